//! The core's flight recorder to dump files: a snapshot, or the window
//! around a slow trace, written as a dump, its traces as the recorder hands
//! them out (the `recorder` feature).

use std::io;
use std::path::{Path, PathBuf};

use minitrace::recorder::{RecordedTrace, SlowTraceWindow};

use crate::writer::{write_file_atomically, Written};

/// Writes everything the flight recorder holds now to a dump at `path`
/// (through a temporary file renamed at the end: never half-written).
/// Call it from an API handler, a thread woken by a signal handler the
/// program installs, or at the end of `main`.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("flight-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let written = minitrace_flight::dump_recorder(dir.join("now.mtf"))?;
/// assert_eq!(written.traces, 0); // the recorder is off in this example
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn dump_recorder(path: impl AsRef<Path>) -> io::Result<Written<PathBuf>> {
    write_file_atomically(path, oldest_first(&minitrace::recorder::snapshot().traces))
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

/// Writes the traces around a slow trace (what
/// [`FlightRecorder::on_slow_trace`](minitrace::recorder::FlightRecorder::on_slow_trace)
/// hands its callback) to a dump at `path`.
pub fn dump_window(window: &SlowTraceWindow, path: impl AsRef<Path>) -> io::Result<Written<PathBuf>> {
    write_file_atomically(path, oldest_first(&window.traces))
}

/// The traces oldest first (the recorder hands them out so; a window is
/// sorted again all the same): a dump's blocks compress best in time order.
fn oldest_first(traces: &[RecordedTrace]) -> Vec<&RecordedTrace> {
    let mut sorted: Vec<&RecordedTrace> = traces.iter().collect();
    sorted.sort_by_key(|trace| trace.begin_unix_ns());
    sorted
}
