//! Views of a minitrace flight dump: a self-contained HTML page of the whole
//! population, a Chrome trace-event export for Perfetto, and a summary of
//! its latency.
//!
//! A dump holds the flight recorder's own records, a
//! [`RecordedTrace`] per request; each view
//! reads them as they are: a request is its trace's root (its name,
//! properties and duration), and the page shows each span's properties and
//! events on a click.
//!
//! ```
//! use minitrace_flight::{synthetic, Reader, Writer};
//!
//! // A dump of 2 000 synthetic requests, in memory.
//! let mut writer = Writer::new(Vec::new());
//! for trace in synthetic::traces(2_000, 1) {
//!     writer.write(&trace)?;
//! }
//! let dump = writer.finish()?.into_inner();
//!
//! // The page: one HTML file that works offline.
//! let mut page = Vec::new();
//! let stats = minitrace_view::render_page(Reader::new(&dump[..])?, "demo", &mut page)?;
//! assert_eq!(stats.requests, 2_000);
//! assert!(page.starts_with(b"<!DOCTYPE html>"));
//!
//! // The same requests for Perfetto, and the summary the CLI prints.
//! let mut json = Vec::new();
//! let exported = minitrace_view::export_perfetto(Reader::new(&dump[..])?, &Default::default(), &mut json)?;
//! assert_eq!(exported.events, 2_000 * 11);
//! println!("{}", minitrace_view::summarize(Reader::new(&dump[..])?)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Several processes' dumps (a frontend's and a backend's, say) make one
//! page of one population with [`render_pages`]: a request's traces in the
//! processes it went through are joined by trace id.
//!
//! The command line, `minitrace-view DUMP [DUMP...] [-o PAGE.html]
//! [--perfetto OUT.json] [--summary]`, is a thin shell over [`render_pages`],
//! [`export_perfetto`] and [`summarize`].

#![deny(missing_docs)]
#![deny(missing_debug_implementations)]

use std::fmt;
use std::io::{self, Read, Write};

use minitrace_flight::{FormatError, Reader, RecordedTrace};

mod embed;
mod page;
mod perfetto;
mod summary;

pub use page::{render_page, render_pages, PageStats};
pub use perfetto::{export_perfetto, Exported, PerfettoOptions};
pub use summary::{format_duration, summary, Slow, Summary, SummaryBuilder};

/// Why a view could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum ViewError {
    /// The dump could not be read (see [`FormatError`]).
    Dump(FormatError),
    /// The output could not be written.
    Output(io::Error),
}

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewError::Dump(error) => error.fmt(f),
            ViewError::Output(error) => write!(f, "cannot write the output: {error}"),
        }
    }
}

impl std::error::Error for ViewError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ViewError::Dump(error) => Some(error),
            ViewError::Output(error) => Some(error),
        }
    }
}

impl From<FormatError> for ViewError {
    fn from(error: FormatError) -> Self {
        ViewError::Dump(error)
    }
}

/// The summary of a whole dump: its latency percentiles and slowest
/// requests, read as a stream.
pub fn summarize<R: Read>(reader: Reader<R>) -> Result<Summary, FormatError> {
    let mut builder = SummaryBuilder::default();
    for trace in reader {
        builder.add(&trace?);
    }
    Ok(builder.finish())
}

/// When a request began and how long it took, as every view shows it: its
/// root's begin and duration, or for a trace whose root was not held, the
/// extent of its spans (as [`RecordedTrace::begin_unix_ns`] and
/// [`RecordedTrace::duration_ns`], but saturating: a dump's times may be
/// anything).
///
/// ```
/// use minitrace_flight::{RecordedTrace, SpanRecord};
///
/// let span = |begin, duration| SpanRecord { begin_time_unix_ns: begin, duration_ns: duration, ..SpanRecord::default() };
/// let rootless = RecordedTrace { thread: 0, spans: vec![span(10, 5), span(12, 20)], ..RecordedTrace::default() };
/// assert_eq!(minitrace_view::request_extent(&rootless), (10, 22));
/// let rooted = RecordedTrace { thread: 1, ..rootless };
/// assert_eq!(minitrace_view::request_extent(&rooted), (12, 20));
/// ```
pub fn request_extent(trace: &RecordedTrace) -> (u64, u64) {
    if let Some(root) = trace.root() {
        return (root.begin_time_unix_ns, root.duration_ns);
    }
    let begin = trace.spans.iter().map(|span| span.begin_time_unix_ns).min().unwrap_or(0);
    let end = trace.spans.iter().map(|span| span.begin_time_unix_ns.saturating_add(span.duration_ns)).max();
    (begin, end.unwrap_or(0).saturating_sub(begin))
}

/// A request's name: its root's, or `(no root)`.
///
/// ```
/// let trace = minitrace_flight::RecordedTrace::default();
/// assert_eq!(minitrace_view::request_name(&trace), "(no root)");
/// ```
pub fn request_name(trace: &RecordedTrace) -> &str {
    trace.root().map_or("(no root)", |root| root.name.as_ref())
}

/// `text` as a JSON string literal; `<` escaped too, so that the literal
/// can sit inside an HTML `<script>` element.
pub(crate) fn json_string(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len() + 2);
    // Writing to a Vec cannot fail.
    let _ = write_json_string(&mut out, text);
    String::from_utf8(out).unwrap_or_default()
}

/// Writes `text` as [`json_string`] does, streamed: runs of plain text as
/// they are and escapes between them, with no copy of the whole.
pub(crate) fn write_json_string(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut plain = 0;
    for (at, c) in text.char_indices() {
        let short: &[u8] = match c {
            '"' => b"\\\"",
            '\\' => b"\\\\",
            '\n' => b"\\n",
            '\r' => b"\\r",
            '\t' => b"\\t",
            // Empty: a \uXXXX escape, written below.
            c if (c as u32) < 0x20 || c == '<' || c == '\u{2028}' || c == '\u{2029}' => b"",
            _ => continue,
        };
        out.write_all(&text.as_bytes()[plain..at])?;
        plain = at + c.len_utf8();
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let code = c as u32;
            let digit = |shift: u32| HEX[(code >> shift & 0xf) as usize];
            out.write_all(&[b'\\', b'u', digit(12), digit(8), digit(4), digit(0)])?;
        } else {
            out.write_all(short)?;
        }
    }
    out.write_all(&text.as_bytes()[plain..])?;
    out.write_all(b"\"")
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_strings_escape_what_json_and_html_need() {
        assert_eq!(super::json_string("a\"b\\c\n</script>\u{1}"), r#""a\"b\\c\n\u003c/script>\u0001""#);
        assert_eq!(super::json_string("é\u{2028}\u{1f}\r\t⏱"), r#""é\u2028\u001f\r\t⏱""#);
        assert_eq!(super::json_string(""), r#""""#);
    }
}
