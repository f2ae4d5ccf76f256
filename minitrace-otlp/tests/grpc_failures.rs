//! OTLP/gRPC when the endpoint misbehaves: counted (this reporter's own
//! counters, compared exactly), no panic, the report not held past its
//! timeout. Needs no Jaeger.
#![cfg(feature = "grpc")]

use std::net::TcpListener;
use std::time::{Duration, Instant};

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_otlp::{OtlpReporter, Protocol};

fn records(count: u64) -> Vec<SpanRecord> {
    (1..=count)
        .map(|i| SpanRecord { trace_id: TraceId(5), span_id: SpanId(i), ..SpanRecord::default() })
        .collect()
}

fn reporter(url: &str, timeout: Duration) -> OtlpReporter {
    OtlpReporter::builder()
        .env(|_| None)
        .protocol(Protocol::Grpc)
        .endpoint(url)
        .timeout(timeout)
        .build()
        .unwrap()
}

#[test]
fn an_endpoint_that_is_down_is_counted_as_failed() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut reporter = reporter(&format!("http://127.0.0.1:{port}"), Duration::from_secs(5));
    let handle = reporter.stats();
    reporter.report(&records(4));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent), (4, 0), "{got:?}");
    // A refused connection is not retried within a report.
    assert_eq!((got.requests, got.retries), (1, 0), "{got:?}");
    assert!(got.last_error.is_some());
}

#[test]
fn a_server_that_never_answers_does_not_hold_the_report() {
    // The kernel accepts the connection; nobody speaks HTTP/2 on it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let timeout = Duration::from_millis(300);
    let mut reporter = reporter(&format!("http://{}", listener.local_addr().unwrap()), timeout);
    let handle = reporter.stats();
    let start = Instant::now();
    reporter.report(&records(3));
    reporter.wait_for_delivery();
    // A sanity bound, not a timing figure.
    assert!(start.elapsed() < timeout * 10, "{:?}", start.elapsed());
    assert_eq!(handle.get().spans_failed, 3, "{:?}", handle.get());
    drop(listener);
}

#[test]
fn a_report_does_not_wait_for_the_server() {
    // Delivered by the sender thread: `report` returns with the spans still
    // on the wire, where a server that never answers keeps them until the
    // listener closes (the timeout is far beyond any pause of the test,
    // and bounds how long a report that waits takes to fail it).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mut reporter = reporter(&url, Duration::from_secs(30));
    let handle = reporter.stats();
    reporter.report(&records(3));
    assert!(!handle.wait_for_delivery(Duration::ZERO), "report returned with its spans delivered");
    // The connection reset, then refused: the delivery ends, failed.
    drop(listener);
    reporter.wait_for_delivery();
    assert!(handle.wait_for_delivery(Duration::ZERO));
    assert_eq!((handle.get().spans_failed, handle.get().spans_sent), (3, 0), "{:?}", handle.get());
}
