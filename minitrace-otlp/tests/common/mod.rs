//! Shared by the end-to-end tests: the local Jaeger v2 that
//! `scripts/jaeger.sh` starts, its query API, and a traced workload whose
//! every span is known in advance.
#![allow(dead_code)] // each test file uses a part

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use minitrace::collector::{SpanContext, SpanId, SpanKind, SpanStatus, TraceId};
use minitrace::prelude::*;
use minitrace_otlp::{OtlpReporter, OtlpReporterBuilder, ReporterStats, StatsHandle};
use serde_json::Value;

/// OTLP/HTTP of the local Jaeger.
pub const OTLP_HTTP: &str = "http://127.0.0.1:4318";
/// OTLP/gRPC of the local Jaeger.
pub const OTLP_GRPC: &str = "http://127.0.0.1:4317";
/// Jaeger's query API.
const QUERY: &str = "http://127.0.0.1:16686";

/// Whether the local Jaeger answers. Under `CI=true` an absent Jaeger fails
/// the test; elsewhere the test is skipped with a note.
pub fn jaeger_available(test: &str) -> bool {
    match get("/api/services") {
        Ok(_) => true,
        Err(error) => {
            let why =
                format!("no Jaeger answers on {QUERY} ({error}); start one with `bash scripts/jaeger.sh`");
            if std::env::var("CI").is_ok_and(|ci| ci == "true") {
                panic!("{test}: {why}");
            }
            // Straight to stderr: libtest captures the output of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            false
        }
    }
}

/// GETs `path` from the query API and parses its JSON.
pub fn get(path: &str) -> Result<Value, String> {
    let agent =
        ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(30))).build().new_agent();
    let mut response = agent.get(format!("{QUERY}{path}")).call().map_err(|e| format!("GET {path}: {e}"))?;
    let body = response.body_mut().with_config().limit(256 << 20).read_to_vec().map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| format!("GET {path}: {e}"))
}

/// A trace id as Jaeger prints it: 16 hex digits when the high half is 0.
pub fn jaeger_id(id: TraceId) -> String {
    if id.0 >> 64 == 0 {
        format!("{:016x}", id.0)
    } else {
        format!("{:032x}", id.0)
    }
}

/// The spans Jaeger holds of `trace_id`, once there are `want` of them or
/// `deadline` passes.
pub fn spans_of(trace_id: TraceId, want: usize, deadline: Instant) -> Vec<Value> {
    loop {
        // 404 until the first span is stored.
        let spans = get(&format!("/api/traces/{}", jaeger_id(trace_id)))
            .map(|answer| answer["data"][0]["spans"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default();
        if spans.len() >= want || Instant::now() > deadline {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A service name no earlier run used.
pub fn unique_service(prefix: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// A span as the workload made it, as Jaeger should show it.
#[derive(Debug, Clone)]
pub struct Expected {
    pub name: &'static str,
    pub parent: Option<&'static str>,
    /// Tags, the ones OTLP fields become in Jaeger (`span.kind`,
    /// `otel.status_code`, `error`) included.
    pub tags: BTreeMap<String, String>,
    /// Each log: its `event` name and fields.
    pub logs: Vec<(String, BTreeMap<String, String>)>,
    /// Its `FOLLOWS_FROM` references (links), as `trace id/span id` in hex.
    pub links: Vec<String>,
}

/// A trace as the workload made it.
#[derive(Debug, Clone)]
pub struct ExpectedTrace {
    pub trace_id: TraceId,
    pub spans: Vec<Expected>,
}

/// The spans of one [`traced_request`].
pub const SPANS_PER_REQUEST: usize = 10;

fn expected(name: &'static str, parent: Option<&'static str>, tags: &[(&str, &str)]) -> Expected {
    let tags = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Expected { name, parent, tags, logs: Vec::new(), links: Vec::new() }
}

/// One request of ten spans through minitrace: a server root, local spans
/// nested three deep, a thread-safe child, each OTLP field (kind, status,
/// links, events) somewhere.
pub fn traced_request(index: usize) -> ExpectedTrace {
    let trace_id = TraceId((u128::from(index as u64 + 1) << 64) | u128::from(SpanId::random().0));
    let index_tag = index.to_string();
    let linked = SpanContext::new(TraceId(u128::from(SpanId::random().0) << 64 | 7), SpanId::random());
    let mut spans = Vec::new();

    let root = Span::root("request", SpanContext::new(trace_id, SpanId(0)))
        .with_kind(SpanKind::Server)
        .with_status(SpanStatus::Ok)
        .with_tracestate(format!("minitrace=t{index}"))
        .with_property(|| ("request.index", index_tag.clone()));
    spans.push(expected(
        "request",
        None,
        &[("request.index", &index_tag), ("span.kind", "server"), ("otel.status_code", "OK")],
    ));
    {
        let _guard = root.set_local_parent();
        {
            let _parse = LocalSpan::enter_with_local_parent("parse").with_property(|| ("step", "parse"));
            spans.push(expected("parse", Some("request"), &[("step", "parse")]));
        }
        {
            let _query = LocalSpan::enter_with_local_parent("query")
                .with_kind(SpanKind::Client)
                .with_properties(|| [("table", "orders"), ("ключ", "значение ✓")]);
            spans.push(expected(
                "query",
                Some("request"),
                &[("table", "orders"), ("ключ", "значение ✓"), ("span.kind", "client")],
            ));
            {
                let _attempt = LocalSpan::enter_with_local_parent("attempt-1")
                    .with_status(SpanStatus::error("timed out"));
                Event::add_to_local_parent("retry", || [("reason".into(), "timeout".into())]);
                let mut span = expected(
                    "attempt-1",
                    Some("query"),
                    &[
                        ("otel.status_code", "ERROR"),
                        ("otel.status_description", "timed out"),
                        ("error", "true"),
                    ],
                );
                span.logs.push(("retry".into(), [("reason".to_string(), "timeout".to_string())].into()));
                spans.push(span);
            }
            let _attempt = LocalSpan::enter_with_local_parent("attempt-2").with_property(|| ("attempt", "2"));
            spans.push(expected("attempt-2", Some("query"), &[("attempt", "2")]));
        }
        {
            let _render = LocalSpan::enter_with_local_parent("render");
            let _template =
                LocalSpan::enter_with_local_parent("template").with_property(|| ("engine", "tera"));
            let _escape = LocalSpan::enter_with_local_parent("escape 🚀");
            spans.push(expected("render", Some("request"), &[]));
            spans.push(expected("template", Some("render"), &[("engine", "tera")]));
            spans.push(expected("escape 🚀", Some("template"), &[]));
        }
        {
            let background = Span::enter_with_parent("background", &root)
                .with_kind(SpanKind::Producer)
                .with_link(linked)
                .with_property(|| ("thread", "worker"));
            background.add_event("done", || [("items", "3")]);
            let mut span =
                expected("background", Some("request"), &[("thread", "worker"), ("span.kind", "producer")]);
            span.logs.push(("done".into(), [("items".to_string(), "3".to_string())].into()));
            span.links.push(format!("{}/{:016x}", jaeger_id(linked.trace_id), linked.span_id.0));
            spans.push(span);
        }
        let _write = LocalSpan::enter_with_local_parent("write").with_property(|| ("bytes", "42"));
        spans.push(expected("write", Some("request"), &[("bytes", "42")]));
    }
    drop(root);
    // The root's tracestate travels on every span of its trace (Jaeger shows it as a tag).
    for span in &mut spans {
        span.tags.insert("w3c.tracestate".into(), format!("minitrace=t{index}"));
        span.tags.entry("span.kind".into()).or_insert_with(|| "internal".into());
    }
    ExpectedTrace { trace_id, spans }
}

fn fields(value: &Value) -> BTreeMap<String, String> {
    let tags = value.as_array().map(Vec::as_slice).unwrap_or_default();
    tags.iter()
        .map(|tag| {
            let value = match &tag["value"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (tag["key"].as_str().unwrap_or_default().to_string(), value)
        })
        .collect()
}

/// Compares Jaeger's spans of one trace with what the workload made;
/// returns the differences.
pub fn check_trace(got: &[Value], want: &ExpectedTrace) -> Vec<String> {
    let trace = jaeger_id(want.trace_id);
    let mut problems = Vec::new();
    if got.len() != want.spans.len() {
        problems.push(format!("{trace}: {} spans, want {}", got.len(), want.spans.len()));
    }
    let name_of = |id: &str| {
        got.iter()
            .find(|s| s["spanID"] == id)
            .and_then(|s| s["operationName"].as_str())
            .unwrap_or("<missing>")
    };
    for expected in &want.spans {
        let who = format!("{trace}/{}", expected.name);
        let Some(span) = got.iter().find(|s| s["operationName"] == expected.name) else {
            problems.push(format!("{who}: missing"));
            continue;
        };
        let references = span["references"].as_array().map(Vec::as_slice).unwrap_or_default();
        let of_type = |kind: &'static str| references.iter().filter(move |r| r["refType"] == kind);
        let parents: Vec<&str> =
            of_type("CHILD_OF").map(|r| name_of(r["spanID"].as_str().unwrap())).collect();
        if parents != expected.parent.into_iter().collect::<Vec<_>>() {
            problems.push(format!("{who}: parents {parents:?}, want {:?}", expected.parent));
        }
        let links: Vec<String> = of_type("FOLLOWS_FROM")
            .map(|r| format!("{}/{}", r["traceID"].as_str().unwrap(), r["spanID"].as_str().unwrap()))
            .collect();
        if links != expected.links {
            problems.push(format!("{who}: links {links:?}, want {:?}", expected.links));
        }
        let tags = fields(&span["tags"]);
        for (key, value) in &expected.tags {
            if tags.get(key) != Some(value) {
                problems.push(format!("{who}: tag {key} = {:?}, want {value:?}", tags.get(key)));
            }
        }
        // Reserved keys become OTLP fields, never attributes of their own.
        if tags.contains_key("otel.link") {
            problems.push(format!("{who}: reserved key as a tag: {tags:?}"));
        }
        let logs: Vec<(String, BTreeMap<String, String>)> = span["logs"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|log| {
                let mut fields = fields(&log["fields"]);
                (fields.remove("event").unwrap_or_default(), fields)
            })
            .collect();
        if logs != expected.logs {
            problems.push(format!("{who}: logs {logs:?}, want {:?}", expected.logs));
        }
    }
    problems
}

/// Checks that the reporter delivered every span of `traces`, then that
/// Jaeger has each trace with all its spans, and the details of every
/// tenth; panics listing the first problems. Also checks the resource of
/// one trace (Jaeger's process).
pub fn assert_delivered(stats: ReporterStats, traces: &[ExpectedTrace], service: &str) {
    let spans = traces.len() * SPANS_PER_REQUEST;
    assert_eq!(traces.iter().map(|t| t.spans.len()).sum::<usize>(), spans, "the workload's expectations");
    assert_eq!(stats.spans_sent, spans as u64, "{stats:?}");
    assert_eq!(stats.spans_failed + stats.spans_rejected, 0, "{stats:?}");

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut problems = Vec::new();
    for (i, trace) in traces.iter().enumerate() {
        let got = spans_of(trace.trace_id, SPANS_PER_REQUEST, deadline);
        if i % 10 == 0 {
            problems.extend(check_trace(&got, trace));
        } else if got.len() != SPANS_PER_REQUEST {
            problems.push(format!("{}: {} spans", jaeger_id(trace.trace_id), got.len()));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems, first: {:#?}",
        problems.len(),
        &problems[..problems.len().min(10)]
    );

    let answer = get(&format!("/api/traces/{}", jaeger_id(traces[0].trace_id))).unwrap();
    let processes = answer["data"][0]["processes"].as_object().unwrap();
    assert_eq!(processes.len(), 1, "{processes:?}");
    let process = processes.values().next().unwrap();
    assert_eq!(process["serviceName"], service);
    let tags = fields(&process["tags"]);
    assert_eq!(tags.get("telemetry.sdk.name").map(String::as_str), Some("minitrace"), "{tags:?}");
    assert_eq!(tags.get("telemetry.sdk.language").map(String::as_str), Some("rust"), "{tags:?}");
    assert!(tags.contains_key("host.name"), "{tags:?}");
}

/// The spans of [`big_trace`].
pub const BIG_TRACE_SPANS: usize = 20_000;

/// One trace of [`BIG_TRACE_SPANS`] spans through minitrace: a root over
/// groups of a hundred local spans.
pub fn big_trace() -> TraceId {
    let trace_id = TraceId((u128::from(SpanId::random().0) << 64) | 1);
    let root = Span::root("big", SpanContext::new(trace_id, SpanId(0)));
    let guard = root.set_local_parent();
    let mut made = 1;
    let mut group = 0;
    while made < BIG_TRACE_SPANS {
        let _group =
            LocalSpan::enter_with_local_parent("group").with_property(|| ("group", group.to_string()));
        made += 1;
        for _ in 0..99.min(BIG_TRACE_SPANS - made) {
            let _leaf = LocalSpan::enter_with_local_parent("leaf");
            made += 1;
        }
        group += 1;
    }
    drop(guard);
    drop(root);
    trace_id
}

/// Checks that Jaeger has the whole of [`big_trace`]: every span, once,
/// each under a parent of the trace but the root.
pub fn assert_big_trace_arrived(trace_id: TraceId) {
    let spans = spans_of(trace_id, BIG_TRACE_SPANS, Instant::now() + Duration::from_secs(120));
    let ids: std::collections::HashSet<&str> = spans.iter().map(|s| s["spanID"].as_str().unwrap()).collect();
    assert_eq!((spans.len(), ids.len()), (BIG_TRACE_SPANS, BIG_TRACE_SPANS), "spans, distinct ids");
    let mut roots = 0;
    for span in &spans {
        match span["references"].as_array().and_then(|refs| refs.first()) {
            Some(parent) => assert!(ids.contains(parent["spanID"].as_str().unwrap()), "{span}"),
            None => roots += 1,
        }
    }
    assert_eq!(roots, 1);
}

/// Sets a reporter built by `configure` (on a builder already given a
/// unique service name, the OTLP/HTTP endpoint and no environment) as
/// minitrace's, waiting rather than dropping on a full queue, then sends
/// `count` traced requests through it and checks that every one arrived.
/// Returns the reporter's stats handle and the traces; `None` when Jaeger
/// is not there (outside CI).
pub fn deliver(
    test: &str,
    count: usize,
    configure: impl FnOnce(OtlpReporterBuilder) -> OtlpReporterBuilder,
) -> Option<(StatsHandle, Vec<ExpectedTrace>)> {
    if !jaeger_available(test) {
        return None;
    }
    let service = unique_service(test);
    let builder = OtlpReporter::builder().env(|_| None).endpoint(OTLP_HTTP).service_name(service.clone());
    let reporter = configure(builder).build().unwrap();
    let stats = reporter.stats();
    // Waiting rather than dropping on a full queue: the test counts every span.
    minitrace::set_reporter(reporter, minitrace::collector::Config::default().wait_when_queue_full(true));
    let traces: Vec<ExpectedTrace> = (0..count).map(traced_request).collect();
    minitrace::flush();
    // flush() returned: every request is answered, the counts are final.
    let sent = stats.get();
    println!("{test}: {sent:?}");
    assert_delivered(sent, &traces, &service);
    Some((stats, traces))
}
