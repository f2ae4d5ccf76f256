//! One trace of 20 000 spans, reported at once: whole over HTTP; over UDP,
//! whole when paced, and as far as the agent keeps up when not (the loss is
//! printed).

mod common;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use minitrace::collector::{EventRecord, Reporter, SpanId, SpanRecord, TraceId};
use minitrace_jaeger::JaegerReporter;
use serde_json::Value;

const SPANS: usize = 20_000;

/// The tests of this file share the agent and the collector: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A tree of `SPANS` spans: span `i` (id `i + 1`) is a child of span `(i - 1) / 8`.
fn big_trace() -> (TraceId, Vec<SpanRecord>) {
    let trace_id = TraceId::random();
    let start = common::wall_clock_us() as u64 * 1000;
    let records = (0..SPANS as u64)
        .map(|i| SpanRecord {
            trace_id,
            span_id: SpanId(i + 1),
            parent_id: SpanId(if i == 0 { 0 } else { (i - 1) / 8 + 1 }),
            begin_time_unix_ns: start + i * 1000,
            duration_ns: 1_000_000,
            name: format!("span-{i}").into(),
            properties: vec![("index".into(), i.to_string().into())],
            events: if i % 100 == 0 {
                vec![EventRecord {
                    name: "checkpoint".into(),
                    timestamp_unix_ns: start + i * 1000 + 500,
                    properties: vec![],
                }]
            } else {
                vec![]
            },
        })
        .collect();
    (trace_id, records)
}

/// The spans of `trace_id` that Jaeger has once their number stops growing.
fn settled_spans(jaeger: &common::Jaeger, trace_id: TraceId, want: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = usize::MAX;
    loop {
        let spans = match jaeger.get(&format!("/api/traces/{}", common::jaeger_trace_id(trace_id))) {
            Ok(answer) => answer["data"][0]["spans"].as_array().cloned().unwrap_or_default(),
            Err(_) => Vec::new(), // 404 until the first span is stored
        };
        if spans.len() == want || (spans.len() == last && last > 0) || Instant::now() > deadline {
            return spans;
        }
        last = spans.len();
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Checks that every span Jaeger has is right; returns how many it has.
fn check_spans(spans: &[Value], records: &[SpanRecord]) -> usize {
    let by_id: HashMap<u64, &SpanRecord> = records.iter().map(|r| (r.span_id.0, r)).collect();
    for span in spans {
        let id = u64::from_str_radix(span["spanID"].as_str().unwrap(), 16).unwrap();
        let record = by_id[&id];
        assert_eq!(span["operationName"], record.name.as_ref());
        assert_eq!(span["startTime"].as_u64().unwrap(), record.begin_time_unix_ns / 1000);
        let parent = span["references"][0]["spanID"].as_str().map(|p| u64::from_str_radix(p, 16).unwrap());
        assert_eq!(parent.unwrap_or(0), record.parent_id.0, "{span}");
        assert_eq!(span["tags"][0]["value"], record.properties[0].1.as_ref());
        assert_eq!(span["logs"].as_array().map_or(0, Vec::len), record.events.len());
    }
    let distinct: std::collections::HashSet<&str> =
        spans.iter().map(|s| s["spanID"].as_str().unwrap()).collect();
    distinct.len()
}

#[test]
fn twenty_thousand_spans_over_http_arrive_whole() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(jaeger) = common::jaeger("twenty_thousand_spans_over_http_arrive_whole") else {
        return;
    };
    let mut reporter =
        JaegerReporter::http(jaeger.collector, common::unique_service("minitrace-jaeger-big-http"));
    let stats = reporter.stats();
    let (trace_id, records) = big_trace();
    reporter.report(&records);
    let sent = stats.get();
    println!("HTTP: {sent:?}");
    assert_eq!((sent.spans_sent, sent.spans_failed), (SPANS as u64, 0));

    let spans = settled_spans(&jaeger, trace_id, SPANS);
    assert_eq!(check_spans(&spans, &records), SPANS);
}

#[test]
fn twenty_thousand_spans_over_udp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(jaeger) = common::jaeger("twenty_thousand_spans_over_udp") else {
        return;
    };

    // All at once, as the collector thread would report them: the datagrams
    // leave back to back and the agent drops what its socket cannot hold.
    let mut reporter =
        JaegerReporter::new(jaeger.agent, common::unique_service("minitrace-jaeger-big-udp")).unwrap();
    let stats = reporter.stats();
    let (trace_id, records) = big_trace();
    let started = Instant::now();
    reporter.report(&records);
    let took = started.elapsed();
    let sent = stats.get();
    assert_eq!((sent.spans_sent, sent.spans_failed), (SPANS as u64, 0));
    let arrived = check_spans(&settled_spans(&jaeger, trace_id, SPANS), &records);
    println!(
        "UDP, one report: {arrived} of {SPANS} spans arrived ({:.1}% lost) in {} datagrams of {} bytes on average, \
         sent in {took:?}",
        100.0 * (SPANS - arrived) as f64 / SPANS as f64,
        sent.messages_sent,
        sent.bytes_sent / sent.messages_sent.max(1),
    );
    assert!(arrived > 0);

    // Paced (a report per 500 spans, 2 ms apart): all of it.
    let (trace_id, records) = big_trace();
    for chunk in records.chunks(500) {
        reporter.report(chunk);
        std::thread::sleep(Duration::from_millis(2));
    }
    let arrived = check_spans(&settled_spans(&jaeger, trace_id, SPANS), &records);
    println!("UDP, paced: {arrived} of {SPANS} spans arrived");
    assert_eq!(arrived, SPANS);
}
