//! A long-lived root whose local parent is set once per item of a loop (a
//! job loop, a long future's polls): the local spans that wait on the
//! thread for the root's end are bounded, and so is what the collector
//! holds of the open trace. Every span made is reported or counted.

use std::sync::atomic::{AtomicU64, Ordering};

use minitrace::collector::{stats, Config, Reporter, SpanRecord};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Counts what it is handed, and keeps nothing, so that the process's
/// memory is the library's.
struct Counting;

impl Reporter for Counting {
    fn report(&mut self, spans: &[SpanRecord]) {
        RECEIVED.fetch_add(spans.len() as u64, Ordering::Relaxed);
    }
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

const ITEMS: u64 = 1_000_000;
const SPANS_PER_ITEM: u64 = 10;
/// What the process may grow by between a tenth of the run and its end: the
/// bounds are 4 096 waiting entries on the thread (256 KiB), 2^17 queued
/// spans (~12 MiB) and 2^16 records of the open trace (~8 MiB), so a few
/// tens of MiB at most; 10 M spans kept would be over a gigabyte.
const MAX_GROWTH_KIB: u64 = 64 << 10;

#[test]
fn ten_million_local_spans_under_one_root_keep_memory_flat() {
    minitrace::set_reporter(Counting, Config::default());
    let before = stats();
    let root = Span::root("job loop", SpanContext::random());
    let mut rss_early = 0;
    for item in 0..ITEMS {
        let _guard = root.set_local_parent();
        let _item = LocalSpan::enter_with_local_parent("item");
        for _ in 1..SPANS_PER_ITEM {
            let _step = LocalSpan::enter_with_local_parent("step");
        }
        if item == ITEMS / 10 {
            rss_early = rss_kib();
        }
    }
    let rss_late = rss_kib();
    drop(root);
    minitrace::flush();
    let after = stats();
    let made = ITEMS * SPANS_PER_ITEM + 1;
    let reported = after.spans_reported - before.spans_reported;
    let dropped = after.dropped() - before.dropped();
    let sampled_out = after.spans_sampled_out - before.spans_sampled_out;
    eprintln!(
        "{made} spans: {reported} reported, {dropped} dropped; RSS {rss_early} KiB at a tenth, {rss_late} KiB at the end"
    );
    assert_eq!(reported + dropped + sampled_out, made, "{after:?}");
    assert_eq!(sampled_out, 0);
    assert_eq!(RECEIVED.load(Ordering::Relaxed), reported);
    assert!(
        rss_late.saturating_sub(rss_early) < MAX_GROWTH_KIB,
        "memory grew from {rss_early} KiB to {rss_late} KiB"
    );
}
