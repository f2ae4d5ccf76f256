//! The retry policy over HTTP, the OTLP spec's (minitrace-otlp has the
//! same): which answers are retried, after how long, and never past the
//! report's timeout; against a scripted collector on 127.0.0.1. Counts are
//! this reporter's own, compared exactly.

use std::time::{Duration, Instant};

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{closed_port, Answer, Server};
use minitrace_jaeger::JaegerReporter;

fn records(count: u64) -> Vec<SpanRecord> {
    (1..=count)
        .map(|i| SpanRecord {
            trace_id: TraceId(31),
            span_id: SpanId(i),
            name: "step".into(),
            ..SpanRecord::default()
        })
        .collect()
}

fn reporter(server: &Server, timeout: Duration) -> JaegerReporter {
    JaegerReporter::http(server.addr(), "retries").with_timeout(timeout)
}

#[test]
fn busy_statuses_are_retried_until_accepted() {
    let server = Server::start(vec![
        Answer::status(429),
        Answer::status(502),
        Answer::status(503),
        Answer::status(504),
        Answer::status(202),
    ]);
    let mut reporter = reporter(&server, Duration::from_secs(20));
    let handle = reporter.stats();
    reporter.report(&records(5));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_failed, got.messages_sent), (5, 0, 1), "{got:?}");
    assert_eq!((got.requests, got.retries), (5, 4), "{got:?}");
    let received = server.received();
    assert_eq!(received.len(), 5);
    assert!(received.iter().all(|request| request.body == received[0].body), "the same batch each time");
}

#[test]
fn retry_after_is_waited_for() {
    let server = Server::start(vec![Answer::Status(503, vec![("retry-after", "1".into())], Vec::new())]);
    let mut reporter = reporter(&server, Duration::from_secs(20));
    let handle = reporter.stats();
    reporter.report(&records(4));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_sent, got.requests, got.retries), (4, 2, 1), "{got:?}");
    let received = server.received();
    assert_eq!(received.len(), 2);
    // The collector asked for a second; the reporter must not come back sooner.
    assert!(received[1].at - received[0].at >= Duration::from_secs(1));
}

#[test]
fn a_retry_after_beyond_the_timeout_is_not_waited_for() {
    let server = Server::start(vec![Answer::Status(429, vec![("retry-after", "3600".into())], Vec::new())]);
    let mut reporter = reporter(&server, Duration::from_secs(2));
    let handle = reporter.stats();
    let start = Instant::now();
    reporter.report(&records(2));
    reporter.wait_for_delivery();
    // A sanity bound, not a timing figure: nowhere near the hour asked for.
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent, got.requests, got.retries), (2, 0, 1, 0), "{got:?}");
    let error = handle.last_error().unwrap();
    assert!(error.contains("HTTP 429") && error.contains("not retried"), "{error}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn other_statuses_are_not_retried() {
    for code in [400, 413, 500] {
        let server = Server::start(vec![Answer::status(code)]);
        let mut reporter = reporter(&server, Duration::from_secs(20));
        let handle = reporter.stats();
        reporter.report(&records(3));
        reporter.wait_for_delivery();
        let got = handle.get();
        assert_eq!(
            (got.spans_failed, got.spans_sent, got.requests, got.retries),
            (3, 0, 1, 0),
            "{code}: {got:?}"
        );
        assert!(handle.last_error().unwrap().ends_with(&format!("HTTP {code}")), "{:?}", handle.last_error());
        assert_eq!(server.received().len(), 1, "{code}");
    }
}

#[test]
fn a_refused_connection_is_not_retried_nor_the_rest_of_the_report_sent() {
    // Small messages: the report goes in several requests, of which only
    // the first is tried.
    let mut reporter = JaegerReporter::http(closed_port(), "retries").with_max_message_size(600);
    let handle = reporter.stats();
    reporter.report(&records(40));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent, got.requests, got.retries), (40, 0, 1, 0), "{got:?}");
    assert!(handle.last_error().unwrap().contains("refused"), "{:?}", handle.last_error());
    // The next report tries again.
    reporter.report(&records(1));
    reporter.wait_for_delivery();
    assert_eq!(handle.get().requests, 2);
}
