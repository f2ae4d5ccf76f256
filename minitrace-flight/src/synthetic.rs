//! A synthetic population of requests, for tests, benches and demos of the
//! format and the viewer, with no recorder needed.

use crate::{Request, SpanEntry};

/// A stage of a request: its span's name and its parent stage.
type Stage = (&'static str, Option<u32>);

/// The stages of each kind of request: ten spans each, sixteen span names
/// in all.
const KINDS: [(&str, [Stage; 10]); 2] = [
    (
        "kv::get",
        [
            ("net::read", None),
            ("proto::parse", None),
            ("auth::check", None),
            ("router::route", None),
            ("store::get", None),
            ("cache::lookup", Some(4)),
            ("disk::read", Some(4)),
            ("codec::decode", Some(6)),
            ("proto::encode", None),
            ("net::write", None),
        ],
    ),
    (
        "kv::put",
        [
            ("net::read", None),
            ("proto::parse", None),
            ("auth::check", None),
            ("txn::begin", None),
            ("store::put", None),
            ("wal::append", Some(4)),
            ("wal::fsync", Some(5)),
            ("memtable::insert", Some(4)),
            ("txn::commit", None),
            ("net::write", None),
        ],
    ),
];

/// Requests with ten spans each, in start order, on 16 threads: µs-scale
/// stages, one request in 50 000 blocked for tens of milliseconds, and a
/// pause in traffic of 300 ms at 40% of the way.
///
/// Deterministic for a seed.
///
/// ```
/// let requests: Vec<_> = minitrace_flight::synthetic::requests(1_000, 7).collect();
/// assert_eq!(requests.len(), 1_000);
/// assert!(requests.iter().all(|request| request.spans.len() == 10));
/// ```
pub fn requests(count: usize, seed: u64) -> Synthetic {
    Synthetic { remaining: count, total: count, state: seed ^ 0x9e37_79b9_7f4a_7c15, clock: START_UNIX_NS }
}

/// The population's first request begins at 2024-01-01T00:00:00Z.
const START_UNIX_NS: u64 = 1_704_067_200_000_000_000;

/// The iterator of [`requests`].
#[derive(Debug, Clone)]
pub struct Synthetic {
    remaining: usize,
    total: usize,
    state: u64,
    clock: u64,
}

impl Synthetic {
    /// splitmix64: small, fast, and good enough for test data.
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Log-normal around `median_ns`, the long right tail of real latencies.
    fn latency(&mut self, median_ns: f64) -> u64 {
        let normal = (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos();
        (median_ns * (0.5 * normal).exp()) as u64
    }
}

impl Iterator for Synthetic {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        if self.remaining == 0 {
            return None;
        }
        let index = self.total - self.remaining;
        self.remaining -= 1;
        if index > 0 && index == self.total * 2 / 5 {
            self.clock += 300_000_000;
        }
        // Exponential gaps averaging 8 µs between arrivals.
        self.clock += (-8_000.0 * self.unit().ln()) as u64;
        let begin = self.clock;
        let (name, stages) = KINDS[usize::from(self.next_u64() % 4 == 0)];
        let blocked = self.next_u64() % 50_000 == 0;
        let mut spans: Vec<SpanEntry> = Vec::with_capacity(stages.len());
        let mut at = begin + 200 + self.next_u64() % 300;
        for (stage, &(span_name, parent)) in stages.iter().enumerate() {
            let mut duration = self.latency(1_500.0);
            if blocked && stage == 4 {
                duration += 20_000_000 + self.next_u64() % 50_000_000;
            }
            // A child starts inside its parent; a sibling after the one before.
            let start = match parent {
                Some(parent) if parent as usize + 1 == stage => spans[parent as usize].begin_unix_ns + 100,
                _ => at,
            };
            spans.push(SpanEntry {
                name: span_name.into(),
                parent,
                begin_unix_ns: start,
                duration_ns: duration,
            });
            let end = start + duration;
            at = at.max(end) + 50 + self.next_u64() % 200;
            // A parent lasts at least as long as its children.
            let mut ancestor = parent;
            while let Some(up) = ancestor {
                let span = &mut spans[up as usize];
                span.duration_ns = span.duration_ns.max(end + 30 - span.begin_unix_ns);
                ancestor = span.parent;
            }
        }
        let shard = self.next_u64() % 16;
        Some(Request {
            trace_id: u128::from(self.next_u64()) << 64 | u128::from(self.next_u64()),
            name: name.into(),
            thread: (self.next_u64() % 16) as u32,
            begin_unix_ns: begin,
            duration_ns: at + 100 - begin,
            properties: vec![("shard".into(), shard.to_string())],
            spans,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}
