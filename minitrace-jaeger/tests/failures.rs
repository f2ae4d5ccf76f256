//! What the reporter does when delivery fails: count, log, never panic, never
//! stall. Needs no Jaeger. Every count is this reporter's own, compared
//! exactly (minitrace's process-wide loss counter is checked in
//! `dropped_by_reporter.rs`, a test binary of its own).

use std::net::UdpSocket;
use std::time::Duration;

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{closed_port, Answer, Server};
use minitrace_jaeger::JaegerReporter;

fn records(count: u64, tag_bytes: usize) -> Vec<SpanRecord> {
    (0..count)
        .map(|i| SpanRecord {
            trace_id: TraceId(99),
            span_id: SpanId(i + 1),
            name: "span".into(),
            properties: vec![("blob".into(), "x".repeat(tag_bytes).into())],
            ..SpanRecord::default()
        })
        .collect()
}

#[test]
fn an_absent_agent_is_counted() {
    let mut reporter = JaegerReporter::new(closed_port(), "failing").unwrap();
    let handle = reporter.stats();
    for _ in 0..20 {
        reporter.report(&records(10, 10));
        reporter.wait_for_delivery();
        // Let the ICMP "port unreachable" come back before the next send.
        std::thread::sleep(Duration::from_millis(5));
    }
    let got = handle.get();
    // Every span is sent or failed, never both: a refused datagram's spans
    // move from sent to failed when the refusal is seen, at the next send.
    assert_eq!(got.spans_sent + got.spans_failed, 200, "{got:?}");
    // Every datagram but possibly the last is seen to be refused.
    assert!(got.spans_failed >= 190, "{got:?}");
    assert_eq!(got.requests, 20, "{got:?}");
    assert!(handle.last_error().unwrap().contains("refused"), "{:?}", handle.last_error());
}

#[test]
fn an_absent_collector_is_counted_and_not_retried() {
    let mut reporter = JaegerReporter::http(closed_port(), "failing");
    let handle = reporter.stats();
    for _ in 0..20 {
        reporter.report(&records(10, 10));
        reporter.wait_for_delivery();
    }
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent), (200, 0), "{got:?}");
    // A refused connection fails at once, with no retry and no pause: every
    // report tries once.
    assert_eq!((got.requests, got.retries), (20, 0), "{got:?}");
}

#[test]
fn an_http_error_status_is_counted() {
    let body = b"Unable to process request body".to_vec();
    let server = Server::start(vec![Answer::Status(400, Vec::new(), body)]);
    let mut reporter = JaegerReporter::http(server.addr(), "failing");
    let handle = reporter.stats();
    reporter.report(&records(7, 10));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent, got.requests), (7, 0, 1), "{got:?}");
    let error = handle.last_error().unwrap();
    assert!(error.ends_with("HTTP 400: Unable to process request body"), "{error}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn a_silent_collector_stalls_the_reporter_only_briefly() {
    // Reads the request, never answers.
    let server = Server::start(vec![Answer::Silent]);
    let mut reporter =
        JaegerReporter::http(server.addr(), "failing").with_timeout(Duration::from_millis(200));
    let handle = reporter.stats();
    for _ in 0..10 {
        reporter.report(&records(3, 10));
        reporter.wait_for_delivery();
    }
    let got = handle.get();
    assert_eq!((got.spans_failed, got.messages_sent), (30, 0), "{got:?}");
    // One timeout, then the reporter pauses instead of waiting again: the
    // nine later reports were dropped without connecting.
    assert_eq!((got.requests, got.retries), (1, 0), "{got:?}");
    assert_eq!(server.connections(), 1);
}

#[test]
fn oversized_spans_are_truncated_or_dropped_and_counted() {
    let agent = UdpSocket::bind("127.0.0.1:0").unwrap();
    agent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reporter =
        JaegerReporter::new(agent.local_addr().unwrap(), "big").unwrap().with_max_message_size(1200);
    let handle = reporter.stats();
    // Three spans with a 5 000-byte tag: each is truncated and sent alone.
    reporter.report(&records(3, 5000));
    reporter.wait_for_delivery();
    let mut buf = [0u8; 65536];
    for _ in 0..3 {
        let n = agent.recv(&mut buf).unwrap();
        assert!(n <= 1200, "{n}");
        assert!(buf[..n].windows(19).any(|w| w == b"minitrace.truncated"));
    }
    assert_eq!(handle.get().spans_truncated, 3);
    assert_eq!(handle.get().spans_sent, 3);

    // A limit that cannot hold even a bare span: dropped and counted.
    let mut reporter = reporter.with_max_message_size(150);
    reporter.report(&records(2, 10));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_too_large, got.spans_sent, got.spans_failed), (2, 3, 0), "{got:?}");
    assert!(handle.last_error().unwrap().contains("too large"));
}
