//! 20 million spans into a reporter far slower than the producers: the
//! queues drop and count what they cannot hold, and memory stays flat.

use std::time::Duration;

use minitrace::collector::{Config, Reporter, SpanRecord};
use minitrace::prelude::*;

struct SlowReporter;

impl Reporter for SlowReporter {
    fn report(&mut self, _spans: &[SpanRecord]) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Resident memory, from `VmRSS` in `/proc/self/status` (in kB).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kilobytes: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .expect("/proc/self/status has a VmRSS line")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .expect("VmRSS is a number of kB");
    assert!(kilobytes > 0, "no resident memory in /proc/self/status: {status:?}");
    kilobytes << 10
}

fn produce(spans: usize) {
    let mut made = 0;
    while made < spans {
        let root = Span::root("request", SpanContext::random());
        let _guard = root.set_local_parent();
        for _ in 0..99 {
            let _span = LocalSpan::enter_with_local_parent("step");
        }
        made += 100;
    }
}

#[cfg(target_os = "linux")]
#[test]
fn memory_stays_flat_with_a_slow_reporter() {
    // Before any reporter: roots are counted no-ops. (This binary's only
    // test, so nothing set a reporter before.)
    let before = minitrace::collector::stats();
    let root = Span::root("no reporter yet", SpanContext::random());
    assert!(root.elapsed().is_none(), "a root made before any reporter is not a no-op");
    assert_eq!(
        minitrace::collector::stats().roots_without_reporter - before.roots_without_reporter,
        1,
        "a root made before any reporter is not counted once"
    );
    produce(1_000_000);
    assert_eq!(minitrace::collector::stats().roots_without_reporter - before.roots_without_reporter, 10_001);

    minitrace::set_reporter(SlowReporter, Config::default());
    let before = minitrace::collector::stats();
    // Two long-lived producer threads (a service's workers); resident memory
    // is sampled after each of twenty rounds of 1M spans.
    let round_done = std::sync::Arc::new(std::sync::Barrier::new(3));
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let round_done = round_done.clone();
            std::thread::spawn(move || {
                for _ in 0..20 {
                    produce(500_000);
                    round_done.wait();
                }
            })
        })
        .collect();
    let mut resident = Vec::new();
    for _ in 0..20 {
        round_done.wait();
        resident.push(resident_bytes() >> 20);
    }
    producers.into_iter().for_each(|t| t.join().unwrap());
    let after = minitrace::collector::stats();
    println!("resident MiB after each 1M spans: {resident:?}; {after:?}");
    assert!(after.dropped_queue_full > before.dropped_queue_full, "the slow reporter should cause drops");
    // Whatever the queues and the collector hold is reached in the first
    // 10M spans; the next 10M add nothing.
    let first_half = *resident[..10].iter().max().unwrap();
    let second_half = *resident[10..].iter().max().unwrap();
    assert!(second_half <= first_half + 16, "resident memory kept growing: {resident:?} MiB");
}
