//! The Chrome trace-event export (JSON), which Perfetto's UI opens.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{Read, Write};

use minitrace_flight::{Reader, Request};

use crate::{write_json_string, ViewError};

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
    /// Requests exported.
    pub requests: u64,
    /// Complete (`"ph":"X"`) events: one per request and one per span.
    pub events: u64,
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
/// with a complete event (`"ph":"X"`) for each request's root and each span.
///
/// Each request goes to a track ("tid") of its own among those free at its
/// begin, so that requests running at once, on one thread or not, never
/// overlap on a track; the recorded thread is in each root's `args`. Times
/// are microseconds since `origin_unix_ns` (in `otherData`), which keeps
/// nanosecond precision that absolute epoch microseconds would lose.
pub fn export_perfetto<R: Read, W: Write>(
    reader: Reader<R>,
    options: &PerfettoOptions,
    out: W,
) -> Result<Exported, ViewError> {
    let mut out = std::io::BufWriter::new(out);
    let mut exported = Exported { requests: 0, events: 0, tracks: 0 };
    // Free tracks by the end of their last request: the earliest first.
    let mut tracks: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut origin = options.origin_unix_ns;
    let write = |out: &mut std::io::BufWriter<W>, text: &str| out.write_all(text.as_bytes());
    write(&mut out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n").map_err(ViewError::Output)?;
    for request in reader {
        let request = request?;
        if let Some((begin, end)) = options.window {
            if request.end_unix_ns() < begin || request.begin_unix_ns > end {
                continue;
            }
        }
        if options.limit.is_some_and(|limit| exported.requests as usize >= limit) {
            break;
        }
        let origin = *origin.get_or_insert(request.begin_unix_ns);
        let track = match tracks.peek() {
            Some(&Reverse((end, track))) if end <= request.begin_unix_ns => {
                tracks.pop();
                track
            }
            _ => {
                exported.tracks += 1;
                exported.tracks
            }
        };
        tracks.push(Reverse((request.end_unix_ns(), track)));
        write_request(&mut out, &request, origin, track, exported.events == 0).map_err(ViewError::Output)?;
        exported.requests += 1;
        exported.events += 1 + request.spans.len() as u64;
    }
    let origin = origin.unwrap_or(0);
    let mut tail = String::new();
    for track in 1..=exported.tracks {
        tail.push_str(if exported.events == 0 && track == 1 { "" } else { ",\n" });
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

/// Writes one request's events, the root first, streamed: a name or a
/// property of many megabytes is escaped straight into the output, never
/// held again in memory.
fn write_request(
    out: &mut impl Write,
    request: &Request,
    origin: u64,
    track: u64,
    first: bool,
) -> std::io::Result<()> {
    let at = |ns: u64| micros(i128::from(ns) - i128::from(origin));
    if !first {
        out.write_all(b",\n")?;
    }
    out.write_all(b"{\"ph\":\"X\",\"cat\":\"request\",\"name\":")?;
    write_json_string(out, &request.name)?;
    write!(
        out,
        ",\"pid\":1,\"tid\":{track},\"ts\":{},\"dur\":{},\"args\":{{\"trace_id\":\"{:032x}\",\"thread\":{},\"duration\":",
        at(request.begin_unix_ns),
        micros(i128::from(request.duration_ns)),
        request.trace_id,
        request.thread,
    )?;
    write_json_string(out, &crate::format_duration(request.duration_ns))?;
    for (key, value) in &request.properties {
        out.write_all(b",")?;
        write_json_string(out, key)?;
        out.write_all(b":")?;
        write_json_string(out, value)?;
    }
    out.write_all(b"}}")?;
    for span in &request.spans {
        out.write_all(b",\n{\"ph\":\"X\",\"cat\":\"span\",\"name\":")?;
        write_json_string(out, &span.name)?;
        write!(
            out,
            ",\"pid\":1,\"tid\":{track},\"ts\":{},\"dur\":{}}}",
            at(span.begin_unix_ns),
            micros(i128::from(span.duration_ns)),
        )?;
    }
    Ok(())
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
