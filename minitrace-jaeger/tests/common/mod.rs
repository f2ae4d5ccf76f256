//! Shared by the end-to-end tests: finding the local Jaeger that
//! `scripts/jaeger.sh` starts, reading its query API, and a traced workload
//! whose every span is known in advance.
#![allow(dead_code)] // each test file uses a part

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use minitrace::collector::{SpanContext, SpanId, TraceId};
use minitrace::prelude::*;
use minitrace_jaeger::ReporterStats;
use serde_json::Value;

/// The ports of a Jaeger all-in-one on 127.0.0.1, as `scripts/jaeger.sh` binds them.
pub struct Jaeger {
    pub agent: SocketAddr,
    pub collector: SocketAddr,
    pub query: SocketAddr,
}

/// The local Jaeger, or `None` (with a message) when it does not answer and
/// this is not CI. Under `CI=true` an absent Jaeger fails the test.
pub fn jaeger(test: &str) -> Option<Jaeger> {
    let jaeger = Jaeger {
        agent: "127.0.0.1:6831".parse().unwrap(),
        collector: "127.0.0.1:14268".parse().unwrap(),
        query: "127.0.0.1:16686".parse().unwrap(),
    };
    match jaeger.get("/api/services") {
        Ok(_) => Some(jaeger),
        Err(error) => {
            let why = format!(
                "no Jaeger answers on {} ({error}); start one with `bash scripts/jaeger.sh`",
                jaeger.query
            );
            if std::env::var("CI").is_ok_and(|ci| ci == "true") {
                panic!("{test}: {why}");
            }
            // Straight to stderr: libtest captures `eprintln!` of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            None
        }
    }
}

impl Jaeger {
    /// GETs `path` from the query API and parses the JSON answer.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        let mut stream =
            TcpStream::connect_timeout(&self.query, Duration::from_secs(2)).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // HTTP/1.0: the body ends where the connection does, never chunked.
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.query).map_err(|e| e.to_string())?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).map_err(|e| e.to_string())?;
        let split = response.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no HTTP head")?;
        let head = String::from_utf8_lossy(&response[..split]);
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
        }
        serde_json::from_slice(&response[split + 4..]).map_err(|e| format!("GET {path}: {e}"))
    }

    /// Every trace of `service` in the last hour (up to `limit`).
    pub fn traces(&self, service: &str, limit: usize) -> Vec<Value> {
        let answer = self.get(&format!("/api/traces?service={service}&limit={limit}&lookback=1h")).unwrap();
        answer["data"].as_array().cloned().unwrap_or_default()
    }

    /// One trace by id.
    pub fn trace(&self, trace_id: TraceId) -> Value {
        let answer = self.get(&format!("/api/traces/{}", jaeger_trace_id(trace_id))).unwrap();
        answer["data"][0].clone()
    }

    /// Polls until `service` has `traces` traces of `spans` spans in all, or
    /// `timeout` passes; returns the last answer.
    pub fn wait_for(&self, service: &str, traces: usize, spans: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.traces(service, traces * 2 + 10);
            let span_count: usize = found.iter().map(|t| t["spans"].as_array().map_or(0, Vec::len)).sum();
            if (found.len() >= traces && span_count >= spans) || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// A trace id as Jaeger prints it: 16 hex digits when the high half is 0.
pub fn jaeger_trace_id(id: TraceId) -> String {
    if id.0 >> 64 == 0 {
        format!("{:016x}", id.0)
    } else {
        format!("{:032x}", id.0)
    }
}

/// A service name no earlier run has used.
pub fn unique_service(prefix: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// How far minstant's Unix time may stray from `SystemTime`'s.
const SLACK_US: i64 = 1_000;

pub fn wall_clock_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as i64
}

/// A span as the workload made it.
#[derive(Debug, Clone)]
pub struct ExpectedSpan {
    pub name: String,
    pub parent: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// Each event: its name and properties.
    pub logs: Vec<(String, BTreeMap<String, String>)>,
    /// The wall clock just before the span started, in µs.
    pub wall_start_us: i64,
    /// The wall clock just before each event, in µs.
    pub wall_log_us: Vec<i64>,
}

/// A trace as the workload made it.
#[derive(Debug, Clone)]
pub struct ExpectedTrace {
    pub trace_id: TraceId,
    pub spans: Vec<ExpectedSpan>,
    /// The wall clock just after the root ended, in µs: every start and
    /// event of the trace came before it, however long a preemption.
    pub wall_end_us: i64,
}

fn cow(s: &str) -> Cow<'static, str> {
    Cow::Owned(s.to_string())
}

fn expected(name: &str, parent: Option<&str>, tags: &[(&str, &str)]) -> ExpectedSpan {
    ExpectedSpan {
        name: name.to_string(),
        parent: parent.map(str::to_string),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        logs: vec![],
        wall_start_us: wall_clock_us(),
        wall_log_us: vec![],
    }
}

/// The spans of one [`traced_request`].
pub const SPANS_PER_REQUEST: usize = 10;

/// Runs one request of ten spans through minitrace (a root, local spans
/// nested three deep, a thread-safe child span, events on both kinds) and
/// returns what Jaeger should show of it.
pub fn traced_request(index: usize) -> ExpectedTrace {
    let trace_id = TraceId((u128::from(index as u64 + 1) << 64) | u128::from(SpanId::random().0));
    let mut spans = Vec::new();
    let index_tag = index.to_string();

    spans.push(expected("request", None, &[("request.index", &index_tag), ("kind", "root")]));
    let root = Span::root("request", SpanContext::new(trace_id, SpanId(0)))
        .with_properties(|| [("request.index", index_tag.clone()), ("kind", "root".to_string())]);
    {
        let _guard = root.set_local_parent();
        {
            spans.push(expected("parse", Some("request"), &[("step", "parse")]));
            let _parse = LocalSpan::enter_with_local_parent("parse").with_property(|| ("step", "parse"));
        }
        {
            spans.push(expected("query", Some("request"), &[("table", "orders"), ("ключ", "значение ✓")]));
            let _query = LocalSpan::enter_with_local_parent("query")
                .with_properties(|| [("table", "orders"), ("ключ", "значение ✓")]);
            for attempt in 1..=2 {
                let name = format!("attempt-{attempt}");
                let attempt_tag = attempt.to_string();
                let mut span = expected(&name, Some("query"), &[("attempt", &attempt_tag)]);
                let _attempt =
                    LocalSpan::enter_with_local_parent(name).with_property(|| ("attempt", attempt_tag));
                if attempt == 1 {
                    span.wall_log_us.push(wall_clock_us());
                    span.logs.push(("retry".into(), [("reason".to_string(), "timeout".to_string())].into()));
                    Event::add_to_local_parent("retry", || [(cow("reason"), cow("timeout"))]);
                }
                spans.push(span);
            }
        }
        {
            spans.push(expected("render", Some("request"), &[]));
            let _render = LocalSpan::enter_with_local_parent("render");
            spans.push(expected("template", Some("render"), &[("engine", "tera")]));
            let _template =
                LocalSpan::enter_with_local_parent("template").with_property(|| ("engine", "tera"));
            spans.push(expected("escape 🚀", Some("template"), &[]));
            let _escape = LocalSpan::enter_with_local_parent("escape 🚀");
        }
        {
            let mut span = expected("background", Some("request"), &[("thread", "worker")]);
            let background =
                Span::enter_with_parent("background", &root).with_property(|| ("thread", "worker"));
            span.wall_log_us.push(wall_clock_us());
            span.logs.push(("done".into(), BTreeMap::new()));
            Event::add_to_parent("done", &background, Vec::new);
            spans.push(span);
        }
        spans.push(expected("write", Some("request"), &[("bytes", "42")]));
        let _write = LocalSpan::enter_with_local_parent("write").with_property(|| ("bytes", "42"));
    }
    drop(root);
    ExpectedTrace { trace_id, spans, wall_end_us: wall_clock_us() }
}

fn tags_of(value: &Value) -> BTreeMap<String, String> {
    value
        .as_array()
        .map(|tags| {
            tags.iter()
                .map(|tag| (tag["key"].as_str().unwrap().to_string(), json_string(&tag["value"])))
                .collect()
        })
        .unwrap_or_default()
}

fn json_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Checks a trace of Jaeger's query API against what the workload made;
/// returns the mismatches.
pub fn check_trace(got: &Value, want: &ExpectedTrace, service: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let spans = got["spans"].as_array().cloned().unwrap_or_default();
    let trace_hex = jaeger_trace_id(want.trace_id);
    if got["traceID"] != trace_hex.as_str() {
        problems.push(format!("traceID {} != {trace_hex}", got["traceID"]));
    }
    if spans.len() != want.spans.len() {
        problems.push(format!("{trace_hex}: {} spans, want {}", spans.len(), want.spans.len()));
    }
    let names: HashMap<&str, &str> =
        spans.iter().map(|s| (s["spanID"].as_str().unwrap(), s["operationName"].as_str().unwrap())).collect();
    for expected in &want.spans {
        let Some(span) = spans.iter().find(|s| s["operationName"] == expected.name.as_str()) else {
            problems.push(format!("{trace_hex}: no span {:?}", expected.name));
            continue;
        };
        let who = format!("{trace_hex}/{}", expected.name);
        let process = &got["processes"][span["processID"].as_str().unwrap()];
        if process["serviceName"] != service {
            problems.push(format!("{who}: service {}", process["serviceName"]));
        }
        let references = span["references"].as_array().cloned().unwrap_or_default();
        let parent = references.first().map(|r| {
            assert_eq!(r["refType"], "CHILD_OF");
            assert_eq!(r["traceID"], trace_hex.as_str());
            names.get(r["spanID"].as_str().unwrap()).copied().unwrap_or("<missing>").to_string()
        });
        if parent != expected.parent || references.len() > 1 {
            problems.push(format!(
                "{who}: parent {parent:?} ({} refs), want {:?}",
                references.len(),
                expected.parent
            ));
        }
        let tags = tags_of(&span["tags"]);
        for (key, value) in &expected.tags {
            if tags.get(key) != Some(value) {
                problems.push(format!("{who}: tag {key} = {:?}, want {value:?}", tags.get(key)));
            }
        }
        // Between the wall clock read before and after, within a slack for
        // the clocks' calibration: a preemption widens the window, never
        // fails the check.
        let within = |at: i64, before: i64| (before - SLACK_US..=want.wall_end_us + SLACK_US).contains(&at);
        let start = span["startTime"].as_i64().unwrap();
        if !within(start, expected.wall_start_us) {
            problems.push(format!(
                "{who}: starts {} µs after the wall clock before it, the trace ended {} µs after",
                start - expected.wall_start_us,
                want.wall_end_us - expected.wall_start_us
            ));
        }
        let logs = span["logs"].as_array().cloned().unwrap_or_default();
        let got_logs: Vec<(String, BTreeMap<String, String>)> = logs
            .iter()
            .map(|log| {
                let mut fields = tags_of(&log["fields"]);
                (fields.remove("event").unwrap_or_default(), fields)
            })
            .collect();
        if got_logs != expected.logs {
            problems.push(format!("{who}: logs {got_logs:?}, want {:?}", expected.logs));
        }
        for (log, wall) in logs.iter().zip(&expected.wall_log_us) {
            let at = log["timestamp"].as_i64().unwrap();
            if !within(at, *wall) {
                problems.push(format!(
                    "{who}: log {} µs after the wall clock before it, the trace ended {} µs after",
                    at - wall,
                    want.wall_end_us - wall
                ));
            }
        }
    }
    problems
}

/// Checks every expected trace against the traces Jaeger returned, and a
/// sample of them again through `GET /api/traces/{id}`. Panics listing the
/// first problems.
pub fn check_all(jaeger: &Jaeger, found: &[Value], want: &[ExpectedTrace], service: &str) {
    let by_id: HashMap<String, &Value> =
        found.iter().map(|t| (t["traceID"].as_str().unwrap().to_string(), t)).collect();
    let mut problems = Vec::new();
    let mut missing = BTreeSet::new();
    for (i, trace) in want.iter().enumerate() {
        let hex = jaeger_trace_id(trace.trace_id);
        match by_id.get(&hex) {
            Some(got) => problems.extend(check_trace(got, trace, service)),
            None => {
                missing.insert(hex);
            }
        }
        if i % 10 == 0 {
            problems.extend(check_trace(&jaeger.trace(trace.trace_id), trace, service));
        }
    }
    assert!(
        missing.is_empty() && problems.is_empty(),
        "{} of {} traces missing (e.g. {:?}); {} problems, first: {:#?}",
        missing.len(),
        want.len(),
        missing.iter().next(),
        problems.len(),
        &problems[..problems.len().min(10)]
    );
}

/// Checks that a reporter sent every span of `traces` whole (its counters
/// `sent`, read after the last flush), then that Jaeger has every trace,
/// right in every detail (see [`check_all`]).
pub fn assert_all_delivered(jaeger: &Jaeger, sent: ReporterStats, traces: &[ExpectedTrace], service: &str) {
    let spans: usize = traces.iter().map(|trace| trace.spans.len()).sum();
    // Counted apart from the expectations, which shrink with the workload.
    assert_eq!(spans, SPANS_PER_REQUEST * traces.len(), "traced_request's expected spans");
    assert_eq!(sent.spans_sent, spans as u64, "{sent:?}");
    assert_eq!(sent.spans_failed + sent.spans_too_large + sent.spans_truncated, 0, "{sent:?}");

    let found = jaeger.wait_for(service, traces.len(), spans, Duration::from_secs(60));
    check_all(jaeger, &found, traces, service);
    assert_eq!(found.len(), traces.len());
}
