//! `report_before_root_finish`: the spans of a trace whose root is still
//! open are reported at every collection, and the root when it finishes,
//! each span once, with its parent and its events.

use minitrace::collector::{Config, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

#[test]
fn spans_are_reported_before_their_root_finishes() {
    let (reporter, records) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().report_before_root_finish(true));
    let root = Span::root("root", SpanContext::random());
    {
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent("step");
        Event::add_to_local_parent("in step", || []);
    }
    drop(Span::enter_with_parent("thread-safe child", &root));
    minitrace::flush();
    let names = |records: &[SpanRecord]| {
        let mut names: Vec<_> = records.iter().map(|record| record.name.to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(names(&records.lock()), ["step", "thread-safe child"]);

    {
        let _guard = root.set_local_parent();
        let _late = LocalSpan::enter_with_local_parent("after the first report");
    }
    Event::add_to_parent("on root", &root, || []);
    drop(root);
    minitrace::flush();
    let records = records.lock();
    assert_eq!(names(&records), ["after the first report", "root", "step", "thread-safe child"]);
    let span = |name: &str| records.iter().find(|record| record.name == name).unwrap();
    for child in ["step", "thread-safe child", "after the first report"] {
        assert_eq!(span(child).parent_id, span("root").span_id, "{child}");
    }
    assert_eq!(span("step").events.len(), 1);
    assert_eq!(span("root").events.len(), 1);
}
