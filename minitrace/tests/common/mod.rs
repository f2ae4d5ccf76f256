//! One `TestReporter` per test process (the reporter is global), and
//! helpers that pick one trace's records out of everything reported.

#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use minitrace::collector::{Config, SpanRecord, TestReporter, TraceId};
use minitrace::util::tree::tree_str_from_span_records;

/// A new root in a trace of its own (setting the reporter up if needed).
pub fn new_root(name: &'static str) -> (minitrace::Span, TraceId) {
    reported();
    let context = minitrace::collector::SpanContext::random();
    (minitrace::Span::root(name, context), context.trace_id)
}

pub fn reported() -> Arc<Mutex<Vec<SpanRecord>>> {
    static SPANS: OnceLock<Arc<Mutex<Vec<SpanRecord>>>> = OnceLock::new();
    SPANS
        .get_or_init(|| {
            let (reporter, spans) = TestReporter::new();
            minitrace::set_reporter(reporter, Config::default());
            spans
        })
        .clone()
}

/// Flushes, then returns the records of `trace_id`.
pub fn trace(trace_id: TraceId) -> Vec<SpanRecord> {
    let spans = reported();
    minitrace::flush();
    let all = spans.lock();
    all.iter().filter(|record| record.trace_id == trace_id).cloned().collect()
}

pub fn tree(trace_id: TraceId) -> String {
    tree_str_from_span_records(trace(trace_id))
}

/// Every parent id names a span of the trace, except the root's.
pub fn assert_linked<'a>(records: impl IntoIterator<Item = &'a SpanRecord>) {
    let records: Vec<&SpanRecord> = records.into_iter().collect();
    let ids: std::collections::HashSet<_> = records.iter().map(|r| r.span_id).collect();
    assert_eq!(ids.len(), records.len(), "duplicate span ids");
    let roots = records.iter().filter(|r| !ids.contains(&r.parent_id)).count();
    assert_eq!(roots, 1, "expected exactly one root in {records:#?}");
}
