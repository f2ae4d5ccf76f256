//! Latency-based selective reporting: every request is traced, only the
//! slow ones are reported, the rest are counted as sampled out.

use std::time::Duration;

use minitrace::collector::{Config, TestReporter};
use minitrace::prelude::*;

#[test]
fn only_traces_slower_than_the_threshold_are_reported() {
    let (reporter, spans) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(Duration::from_millis(200)));
    let before = minitrace::collector::stats();

    let request = |name: &'static str, work: Duration| {
        let root = Span::root(name, SpanContext::random());
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent("step");
        std::thread::sleep(work);
        let late = Span::enter_with_local_parent("finishes after the root");
        (root, late)
    };
    let (fast, fast_late) = request("fast", Duration::ZERO);
    drop(fast);
    let (slow, slow_late) = request("slow", Duration::from_millis(250));
    drop(slow);
    minitrace::flush();
    drop((fast_late, slow_late));
    minitrace::flush();

    let mut names: Vec<String> = spans.lock().iter().map(|r| r.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["finishes after the root", "slow", "step"]);
    let after = minitrace::collector::stats();
    // The fast root, its step, and its late child.
    assert_eq!(after.spans_sampled_out - before.spans_sampled_out, 3);
    assert_eq!(after.dropped(), before.dropped());
}
