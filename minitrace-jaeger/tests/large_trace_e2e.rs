//! One trace of 20 000 spans, reported at once: whole over HTTP; over UDP,
//! whole when paced. Sent over UDP in one burst, datagrams may be lost (the
//! agent's socket buffer holds a few megabytes at most, and the kernel
//! drops what does not fit): then every datagram is accounted for, as
//! processed by the agent or counted as dropped by the kernel or the agent,
//! Jaeger holds exactly the spans the agent passed on, and all 20 000 when
//! no datagram was dropped.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
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

/// The agent's UDP port, as `scripts/jaeger.sh` binds it (127.0.0.1:6831).
const AGENT_PORT: u16 = 6831;

/// The sum of the Prometheus samples of `metric` whose labels include every
/// one of `labels`, from the Jaeger admin port's `/metrics`.
fn metric(name: &str, labels: &[&str]) -> u64 {
    let mut stream = TcpStream::connect("127.0.0.1:14269").expect("Jaeger's admin port");
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|line| {
            line.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|line| labels.iter().all(|label| line.contains(label)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|value| value as u64)
        .sum()
}

/// Datagrams the kernel dropped at the agent's socket, for want of room in
/// its receive buffer (the `drops` column of `/proc/net/udp`).
fn kernel_drops() -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").expect("read /proc/net/udp");
    let local = format!("0100007F:{AGENT_PORT:04X}");
    let row = table.lines().find(|row| row.split_whitespace().nth(1) == Some(local.as_str())).unwrap_or_else(
        || panic!("no socket on 127.0.0.1:{AGENT_PORT} in /proc/net/udp: is the agent local?"),
    );
    row.split_whitespace().last().unwrap().parse().unwrap()
}

/// What became of UDP datagrams at the agent: (processed, dropped by the
/// agent's queue, dropped by the kernel).
fn agent_datagrams() -> (u64, u64, u64) {
    let compact = ["model=\"jaeger\"", "protocol=\"compact\""];
    (
        metric("jaeger_thrift_udp_server_packets_processed_total", &compact),
        metric("jaeger_thrift_udp_server_packets_dropped_total", &compact),
        kernel_drops(),
    )
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
    let service = common::unique_service("minitrace-jaeger-big-udp");
    let mut reporter = JaegerReporter::new(jaeger.agent, service.clone()).unwrap();
    let stats = reporter.stats();
    let (trace_id, records) = big_trace();
    let before = agent_datagrams();
    let started = Instant::now();
    reporter.report(&records);
    let took = started.elapsed();
    let sent = stats.get();
    assert_eq!((sent.spans_sent, sent.spans_failed), (SPANS as u64, 0));
    let arrived = check_spans(&settled_spans(&jaeger, trace_id, SPANS), &records);
    let after = agent_datagrams();
    let (processed, agent_dropped, kernel_dropped) =
        (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    // The spans the collector received from the agent, for this run's service alone.
    let passed_on = metric("jaeger_spans_received_total", &[&format!("svc=\"{service}\"")]);
    println!(
        "UDP, one report: {arrived} of {SPANS} spans arrived in {} datagrams of {} bytes on average, sent in \
         {took:?}; datagrams processed {processed}, dropped by the agent {agent_dropped}, by the kernel \
         {kernel_dropped}",
        sent.messages_sent,
        sent.bytes_sent / sent.messages_sent.max(1),
    );
    // Nothing else sends to the agent meanwhile: this file's tests run one
    // at a time, and cargo runs test binaries one after another.
    assert_eq!(processed + agent_dropped + kernel_dropped, sent.messages_sent, "datagrams unaccounted for");
    assert_eq!(arrived as u64, passed_on, "Jaeger lost spans the agent passed on");
    if agent_dropped + kernel_dropped == 0 {
        assert_eq!(arrived, SPANS, "no datagram was dropped, yet spans are missing");
    } else {
        assert!(arrived < SPANS, "datagrams were dropped, yet every span arrived");
    }

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
