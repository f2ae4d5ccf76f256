//! The command line as a person uses it: a page and a summary by default,
//! a Perfetto export that parses, and clear errors for bad dumps.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn view(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_minitrace-view")).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The files in `dir`, sorted: to see that nothing half-written was left.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into())
        .collect();
    names.sort();
    names
}

#[test]
fn by_default_it_writes_the_page_beside_the_dump_and_prints_the_summary() {
    let dir = support::scratch("cli-default");
    let dump = dir.join("service.mtf");
    let summary = support::synthetic_dump(&dump, 20_000);
    let output = view(&[&dump]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(stdout.starts_with("20000 requests, 220000 spans\nlatency  p50 "), "{stdout}");
    let slowest = format!("trace {}", summary.slowest[0].trace_id);
    assert!(stdout.contains(&slowest), "the slowest request is listed: {stdout}");
    assert!(stdout.contains(&format!("page: {}", dir.join("service.html").display())), "{stdout}");

    let page = text(&std::fs::read(dir.join("service.html")).unwrap());
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert!(page.contains("<title>service.mtf &middot; minitrace flight dump</title>"));
    // Self-contained: nothing is fetched from anywhere.
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains(" src="));
    assert_eq!(files(&dir), ["service.html", "service.mtf"]);
}

/// Runs `--perfetto` with `extra` arguments; the parsed JSON and stdout.
fn perfetto(dump: &Path, extra: &[&str]) -> (Value, String) {
    let json = dump.with_extension("json");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&dump, &"--perfetto", &json];
    args.extend(extra.iter().map(|arg| arg as &dyn AsRef<std::ffi::OsStr>));
    let output = view(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let parsed = serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("valid JSON");
    (parsed, text(&output.stdout))
}

fn complete_events(trace: &Value) -> Vec<&Value> {
    trace["traceEvents"].as_array().unwrap().iter().filter(|event| event["ph"] == "X").collect()
}

#[test]
fn the_perfetto_export_has_an_event_per_span_on_tracks_that_never_overlap() {
    let dir = support::scratch("cli-perfetto");
    let dump = dir.join("dump.mtf");
    support::synthetic_dump(&dump, 2_000);
    let (trace, stdout) = perfetto(&dump, &[]);
    let events = complete_events(&trace);
    assert_eq!(events.len(), 2_000 * 11);
    let roots: Vec<&&Value> = events.iter().filter(|event| event["cat"] == "request").collect();
    assert_eq!(roots.len(), 2_000);
    assert!(roots.iter().all(|root| root["args"]["trace_id"].as_str().unwrap().len() == 32));
    assert!(events
        .iter()
        .all(|event| event["ts"].as_f64().unwrap() >= 0.0 && event["dur"].as_f64().is_some()));

    // Requests that overlap in time are on different tracks.
    let mut by_track: std::collections::HashMap<u64, Vec<(f64, f64)>> = Default::default();
    for root in &roots {
        let (ts, dur) = (root["ts"].as_f64().unwrap(), root["dur"].as_f64().unwrap());
        by_track.entry(root["tid"].as_u64().unwrap()).or_default().push((ts, ts + dur));
    }
    for intervals in by_track.values_mut() {
        intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(intervals.windows(2).all(|pair| pair[0].1 <= pair[1].0 + 1e-3));
    }
    let names = trace["traceEvents"].as_array().unwrap().iter().filter(|event| event["ph"] == "M").count();
    assert_eq!(names, by_track.len(), "each track is named");
    assert!(
        stdout.contains(&format!("2000 requests, 22000 events on {} tracks", by_track.len())),
        "{stdout}"
    );
}

#[test]
fn the_perfetto_export_around_a_request_keeps_what_overlapped_it() {
    let dir = support::scratch("cli-around");
    let dump = dir.join("dump.mtf");
    let summary = support::synthetic_dump(&dump, 200_000);
    let slow = &summary.slowest[0];
    let (trace, _) = perfetto(&dump, &["--around", &format!("{:x}", slow.trace_id.0)]);
    let roots: Vec<&Value> =
        complete_events(&trace).into_iter().filter(|event| event["cat"] == "request").collect();
    let id = slow.trace_id.to_string();
    assert!(roots.iter().any(|root| root["args"]["trace_id"] == id.as_str()), "the slow request itself");
    // A slow request of tens of ms overlaps thousands of 8 µs-spaced arrivals, not all 200 000.
    assert!(roots.len() > 1_000 && roots.len() < 50_000, "{} requests", roots.len());

    let (limited, _) = perfetto(&dump, &["--limit", "10"]);
    assert_eq!(complete_events(&limited).len(), 10 * 11);

    let output = view(&[&dump, &"--perfetto", &dir.join("x.json"), &"--around", &"abc"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("holds no request with trace id 00000000000000000000000000000abc"));
}

#[test]
fn an_empty_dump_gives_an_empty_state_page_and_an_empty_trace() {
    let dir = support::scratch("cli-empty");
    let dump = dir.join("empty.mtf");
    support::synthetic_dump(&dump, 0);
    let page = dir.join("empty.html");
    let output = view(&[&dump, &"-o", &page, &"--summary"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("0 requests, 0 spans\n"));
    assert!(text(&output.stderr).contains("holds no requests; the page says so"));
    assert!(text(&std::fs::read(&page).unwrap()).contains("\"count\":0"));
    let (trace, _) = perfetto(&dump, &[]);
    assert!(complete_events(&trace).is_empty());
}

#[test]
fn bad_dumps_are_clear_errors_and_leave_no_page() {
    let dir = support::scratch("cli-bad");
    let good = dir.join("good.mtf");
    support::synthetic_dump(&good, 10_000);
    let bytes = std::fs::read(&good).unwrap();
    let mut newer = bytes.clone();
    newer[8] = 9;
    let mut corrupted = bytes.clone();
    corrupted[bytes.len() / 2] ^= 0xff;
    let mut version_1 = bytes.clone();
    version_1[8] = 1;
    let cases: [(&str, &[u8], &str); 6] = [
        ("empty", b"", "the file is empty: not a minitrace flight dump"),
        ("not-a-dump", b"<html>not a dump</html>", "not a minitrace flight dump"),
        ("newer", &newer, "newer version of the format (9); this reader reads up to version 2"),
        ("version-1", &version_1, "written in version 1 of the format, which this reader no longer reads"),
        ("truncated", &bytes[..bytes.len() - 100], "the dump is truncated at byte"),
        ("corrupted", &corrupted, "the dump is corrupted: block"),
    ];
    for (name, bytes, message) in cases {
        let dump = dir.join(format!("{name}.mtf"));
        std::fs::write(&dump, bytes).unwrap();
        let page = dir.join(format!("{name}.html"));
        let output = view(&[&dump, &"-o", &page]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.starts_with("minitrace-view: ") && stderr.contains(message), "{name}: {stderr}");
        assert!(!page.exists(), "{name}: no page");
    }
    let leftovers: Vec<String> = files(&dir).into_iter().filter(|name| !name.ends_with(".mtf")).collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let missing = view(&[&dir.join("missing.mtf")]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("cannot open"));
}

#[test]
fn usage_errors_say_what_is_wrong() {
    let none = view(&[]);
    assert_eq!(none.status.code(), Some(2));
    assert!(text(&none.stderr).contains("no dump given") && text(&none.stderr).contains("usage:"));
    let unknown = view(&[&"dump.mtf", &"--frobnicate"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("unknown option --frobnicate"));
    let help = view(&[&"--help"]);
    assert!(help.status.success() && text(&help.stdout).contains("--perfetto OUT.json"));
}

#[test]
fn several_dumps_make_one_page_of_their_processes() {
    let dir = support::scratch("cli-processes");
    // The same requests, dumped by two processes: joined, one each.
    let (frontend, backend) = (dir.join("frontend.mtf"), dir.join("backend.mtf"));
    support::synthetic_dump(&frontend, 1_000);
    support::synthetic_dump(&backend, 1_000);
    let page = dir.join("both.html");
    let output = view(&[&frontend, &backend, &"-o", &page]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("(1000 requests, "), "{}", text(&output.stdout));
    let html = text(&std::fs::read(&page).unwrap());
    assert!(html.contains("<title>frontend.mtf + backend.mtf &middot; minitrace flight dump</title>"));
    assert!(html.contains(r#""rows":2000,"processes":["frontend","backend"]"#));

    let labelled = view(&[&frontend, &"--process", &"tidb", &backend, &"--process", &"tikv", &"-o", &page]);
    assert!(labelled.status.success(), "{}", text(&labelled.stderr));
    assert!(text(&std::fs::read(&page).unwrap()).contains(r#""processes":["tidb","tikv"]"#));

    for (args, error) in [
        (vec![&frontend as &dyn AsRef<std::ffi::OsStr>, &backend], "name it with -o PAGE.html"),
        (vec![&frontend, &backend, &"--perfetto", &"out.json"], "--perfetto takes one dump"),
        (vec![&frontend, &backend, &"-o", &page, &"--process", &"tidb"], "1 --process labels for 2 dumps"),
    ] {
        let output = view(&args);
        assert_eq!(output.status.code(), Some(2));
        assert!(text(&output.stderr).contains(error), "{}", text(&output.stderr));
    }
}
