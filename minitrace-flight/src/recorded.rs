//! The core's flight recorder to dump files: a snapshot, or the window
//! around a slow trace, written as a dump.

use std::io;
use std::path::{Path, PathBuf};

use minitrace::recorder::{RecordedTrace, SlowTraceWindow};

use crate::writer::{write_file_atomically, Written};
use crate::{Request, SpanEntry};

impl From<&RecordedTrace> for Request {
    /// The trace's root as the request, its other spans under it, in the
    /// order they began (a trace whose root was not held has none).
    fn from(recorded: &RecordedTrace) -> Request {
        let root = recorded.root();
        let mut spans: Vec<_> = recorded.spans.iter().filter(|span| Some(*span) != root).collect();
        spans.sort_by_key(|span| span.begin_time_unix_ns);
        let index: std::collections::HashMap<_, _> =
            spans.iter().enumerate().map(|(at, span)| (span.span_id, at as u32)).collect();
        Request {
            trace_id: recorded.trace_id.0,
            name: root.map_or_else(String::new, |root| root.name.to_string()),
            thread: recorded.thread,
            begin_unix_ns: recorded.begin_unix_ns(),
            duration_ns: recorded.duration_ns(),
            properties: root
                .map(|root| root.properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
                .unwrap_or_default(),
            spans: spans
                .iter()
                .map(|span| SpanEntry {
                    name: span.name.to_string(),
                    parent: index.get(&span.parent_id).copied(),
                    begin_unix_ns: span.begin_time_unix_ns,
                    duration_ns: span.duration_ns,
                })
                .collect(),
        }
    }
}

/// Writes everything the flight recorder holds now to a dump at `path`
/// (through a temporary file renamed at the end: never half-written).
/// Call it from an API handler, a thread woken by a signal handler the
/// program installs, or at the end of `main`.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("flight-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let written = minitrace_flight::dump_recorder(dir.join("now.mtf"))?;
/// assert_eq!(written.requests, 0); // the recorder is off in this example
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn dump_recorder(path: impl AsRef<Path>) -> io::Result<Written<PathBuf>> {
    let requests = to_requests(&minitrace::recorder::snapshot().traces);
    write_file_atomically(path, &requests)
}

/// Writes everything the flight recorder holds to a dump at `path` when
/// dropped: keep one alive in `main` to dump at exit (a panic that unwinds
/// out of `main` drops it too). A failure is printed to standard error.
///
/// ```
/// let path = std::env::temp_dir().join(format!("flight-exit-doc-{}.mtf", std::process::id()));
/// {
///     let _dump = minitrace_flight::DumpOnExit::new(&path);
///     // ... the program's work ...
/// }
/// assert!(path.exists());
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct DumpOnExit {
    path: PathBuf,
}

impl DumpOnExit {
    /// A guard that dumps to `path` when dropped.
    pub fn new(path: impl Into<PathBuf>) -> DumpOnExit {
        DumpOnExit { path: path.into() }
    }
}

impl Drop for DumpOnExit {
    fn drop(&mut self) {
        if let Err(error) = dump_recorder(&self.path) {
            eprintln!("minitrace-flight: no dump at exit to {}: {error}", self.path.display());
        }
    }
}

/// Writes the requests around a slow trace (what
/// [`FlightRecorder::on_slow_trace`](minitrace::recorder::FlightRecorder::on_slow_trace)
/// hands its callback) to a dump at `path`.
pub fn dump_window(window: &SlowTraceWindow, path: impl AsRef<Path>) -> io::Result<Written<PathBuf>> {
    write_file_atomically(path, &to_requests(&window.traces))
}

/// The dump format's requests, oldest first: a dump's blocks read best in
/// time order.
fn to_requests(recorded: &[RecordedTrace]) -> Vec<Request> {
    let mut requests: Vec<Request> = recorded.iter().map(Request::from).collect();
    requests.sort_by_key(|request| request.begin_unix_ns);
    requests
}
