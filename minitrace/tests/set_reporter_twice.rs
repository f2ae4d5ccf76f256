//! A second `set_reporter` replaces the first: spans finished before the
//! call go to the first reporter, later ones to the second.

use minitrace::collector::{Config, TestReporter};
use minitrace::prelude::*;

#[test]
fn the_second_reporter_replaces_the_first() {
    let (first, first_spans) = TestReporter::new();
    minitrace::set_reporter(first, Config::default());
    drop(Span::root("before", SpanContext::random()));

    let (second, second_spans) = TestReporter::new();
    minitrace::set_reporter(second, Config::default());
    drop(Span::root("after", SpanContext::random()));
    minitrace::flush();

    let names = |spans: &std::sync::Arc<std::sync::Mutex<Vec<SpanRecord>>>| {
        spans.lock().unwrap().iter().map(|r| r.name.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(names(&first_spans), ["before"]);
    assert_eq!(names(&second_spans), ["after"]);
}

#[test]
fn roots_before_any_reporter_are_counted_noops() {
    // Runs in the same process as the test above, possibly before it: only
    // check that the counter and the no-op agree.
    let before = minitrace::collector::stats().roots_without_reporter;
    let root = Span::root("maybe", SpanContext::random());
    let after = minitrace::collector::stats().roots_without_reporter;
    assert_eq!(root.elapsed().is_none(), after > before);
}
