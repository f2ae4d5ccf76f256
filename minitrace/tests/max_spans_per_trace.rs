//! `max_spans_per_trace`: spans past the limit are dropped and counted, and
//! spans whose parent was dropped are re-parented to the root, so every
//! parent id in a reported trace exists.

mod common;

use minitrace::collector::{Config, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

#[test]
fn spans_past_the_limit_are_dropped_and_orphans_reparented() {
    let (reporter, spans) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().max_spans_per_trace(Some(1)));
    let before = minitrace::collector::stats();

    let context = SpanContext::random();
    let root = Span::root("root", context);
    let child = Span::enter_with_parent("child", &root);
    {
        // Sent first, so accepted: the trace's one span.
        let _guard = child.set_local_parent();
        let _local = LocalSpan::enter_with_local_parent("under child");
    }
    drop(child); // over the limit: dropped
    drop(root);
    minitrace::flush();

    let records: Vec<_> = spans.lock().iter().filter(|r| r.trace_id == context.trace_id).cloned().collect();
    common::assert_linked(&records);
    let orphan = records.iter().find(|r| r.name == "under child").unwrap();
    let root = records.iter().find(|r| r.name == "root").unwrap();
    assert_eq!(orphan.parent_id, root.span_id);
    assert!(orphan.properties.iter().any(|(k, _)| k == "minitrace.reparented"));
    assert_eq!(minitrace::collector::stats().dropped_trace_too_large - before.dropped_trace_too_large, 1);
}
