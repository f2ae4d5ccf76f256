//! Dumps of two processes, a frontend and the backend it calls, as one
//! page: the frontend holds 200 requests, the backend parts of 100 of them
//! (spans under the frontend's, with the same trace ids). The page holds
//! 200 requests, not 300; a joined request's trace shows the spans of both,
//! the backend's under the frontend span that called it; and a brush over
//! the slow requests (the joined ones) ranks the processes.
//!
//! The browser part needs the browser as tests/browser.rs does: skipped
//! without it, except under `CI=true`, where it fails.

mod support;

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use minitrace_flight::{EventRecord, Reader, RecordedTrace, SpanId, SpanRecord, TraceId, Writer};
use serde_json::Value;
use support::{artifacts, browser_ready, check, explain, page_element, page_script, scratch};

const REQUESTS: u64 = 200;
const FAST_NS: u64 = 1_000_000;
/// The requests that call the backend (every other one) take this long.
const SLOW_NS: u64 = 10_000_000;
const BEGIN_NS: u64 = 1_750_000_000_000_000_000;

fn span(
    trace_id: TraceId,
    id: u64,
    parent: u64,
    name: &'static str,
    begin: u64,
    duration: u64,
) -> SpanRecord {
    SpanRecord {
        trace_id,
        span_id: SpanId(id),
        parent_id: SpanId(parent),
        begin_time_unix_ns: begin,
        duration_ns: duration,
        name: name.into(),
        ..SpanRecord::default()
    }
}

/// Request `k` as the frontend recorded it: a `frontend::query` root over a
/// `dispatch` span; and, for every other request, as the backend did: a
/// `backend::handle` root (with an event) under that `dispatch` span, over
/// a `storage::read` span.
fn request(k: u64) -> (RecordedTrace, Option<RecordedTrace>) {
    let trace_id = TraceId(0xabc0_0000 + u128::from(k));
    let begin = BEGIN_NS + k * 5_000_000;
    let calls_backend = k % 2 == 0;
    let duration = if calls_backend { SLOW_NS } else { FAST_NS };
    let (root, dispatch) = (1_000 * (k + 1), 1_000 * (k + 1) + 1);
    let mut frontend_root = span(trace_id, root, 0, "frontend::query", begin, duration);
    frontend_root.properties = vec![("table".into(), format!("t{}", k % 4).into())];
    let frontend = RecordedTrace {
        trace_id,
        thread: 1 + (k % 4) as u32,
        spans: vec![
            span(trace_id, dispatch, root, "dispatch", begin + 100_000, duration * 8 / 10),
            frontend_root,
        ],
        complete: true,
    };
    if !calls_backend {
        return (frontend, None);
    }
    let handle = 900_000_000 + k;
    let mut backend_root =
        span(trace_id, handle, dispatch, "backend::handle", begin + 200_000, duration * 6 / 10);
    backend_root.events = vec![EventRecord {
        name: "read done".into(),
        timestamp_unix_ns: begin + 300_000,
        properties: Vec::new(),
    }];
    let backend = RecordedTrace {
        trace_id,
        thread: 7,
        spans: vec![
            span(trace_id, handle + 1, handle, "storage::read", begin + 250_000, duration / 2),
            backend_root,
        ],
        complete: true,
    };
    (frontend, Some(backend))
}

fn write(path: &Path, traces: &[RecordedTrace]) {
    let mut writer = Writer::new(BufWriter::new(File::create(path).unwrap()));
    for trace in traces {
        writer.write(trace).unwrap();
    }
    writer.finish().unwrap();
}

/// The two dumps, in `dir`; the backend's first, so that its rows come
/// before the frontend's on the page.
fn dumps(dir: &Path) -> [(&'static str, std::path::PathBuf); 2] {
    let (frontend, backend): (Vec<_>, Vec<_>) = (0..REQUESTS).map(request).unzip();
    let backend: Vec<RecordedTrace> = backend.into_iter().flatten().collect();
    assert_eq!(backend.len(), 100);
    let paths = [("backend", dir.join("backend.mtf")), ("frontend", dir.join("frontend.mtf"))];
    write(&paths[0].1, &backend);
    write(&paths[1].1, &frontend);
    paths
}

fn render(dumps: &[(&str, std::path::PathBuf)], page: &Path) -> minitrace_view::PageStats {
    let readers = dumps.iter().map(|(label, path)| (*label, Reader::new(File::open(path).unwrap()).unwrap()));
    minitrace_view::render_pages(readers, "frontend + backend", File::create(page).unwrap()).unwrap()
}

/// The text of the page's element `id`.

#[test]
fn the_page_joins_the_processes_requests_by_trace_id() {
    let dir = scratch("processes-join");
    let dumps = dumps(&dir);
    let page = dir.join("page.html");
    let stats = render(&dumps, &page);
    assert_eq!(stats.requests, REQUESTS);
    assert_eq!(stats.spans, REQUESTS * 2 + 100 * 2);

    let html = std::fs::read(&page).unwrap();
    let meta: Value = serde_json::from_slice(page_script(&html, "meta")).unwrap();
    assert_eq!(meta["count"], REQUESTS);
    assert_eq!(meta["rows"], REQUESTS + 100);
    assert_eq!(meta["processes"], serde_json::json!(["backend", "frontend"]));
    // A request is named and timed by its entry, the frontend: the
    // backend's roots are no kind of request of their own.
    assert_eq!(meta["kinds"].as_array().unwrap().len(), 1, "{}", meta["kinds"]);
    assert_eq!(meta["kinds"][0]["name"], "frontend::query");
    assert_eq!(meta["kinds"][0]["count"], REQUESTS);
    assert_eq!(meta["summary"]["max"], SLOW_NS);
    assert_eq!(meta["summary"]["p50"], FAST_NS);

    // The joins: each backend row (rows 0..100, its dump first) is a part
    // of the frontend request of its trace id. Requests are numbered by
    // their entry rows, the frontend's 100..300, so request k is trace k.
    let parts = page_element(&html, "d-parts");
    let pairs: Vec<(u32, u32)> = parts
        .chunks_exact(8)
        .map(|pair| {
            let word = |at: usize| u32::from_le_bytes(pair[at..at + 4].try_into().unwrap());
            (word(0), word(4))
        })
        .collect();
    let expected: Vec<(u32, u32)> = (0..100).map(|b| (b, 2 * b)).collect();
    assert_eq!(pairs, expected);

    // One dump alone joins nothing, and its page is as before.
    let alone = render(&dumps[1..], &dir.join("frontend.html"));
    assert_eq!(alone.requests, REQUESTS);
    let html = std::fs::read(dir.join("frontend.html")).unwrap();
    assert_eq!(page_element(&html, "d-parts"), b"");
}

#[test]
fn a_joined_request_shows_both_processes_in_the_browser() {
    let dir = scratch("processes-browser");
    let dumps = dumps(&dir);
    let page = dir.join("page.html");
    render(&dumps, &page);
    if !browser_ready() {
        return;
    }

    let results = check(&page, &artifacts("processes"));
    eprintln!("browser: {results}");
    assert_eq!(results["errors"], Value::Array(vec![]), "no script error, no network request");
    assert_eq!(results["count"], REQUESTS, "200 requests, not 300");
    assert!(results["stats"].as_str().unwrap().starts_with("200 requests"), "{}", results["stats"]);
    // The slowest request, clicked, is a joined one: its spans are both
    // processes', labelled so.
    assert_eq!(results["selectedDuration"], minitrace_view::format_duration(SLOW_NS));
    assert_eq!(results["selectedProcess"], "frontend → backend");
    assert_eq!(results["bars"], 4);
    let mut labels: Vec<String> = results["spanLabels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|label| label.as_str().unwrap().split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            "backend: backend::handle",
            "backend: storage::read",
            "frontend: dispatch",
            "frontend: frontend::query"
        ]
    );
    // The span with an event is the backend's root, under the frontend's
    // dispatch span: its detail names its process and its parent.
    let detail = results["spanDetail"].as_str().unwrap();
    assert!(detail.starts_with("backend::handle"), "{detail}");
    assert!(detail.contains("processbackend"), "{detail}");
    let trace = results["selectedTrace"].as_str().unwrap();
    let k = u64::from_str_radix(trace, 16).unwrap() - 0xabc0_0000;
    let dispatch = format!("{:016x}", 1_000 * (k + 1) + 1);
    assert!(detail.contains(&format!("parent id{dispatch} (dispatch)")), "{detail}");
    // The rows read block by block: every trace of both dumps.
    assert_eq!(results["attributes"]["requests"], REQUESTS + 100);

    // A brush over the slow requests ranks the backend first: every one of
    // them has spans there, and no other request does.
    let explained = explain(&page, &artifacts("processes-explain"), (SLOW_NS / 2_000) as f64);
    eprintln!("browser: {explained}");
    assert_eq!(explained["errors"], Value::Array(vec![]));
    assert_eq!(explained["selected"], 100);
    let ranking = explained["ranking"].as_array().unwrap();
    let row = |k: usize| -> Vec<&str> {
        ranking[k].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect()
    };
    let processes: Vec<Vec<&str>> =
        (0..ranking.len()).map(row).filter(|row| row[0] == "process").map(|row| row[1..4].to_vec()).collect();
    assert_eq!(processes, [["backend", "100.0%", "0.0%"], ["frontend", "100.0%", "100.0%"]], "{ranking:?}");
    // Ties (the backend's spans and thread) go to the label first in order.
    assert_eq!(row(0)[..2], ["process", "backend"], "{ranking:?}");

    // Where their time went, across both processes: a slow request's 10 ms
    // are the frontend root's 2 (10 - dispatch's 8), dispatch's 2 (8 - the
    // backend root's 6), the backend root's 1 (6 - storage's 5) and the
    // backend's storage read's 5; a fast one's 1 ms, the root's 0.2 and
    // dispatch's 0.8.
    let exact = &explained["criticalExact"];
    assert_eq!(exact["selection"]["requests"], 100, "{exact}");
    assert_eq!(exact["baseline"]["requests"], 100, "{exact}");
    let stages: Vec<(String, f64, f64)> = exact["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|stage| {
            let ms = |key: &str| (stage[key].as_f64().unwrap() / 1e3).round() / 1e3;
            (stage["stage"].as_str().unwrap().to_string(), ms("selectionNs"), ms("baselineNs"))
        })
        .collect();
    let expected = [
        ("storage::read (backend)", 5.0, 0.0),
        ("frontend::query (frontend)", 2.0, 0.2),
        ("dispatch (frontend)", 2.0, 0.8),
        ("backend::handle (backend)", 1.0, 0.0),
    ];
    let expected: Vec<(String, f64, f64)> =
        expected.iter().map(|(s, a, b)| (s.to_string(), *a, *b)).collect();
    assert_eq!(stages, expected, "{exact}");
    assert_eq!(explained["critical"][0][0], "storage::read (backend)", "{explained}");
}
