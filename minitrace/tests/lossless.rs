//! `Config::wait_when_queue_full`: producers far faster than a slow
//! reporter wait for room instead of dropping. The same load is run twice
//! with two threads flat out on two cores: without the policy it drops
//! spans (so the load does fill the queues), with it every span made is
//! reported, none dropped, and the threads are seen to have waited.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use minitrace::collector::{stats, Config, Reporter, SpanRecord};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Far slower than the producers: ~2 ms per batch of up to ~4 000 spans.
struct Slow;

impl Reporter for Slow {
    fn report(&mut self, spans: &[SpanRecord]) {
        RECEIVED.fetch_add(spans.len() as u64, Ordering::Relaxed);
        if !spans.is_empty() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

const THREADS: u64 = 2;
const TRACES_PER_THREAD: u64 = 60_000;
const SPANS_PER_TRACE: u64 = 10;

/// What a run moved the counters by.
#[derive(Debug)]
struct Moved {
    reported: u64,
    dropped_queue_full: u64,
    /// Every kind of loss.
    dropped: u64,
    waits_for_room: u64,
}

/// Runs the load under `config`; what the counters moved by, and what the
/// reporter received.
fn run(config: Config) -> (Moved, u64) {
    minitrace::set_reporter(Slow, config);
    let before = stats();
    let received_before = RECEIVED.load(Ordering::Relaxed);
    let producers: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..TRACES_PER_THREAD {
                    let root = Span::root("request", SpanContext::random());
                    let _guard = root.set_local_parent();
                    for _ in 1..SPANS_PER_TRACE {
                        let _step = LocalSpan::enter_with_local_parent("step");
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    minitrace::flush();
    let after = stats();
    let moved = Moved {
        reported: after.spans_reported - before.spans_reported,
        dropped_queue_full: after.dropped_queue_full - before.dropped_queue_full,
        dropped: after.dropped() - before.dropped(),
        waits_for_room: after.waits_for_room - before.waits_for_room,
    };
    (moved, RECEIVED.load(Ordering::Relaxed) - received_before)
}

#[test]
fn nothing_is_dropped_when_producers_wait_for_room() {
    let made = THREADS * TRACES_PER_THREAD * SPANS_PER_TRACE;

    // The same load without the policy: the queues fill and spans drop.
    let (dropping, received) = run(Config::default());
    assert!(dropping.dropped_queue_full > 0, "the load never filled a queue: {dropping:?}");
    assert_eq!(dropping.waits_for_room, 0);
    assert_eq!(dropping.reported + dropping.dropped, made, "{dropping:?}");
    assert_eq!(received, dropping.reported);

    // With it: nothing dropped, every span reported, and the threads waited.
    let (lossless, received) = run(Config::default().wait_when_queue_full(true));
    assert!(lossless.waits_for_room > 0, "no thread waited: {lossless:?}");
    assert_eq!(lossless.dropped, 0, "{lossless:?}");
    assert_eq!(lossless.reported, made, "{lossless:?}");
    assert_eq!(received, made);
}
