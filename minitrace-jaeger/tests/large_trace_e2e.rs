//! One trace of 20 000 spans, reported at once: whole over HTTP; over UDP,
//! whole when paced. Sent over UDP in one burst, datagrams may be lost (the
//! receiver's socket buffer holds a few megabytes at most, and the kernel
//! drops what does not fit): then every datagram is accounted for, as
//! processed by Jaeger's receiver or counted as dropped by the kernel,
//! Jaeger holds exactly the spans the receiver accepted, and all 20 000 when
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

/// The tests of this file share Jaeger's receivers: one at a time.
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

/// Jaeger's Thrift compact UDP port, as `scripts/jaeger.sh` binds it (127.0.0.1:6831).
const AGENT_PORT: u16 = 6831;

/// The receiver's queue of datagrams read but not yet decoded (`queue_size`
/// in `scripts/jaeger-v2.yaml`). Jaeger v2 drops a datagram that finds it
/// full without counting it, so a burst must fit: then none is dropped there.
const RECEIVER_QUEUE: u64 = 10_000;

/// The sum of the Prometheus samples of `metric` whose labels include every
/// one of `labels`, from Jaeger's own telemetry endpoint, `/metrics` on
/// 127.0.0.1:8888 (where `scripts/jaeger-v2.yaml` puts it).
fn metric(name: &str, labels: &[&str]) -> u64 {
    let mut stream = TcpStream::connect("127.0.0.1:8888").expect("Jaeger's telemetry endpoint");
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

/// Datagrams the kernel dropped at the receiver's socket, for want of room
/// in its receive buffer (the `drops` column of `/proc/net/udp`).
fn kernel_drops() -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").expect("read /proc/net/udp");
    let local = format!("0100007F:{AGENT_PORT:04X}");
    let row = table
        .lines()
        .find(|row| row.split_whitespace().nth(1) == Some(local.as_str()))
        .unwrap_or_else(|| panic!("no socket on 127.0.0.1:{AGENT_PORT} in /proc/net/udp: is Jaeger local?"));
    row.split_whitespace().last().unwrap().parse().unwrap()
}

/// What became of UDP datagrams at Jaeger's Thrift compact receiver, and of
/// their spans: running totals, to subtract.
#[derive(Debug, Clone, Copy)]
struct Receiver {
    /// Datagrams decoded and handed to the pipeline, whatever the outcome
    /// (`otelcol_receiver_requests`: one request per datagram; `jaeger.sh`
    /// turns on the feature gate that adds it).
    datagrams: u64,
    /// Datagrams the kernel dropped before the receiver read them.
    kernel_dropped: u64,
    /// Spans the pipeline took.
    accepted: u64,
    /// Spans of datagrams decoded but refused by the pipeline or failed.
    not_accepted: u64,
}

impl Receiver {
    fn now() -> Receiver {
        let compact = ["receiver=\"jaeger\"", "transport=\"udp_thrift_compact\""];
        Receiver {
            datagrams: metric("otelcol_receiver_requests_total", &compact),
            kernel_dropped: kernel_drops(),
            accepted: metric("otelcol_receiver_accepted_spans_total", &compact),
            not_accepted: metric("otelcol_receiver_refused_spans_total", &compact)
                + metric("otelcol_receiver_failed_spans_total", &compact),
        }
    }

    fn since(self, before: Receiver) -> Receiver {
        Receiver {
            datagrams: self.datagrams - before.datagrams,
            kernel_dropped: self.kernel_dropped - before.kernel_dropped,
            accepted: self.accepted - before.accepted,
            not_accepted: self.not_accepted - before.not_accepted,
        }
    }
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
    reporter.wait_for_delivery();
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
    // leave back to back and the kernel drops what the socket cannot hold.
    let service = common::unique_service("minitrace-jaeger-big-udp");
    let mut reporter = JaegerReporter::new(jaeger.agent, service.clone()).unwrap();
    let stats = reporter.stats();
    let (trace_id, records) = big_trace();
    let before = Receiver::now();
    let started = Instant::now();
    reporter.report(&records);
    reporter.wait_for_delivery();
    let took = started.elapsed();
    let sent = stats.get();
    assert_eq!((sent.spans_sent, sent.spans_failed), (SPANS as u64, 0));
    let arrived = check_spans(&settled_spans(&jaeger, trace_id, SPANS), &records);
    let got = Receiver::now().since(before);
    println!(
        "UDP, one report: {arrived} of {SPANS} spans arrived in {} datagrams of {} bytes on average, sent in \
         {took:?}; datagrams processed {}, dropped by the kernel {}; spans accepted {}, not accepted {}",
        sent.messages_sent,
        sent.bytes_sent / sent.messages_sent.max(1),
        got.datagrams,
        got.kernel_dropped,
        got.accepted,
        got.not_accepted,
    );
    // The receiver's queue cannot fill, so every datagram it read is counted.
    assert!(sent.messages_sent <= RECEIVER_QUEUE, "a burst larger than the receiver's queue: {sent:?}");
    // Nothing else sends to the receiver meanwhile: this file's tests run one
    // at a time, and cargo runs test binaries one after another.
    assert_eq!(got.datagrams + got.kernel_dropped, sent.messages_sent, "datagrams unaccounted for: {got:?}");
    assert_eq!(got.not_accepted, 0, "the pipeline refused spans: {got:?}");
    assert_eq!(arrived as u64, got.accepted, "Jaeger lost spans the receiver accepted");
    if got.kernel_dropped == 0 {
        assert_eq!(arrived, SPANS, "no datagram was dropped, yet spans are missing");
    } else {
        // Each datagram dropped held at least one span.
        assert!(
            SPANS as u64 - got.accepted >= got.kernel_dropped,
            "fewer spans missing than datagrams dropped: {got:?}"
        );
    }

    // Paced (a report per 500 spans, 2 ms apart): all of it.
    let (trace_id, records) = big_trace();
    for chunk in records.chunks(500) {
        reporter.report(chunk);
        reporter.wait_for_delivery();
        std::thread::sleep(Duration::from_millis(2));
    }
    let arrived = check_spans(&settled_spans(&jaeger, trace_id, SPANS), &records);
    println!("UDP, paced: {arrived} of {SPANS} spans arrived");
    assert_eq!(arrived, SPANS);
}
