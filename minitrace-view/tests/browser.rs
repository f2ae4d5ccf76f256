//! The page as a person sees it: headless Chromium opens the page of a
//! 1 M-request dump, and scripts/browser/check.mjs reports what it shows.
//!
//! Needs Debian's chromium and playwright-core, which `scripts/browser.sh`
//! installs. Without them the test is skipped with a message, except under
//! `CI=true`, where it fails.

mod support;

use support::{artifacts, browser_ready, check};

use std::time::Instant;

use minitrace_flight::Reader;
use serde_json::Value;

#[test]
fn a_million_requests_load_draw_and_show_a_trace_on_click() {
    let dir = support::scratch("browser-1m");
    let dump = dir.join("dump.mtf");
    let summary = support::synthetic_dump(&dump, 1_000_000);
    let page = dir.join("page.html");
    let started = Instant::now();
    let reader = Reader::new(std::io::BufReader::new(std::fs::File::open(&dump).unwrap())).unwrap();
    let stats =
        minitrace_view::render_page(reader, "1 M synthetic requests", std::fs::File::create(&page).unwrap())
            .unwrap();
    eprintln!("page: {} MB in {:.1?}", stats.bytes / 1_000_000, started.elapsed());
    assert_eq!(stats.requests, 1_000_000);
    // The page is its dump plus a stated overhead (page.rs, "Size"): the
    // blocks nearly byte for byte, 13 bytes a request (each escaped byte
    // written twice), the scripts and the per-stage raster.
    let dump_bytes = std::fs::metadata(&dump).unwrap().len();
    let bound = dump_bytes * 102 / 100 + 26 * stats.requests + (4 << 20);
    println!(
        "page {} bytes for a dump of {dump_bytes}: +{:.1} bytes a request (bound {bound})",
        stats.bytes,
        (stats.bytes as f64 - dump_bytes as f64) / stats.requests as f64
    );
    assert!(stats.bytes <= bound, "page {} bytes, dump {dump_bytes}, bound {bound}", stats.bytes);
    if !browser_ready() {
        return;
    }

    let results = check(&page, &artifacts("one-million"));
    eprintln!("browser: {results}");
    assert_eq!(results["errors"], Value::Array(vec![]), "no script error, no network request");
    // The sanity bound: the page is usable within a few seconds.
    let load_ms = results["loadMs"].as_u64().unwrap();
    // A figure to read, not a limit: no timing is asserted in a test.
    println!("1 M-request page loaded in {load_ms} ms");
    // Drawn: points cover a real share of the canvas, not a blank one.
    let drawn = results["scatterPixels"].as_u64().unwrap();
    let pixels = results["canvasPixels"].as_u64().unwrap();
    assert!(drawn > pixels / 50 && drawn < pixels, "{drawn} of {pixels} pixels drawn");
    assert!(results["inflightPixels"].as_u64().unwrap() > 0);
    // The topmost point is one of the slow outliers: the click selects it,
    // decoded from its block in the browser, with the trace id the dump holds.
    let selected = results["selectedTrace"].as_str().unwrap();
    let slowest: Vec<String> = summary.slowest.iter().map(|slow| slow.trace_id.to_string()).collect();
    assert!(slowest.iter().any(|id| id == selected), "selected {selected}, slowest {slowest:?}");
    let slow = &summary.slowest[slowest.iter().position(|id| id == selected).unwrap()];
    assert_eq!(results["selectedDuration"], minitrace_view::format_duration(slow.duration_ns));
    assert_eq!(results["bars"], 11, "the root and its 10 spans");
    assert_eq!(results["visibleBars"], 11);
    // The slowest are the blocked requests: the root's property in the
    // panel, and the blocked stage's property and event, which the synthetic
    // population gives only them, in the span's detail on a click.
    let properties = results["selectedProperties"].as_str().unwrap();
    assert!(properties.starts_with("shard=") && properties.len() <= "shard=15".len(), "{properties}");
    let detail = results["spanDetail"].as_str().unwrap();
    let stage = if slow.name == "kv::get" { "store::get" } else { "store::put" };
    assert!(detail.starts_with(stage), "{detail}");
    for text in ["span id", "parent id", "lockstore", "lock acquired: waited_ns="] {
        assert!(detail.contains(text), "{text:?} in {detail:?}");
    }
    assert!(results["spanTooltip"].as_str().unwrap().contains("• lock acquired at +"), "{results}");
    assert_eq!(results["eventTicks"], 1);
    // Every request's attributes, read through the page's data access: the
    // same population, named as the page's legend counts it.
    let attributes = &results["attributes"];
    eprintln!("attributes of every request: {} ms", attributes["ms"]);
    assert_eq!(
        (attributes["requests"].as_u64(), attributes["spans"].as_u64()),
        (Some(1_000_000), Some(11_000_000))
    );
    let names = attributes["names"].as_object().unwrap();
    assert_eq!(names.keys().collect::<Vec<_>>(), ["kv::get", "kv::put"]);
    assert_eq!(names.values().map(|count| count.as_u64().unwrap()).sum::<u64>(), 1_000_000);
    assert_eq!(results["zoomedIn"], true);
    // The heatmap of a million requests: drawn, and quick to redraw.
    assert!(results["heatmapPixels"].as_u64().unwrap() > 0);
    let heatmap_ms = results["heatmapMs"].as_u64().unwrap();
    // A figure to read, not a limit: no timing is asserted in a test.
    println!("heatmap of 1 M requests drawn in {heatmap_ms} ms");
    // A brush over the blocked requests ranks their attributes: every
    // request's, read once (above, so here from what the page kept).
    let brushed = &results["slowerThan10ms"];
    eprintln!("brush over the slowest: {brushed}");
    assert!(brushed["selected"].as_u64().unwrap() >= summary.slowest.len() as u64);
    assert_eq!(brushed["top"].as_array().unwrap().len(), 3);
    // Their critical path, beside the other requests of their blocks: the
    // blocked stage first (the synthetic population's slow ones wait for a
    // lock in `store::get` / `store::put`).
    let critical = &brushed["critical"];
    println!("critical path of the slowest at 1 M: {} ms over {} blocks", critical["ms"], critical["blocks"]);
    // Every selected request read (fewer than the page's 20 000 a side).
    assert_eq!(critical["selection"]["requests"], brushed["selected"], "{critical}");
    assert!(critical["baseline"]["requests"].as_u64().unwrap() > 0, "{critical}");
    let top = critical["top"][0].as_str().unwrap();
    assert!(top.starts_with("store::"), "{critical}");
}

#[test]
fn an_empty_dump_shows_an_empty_state() {
    if !browser_ready() {
        return;
    }
    let dir = support::scratch("browser-empty");
    let dump = dir.join("empty.mtf");
    support::synthetic_dump(&dump, 0);
    let page = dir.join("page.html");
    let reader = Reader::new(std::fs::File::open(&dump).unwrap()).unwrap();
    minitrace_view::render_page(reader, "empty", std::fs::File::create(&page).unwrap()).unwrap();
    let results = check(&page, &artifacts("empty"));
    assert_eq!(results["errors"], Value::Array(vec![]));
    assert_eq!(results["empty"], true);
}
