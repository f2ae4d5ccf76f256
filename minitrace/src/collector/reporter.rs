use std::sync::Arc;

use parking_lot::Mutex;

use crate::collector::SpanRecord;

/// Receives finished spans from the collector thread, in batches.
///
/// `report` runs on the collector's own thread, never on a traced thread,
/// so it may do I/O. A reporter that panics loses that batch (counted in
/// [`Stats::dropped_by_reporter`](crate::collector::Stats::dropped_by_reporter))
/// and keeps receiving later batches.
///
/// ```
/// use minitrace::collector::{Reporter, SpanRecord};
///
/// struct CountingReporter(usize);
///
/// impl Reporter for CountingReporter {
///     fn report(&mut self, spans: &[SpanRecord]) {
///         self.0 += spans.len();
///     }
/// }
/// ```
pub trait Reporter: Send + 'static {
    /// Delivers one batch: every `report_interval` (or [`flush`](crate::flush)),
    /// the traces finished since, split into batches of about 4 096 spans
    /// at trace boundaries so that the records are still in the CPU's cache
    /// while they are reported. The spans of one trace may arrive over
    /// several batches only with `report_before_root_finish`, or when
    /// children finish after their root. A cycle with nothing to report
    /// still calls it once, with no spans, as minitrace 0.6 did, so that a
    /// reporter that batches on its own can flush then.
    ///
    /// ```
    /// use minitrace::collector::{Reporter, SpanRecord};
    ///
    /// struct Names(Vec<String>);
    ///
    /// impl Reporter for Names {
    ///     fn report(&mut self, spans: &[SpanRecord]) {
    ///         self.0.extend(spans.iter().map(|span| span.name.to_string()));
    ///     }
    /// }
    ///
    /// let mut reporter = Names(Vec::new());
    /// reporter.report(&[SpanRecord { name: "query".into(), ..Default::default() }]);
    /// assert_eq!(reporter.0, ["query"]);
    /// ```
    fn report(&mut self, spans: &[SpanRecord]);
}

/// Prints every span to standard error, in Rust's pretty debug format.
///
/// ```
/// use minitrace::collector::{Config, ConsoleReporter};
///
/// minitrace::set_reporter(ConsoleReporter, Config::default());
/// ```
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
