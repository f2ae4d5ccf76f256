//! minitrace 0.6.7 before the process's first `set_reporter`: spans are no-ops, while a
//! `LocalCollector` still records local spans for `LocalSpans::to_span_records`; roots
//! started after `set_reporter` record. A single test, as it depends on the order of events
//! in the process.

use std::sync::Arc;

use minitrace::collector::{Config, SpanContext, SpanId, SpanRecord, TestReporter, TraceId};
use minitrace::local::{LocalCollector, LocalSpan, LocalSpans};
use minitrace::Span;

#[test]
fn spans_record_only_after_set_reporter() {
    // Flushing with no reporter is harmless.
    minitrace::flush();
    let before: Span = Span::root("before", SpanContext::random());
    assert!(before.elapsed().is_none());
    assert!(SpanContext::from_span(&before).is_none());
    let child = Span::enter_with_parent("child of before", &before);
    assert!(child.elapsed().is_none());
    {
        let _guard = before.set_local_parent();
        assert!(SpanContext::current_local_parent().is_none());
    }

    // Local spans need no reporter to be collected.
    let collector: LocalCollector = LocalCollector::start();
    drop(LocalSpan::enter_with_local_parent("local").with_property(|| ("k", "v")));
    let local_spans: LocalSpans = collector.collect();
    let records: Vec<SpanRecord> = local_spans.to_span_records(SpanContext::new(TraceId(3), SpanId(4)));
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(
        (records[0].name.as_ref(), records[0].trace_id, records[0].parent_id),
        ("local", TraceId(3), SpanId(4))
    );

    let (reporter, spans): (TestReporter, Arc<parking_lot::Mutex<Vec<SpanRecord>>>) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default());
    let after = Span::root("after", SpanContext::random());
    assert!(after.elapsed().is_some());
    // A span started before stays a no-op.
    drop(Span::enter_with_parent("late child of before", &before));
    drop((child, before, after));
    minitrace::flush();
    let names: Vec<String> = spans.lock().iter().map(|record| record.name.to_string()).collect();
    assert_eq!(names, ["after"]);
}
