//! `minitrace-opentelemetry` 0.6.7, as published, reporting this workspace's
//! spans through `opentelemetry-otlp` to the local Jaeger's OTLP/HTTP port;
//! the trace is then read back through Jaeger's query API, whole.
//!
//! Needs the Jaeger that `scripts/jaeger.sh` starts; without one the test
//! is skipped, except under `CI=true`, where it fails.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use minitrace::collector::Config;
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace_opentelemetry::OpenTelemetryReporter;
use opentelemetry::trace::SpanKind;
use opentelemetry::{InstrumentationLibrary, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use serde_json::Value;

const QUERY: &str = "http://127.0.0.1:16686";
const SERVICE: &str = "minitrace-ecosystem-otel";

/// The trace as Jaeger's query API returns it, once it holds `spans` spans.
fn jaeger_trace(trace_id: TraceId, spans: usize) -> Option<Value> {
    let url = format!("{QUERY}/api/traces/{:032x}", trace_id.0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(response) = reqwest::blocking::get(&url) {
            if let Ok(body) = response.json::<Value>() {
                let trace = &body["data"][0];
                if trace["spans"].as_array().map_or(0, Vec::len) >= spans {
                    return Some(trace.clone());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

fn jaeger_is_up() -> bool {
    let up = reqwest::blocking::get(format!("{QUERY}/api/services")).is_ok_and(|r| r.status().is_success());
    if !up {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "CI=true and no Jaeger answers on {QUERY}");
        eprintln!("skipped: no Jaeger on {QUERY} (start one with `bash scripts/jaeger.sh`)");
    }
    up
}

#[test]
fn a_trace_reaches_jaeger_through_minitrace_opentelemetry() {
    if !jaeger_is_up() {
        return;
    }
    let exporter = opentelemetry_otlp::new_exporter()
        .http()
        .with_endpoint("http://127.0.0.1:4318/v1/traces")
        .build_span_exporter()
        .expect("an OTLP/HTTP exporter");
    let reporter = OpenTelemetryReporter::new(
        exporter,
        SpanKind::Server,
        Cow::Owned(Resource::new([KeyValue::new("service.name", SERVICE)])),
        InstrumentationLibrary::builder("minitrace-ecosystem-check").build(),
    );
    minitrace::set_reporter(reporter, Config::default());

    let context = SpanContext::random();
    {
        let root = Span::root("request", context).with_property(|| ("path", "/get"));
        let _guard = root.set_local_parent();
        let _parse = LocalSpan::enter_with_local_parent("parse");
        Event::add_to_local_parent("parsed", || [("bytes".into(), "42".into())]);
        let _store = LocalSpan::enter_with_local_parent("store").with_property(|| ("key", "k1"));
    }
    minitrace::flush();

    let trace = jaeger_trace(context.trace_id, 3).expect("the trace's 3 spans in Jaeger");
    let spans = trace["spans"].as_array().unwrap();
    let by_name = |name: &str| spans.iter().find(|span| span["operationName"] == name).unwrap();
    let parent_of = |name: &str| by_name(name)["references"][0]["spanID"].as_str().unwrap().to_string();
    assert_eq!(parent_of("parse"), by_name("request")["spanID"].as_str().unwrap());
    assert_eq!(parent_of("store"), by_name("parse")["spanID"].as_str().unwrap());
    let tag = |name: &str, key: &str| {
        by_name(name)["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tag| tag["key"] == key)
            .map(|tag| tag["value"].clone())
    };
    assert_eq!(tag("request", "path"), Some(Value::from("/get")));
    assert_eq!(tag("store", "key"), Some(Value::from("k1")));
    assert_eq!(by_name("parse")["logs"].as_array().map(Vec::len), Some(1), "the event, as a log");
    let process = by_name("request")["processID"].as_str().unwrap();
    assert_eq!(trace["processes"][process]["serviceName"], SERVICE);
}
