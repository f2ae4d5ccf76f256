//! 10 million traces (a root and two local spans) in each fate, one after
//! the other in one process: thrown away on their thread by the latency
//! threshold, cancelled, left out by head sampling, begun while recording
//! is switched off, and reported to a reporter that discards them. Each
//! fate is counted exactly (sampled out, reported, or nothing at all for
//! roots that never recorded), and memory at the end of each run is within
//! 16 MiB of what it was after its first million: nothing a trace leaves
//! behind accumulates. Memory is measured twice: the live heap, counted by
//! this binary's allocator, which no allocator's caching or fragmentation
//! blurs, and resident memory (`VmRSS`), in every fate but the reported one
//! (see there why).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use minitrace::collector::{stats, Config, Reporter, SpanRecord};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

const ROUNDS: usize = 10;
const TRACES_PER_ROUND: u64 = 1_000_000;
const SPANS_PER_TRACE: u64 = 3;
/// What memory may grow by after the first million traces: the allocator's
/// slack, and the collector's fates of reported traces (1 KiB per 4 096
/// traces, kept 10 s: ~2.5 MiB here). A leak of 2 bytes a trace shows as 18.
const ALLOWANCE: u64 = 16 << 20;

/// The system allocator, counting the bytes allocated and not yet freed,
/// and their peak.
struct Counting;

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

impl Counting {
    fn grew(by: usize) {
        let live = LIVE.fetch_add(by as u64, Ordering::Relaxed) + by as u64;
        PEAK.fetch_max(live, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to `System` unchanged; only counters are
// added, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Counting::grew(layout.size());
        // SAFETY: the caller's guarantees, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Counting::grew(layout.size());
        // SAFETY: the caller's guarantees, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's guarantees, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as grown first, so that the live count never underflows.
        Counting::grew(new_size);
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's guarantees, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Counts what it receives, keeps nothing.
struct Discard;

impl Reporter for Discard {
    fn report(&mut self, spans: &[SpanRecord]) {
        RECEIVED.fetch_add(spans.len() as u64, Ordering::Relaxed);
    }
}

/// `VmRSS` from `/proc/self/status`, in bytes (as in bounded_memory.rs).
fn resident() -> u64 {
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
    assert!(kilobytes > 0, "no VmRSS in /proc/self/status: {status:?}");
    kilobytes << 10
}

fn traces(count: u64, cancel: bool) {
    for _ in 0..count {
        let mut root = Span::root("request", SpanContext::random());
        {
            let _guard = root.set_local_parent();
            let _parse = LocalSpan::enter_with_local_parent("parse");
            let _query = LocalSpan::enter_with_local_parent("query");
        }
        if cancel {
            root.cancel();
        }
    }
}

/// Memory after a million traces, once the collector has caught up: what
/// is left then is what the traces left behind, not a backlog.
#[derive(Clone, Copy, Debug)]
struct Sample {
    resident: u64,
    heap: u64,
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

/// Runs `ROUNDS` million traces and checks that memory stayed flat (resident
/// memory only if `check_resident`); returns the spans counted as sampled
/// out and as reported meanwhile.
fn run(fate: &str, cancel: bool, check_resident: bool) -> (u64, u64) {
    let before = stats();
    let started = Instant::now();
    let mut samples = Vec::new();
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    for _ in 0..ROUNDS {
        traces(TRACES_PER_ROUND, cancel);
        minitrace::flush();
        samples.push(Sample { resident: resident(), heap: LIVE.load(Ordering::Relaxed) });
    }
    let after = stats();
    let (first, last) = (samples[0], samples[ROUNDS - 1]);
    println!(
        "{fate}: {ROUNDS} M traces in {:?}; MiB after each million: resident {:?}, live heap {:?}, \
         peak live heap {}",
        started.elapsed(),
        samples.iter().map(|s| mib(s.resident)).collect::<Vec<_>>(),
        samples.iter().map(|s| mib(s.heap)).collect::<Vec<_>>(),
        mib(PEAK.load(Ordering::Relaxed)),
    );
    assert!(
        last.heap <= first.heap + ALLOWANCE,
        "{fate}: the live heap grew from {} MiB after the first million traces to {} MiB",
        mib(first.heap),
        mib(last.heap)
    );
    assert!(
        !check_resident || last.resident <= first.resident + ALLOWANCE,
        "{fate}: resident memory grew from {} MiB after the first million traces to {} MiB",
        mib(first.resident),
        mib(last.resident)
    );
    assert_eq!(after.roots_without_reporter, before.roots_without_reporter, "{fate}");
    assert_eq!(after.dropped(), before.dropped(), "{fate}: nothing may be dropped: {after:?}");
    (after.spans_sampled_out - before.spans_sampled_out, after.spans_reported - before.spans_reported)
}

#[cfg(target_os = "linux")]
#[test]
fn memory_stays_flat_in_every_fate() {
    let made = ROUNDS as u64 * TRACES_PER_ROUND * SPANS_PER_TRACE;
    // Lossless, so that every count below is exact.
    let config = Config::default().wait_when_queue_full(true);

    minitrace::set_reporter(Discard, config.report_slow_traces_only(Duration::from_secs(1)));
    let counted = run("thrown away by the threshold", false, true);
    assert_eq!(counted, (made, 0), "(sampled out, reported)");

    minitrace::set_reporter(Discard, config);
    let counted = run("cancelled", true, true);
    assert_eq!(counted, (made, 0), "(sampled out, reported)");

    minitrace::set_reporter(Discard, config.head_sampling(0.0));
    let counted = run("left out by head sampling", false, true);
    assert_eq!(counted, (0, 0), "unsampled roots count nothing");

    minitrace::set_reporter(Discard, config);
    minitrace::set_enabled(false);
    let counted = run("switched off", false, true);
    minitrace::set_enabled(true);
    assert_eq!(counted, (0, 0), "roots switched off count nothing");

    assert_eq!(RECEIVED.load(Ordering::Relaxed), 0, "nothing reached a reporter so far");
    let counted = run("reported", false, true);
    assert_eq!(counted, (0, made), "(sampled out, reported)");
    assert_eq!(RECEIVED.load(Ordering::Relaxed), made, "the reporter got every span counted as reported");
}
