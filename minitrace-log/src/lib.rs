//! [`log`] records in minitrace traces, and the trace in every log line.
//!
//! - [`Logger`] wraps the application's logger (`env_logger`, a file
//!   logger, anything that implements [`log::Log`]): each record logged
//!   inside a trace becomes an [`Event`] of the current
//!   span, then goes on to the wrapped logger, optionally stamped with the
//!   current trace and span ids.
//! - [`current_ids`] gives those ids to a logger that formats its own
//!   lines (e.g. in an `env_logger` format closure).
//!
//! ```
//! use std::sync::Mutex;
//!
//! use log::{Log, Metadata, Record};
//! use minitrace::collector::{Config, TestReporter};
//! use minitrace::prelude::*;
//!
//! // The application's own logger; this one keeps its lines in memory.
//! struct Lines(Mutex<Vec<String>>);
//!
//! impl Log for Lines {
//!     fn enabled(&self, _: &Metadata) -> bool {
//!         true
//!     }
//!     fn log(&self, record: &Record) {
//!         self.0.lock().unwrap().push(record.args().to_string());
//!     }
//!     fn flush(&self) {}
//! }
//!
//! static LINES: Lines = Lines(Mutex::new(Vec::new()));
//!
//! // Once, at start-up: the bridge around it, and minitrace's reporter.
//! log::set_boxed_logger(Box::new(minitrace_log::Logger::new(&LINES).with_ids_stamped())).unwrap();
//! log::set_max_level(log::LevelFilter::Info);
//! let (reporter, records) = TestReporter::new();
//! minitrace::set_reporter(reporter, Config::default());
//!
//! log::info!("starting"); // outside any trace: a plain line, no event
//! let root = Span::root("request", SpanContext::random());
//! let request = SpanContext::from_span(&root).unwrap();
//! {
//!     let _guard = root.set_local_parent();
//!     log::info!("user 7 found");
//! }
//! drop(root);
//! minitrace::flush();
//!
//! let lines = LINES.0.lock().unwrap();
//! assert_eq!(lines[0], "starting");
//! let stamp = format!("trace_id={} span_id={}", request.trace_id, request.span_id);
//! assert_eq!(lines[1], format!("{stamp} user 7 found"));
//! assert_eq!(records.lock()[0].events[0].name, "user 7 found");
//! ```
//!
//! An `env_logger` line with the ids, from its format closure:
//!
//! ```ignore
//! use std::io::Write;
//!
//! env_logger::Builder::from_default_env()
//!     .format(|buf, record| match minitrace_log::current_ids() {
//!         Some((trace_id, span_id)) => {
//!             writeln!(buf, "{} trace_id={trace_id} span_id={span_id} {}", record.level(), record.args())
//!         }
//!         None => writeln!(buf, "{} {}", record.level(), record.args()),
//!     })
//!     .init();
//! ```
//!
//! # Cost
//!
//! Outside a trace, [`Logger`] adds a thread-local read to each record
//! it is handed; inside one, the event (the message formatted once more,
//! and two properties) and the stamp.
//!
//! Crates instrumented with `tracing` rather than `log` are bridged by the
//! `minitrace-tracing` crate; `tracing-log` carries `log` records into
//! `tracing`, should an application prefer one pipeline.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::borrow::Cow;
use std::fmt;

use log::{LevelFilter, Log, Metadata, Record};
use minitrace::collector::{SpanContext, SpanId, TraceId};
use minitrace::Event;

/// The property key of an event's `log` level.
///
/// ```
/// assert_eq!(minitrace_log::LEVEL_KEY, "log.level");
/// ```
pub const LEVEL_KEY: &str = "log.level";

/// The property key of an event's `log` target.
///
/// ```
/// assert_eq!(minitrace_log::TARGET_KEY, "log.target");
/// ```
pub const TARGET_KEY: &str = "log.target";

/// The trace id and span id of the current thread's local parent (the
/// span a log line written now belongs to), or `None` outside a trace.
///
/// ```
/// use minitrace::prelude::*;
///
/// assert_eq!(minitrace_log::current_ids(), None);
/// let root = Span::root("request", SpanContext::random());
/// let _guard = root.set_local_parent();
/// // With a reporter set (see the crate docs), the root's ids:
/// if let Some((trace_id, span_id)) = minitrace_log::current_ids() {
///     println!("trace_id={trace_id} span_id={span_id}");
/// }
/// ```
pub fn current_ids() -> Option<(TraceId, SpanId)> {
    SpanContext::current_local_parent().map(|context| (context.trace_id, context.span_id))
}

/// A [`Log`] that adds each record logged inside a trace to the current
/// span as an event, and hands every record on to `inner`.
///
/// The event's name is the record's message; its properties are
/// [`LEVEL_KEY`] and [`TARGET_KEY`]. By default every record that reaches
/// the logger (`log::max_level()` filters first) becomes an event, and
/// lines are passed on unchanged; see [`with_event_level`](Logger::with_event_level)
/// and [`with_ids_stamped`](Logger::with_ids_stamped).
///
/// ```
/// use log::LevelFilter;
///
/// struct Stderr;
/// impl log::Log for Stderr {
///     fn enabled(&self, _: &log::Metadata) -> bool {
///         true
///     }
///     fn log(&self, record: &log::Record) {
///         eprintln!("[{}] {}", record.level(), record.args());
///     }
///     fn flush(&self) {}
/// }
///
/// let logger = minitrace_log::Logger::new(Stderr).with_event_level(LevelFilter::Info).with_ids_stamped();
/// log::set_boxed_logger(Box::new(logger)).unwrap();
/// log::set_max_level(LevelFilter::Debug);
/// log::debug!("a line, but no event");
/// ```
pub struct Logger<L> {
    inner: L,
    events: LevelFilter,
    stamp_ids: bool,
}

impl<L: Log> Logger<L> {
    /// Wraps `inner`: every record becomes an event inside a trace, and
    /// goes on to `inner` unchanged.
    ///
    /// ```
    /// let logger = minitrace_log::Logger::new(log::logger());
    /// # drop(logger);
    /// ```
    pub fn new(inner: L) -> Logger<L> {
        Logger { inner, events: LevelFilter::Trace, stamp_ids: false }
    }

    /// Makes events only of records at `level` or more severe
    /// (`LevelFilter::Off`: none); the others still go on to `inner`.
    ///
    /// ```
    /// let logger = minitrace_log::Logger::new(log::logger()).with_event_level(log::LevelFilter::Warn);
    /// # drop(logger);
    /// ```
    pub fn with_event_level(mut self, level: LevelFilter) -> Logger<L> {
        self.events = level;
        self
    }

    /// Prefixes the message of each record logged inside a trace with
    /// `trace_id=<32 hex digits> span_id=<16 hex digits> ` before handing
    /// it on (records outside a trace go on unchanged).
    ///
    /// ```
    /// let logger = minitrace_log::Logger::new(log::logger()).with_ids_stamped();
    /// # drop(logger);
    /// ```
    pub fn with_ids_stamped(mut self) -> Logger<L> {
        self.stamp_ids = true;
        self
    }

    /// The wrapped logger.
    ///
    /// ```
    /// let logger = minitrace_log::Logger::new(log::logger());
    /// let _inner = logger.inner();
    /// ```
    pub fn inner(&self) -> &L {
        &self.inner
    }
}

impl<L: Log> Log for Logger<L> {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= self.events || self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        let as_event = record.level() <= self.events;
        // The one cost outside a trace, and only when it could matter.
        let context = if as_event || self.stamp_ids { SpanContext::current_local_parent() } else { None };
        let Some(context) = context else {
            return self.inner.log(record);
        };
        if as_event {
            Event::add_to_local_parent(record.args().to_string(), || {
                [
                    (Cow::Borrowed(LEVEL_KEY), Cow::Borrowed(record.level().as_str())),
                    (Cow::Borrowed(TARGET_KEY), Cow::Owned(record.target().to_owned())),
                ]
            });
        }
        if self.stamp_ids {
            let (trace_id, span_id) = (context.trace_id, context.span_id);
            self.inner.log(
                &Record::builder()
                    .metadata(record.metadata().clone())
                    .module_path(record.module_path())
                    .file(record.file())
                    .line(record.line())
                    .args(format_args!("trace_id={trace_id} span_id={span_id} {}", record.args()))
                    .build(),
            );
        } else {
            self.inner.log(record);
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

impl<L> fmt::Debug for Logger<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Logger")
            .field("inner", &std::any::type_name::<L>())
            .field("events", &self.events)
            .field("stamp_ids", &self.stamp_ids)
            .finish()
    }
}
