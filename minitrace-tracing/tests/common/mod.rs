//! Shared by the test files: one `TestReporter` per test process, a root
//! per test (tests run in parallel and tell their spans apart by trace id),
//! and look-ups in a finished trace.
#![allow(dead_code)] // each test file uses a part

use std::sync::{Arc, Once, OnceLock};

use minitrace::collector::{Config, SpanRecord, TestReporter, TraceId};
use minitrace::prelude::*;
use parking_lot::Mutex;
use tracing::Subscriber;

/// Every span reported in this process.
pub fn records() -> &'static Arc<Mutex<Vec<SpanRecord>>> {
    static RECORDS: OnceLock<Arc<Mutex<Vec<SpanRecord>>>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let (reporter, records) = TestReporter::new();
        minitrace::set_reporter(reporter, Config::default());
        records
    })
}

/// Sets `subscriber` as this process's global subscriber, the first time.
pub fn install(subscriber: impl FnOnce() -> Box<dyn Subscriber + Send + Sync>) {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| tracing::subscriber::set_global_default(subscriber()).unwrap());
    records();
}

/// Runs `f` with a new root named "root" as this thread's local parent,
/// then returns the trace.
pub fn trace(f: impl FnOnce()) -> Trace {
    let context = SpanContext::random();
    {
        let root = Span::root("root", context);
        let _guard = root.set_local_parent();
        f();
    }
    finished(context.trace_id)
}

/// The spans of `trace_id`, once everything finished so far is reported.
pub fn finished(trace_id: TraceId) -> Trace {
    minitrace::flush();
    let spans = records().lock().iter().filter(|span| span.trace_id == trace_id).cloned().collect();
    Trace { spans }
}

/// Whether any span named `name` was reported in this process so far.
pub fn any_span_named(name: &str) -> bool {
    minitrace::flush();
    records().lock().iter().any(|span| span.name == name)
}

/// One finished trace.
#[derive(Debug)]
pub struct Trace {
    pub spans: Vec<SpanRecord>,
}

impl Trace {
    /// Every span named `name`.
    pub fn all(&self, name: &str) -> Vec<&SpanRecord> {
        self.spans.iter().filter(|span| span.name == name).collect()
    }

    /// The one span named `name`.
    pub fn span(&self, name: &str) -> &SpanRecord {
        match self.all(name)[..] {
            [span] => span,
            ref found => panic!("{} spans named {name:?} in {:#?}", found.len(), self.spans),
        }
    }

    /// The name of the parent of the one span named `name`.
    pub fn parent_of(&self, name: &str) -> &str {
        self.parent(self.span(name))
    }

    /// The name of `span`'s parent.
    pub fn parent<'a>(&'a self, span: &SpanRecord) -> &'a str {
        let parent = self.spans.iter().find(|parent| parent.span_id == span.parent_id);
        parent.map_or("<none>", |parent| &parent.name)
    }
}

/// The value of `key` among `properties`, the last one if several.
pub fn property<'a>(
    properties: &'a [(std::borrow::Cow<'static, str>, std::borrow::Cow<'static, str>)],
    key: &str,
) -> Option<&'a str> {
    properties.iter().rev().find(|(k, _)| k == key).map(|(_, value)| value.as_ref())
}
