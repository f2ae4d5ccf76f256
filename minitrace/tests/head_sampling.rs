//! `Config::head_sampling`: a root's trace is recorded when the low 64 bits
//! of its id, halved, fall below the ratio × 2⁶³, the rule OpenTelemetry's
//! trace-id-ratio sampler uses; an unsampled root records nothing, and
//! nothing under it does.

use minitrace::collector::{Config, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

fn root(trace_id: u128) -> (Span, TraceId) {
    let context = SpanContext::new(TraceId(trace_id), SpanId(0));
    (Span::root("request", context), context.trace_id)
}

#[test]
fn only_ids_below_the_ratio_are_recorded() {
    let (reporter, spans) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().head_sampling(0.25));

    // The high 64 bits are not looked at; the low ones, halved, against 2⁶¹.
    let kept = ((1 << 64) | (2 * ((1 << 61) - 1)), u128::MAX << 64);
    let left_out = (2 << 61, u64::MAX as u128);
    for id in [kept.0, kept.1] {
        let (root, _) = root(id);
        assert!(root.elapsed().is_some(), "{id:x} is sampled");
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent("step");
    }
    for id in [left_out.0, left_out.1] {
        let (root, _) = root(id);
        assert!(root.elapsed().is_none(), "{id:x} is not sampled");
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent("step");
        assert_eq!(SpanContext::current_local_parent(), None, "nothing under it records");
    }
    minitrace::flush();
    let mut ids: Vec<u128> = spans.lock().iter().map(|span| span.trace_id.0).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids, [kept.0, kept.1]);
    assert_eq!(spans.lock().len(), 4, "two traces of a root and a step");

    // About a quarter of random ids, and none at a ratio of 0.
    let sampled =
        (0..20_000).filter(|_| Span::root("random", SpanContext::random()).elapsed().is_some()).count();
    assert!((4_000..6_000).contains(&sampled), "{sampled} of 20 000 sampled at 0.25");
    minitrace::set_reporter(TestReporter::new().0, Config::default().head_sampling(0.0));
    assert!(root(0).0.elapsed().is_none());
    minitrace::set_reporter(TestReporter::new().0, Config::default());
    assert!(root(u128::MAX).0.elapsed().is_some());
}
