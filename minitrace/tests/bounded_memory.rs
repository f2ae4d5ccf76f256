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

/// The page size, from `getconf` (minitrace has no libc dependency to ask
/// `sysconf` directly); read once, before any sampling.
fn page_size() -> u64 {
    static PAGE_SIZE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE_SIZE.get_or_init(|| {
        let output = std::process::Command::new("getconf").arg("PAGESIZE").output().expect("run getconf");
        assert!(output.status.success(), "getconf PAGESIZE failed: {output:?}");
        let text = String::from_utf8(output.stdout).expect("getconf output is UTF-8");
        text.trim().parse().expect("getconf PAGESIZE prints a number")
    })
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .expect("/proc/self/statm has a resident field")
        .parse()
        .expect("/proc/self/statm's resident field is a number");
    assert!(pages > 0, "no resident pages in /proc/self/statm: {statm:?}");
    pages * page_size()
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
    // Before any reporter: roots are counted no-ops.
    let before = minitrace::collector::stats();
    produce(1_000_000);
    assert_eq!(minitrace::collector::stats().roots_without_reporter - before.roots_without_reporter, 10_000);

    minitrace::set_reporter(SlowReporter, Config::default());
    let before = minitrace::collector::stats();
    page_size();
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
