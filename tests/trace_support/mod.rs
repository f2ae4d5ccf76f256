//! Shared by the `trace_*` tests: one `TestReporter` per test binary (the
//! reporter is global), and each test's trace picked out by its trace id,
//! so that tests can run in parallel.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use minitrace::collector::{Config, SpanRecord, TestReporter, TraceId};
use minitrace::prelude::*;
use minitrace::util::tree::tree_str_from_span_records;

/// Every span reported in this test binary.
pub fn reported() -> &'static Arc<Mutex<Vec<SpanRecord>>> {
    static SPANS: OnceLock<Arc<Mutex<Vec<SpanRecord>>>> = OnceLock::new();
    SPANS.get_or_init(|| {
        let (reporter, spans) = TestReporter::new();
        minitrace::set_reporter(reporter, Config::default());
        spans
    })
}

/// The spans of one trace, once reported.
pub fn spans_of(trace_id: TraceId) -> Vec<SpanRecord> {
    minitrace::flush();
    let spans = reported().lock();
    spans.iter().filter(|span| span.trace_id == trace_id).cloned().collect()
}

/// Runs `f` with a new root span named "root" as the local parent, and
/// returns the trace's tree (see `tree_str_from_span_records`).
pub fn traced(f: impl FnOnce()) -> String {
    reported();
    let context = SpanContext::random();
    {
        let root = Span::root("root", context);
        let _guard = root.set_local_parent();
        f();
    }
    tree_str_from_span_records(spans_of(context.trace_id))
}
