//! A second `set_reporter` replaces the first: spans finished before the
//! call go to the first reporter, later ones to the second.

use minitrace::collector::{Config, TestReporter};
use minitrace::prelude::*;

// Roots made before any reporter is set are checked in bounded_memory.rs,
// whose process sets a reporter only after that check.

#[test]
fn the_second_reporter_replaces_the_first() {
    let (first, first_spans) = TestReporter::new();
    minitrace::set_reporter(first, Config::default());
    drop(Span::root("before", SpanContext::random()));

    let (second, second_spans) = TestReporter::new();
    minitrace::set_reporter(second, Config::default());
    drop(Span::root("after", SpanContext::random()));
    minitrace::flush();

    let names = |spans: &std::sync::Arc<parking_lot::Mutex<Vec<SpanRecord>>>| {
        spans.lock().iter().map(|r| r.name.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(names(&first_spans), ["before"]);
    assert_eq!(names(&second_spans), ["after"]);
}
