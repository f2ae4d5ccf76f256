//! `max_spans_per_trace` judges each local parent guard's batch as
//! minitrace 0.6 did, even when the batches of several guards of a root
//! wait together on its thread: a batch is kept whole while the trace
//! holds fewer spans than the limit, later ones are dropped and counted.

mod common;

use minitrace::collector::{Config, TestReporter};
use minitrace::prelude::*;

#[trace(short_name = true)]
fn outer() {
    middle();
}

#[trace(short_name = true)]
fn middle() {
    inner();
}

#[trace(short_name = true)]
fn inner() {}

#[test]
fn four_guards_of_three_spans_under_a_limit_of_five_keep_the_first_two() {
    let (reporter, spans) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().max_spans_per_trace(Some(5)));
    let before = minitrace::collector::stats();
    let context = SpanContext::random();
    let root = Span::root("root", context);
    for _ in 0..4 {
        let _guard = root.set_local_parent();
        outer();
    }
    drop(root);
    minitrace::flush();

    let records: Vec<_> = spans.lock().iter().filter(|r| r.trace_id == context.trace_id).cloned().collect();
    common::assert_linked(&records);
    let mut names: Vec<&str> = records.iter().map(|record| record.name.as_ref()).collect();
    names.sort();
    // minitrace 0.6.7 reports the root and the first two guards' spans.
    assert_eq!(names, ["inner", "inner", "middle", "middle", "outer", "outer", "root"]);
    let after = minitrace::collector::stats();
    assert_eq!(after.dropped_trace_too_large - before.dropped_trace_too_large, 6);
}
