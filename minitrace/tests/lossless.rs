//! `Config::wait_when_queue_full`: producers far faster than a slow
//! reporter wait for room instead of dropping: every span made is
//! reported, none dropped, with two threads flat out on two cores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use minitrace::collector::{stats, Config, Reporter, SpanRecord};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Far slower than the producers: ~1 ms per batch of up to ~4 000 spans.
struct Slow;

impl Reporter for Slow {
    fn report(&mut self, spans: &[SpanRecord]) {
        RECEIVED.fetch_add(spans.len() as u64, Ordering::Relaxed);
        if !spans.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

const THREADS: u64 = 2;
const TRACES_PER_THREAD: u64 = 60_000;
const SPANS_PER_TRACE: u64 = 10;

#[test]
fn nothing_is_dropped_when_producers_wait_for_room() {
    minitrace::set_reporter(Slow, Config::default().wait_when_queue_full(true));
    let before = stats();
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
    let made = THREADS * TRACES_PER_THREAD * SPANS_PER_TRACE;
    // Several times what the two queues hold, so they must have filled.
    assert!(made > 4 * (1 << 17));
    assert_eq!(after.dropped() - before.dropped(), 0, "{after:?}");
    assert_eq!(after.spans_reported - before.spans_reported, made, "{after:?}");
    assert_eq!(RECEIVED.load(Ordering::Relaxed), made);
}
