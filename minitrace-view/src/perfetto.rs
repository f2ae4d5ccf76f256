//! The Chrome trace-event export (JSON), which Perfetto's UI opens.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{Read, Write};

use minitrace_flight::{Reader, RecordedTrace, SpanRecord};

use crate::{request_extent, write_json_string, ViewError};

/// Which requests [`export_perfetto`] writes. The default: all of them.
#[derive(Debug, Clone, Default)]
pub struct PerfettoOptions {
    /// Only requests that overlap this span of time, `(begin, end)` in
    /// nanoseconds since the Unix epoch: what ran beside a slow request.
    pub window: Option<(u64, u64)>,
    /// At most this many requests (the first in the dump that pass the window).
    pub limit: Option<usize>,
    /// The time written as 0, in nanoseconds since the Unix epoch; `None`
    /// takes the first exported request's begin. Earlier events would get
    /// negative times, so pass the dump's earliest begin when it is known.
    pub origin_unix_ns: Option<u64>,
}

/// What [`export_perfetto`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    /// Requests (traces) exported.
    pub requests: u64,
    /// Complete (`"ph":"X"`) events: one per span, roots included.
    pub events: u64,
    /// Instant (`"ph":"i"`) events: one per event of a span.
    pub instants: u64,
    /// Tracks used: requests that overlap in time go to different tracks.
    pub tracks: u64,
}

/// Microseconds, as trace events count them, from nanoseconds: exact to the
/// nanosecond, as a decimal.
fn micros(ns: i128) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let ns = ns.unsigned_abs();
    format!("{sign}{}.{:03}", ns / 1_000, ns % 1_000)
}

/// Streams a dump out as Chrome trace-event JSON: `{"traceEvents":[...]}`
/// with a complete event (`"ph":"X"`) for each span of each trace, the
/// root's in the category `request` and the others' in `span`, and an
/// instant event (`"ph":"i"`) for each event of a span.
///
/// Each request goes to a track ("tid") of its own among those free at its
/// begin, so that requests running at once, on one thread or not, never
/// overlap on a track; the recorded thread, the trace id and whether the
/// trace is whole are in the root's `args`, each span's ids and properties
/// in its own. Times are microseconds since `origin_unix_ns` (in
/// `otherData`), which keeps nanosecond precision that absolute epoch
/// microseconds would lose.
pub fn export_perfetto<R: Read, W: Write>(
    reader: Reader<R>,
    options: &PerfettoOptions,
    out: W,
) -> Result<Exported, ViewError> {
    let mut out = std::io::BufWriter::new(out);
    let mut exported = Exported { requests: 0, events: 0, instants: 0, tracks: 0 };
    // Free tracks by the end of their last request: the earliest first.
    let mut tracks: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut origin = options.origin_unix_ns;
    let write = |out: &mut std::io::BufWriter<W>, text: &str| out.write_all(text.as_bytes());
    write(&mut out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n").map_err(ViewError::Output)?;
    for trace in reader {
        let trace = trace?;
        let (begin, duration) = request_extent(&trace);
        let end = begin.saturating_add(duration);
        if let Some((from, to)) = options.window {
            if end < from || begin > to {
                continue;
            }
        }
        if options.limit.is_some_and(|limit| exported.requests as usize >= limit) {
            break;
        }
        let origin = *origin.get_or_insert(begin);
        let track = match tracks.peek() {
            Some(&Reverse((free_at, track))) if free_at <= begin => {
                tracks.pop();
                track
            }
            _ => {
                exported.tracks += 1;
                exported.tracks
            }
        };
        tracks.push(Reverse((end, track)));
        let first = exported.events + exported.instants == 0;
        let written = write_trace(&mut out, &trace, origin, track, first).map_err(ViewError::Output)?;
        exported.requests += 1;
        exported.events += trace.spans.len() as u64;
        exported.instants += written;
    }
    let origin = origin.unwrap_or(0);
    let mut tail = String::new();
    for track in 1..=exported.tracks {
        let nothing_before = exported.events + exported.instants == 0 && track == 1;
        tail.push_str(if nothing_before { "" } else { ",\n" });
        tail.push_str(&format!(
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":{track},\"args\":{{\"name\":\"requests {track}\"}}}}"
        ));
    }
    tail.push_str(&format!(
        "\n],\"otherData\":{{\"origin_unix_ns\":\"{origin}\",\"requests\":{},\"source\":\"minitrace flight dump\"}}}}\n",
        exported.requests
    ));
    write(&mut out, &tail).and_then(|()| out.flush()).map_err(ViewError::Output)?;
    Ok(exported)
}

/// Writes `properties` as the members of a JSON object, streamed.
fn write_properties<'a>(
    out: &mut impl Write,
    properties: impl IntoIterator<Item = &'a (std::borrow::Cow<'static, str>, std::borrow::Cow<'static, str>)>,
) -> std::io::Result<()> {
    for (at, (key, value)) in properties.into_iter().enumerate() {
        if at > 0 {
            out.write_all(b",")?;
        }
        write_json_string(out, key)?;
        out.write_all(b":")?;
        write_json_string(out, value)?;
    }
    Ok(())
}

/// Writes one trace's events, the root first, streamed: a name or a
/// property of many megabytes is escaped straight into the output, never
/// held again in memory. Returns the instant events written.
fn write_trace(
    out: &mut impl Write,
    trace: &RecordedTrace,
    origin: u64,
    track: u64,
    first: bool,
) -> std::io::Result<u64> {
    let at = |ns: u64| micros(i128::from(ns) - i128::from(origin));
    let root = trace.root();
    // The root (the last span, when held) first, then the others in order.
    let others = &trace.spans[..trace.spans.len() - usize::from(root.is_some())];
    let spans = root.map(|root| (root, true)).into_iter().chain(others.iter().map(|span| (span, false)));
    let mut instants = 0;
    for (index, (span, is_root)) in spans.enumerate() {
        if !first || index > 0 {
            out.write_all(b",\n")?;
        }
        let cat = if is_root { "request" } else { "span" };
        write_span(out, span, cat, track, at(span.begin_time_unix_ns))?;
        if is_root || root.is_none() {
            write!(
                out,
                ",\"trace_id\":\"{}\",\"thread\":{},\"complete\":{}",
                trace.trace_id, trace.thread, trace.complete
            )?;
        }
        if is_root {
            out.write_all(b",\"duration\":")?;
            write_json_string(out, &crate::format_duration(span.duration_ns))?;
        }
        out.write_all(b",\"properties\":{")?;
        write_properties(out, &span.properties)?;
        out.write_all(b"}}}")?;
        for event in &span.events {
            out.write_all(b",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"event\",\"name\":")?;
            write_json_string(out, &event.name)?;
            write!(out, ",\"pid\":1,\"tid\":{track},\"ts\":{},\"args\":{{", at(event.timestamp_unix_ns))?;
            write_properties(out, &event.properties)?;
            out.write_all(b"}}")?;
            instants += 1;
        }
    }
    Ok(instants)
}

/// Writes a span's complete event up to its `args`' ids, left open.
fn write_span(
    out: &mut impl Write,
    span: &SpanRecord,
    cat: &str,
    track: u64,
    ts: String,
) -> std::io::Result<()> {
    write!(out, "{{\"ph\":\"X\",\"cat\":\"{cat}\",\"name\":")?;
    write_json_string(out, &span.name)?;
    write!(
        out,
        ",\"pid\":1,\"tid\":{track},\"ts\":{ts},\"dur\":{},\"args\":{{\"span_id\":\"{}\",\"parent_id\":\"{}\"",
        micros(i128::from(span.duration_ns)),
        span.span_id,
        span.parent_id,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn micros_keep_every_nanosecond() {
        assert_eq!(super::micros(1_234_567), "1234.567");
        assert_eq!(super::micros(5), "0.005");
        assert_eq!(super::micros(-1_500), "-1.500");
    }
}
