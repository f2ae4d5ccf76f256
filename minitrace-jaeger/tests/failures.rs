//! What the reporter does when delivery fails: count, log, never panic, never
//! stall. Needs no Jaeger.

use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use minitrace::collector::{stats, Reporter, SpanId, SpanRecord, TraceId};
use minitrace_jaeger::JaegerReporter;

#[path = "common/http_server.rs"]
mod http_server;
use http_server::{pending_connections, read_request};

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

/// A local port that nothing listens on (UDP or TCP).
fn closed_port() -> std::net::SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    drop(socket);
    addr
}

// The tests of this file run in parallel and share minitrace's global
// counters: each checks that they grew by at least its own losses.

#[test]
fn an_absent_agent_is_counted() {
    let before = stats().dropped_by_reporter;
    let mut reporter = JaegerReporter::new(closed_port(), "failing").unwrap();
    let handle = reporter.stats();
    for _ in 0..20 {
        reporter.report(&records(10, 10));
        // Let the ICMP "port unreachable" come back before the next send.
        std::thread::sleep(Duration::from_millis(5));
    }
    let lost = handle.get().spans_failed;
    // Every datagram but possibly the last is seen to be refused.
    assert!(lost >= 190, "{:?}", handle.get());
    assert!(stats().dropped_by_reporter - before >= lost);
}

#[test]
fn an_absent_collector_is_counted() {
    // A refused connection fails at once, with no timeout and no back-off
    // (see the unit tests of the HTTP client): every report tries again.
    let before = stats().dropped_by_reporter;
    let mut reporter = JaegerReporter::http(closed_port(), "failing");
    let handle = reporter.stats();
    for _ in 0..20 {
        reporter.report(&records(10, 10));
    }
    assert_eq!(handle.get().spans_failed, 200);
    assert_eq!(handle.get().spans_sent, 0);
    assert!(stats().dropped_by_reporter - before >= 200);
}

#[test]
fn an_http_error_status_is_counted() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        // Read the whole request, then refuse it.
        read_request(&mut stream);
        let body = "Unable to process request body";
        write!(stream, "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    });
    let before = stats().dropped_by_reporter;
    let mut reporter = JaegerReporter::http(addr, "failing");
    let handle = reporter.stats();
    reporter.report(&records(7, 10));
    server.join().unwrap();
    assert_eq!(handle.get().spans_failed, 7);
    assert!(stats().dropped_by_reporter - before >= 7);
}

#[test]
fn a_silent_collector_stalls_the_reporter_only_briefly() {
    // Accepts connections (the kernel does) but never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut reporter = JaegerReporter::http(listener.local_addr().unwrap(), "failing")
        .with_timeout(Duration::from_millis(200));
    let handle = reporter.stats();
    for _ in 0..10 {
        reporter.report(&records(3, 10));
    }
    assert_eq!(handle.get().spans_failed, 30);
    assert_eq!(handle.get().messages_sent, 0);
    // One timeout, then the reporter backs off instead of waiting again: the
    // nine later reports were dropped without connecting. Every connection
    // made has completed, so it waits in the listener's queue.
    assert_eq!(pending_connections(&listener), 1);
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
    let mut buf = [0u8; 65536];
    for _ in 0..3 {
        let n = agent.recv(&mut buf).unwrap();
        assert!(n <= 1200, "{n}");
        assert!(buf[..n].windows(19).any(|w| w == b"minitrace.truncated"));
    }
    assert_eq!(handle.get().spans_truncated, 3);
    assert_eq!(handle.get().spans_sent, 3);

    // A limit that cannot hold even a bare span: dropped and counted.
    let before = stats().dropped_by_reporter;
    let mut reporter = reporter.with_max_message_size(150);
    reporter.report(&records(2, 10));
    assert_eq!(handle.get().spans_too_large, 2);
    assert!(stats().dropped_by_reporter - before >= 2);
}
