//! 20 million spans into a reporter far slower than the producers: the
//! queues drop what they cannot hold and count it, so that every span made
//! is reported or counted as dropped, and resident memory stays within the
//! documented bound of each producer thread's queue (README: at most
//! 128 Ki span slots, ~12 MiB, per thread) plus a stated allowance for the
//! rest of the process, and stops growing.

use std::time::Duration;

use minitrace::collector::{Config, Reporter, SpanRecord};
use minitrace::prelude::*;

/// `MAX_SPANS_IN_FLIGHT` in minitrace/src/transport/queue.rs: the span
/// slots a thread's queue may hold.
const MAX_SPANS_IN_FLIGHT: u64 = 1 << 17;
/// The README's ~12 MiB per thread for those slots: 96 bytes a slot, for a
/// 64-byte span, its share of its 88-byte ring slot and of its buffer's
/// spare capacity (measured with this test's 99-span batches: ~83 bytes).
const PER_THREAD: u64 = MAX_SPANS_IN_FLIGHT * 96;
/// The rest of the process, which the per-thread bound does not cover: the
/// collector's list of dropped messages (at most `MAX_DROPPED`, 2^20, of 16
/// bytes: 16 MiB, in queue.rs), the pool of recycled span buffers (4 MiB,
/// transport/span_buffers.rs), the collector's outbox and open traces (~1 MiB
/// here), and the allocator's slack.
const ALLOWANCE: u64 = 32 << 20;
const PRODUCERS: u64 = 2;
const ROUNDS: usize = 20;
const SPANS_PER_ROUND: usize = 500_000;

struct SlowReporter;

impl Reporter for SlowReporter {
    fn report(&mut self, _spans: &[SpanRecord]) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A field of `/proc/self/status` given in kB (`VmRSS`, `VmHWM`), in bytes.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kilobytes: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("/proc/self/status has no {field} line"))
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or_else(|error| panic!("{field} is not a number of kB: {error}"));
    assert!(kilobytes > 0, "no {field} in /proc/self/status: {status:?}");
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
fn memory_stays_within_the_queues_bound_with_a_slow_reporter() {
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
    minitrace::flush();
    let before = minitrace::collector::stats();
    let baseline = status_bytes("VmRSS");
    // Two long-lived producer threads (a service's workers); resident memory
    // is sampled after each round of 1M spans.
    let round_done = std::sync::Arc::new(std::sync::Barrier::new(PRODUCERS as usize + 1));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let round_done = round_done.clone();
            std::thread::spawn(move || {
                for _ in 0..ROUNDS {
                    produce(SPANS_PER_ROUND);
                    round_done.wait();
                }
            })
        })
        .collect();
    let mut resident = Vec::new();
    for _ in 0..ROUNDS {
        round_done.wait();
        resident.push(status_bytes("VmRSS") >> 20);
    }
    producers.into_iter().for_each(|t| t.join().unwrap());
    // The peak since the process started, transient ones between samples included.
    let peak = status_bytes("VmHWM");
    let bound = baseline + PRODUCERS * PER_THREAD + ALLOWANCE;

    // The slow reporter's backlog (a few seconds of it) may outlast one
    // flush's 10 s wait on a loaded machine: flushed until accounted for.
    let made = PRODUCERS * (ROUNDS * SPANS_PER_ROUND) as u64;
    let accounted = |stats: &minitrace::collector::Stats| {
        (stats.spans_reported - before.spans_reported) + (stats.dropped() - before.dropped())
    };
    let mut after = minitrace::collector::stats();
    for _ in 0..5 {
        minitrace::flush();
        after = minitrace::collector::stats();
        if accounted(&after) >= made {
            break;
        }
    }
    println!(
        "resident MiB after each 1M spans: {resident:?}; baseline {} MiB, peak {} MiB, bound {} MiB; {after:?}",
        baseline >> 20,
        peak >> 20,
        bound >> 20
    );
    assert!(after.dropped_queue_full > before.dropped_queue_full, "the slow reporter should cause drops");
    assert_eq!(accounted(&after), made, "made = reported + dropped: {after:?}");
    assert_eq!(after.spans_sampled_out, before.spans_sampled_out, "nothing is sampled out here");
    assert!(
        peak <= bound,
        "peak resident {} MiB over the bound {} MiB (baseline {} + {PRODUCERS} threads × {} + allowance {})",
        peak >> 20,
        bound >> 20,
        baseline >> 20,
        PER_THREAD >> 20,
        ALLOWANCE >> 20
    );
    // Whatever the queues and the collector hold is reached in the first
    // 10M spans; the next 10M add nothing.
    let first_half = *resident[..ROUNDS / 2].iter().max().unwrap();
    let second_half = *resident[ROUNDS / 2..].iter().max().unwrap();
    assert!(second_half <= first_half + 16, "resident memory kept growing: {resident:?} MiB");
}
