//! A second `set_reporter` replaces the first: spans finished before the
//! call go to the first reporter, later ones to the second.

use std::sync::Once;

use minitrace::collector::{Config, TestReporter};
use minitrace::prelude::*;

/// The check of roots made before any reporter is set, run exactly once by
/// whichever test below comes first, and always before the first
/// `set_reporter` of this process: the test that sets reporters runs it
/// first, and `Once` makes a concurrent caller wait for it to finish.
static BEFORE_ANY_REPORTER: Once = Once::new();

fn check_roots_before_any_reporter() {
    BEFORE_ANY_REPORTER.call_once(|| {
        let before = minitrace::collector::stats().roots_without_reporter;
        let root = Span::root("no reporter yet", SpanContext::random());
        let after = minitrace::collector::stats().roots_without_reporter;
        assert_eq!(root.elapsed().is_none(), after > before);
        assert!(root.elapsed().is_none(), "a root made before any reporter is not a no-op");
        assert_eq!(after - before, 1, "a root made before any reporter is not counted once");
    });
}

#[test]
fn the_second_reporter_replaces_the_first() {
    check_roots_before_any_reporter();
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
    // Runs in the same process as the test above, possibly after it; the
    // check itself ran (or runs now) before any reporter was set.
    check_roots_before_any_reporter();
    assert!(BEFORE_ANY_REPORTER.is_completed());
}
