//! The error log: a line on standard error at most once per interval, with
//! the count of the lines held back since the last one.

use std::io::Write;
use std::time::{Duration, Instant};

/// Writes a reporter's errors to standard error, at most one line per
/// interval; the errors in between are counted, and their number told with
/// the next line. Each reporter has its own, so one failing reporter does
/// not silence another.
///
/// It writes what it is given: callers give it no header value and no
/// credentials ([`Delivery`](crate::Delivery) removes the secrets it was
/// told of from every message first).
///
/// ```
/// use std::time::Duration;
/// use minitrace_delivery::ErrorLog;
///
/// let mut log = ErrorLog::new("my-reporter", Duration::from_secs(10));
/// assert!(log.log(|| "the first error is written".into()));
/// assert!(!log.log(|| "the second, within 10 s, is counted".into()));
/// ```
#[derive(Debug, Clone)]
pub struct ErrorLog {
    prefix: &'static str,
    interval: Duration,
    last: Option<Instant>,
    /// Errors not written since the last line.
    held_back: u64,
}

impl ErrorLog {
    /// A log whose lines start with `prefix: ` and come at most once per
    /// `interval`.
    ///
    /// ```
    /// let log = minitrace_delivery::ErrorLog::new("minitrace-otlp", std::time::Duration::ZERO);
    /// # drop(log);
    /// ```
    pub fn new(prefix: &'static str, interval: Duration) -> ErrorLog {
        ErrorLog { prefix, interval, last: None, held_back: 0 }
    }

    /// Sets the shortest time between two lines.
    ///
    /// ```
    /// let mut log = minitrace_delivery::ErrorLog::new("r", std::time::Duration::ZERO);
    /// log.set_interval(std::time::Duration::from_secs(60));
    /// ```
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    /// Writes `message()` unless a line was written less than the interval
    /// ago, in which case it is only counted (and `message` not called).
    /// Returns whether a line was written.
    ///
    /// ```
    /// let mut log = minitrace_delivery::ErrorLog::new("r", std::time::Duration::ZERO);
    /// assert!(log.log(|| "no interval: every error is written".into()));
    /// ```
    pub fn log(&mut self, message: impl FnOnce() -> String) -> bool {
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < self.interval) {
            self.held_back += 1;
            return false;
        }
        let mut line = format!("{}: {}", self.prefix, message());
        let held_back = std::mem::take(&mut self.held_back);
        if held_back > 0 {
            line.push_str(&format!(" ({held_back} more errors since the last message)"));
        }
        write_line(&line);
        self.last = Some(now);
        true
    }
}

pub(crate) fn write_line(line: &str) {
    #[cfg(feature = "testing")]
    if crate::testing::captured(line) {
        return;
    }
    // A closed stderr must not become a panic on minitrace's collector thread.
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A seam for the reporters' tests, with the `testing` feature: the lines
/// that the error logs write on this thread, caught instead of written.
#[cfg(feature = "testing")]
pub mod testing {
    use std::cell::RefCell;

    thread_local! {
        static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
    }

    /// Runs `f`, and returns what it returned with the lines that the error
    /// logs wrote on this thread meanwhile (which then do not reach
    /// standard error).
    ///
    /// ```
    /// use minitrace_delivery::{testing::capture_log, ErrorLog};
    ///
    /// let mut log = ErrorLog::new("r", std::time::Duration::ZERO);
    /// let ((), lines) = capture_log(|| {
    ///     log.log(|| "caught".into());
    /// });
    /// assert_eq!(lines, ["r: caught"]);
    /// ```
    pub fn capture_log<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
        let outer = CAPTURED.with(|captured| captured.borrow_mut().replace(Vec::new()));
        let result = f();
        let lines = CAPTURED.with(|captured| std::mem::replace(&mut *captured.borrow_mut(), outer));
        (result, lines.unwrap_or_default())
    }

    /// Whether this thread captures the lines.
    pub(crate) fn capturing() -> bool {
        CAPTURED.with(|captured| captured.borrow().is_some())
    }

    /// Keeps `line` if this thread is capturing; says whether it did.
    pub(crate) fn captured(line: &str) -> bool {
        CAPTURED.with(|captured| match captured.borrow_mut().as_mut() {
            Some(lines) => {
                lines.push(line.to_owned());
                true
            }
            None => false,
        })
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::testing::capture_log;
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_held_back() {
        let mut log = ErrorLog::new("r", Duration::from_secs(3600));
        let (written, lines) = capture_log(|| {
            let written: Vec<bool> = (0..4).map(|i| log.log(|| format!("error {i}"))).collect();
            // An interval of zero lets the next line through, with the count.
            log.set_interval(Duration::ZERO);
            log.log(|| "error 4".into());
            log.log(|| "error 5".into());
            written
        });
        assert_eq!(written, [true, false, false, false]);
        assert_eq!(lines, ["r: error 0", "r: error 4 (3 more errors since the last message)", "r: error 5"]);
    }
}
