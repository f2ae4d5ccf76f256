//! A synthetic population of requests, for tests, benches and demos of the
//! format and the viewer, with no recorder needed.

use std::borrow::Cow;

use minitrace::collector::{EventRecord, SpanId, SpanRecord, TraceId};
use minitrace::recorder::RecordedTrace;

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

/// Traces of one request each with ten spans under its root, in start
/// order, the root last, as the flight recorder hands them out: µs-scale
/// stages, one request in 50 000 blocked for tens of milliseconds, and a
/// pause in traffic of 300 ms at 40% of the way.
///
/// Span ids are drawn as the recorder draws them: a random id for the root,
/// and a random base plus the span's place for the spans under it. The root
/// has one property (`shard`); the spans have none, and no events, except
/// in the blocked requests, whose blocked stage has a property (`lock`) and
/// an event (`lock acquired`, with the time waited).
///
/// Deterministic for a seed.
///
/// ```
/// let traces: Vec<_> = minitrace_flight::synthetic::traces(1_000, 7).collect();
/// assert_eq!(traces.len(), 1_000);
/// assert!(traces.iter().all(|trace| trace.spans.len() == 11 && trace.complete));
/// ```
pub fn traces(count: usize, seed: u64) -> Synthetic {
    Synthetic { remaining: count, total: count, state: seed ^ 0x9e37_79b9_7f4a_7c15, clock: START_UNIX_NS }
}

/// The population's first request begins at 2024-01-01T00:00:00Z.
const START_UNIX_NS: u64 = 1_704_067_200_000_000_000;

/// The iterator of [`traces`].
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
    type Item = RecordedTrace;

    fn next(&mut self) -> Option<RecordedTrace> {
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
        let trace_id = TraceId(u128::from(self.next_u64()) << 64 | u128::from(self.next_u64()));
        let root_id = self.next_u64().max(1);
        let base = (self.next_u64() >> 1).max(1);
        let (name, stages) = KINDS[usize::from(self.next_u64() % 4 == 0)];
        let blocked = self.next_u64() % 50_000 == 0;
        let mut spans: Vec<SpanRecord> = Vec::with_capacity(stages.len() + 1);
        let mut at = begin + 200 + self.next_u64() % 300;
        for (stage, &(span_name, parent)) in stages.iter().enumerate() {
            let mut duration = self.latency(1_500.0);
            let mut wait = 0;
            if blocked && stage == 4 {
                wait = 20_000_000 + self.next_u64() % 50_000_000;
                duration += wait;
            }
            // A child starts inside its parent; a sibling after the one before.
            let start = match parent {
                Some(parent) if parent as usize + 1 == stage => {
                    spans[parent as usize].begin_time_unix_ns + 100
                }
                _ => at,
            };
            let mut span = SpanRecord {
                trace_id,
                span_id: SpanId(base + stage as u64),
                parent_id: SpanId(parent.map_or(root_id, |parent| base + u64::from(parent))),
                begin_time_unix_ns: start,
                duration_ns: duration,
                name: Cow::Borrowed(span_name),
                properties: Vec::new(),
                events: Vec::new(),
            };
            if wait > 0 {
                span.properties.push(("lock".into(), "store".into()));
                span.events.push(EventRecord {
                    name: "lock acquired".into(),
                    timestamp_unix_ns: start + wait,
                    properties: vec![("waited_ns".into(), wait.to_string().into())],
                });
            }
            spans.push(span);
            let end = start + duration;
            at = at.max(end) + 50 + self.next_u64() % 200;
            // A parent lasts at least as long as its children.
            let mut ancestor = parent;
            while let Some(up) = ancestor {
                let span = &mut spans[up as usize];
                span.duration_ns = span.duration_ns.max(end + 30 - span.begin_time_unix_ns);
                ancestor = stages[up as usize].1;
            }
        }
        let shard = self.next_u64() % 16;
        spans.push(SpanRecord {
            trace_id,
            span_id: SpanId(root_id),
            parent_id: SpanId(0),
            begin_time_unix_ns: begin,
            duration_ns: at + 100 - begin,
            name: Cow::Borrowed(name),
            properties: vec![("shard".into(), shard.to_string().into())],
            events: Vec::new(),
        });
        Some(RecordedTrace { trace_id, thread: 1 + (self.next_u64() % 16) as u32, spans, complete: true })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}
