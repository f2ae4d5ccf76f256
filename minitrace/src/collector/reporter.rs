//! Two reporters of the crate's own: one that prints, one that keeps the
//! records for tests.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::data::record::{Reporter, SpanRecord};

/// Prints every span to standard error, in Rust's pretty debug format.
///
/// ```
/// use minitrace::collector::{Config, ConsoleReporter};
///
/// minitrace::set_reporter(ConsoleReporter, Config::default());
/// ```
#[derive(Debug)]
pub struct ConsoleReporter;

impl Reporter for ConsoleReporter {
    fn report(&mut self, spans: &[SpanRecord]) {
        for span in spans {
            eprintln!("{span:#?}");
        }
    }
}

/// Keeps every reported span in a shared vector, for tests.
///
/// The vector sits behind a `parking_lot` mutex, as in minitrace 0.6:
/// `lock()` gives the guard directly, and a test that panicked while
/// holding it does not poison it.
///
/// ```
/// use minitrace::collector::{Config, TestReporter};
/// use minitrace::prelude::*;
///
/// let (reporter, spans) = TestReporter::new();
/// minitrace::set_reporter(reporter, Config::default());
/// drop(Span::root("request", SpanContext::random()));
/// minitrace::flush();
/// assert!(spans.lock().iter().any(|span| span.name == "request"));
/// ```
#[derive(Debug)]
pub struct TestReporter {
    /// The spans reported so far.
    pub spans: Arc<Mutex<Vec<SpanRecord>>>,
}

impl TestReporter {
    /// A reporter and a handle to the spans it will collect.
    ///
    /// ```
    /// let (_reporter, spans) = minitrace::collector::TestReporter::new();
    /// assert!(spans.lock().is_empty());
    /// ```
    pub fn new() -> (TestReporter, Arc<Mutex<Vec<SpanRecord>>>) {
        let spans = Arc::new(Mutex::new(Vec::new()));
        (TestReporter { spans: spans.clone() }, spans)
    }
}

impl Reporter for TestReporter {
    fn report(&mut self, spans: &[SpanRecord]) {
        self.spans.lock().extend_from_slice(spans);
    }
}
