//! The page answers "why were these slow?": in a dump where the requests of
//! one shard are ten times slower than the rest, a brush over the slow
//! region of the heatmap ranks that shard first, in headless Chromium, and
//! the table of latency by operation agrees with the dump.
//!
//! Needs the browser as tests/browser.rs does: skipped without it, except
//! under `CI=true`, where it fails.

mod support;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;

use minitrace_flight::{Reader, RecordedTrace, SpanId, SpanRecord, TraceId, Writer};
use minitrace_view::format_duration;
use serde_json::Value;
use support::{artifacts, browser_ready, explain, scratch};

const REQUESTS: usize = 4_000;
const SLOW_SHARD: u64 = 7;
const FAST_MEDIAN_NS: f64 = 1_000_000.0;
const SLOWDOWN: f64 = 10.0;

/// splitmix64, for a population that is the same on every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Log-normal around `median`, spread by a factor of e^0.25.
    fn around(&mut self, median: f64) -> f64 {
        let normal = (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos();
        median * (0.25 * normal).exp()
    }
}

/// `ns` to three significant digits: the page's µs (f32) hold it exactly,
/// and it formats the same on both sides with no rounding.
fn three_digits(ns: f64) -> u64 {
    let scale = 10f64.powi(ns.log10().floor() as i32 - 2);
    ((ns / scale).round() * scale).round() as u64
}

/// A request: a root (`kv::get` or `kv::put`, with `shard` and `region`
/// properties) over three stages, on one of eight threads.
fn request(random: &mut Random, begin: u64) -> RecordedTrace {
    let trace_id = TraceId(u128::from(random.next()) << 64 | u128::from(random.next()));
    let root_id = random.next().max(1);
    let shard = random.next() % 16;
    let name = if random.next() % 4 == 0 { "kv::put" } else { "kv::get" };
    let region = ["eu", "us", "ap"][(random.next() % 3) as usize];
    let median = if shard == SLOW_SHARD { FAST_MEDIAN_NS * SLOWDOWN } else { FAST_MEDIAN_NS };
    let duration = three_digits(random.around(median));
    let stage = |k: u64, name: &'static str, from: u64, length: u64| SpanRecord {
        trace_id,
        span_id: SpanId(root_id.wrapping_add(k).max(1)),
        parent_id: SpanId(root_id),
        begin_time_unix_ns: begin + from,
        duration_ns: length,
        name: name.into(),
        ..SpanRecord::default()
    };
    let spans = vec![
        stage(1, "parse", 1_000, duration / 20),
        stage(2, "store", duration / 10, duration * 7 / 10),
        stage(3, "reply", duration * 9 / 10, duration / 20),
        SpanRecord {
            trace_id,
            span_id: SpanId(root_id),
            begin_time_unix_ns: begin,
            duration_ns: duration,
            name: name.into(),
            properties: vec![("shard".into(), shard.to_string().into()), ("region".into(), region.into())],
            ..SpanRecord::default()
        },
    ];
    RecordedTrace { trace_id, thread: 1 + (random.next() % 8) as u32, spans, complete: true }
}

/// A count as the page writes it: `3,012`.
fn thousands(count: usize) -> String {
    let digits = count.to_string();
    let mut out = String::new();
    for (k, digit) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Nearest-rank percentile of sorted durations, formatted as the page does.
fn percentile(sorted: &[u64], q: f64) -> String {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    format_duration(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[test]
fn a_brush_over_the_slow_region_ranks_the_slow_shard_first() {
    let dir = scratch("explain");
    let dump = dir.join("dump.mtf");
    let mut random = Random(38);
    let mut traces = Vec::with_capacity(REQUESTS);
    let mut clock = 1_750_000_000_000_000_000u64;
    for _ in 0..REQUESTS {
        // Arrivals 500 µs apart on average, over some two seconds.
        clock += (-500_000.0 * random.unit().ln()) as u64;
        traces.push(request(&mut random, clock));
    }
    // Blocks of 500: the critical path reads several, and all of them here.
    let mut writer = Writer::new(BufWriter::new(File::create(&dump).unwrap())).with_block_traces(500);
    for trace in &traces {
        writer.write(trace).unwrap();
    }
    writer.finish().unwrap();

    let page = dir.join("page.html");
    let reader = Reader::new(File::open(&dump).unwrap()).unwrap();
    let stats = minitrace_view::render_page(reader, "shard 7 is slow — 10× µs", File::create(&page).unwrap())
        .unwrap();
    assert_eq!(stats.requests as usize, REQUESTS);
    if !browser_ready() {
        return;
    }

    // The brush: every latency above the geometric mean of the two medians.
    let threshold_ns = FAST_MEDIAN_NS * SLOWDOWN.sqrt();
    let results = explain(&page, &artifacts("explain"), threshold_ns / 1e3);
    eprintln!("browser: {results}");
    assert_eq!(results["errors"], Value::Array(vec![]), "no script error, no network request");
    assert!(results["heatmapPixels"].as_u64().unwrap() > 0);
    // The page is windows-1252: its text outside ASCII is escaped, and reads back.
    assert_eq!(results["title"], "shard 7 is slow — 10× µs · minitrace flight dump");

    let shard = |trace: &RecordedTrace| trace.root().unwrap().properties[0].1.to_string();
    let slow = traces.iter().filter(|trace| trace.duration_ns() as f64 >= threshold_ns).count();
    let slow_shard7 = traces
        .iter()
        .filter(|trace| trace.duration_ns() as f64 >= threshold_ns && shard(trace) == "7")
        .count();
    assert!(slow_shard7 as f64 > 0.95 * slow as f64, "the plant: {slow_shard7} of {slow} slow are shard 7");
    let selected = results["selected"].as_u64().unwrap() as usize;
    // The drag's edge is a pixel: within a few requests of the threshold.
    assert!(selected.abs_diff(slow) <= slow / 20, "selected {selected}, {slow} slower than the threshold");

    let ranking = results["ranking"].as_array().unwrap();
    let row = |k: usize| -> Vec<&str> {
        ranking[k].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect()
    };
    let first = row(0);
    assert_eq!(&first[..2], ["property", "shard=7"], "{ranking:?}");
    // Both shares shown: nearly all of the selection, nearly none of the rest.
    let share = |text: &str| text.trim_end_matches('%').parse::<f64>().unwrap();
    assert!(share(first[2]) > 90.0 && share(first[3]) < 5.0, "{first:?}");
    // Nothing else comes close: the next attribute is a far weaker cause.
    let second = row(1);
    let difference = |row: &[&str]| row[4].replace('−', "-").parse::<f64>().unwrap();
    assert!(difference(&second) < difference(&first) / 3.0, "{second:?} vs {first:?}");
    // Every kind of attribute is ranked: operations, properties, stages, threads.
    let kinds: std::collections::BTreeSet<&str> = ranking.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["operation", "property", "span", "thread"]);
    assert!(results["status"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{} requests selected", thousands(selected))));

    // Latency by operation, every request's: as the dump says, busiest first.
    let heads = results["operationHeads"].as_array().unwrap();
    assert_eq!(heads[..6], ["operation", "requests", "p50", "p90", "p99", "max"]);
    let operations = results["operations"].as_array().unwrap();
    let mut expected = Vec::new();
    for name in ["kv::get", "kv::put"] {
        let mut durations: Vec<u64> = traces
            .iter()
            .filter(|trace| trace.root().unwrap().name == name)
            .map(RecordedTrace::duration_ns)
            .collect();
        durations.sort_unstable();
        expected.push(vec![
            name.to_string(),
            thousands(durations.len()),
            percentile(&durations, 0.5),
            percentile(&durations, 0.9),
            percentile(&durations, 0.99),
            format_duration(*durations.last().unwrap()),
        ]);
    }
    let shown: Vec<Vec<&str>> = operations
        .iter()
        .map(|row| row.as_array().unwrap()[..6].iter().map(|c| c.as_str().unwrap()).collect())
        .collect();
    assert_eq!(shown, expected);

    // Where the time went: after the drag, the stage the slow requests
    // spend their extra time in heads the critical-path table.
    let critical = results["critical"].as_array().unwrap();
    assert_eq!(critical[0][0], "store", "{critical:?}");
    assert!(results["criticalStatus"].as_str().unwrap().contains(" selected and "), "{results}");

    // And exactly, for every request from the threshold up. The stages run
    // one after another inside the root, so each is on the path whole and
    // the root's name holds the rest.
    let exact = &results["criticalExact"];
    let mut sides: [(BTreeMap<String, f64>, usize, f64); 2] = Default::default();
    for trace in &traces {
        let side = &mut sides[usize::from((trace.duration_ns() as f64) < threshold_ns)];
        let root = trace.root().unwrap();
        let stages: u64 =
            trace.spans.iter().filter(|span| span.span_id != root.span_id).map(|span| span.duration_ns).sum();
        for span in &trace.spans {
            let on_path =
                if span.span_id == root.span_id { root.duration_ns - stages } else { span.duration_ns };
            *side.0.entry(span.name.to_string()).or_default() += on_path as f64;
        }
        side.1 += 1;
        side.2 += root.duration_ns as f64;
    }
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    for (side, key) in sides.iter().zip(["selection", "baseline"]) {
        assert_eq!(exact[key]["requests"].as_u64().unwrap() as usize, side.1, "{key}: {exact}");
        assert!(
            close(exact[key]["meanLatencyNs"].as_f64().unwrap(), side.2 / side.1 as f64),
            "{key}: {exact}"
        );
    }
    let stages = exact["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 5, "parse, store, reply, kv::get, kv::put: {exact}");
    for stage in stages {
        let name = stage["stage"].as_str().unwrap();
        for (side, key) in sides.iter().zip(["selectionNs", "baselineNs"]) {
            let expected = side.0.get(name).copied().unwrap_or(0.0) / side.1 as f64;
            assert!(close(stage[key].as_f64().unwrap(), expected), "{name} {key}: {stage} vs {expected}");
        }
    }
    assert_eq!(stages[0]["stage"], "store", "ranked by the difference: {exact}");
    assert_eq!(exact["blocks"].as_u64(), Some(8), "a page this small is read whole: {exact}");
}
