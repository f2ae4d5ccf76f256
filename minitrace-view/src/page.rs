//! The HTML page: every request's begin, duration and kind as typed arrays,
//! the per-stage view as a raster, and the dump's own blocks for the traces
//! (decoded in the browser by `decode.js` when a request is clicked), all
//! inline in one file.
//!
//! The page draws a million points on `<canvas>`: one pass over the typed
//! arrays adds each point into a pixel buffer and one `putImageData` shows
//! it, a few milliseconds per redraw. A million SVG or DOM nodes would take
//! seconds to build and lay out, and each zoom would rebuild them.
//!
//! Size: the page is its dump plus a stated overhead. The dump's blocks go
//! in as they are stored (zlib), nearly byte for byte (see
//! `data_element`: ~1.6 % of escapes, where base64 would add a third); per
//! request 13 bytes (begin, duration, kind), 8 per joined part; and a fixed
//! part: the scripts, the template and the per-stage raster. No page is
//! larger than 1.02 × its dumps + 26 bytes a request + 4 MiB
//! (`tests/browser.rs` checks it on a million requests).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Read, Write};

use minitrace_flight::{Reader, RecordedTrace, TraceId};

use crate::embed::{ascii_script, data_element, html_escape, EMBED};
use crate::{json_string, request_extent, request_name, SummaryBuilder, ViewError};

const TEMPLATE: &str = include_str!("page.html");
/// The block decoder (FORMAT.md of minitrace-flight, in JavaScript), then
/// the page's scripts, which use it.
const DECODER: &str = include_str!("decode.js");
/// The heatmap, the ranking of a brushed region's attributes and the
/// percentiles per operation, which the page's script installs.
const EXPLAIN: &str = include_str!("explain.js");
/// The critical path of a brushed selection by stage, beside the rest's.
const CRITICAL: &str = include_str!("critical.js");
/// Formatting of durations, times, axis ticks and HTML text.
const FORMAT: &str = include_str!("format.js");
const SCRIPT: &str = include_str!("page.js");

/// The per-stage view's raster: columns of time since the request began.
const STREAM_WIDTH: usize = 900;
/// Its rows of requests in start order, at most.
const STREAM_HEIGHT: usize = 450;
/// Root names with a colour of their own; the rest share "other".
const MAX_KINDS: usize = 255;
/// Span names with a colour of their own in the per-stage view.
const MAX_STAGES: usize = 62;
/// Slowest requests listed on the page.
const SLOWEST: usize = 10;
/// The longest root or span name the page keeps for its legends, in bytes:
/// the dump may hold names of megabytes, and the legends keep hundreds.
const MAX_NAME_BYTES: usize = 200;

/// `name` as the legends show it: cut after [`MAX_NAME_BYTES`] (on a
/// character's boundary) and marked with an ellipsis.
fn shown(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_NAME_BYTES {
        return Cow::Borrowed(name);
    }
    let mut end = MAX_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &name[..end]))
}

/// What [`render_page`] or [`render_pages`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageStats {
    /// Requests on the page: a trace each, or several processes' traces
    /// of one trace id.
    pub requests: u64,
    /// Their spans, roots included.
    pub spans: u64,
    /// The page's size in bytes.
    pub bytes: u64,
}

/// Names numbered in order of first sight, up to a limit past which they
/// share the last number. Long names are kept as [`shown`]: names that
/// differ only past its cut share a number.
#[derive(Default)]
struct Names {
    index: HashMap<String, usize>,
    names: Vec<String>,
    counts: Vec<u64>,
}

impl Names {
    fn id(&mut self, name: &str, limit: usize) -> usize {
        let name = shown(name);
        let name = name.as_ref();
        let id = match self.index.get(name) {
            Some(&id) => id,
            None if self.names.len() < limit => {
                self.names.push(name.to_string());
                self.counts.push(0);
                self.index.insert(name.to_string(), self.names.len() - 1);
                self.names.len() - 1
            }
            None => {
                if self.names.len() == limit {
                    self.names.push("(other)".to_string());
                    self.counts.push(0);
                }
                limit
            }
        };
        self.counts[id] += 1;
        id
    }
}

/// Everything the page needs, gathered in one pass over the dumps: a row
/// per trace, in the order of the dumps and their blocks.
#[derive(Default)]
struct Gathered {
    begins: Vec<u64>,
    durations: Vec<u64>,
    kinds: Vec<u8>,
    kind_names: Names,
    stage_names: Names,
    /// (stage, ns since the row's trace began) for each span's begin; stage
    /// 0 marks the trace's end.
    points: Vec<(u8, f32)>,
    point_starts: Vec<usize>,
    blocks: Vec<Vec<u8>>,
    block_starts: Vec<u64>,
    /// Each block's process: its dump's place in the list.
    block_processes: Vec<usize>,
    spans: u64,
    /// Only with several dumps, to join them: each row's trace id, process,
    /// and whether its root was held.
    joining: bool,
    ids: Vec<(u128, usize, bool)>,
}

impl Gathered {
    fn add(&mut self, trace: &RecordedTrace, process: usize) {
        let (begin, duration) = request_extent(trace);
        self.begins.push(begin);
        self.durations.push(duration);
        self.kinds.push(self.kind_names.id(request_name(trace), MAX_KINDS) as u8);
        self.point_starts.push(self.points.len());
        self.points.push((0, duration as f32));
        // Every span but the root (the last, when held) is a stage.
        let stages = &trace.spans[..trace.spans.len() - usize::from(trace.root().is_some())];
        for span in stages {
            let stage = 1 + self.stage_names.id(&span.name, MAX_STAGES) as u8;
            self.points.push((stage, span.begin_time_unix_ns.saturating_sub(begin) as f32));
        }
        self.spans += trace.spans.len() as u64;
        if self.joining {
            self.ids.push((trace.trace_id.0, process, trace.root().is_some()));
        }
    }

    /// The page's requests: a row each, except that the rows of different
    /// processes with the same trace id are one request, whose entry is
    /// the row whose root began first (a rooted row before a rootless one).
    /// A process's further rows with an id it already had stay requests of
    /// their own.
    fn join(&self) -> Requests {
        let rows = self.begins.len();
        if !self.joining {
            return Requests { entries: (0..rows).collect(), parts: Vec::new() };
        }
        let mut entry_of: Vec<usize> = (0..rows).collect();
        let mut order: Vec<usize> = (0..self.ids.len()).collect();
        order.sort_unstable_by_key(|&row| (self.ids[row].0, self.ids[row].1, row));
        for group in order.chunk_by(|&a, &b| self.ids[a].0 == self.ids[b].0) {
            let members: Vec<usize> = group
                .iter()
                .enumerate()
                .filter(|&(k, &row)| k == 0 || self.ids[group[k - 1]].1 != self.ids[row].1)
                .map(|(_, &row)| row)
                .collect();
            let entry = members.iter().copied().min_by_key(|&row| (!self.ids[row].2, self.begins[row], row));
            for &row in &members {
                entry_of[row] = entry.unwrap_or(row);
            }
        }
        let mut request_of = vec![0; rows];
        let mut entries = Vec::with_capacity(rows);
        for row in (0..rows).filter(|&row| entry_of[row] == row) {
            request_of[row] = entries.len();
            entries.push(row);
        }
        let mut parts: Vec<(usize, usize)> = (0..rows)
            .filter(|&row| entry_of[row] != row)
            .map(|row| (request_of[entry_of[row]], row))
            .collect();
        parts.sort_unstable();
        Requests { entries, parts }
    }
}

/// The requests of a page, made of the gathered rows.
struct Requests {
    /// Each request's entry row, in row order.
    entries: Vec<usize>,
    /// (request, row) of each row joined into another process's request,
    /// by request.
    parts: Vec<(usize, usize)>,
}

/// Each request's kind (its entry's root's name) and the kinds' names and
/// counts of requests: the kinds of the gathered rows, less those only
/// parts of requests had.
fn request_kinds(gathered: &Gathered, requests: &Requests) -> (Vec<u8>, Vec<(String, u64)>) {
    let names = &gathered.kind_names.names;
    let mut counts = vec![0u64; names.len()];
    for &row in &requests.entries {
        counts[usize::from(gathered.kinds[row])] += 1;
    }
    let mut renumbered = vec![0u8; names.len()];
    let mut kept = Vec::new();
    for (id, name) in names.iter().enumerate() {
        if counts[id] > 0 {
            renumbered[id] = kept.len() as u8;
            kept.push((name.clone(), counts[id]));
        }
    }
    let kinds = requests.entries.iter().map(|&row| renumbered[usize::from(gathered.kinds[row])]).collect();
    (kinds, kept)
}

/// An RGB colour of a hue (degrees) at the page's saturation and lightness.
fn hue_color(hue: f64) -> [u8; 3] {
    let (s, l) = (0.65, 0.45);
    let c = (1.0 - (2.0 * l - 1.0_f64).abs()) * s;
    let h = hue.rem_euclid(360.0) / 60.0;
    let x = c * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    [r, g, b].map(|v| ((v + m) * 255.0).round() as u8)
}

/// Colours for `count` categories, neighbours far apart (the golden angle).
fn palette(count: usize, first_hue: f64) -> Vec<[u8; 3]> {
    (0..count).map(|i| hue_color(first_hue + i as f64 * 137.508)).collect()
}

fn css(color: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", color[0], color[1], color[2])
}

/// The per-stage view: requests stacked by start order (rows), each span's
/// begin and the request's end as a point at its time since the request
/// began (log scale), coloured by stage and shaded by how many points share
/// a pixel. Returns the RGBA raster, its height and the log10 range.
fn stream_raster(gathered: &Gathered, requests: &Requests, colors: &[[u8; 3]]) -> (Vec<u8>, usize, f64, f64) {
    let count = requests.entries.len();
    let height = count.clamp(1, STREAM_HEIGHT);
    // A request's points, in ns since it began: its entry row's, and each
    // of its parts' spans (not a part's end: the request's end is the entry's).
    let row_points = |row: usize| {
        let end = gathered.point_starts.get(row + 1).copied().unwrap_or(gathered.points.len());
        &gathered.points[gathered.point_starts[row]..end]
    };
    let points_of = |index: usize| {
        let entry = requests.entries[index];
        let from = requests.parts.partition_point(|&(request, _)| request < index);
        let to = requests.parts.partition_point(|&(request, _)| request <= index);
        let parts = requests.parts[from..to].iter().flat_map(move |&(_, row)| {
            let shift = gathered.begins[row] as f64 - gathered.begins[entry] as f64;
            row_points(row)[1..]
                .iter()
                .map(move |&(stage, offset)| (stage, (f64::from(offset) + shift) as f32))
        });
        row_points(entry).iter().copied().chain(parts)
    };
    let log = |ns: f32| f64::from(ns.max(1.0)).log10();
    let (mut low, mut high) = (f64::MAX, f64::MIN);
    for index in 0..count {
        for (_, offset) in points_of(index) {
            low = low.min(log(offset));
            high = high.max(log(offset));
        }
    }
    if high - low < 1.0 {
        high = low + 1.0;
    }
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_key(|&index| gathered.begins[requests.entries[index]]);
    let cells = STREAM_WIDTH * height;
    let mut counts = vec![0u32; cells];
    let mut sums = vec![[0f32; 3]; cells];
    for (rank, &index) in order.iter().enumerate() {
        let row = rank * height / count;
        for (stage, offset) in points_of(index) {
            let column = ((log(offset) - low) / (high - low) * (STREAM_WIDTH - 1) as f64).round() as usize;
            let cell = row * STREAM_WIDTH + column.min(STREAM_WIDTH - 1);
            counts[cell] += 1;
            let color = colors[usize::from(stage)];
            for channel in 0..3 {
                sums[cell][channel] += f32::from(color[channel]);
            }
        }
    }
    let most = f64::from(counts.iter().copied().max().unwrap_or(0).max(1));
    let mut rgba = vec![0u8; cells * 4];
    for cell in 0..cells {
        let hits = counts[cell];
        if hits == 0 {
            continue;
        }
        // Log shading: a lone point still shows, a crowded pixel is solid.
        let alpha = 0.25 + 0.75 * (1.0 + f64::from(hits)).ln() / (1.0 + most).ln();
        for channel in 0..3 {
            rgba[cell * 4 + channel] = (sums[cell][channel] / hits as f32).round() as u8;
        }
        rgba[cell * 4 + 3] = (alpha * 255.0).round() as u8;
    }
    (rgba, height, low, high)
}

/// `template` with each marker replaced by its value; values are not
/// searched for markers, so names in the dump cannot inject any.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some((at, marker, value)) = values
        .iter()
        .filter_map(|&(marker, value)| rest.find(marker).map(|at| (at, marker, value)))
        .min_by_key(|&(at, _, _)| at)
    {
        out.push_str(&rest[..at]);
        out.push_str(value);
        rest = &rest[at + marker.len()..];
    }
    out.push_str(rest);
    out
}

/// A writer that counts what passes through it.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Renders a dump as one self-contained HTML page that works offline: the
/// latency scatter of every request over time (zoomable on both axes),
/// requests in flight over time, a heatmap of start time by latency whose
/// brushed region's requests get their attributes ranked by what sets them
/// apart and their critical path by stage shown beside the other requests',
/// latency percentiles per operation, the per-stage view, and on a
/// click the chosen request's trace as a timeline.
///
/// A dump with no requests gives a page that says so. A damaged dump is an
/// error, and nothing is written before the whole dump has been read.
pub fn render_page<R: Read, W: Write>(
    reader: Reader<R>,
    title: &str,
    out: W,
) -> Result<PageStats, ViewError> {
    render_pages([(title, reader)], title, out)
}

/// Renders the dumps of several processes (say a frontend's and a
/// backend's, each named by a label such as its file's stem) as one page
/// of one population, as [`render_page`] renders one dump.
///
/// Each request knows its process. Traces of different processes with the
/// same trace id are one request: its spans are all of theirs, each
/// labelled by its process, and its begin, duration and name are those of
/// its entry, the trace whose root began first (the process the request
/// entered by). The ranking of a brushed region's attributes then ranks
/// each process too.
///
/// ```
/// use minitrace_flight::{synthetic, Reader, Writer};
///
/// let dump = |seed| -> Result<Vec<u8>, Box<dyn std::error::Error>> {
///     let mut writer = Writer::new(Vec::new());
///     for trace in synthetic::traces(100, seed) {
///         writer.write(&trace)?;
///     }
///     Ok(writer.finish()?.into_inner())
/// };
/// let (frontend, backend) = (dump(1)?, dump(2)?);
/// let dumps = [("frontend", Reader::new(&frontend[..])?), ("backend", Reader::new(&backend[..])?)];
/// let stats = minitrace_view::render_pages(dumps, "two processes", std::io::sink())?;
/// // Synthetic trace ids differ from seed to seed: nothing to join.
/// assert_eq!(stats.requests, 200);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn render_pages<L: AsRef<str>, R: Read, W: Write>(
    dumps: impl IntoIterator<Item = (L, Reader<R>)>,
    title: &str,
    out: W,
) -> Result<PageStats, ViewError> {
    let dumps: Vec<(L, Reader<R>)> = dumps.into_iter().collect();
    let mut gathered = Gathered { joining: dumps.len() > 1, ..Gathered::default() };
    let mut processes = Vec::with_capacity(dumps.len());
    for (process, (label, mut reader)) in dumps.into_iter().enumerate() {
        processes.push(json_string(&shown(label.as_ref())));
        while let Some(block) = reader.next_block() {
            let block = block?;
            gathered.block_starts.push(gathered.begins.len() as u64);
            gathered.block_processes.push(process);
            for trace in &block.traces {
                gathered.add(trace, process);
            }
            gathered.blocks.push(block.compressed);
        }
    }
    let requests = gathered.join();
    let rows = gathered.begins.len();
    // A request's begin, duration and kind are its entry's.
    let begins: Vec<u64> = requests.entries.iter().map(|&row| gathered.begins[row]).collect();
    let durations: Vec<u64> = requests.entries.iter().map(|&row| gathered.durations[row]).collect();
    // The percentiles need only the durations; no slowest are kept.
    let mut summary = SummaryBuilder::new(0);
    for &duration in &durations {
        summary.add_request((TraceId(0), 0, duration), 0, String::new);
    }
    let summary = summary.finish();
    let (kinds, kind_names) = request_kinds(&gathered, &requests);
    let count = requests.entries.len();
    let origin = begins.iter().copied().min().unwrap_or(0);

    let kind_colors = palette(kind_names.len(), 210.0);
    let mut stage_colors = vec![[40, 40, 40]];
    stage_colors.extend(palette(gathered.stage_names.names.len(), 20.0));
    let (raster, stream_height, log_low, log_high) = stream_raster(&gathered, &requests, &stage_colors);

    let mut slowest: Vec<usize> = (0..count).collect();
    slowest.sort_unstable_by_key(|&index| std::cmp::Reverse(durations[index]));
    slowest.truncate(SLOWEST);

    let kind_list: Vec<String> = (kind_names.iter())
        .zip(&kind_colors)
        .map(|((name, count), &color)| {
            format!("{{\"name\":{},\"color\":\"{}\",\"count\":{count}}}", json_string(name), css(color))
        })
        .collect();
    let mut stage_list =
        vec![format!("{{\"name\":\"(request end)\",\"color\":\"{}\"}}", css(stage_colors[0]))];
    stage_list.extend(
        gathered
            .stage_names
            .names
            .iter()
            .zip(&stage_colors[1..])
            .map(|(name, &color)| format!("{{\"name\":{},\"color\":\"{}\"}}", json_string(name), css(color))),
    );
    let slowest_list: Vec<String> = slowest
        .iter()
        .map(|&index| {
            format!(
                "{{\"index\":{index},\"name\":{},\"durationNs\":{}}}",
                json_string(&kind_names[usize::from(kinds[index])].0),
                durations[index]
            )
        })
        .collect();
    let block_starts: Vec<String> = gathered.block_starts.iter().map(u64::to_string).collect();
    let meta = format!(
        "{{\"title\":{},\"count\":{count},\"spans\":{},\"originUnixNs\":\"{origin}\",\
         \"kinds\":[{}],\"stages\":[{}],\"blockStarts\":[{}],\
         \"rows\":{rows},\"processes\":[{}],\"blockProcesses\":[{}],\
         \"stream\":{{\"width\":{STREAM_WIDTH},\"height\":{stream_height},\"logMin\":{log_low},\"logMax\":{log_high}}},\
         \"summary\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{}}},\"slowest\":[{}]}}",
        json_string(title),
        gathered.spans,
        kind_list.join(","),
        stage_list.join(","),
        block_starts.join(","),
        processes.join(","),
        gathered.block_processes.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        summary.p50_ns,
        summary.p90_ns,
        summary.p99_ns,
        summary.p999_ns,
        summary.max_ns,
        slowest_list.join(","),
    );

    let title = html_escape(title);
    let script = format!("{EMBED}\n{FORMAT}\n{DECODER}\n{EXPLAIN}\n{CRITICAL}\n{SCRIPT}");
    let (meta, script) = (ascii_script(&meta), ascii_script(&script));
    let values = [("{{TITLE}}", title.as_str()), ("/*{{META}}*/", &meta), ("/*{{SCRIPT}}*/", &script)];
    let (head, tail) = TEMPLATE.split_once("<!--{{DATA}}-->").unwrap_or((TEMPLATE, ""));
    let (head, tail) = (fill(head, &values), fill(tail, &values));

    let mut out = Counting { inner: io::BufWriter::new(out), bytes: 0 };
    let result = (|| {
        out.write_all(head.as_bytes())?;
        // Microseconds since the earliest begin: f64 keeps nanoseconds for
        // dumps of weeks; durations fit f32's 24 bits of precision.
        let begins: Vec<u8> =
            begins.iter().flat_map(|&begin| (((begin - origin) as f64) / 1e3).to_le_bytes()).collect();
        data_element(&mut out, "d-begin", &begins)?;
        let durations: Vec<u8> =
            durations.iter().flat_map(|&duration| ((duration as f64 / 1e3) as f32).to_le_bytes()).collect();
        data_element(&mut out, "d-duration", &durations)?;
        data_element(&mut out, "d-kind", &kinds)?;
        // The joined rows: (row, request) pairs, each a little-endian u32.
        let parts: Vec<u8> = (requests.parts.iter())
            .flat_map(|&(request, row)| [row as u32, request as u32])
            .flat_map(u32::to_le_bytes)
            .collect();
        data_element(&mut out, "d-parts", &parts)?;
        data_element(&mut out, "d-stream", &raster)?;
        for (index, block) in gathered.blocks.iter().enumerate() {
            data_element(&mut out, &format!("b{index}"), block)?;
        }
        out.write_all(tail.as_bytes())?;
        out.flush()
    })();
    result.map_err(ViewError::Output)?;
    Ok(PageStats { requests: count as u64, spans: gathered.spans, bytes: out.bytes })
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        assert_eq!(super::shown("short"), "short");
        let long = "é".repeat(150);
        let cut = super::shown(&long);
        assert!(cut.len() <= super::MAX_NAME_BYTES + "…".len() && cut.ends_with('…'), "{cut}");
        assert!(long.starts_with(cut.trim_end_matches('…')));
        let mut names = super::Names::default();
        assert_eq!(names.id(&format!("{long}a"), 10), names.id(&format!("{long}b"), 10));
    }

    #[test]
    fn colours_are_valid_and_distinct() {
        let colors = super::palette(20, 0.0);
        for (i, a) in colors.iter().enumerate() {
            assert!(colors[i + 1..].iter().all(|b| a != b));
        }
        assert_eq!(super::hue_color(0.0), [189, 40, 40]);
    }
}
