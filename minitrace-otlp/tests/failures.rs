//! What the reporter does when the endpoint misbehaves: count, retry where
//! the OTLP spec says, never panic, never hold the report past its
//! timeout. Against a scripted server on 127.0.0.1; needs no Jaeger. Every
//! count is this reporter's own, compared exactly (minitrace's
//! process-wide loss counter is checked in `dropped_by_reporter.rs`, a test
//! binary of its own).

use std::time::{Duration, Instant};

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{closed_port, Answer, Server};
use minitrace_otlp::{Compression, Error, OtlpReporter, OtlpReporterBuilder};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

fn records(count: u64) -> Vec<SpanRecord> {
    (1..=count)
        .map(|i| SpanRecord {
            trace_id: TraceId(77),
            span_id: SpanId(i),
            parent_id: SpanId(i - 1),
            name: "step".into(),
            ..SpanRecord::default()
        })
        .collect()
}

fn builder(url: &str) -> OtlpReporterBuilder {
    OtlpReporter::builder().env(|_| None).endpoint(url).service_name("failures")
}

fn spans_in(body: &[u8]) -> usize {
    let request = ExportTraceServiceRequest::decode(body).expect("a protobuf ExportTraceServiceRequest");
    request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum()
}

#[test]
fn an_endpoint_that_is_down_is_counted_as_failed() {
    let mut reporter = builder(&format!("http://{}", closed_port())).build().unwrap();
    let handle = reporter.stats();
    reporter.report(&records(7));
    reporter.wait_for_delivery();
    reporter.report(&records(3));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent), (10, 0), "{got:?}");
    // A refused connection is not retried within a report.
    assert_eq!((got.requests, got.retries), (2, 0), "{got:?}");
    assert!(got.last_error.unwrap().contains("connection refused"));
}

#[test]
fn a_refused_connection_ends_the_reports_tries() {
    // Three requests in the report: the first is refused, the others are
    // not tried.
    let mut reporter =
        builder(&format!("http://{}", closed_port())).max_spans_per_request(4).build().unwrap();
    let handle = reporter.stats();
    reporter.report(&records(12));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent, got.requests, got.retries), (12, 0, 1, 0), "{got:?}");
}

#[test]
fn a_server_slower_than_the_timeout_does_not_hold_the_report() {
    let server = Server::start(vec![Answer::Silent]);
    let timeout = Duration::from_millis(300);
    let mut reporter = builder(&server.url()).timeout(timeout).build().unwrap();
    let handle = reporter.stats();
    let start = Instant::now();
    reporter.report(&records(5));
    reporter.wait_for_delivery();
    let took = start.elapsed();
    // A sanity bound, not a timing figure: nowhere near the server's minute.
    assert!(took < timeout * 10, "{took:?}");
    let got = handle.get();
    assert_eq!((got.spans_failed, got.requests, got.retries), (5, 1, 0), "{got:?}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn a_503_with_retry_after_is_retried_after_it_and_delivered() {
    let busy = Answer::Status(503, vec![("retry-after", "1".into())], Vec::new());
    let server = Server::start(vec![busy]);
    let mut reporter = builder(&server.url()).timeout(Duration::from_secs(20)).build().unwrap();
    let handle = reporter.stats();
    reporter.report(&records(4));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_failed), (4, 0), "{got:?}");
    assert_eq!((got.requests, got.retries), (2, 1), "{got:?}");
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].body, received[1].body, "the same request again");
    // The server asked for a second; the client must not come back sooner.
    assert!(received[1].at - received[0].at >= Duration::from_secs(1));
}

#[test]
fn a_retry_after_beyond_the_timeout_is_not_waited_for() {
    let busy = Answer::Status(429, vec![("retry-after", "3600".into())], Vec::new());
    let server = Server::start(vec![busy]);
    let timeout = Duration::from_millis(500);
    let mut reporter = builder(&server.url()).timeout(timeout).build().unwrap();
    let handle = reporter.stats();
    let start = Instant::now();
    reporter.report(&records(2));
    reporter.wait_for_delivery();
    assert!(start.elapsed() < timeout * 10, "{:?}", start.elapsed());
    let got = handle.get();
    assert_eq!((got.spans_failed, got.spans_sent, got.requests, got.retries), (2, 0, 1, 0), "{got:?}");
    let error = got.last_error.unwrap();
    assert!(error.contains("HTTP 429") && error.contains("not retried"), "{error}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn retryable_statuses_back_off_and_retry() {
    let busy = [429, 502, 503, 504].map(Answer::status).to_vec();
    let server = Server::start(busy);
    let mut reporter = builder(&server.url()).build().unwrap();
    let handle = reporter.stats();
    reporter.report(&records(3));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_failed, got.requests, got.retries), (3, 0, 5, 4), "{got:?}");
    let received = server.received();
    assert_eq!(received.len(), 5);
    assert!(received.iter().all(|request| spans_in(&request.body) == 3));
}

#[test]
fn other_statuses_are_not_retried() {
    for code in [400, 413, 500] {
        let server = Server::start(vec![Answer::Status(code, Vec::new(), b"bad span".to_vec())]);
        let mut reporter = builder(&server.url()).build().unwrap();
        let handle = reporter.stats();
        reporter.report(&records(6));
        reporter.wait_for_delivery();
        let got = handle.get();
        assert_eq!(
            (got.spans_failed, got.spans_sent, got.requests, got.retries),
            (6, 0, 1, 0),
            "{code}: {got:?}"
        );
        assert!(got.last_error.unwrap().ends_with(&format!("HTTP {code}: bad span")));
        assert_eq!(server.received().len(), 1);
    }
}

#[test]
fn a_partial_success_counts_the_rejected_spans() {
    let answer = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: 3,
            error_message: "too old".into(),
        }),
    };
    let protobuf = vec![("content-type", "application/x-protobuf".to_string())];
    let server = Server::start(vec![Answer::Status(200, protobuf, answer.encode_to_vec())]);
    let mut reporter = builder(&server.url()).build().unwrap();
    let handle = reporter.stats();
    reporter.report(&records(10));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_rejected, got.spans_failed), (7, 3, 0), "{got:?}");
    // Not retried: the endpoint has the request.
    assert_eq!((got.requests, got.retries), (1, 0), "{got:?}");
    assert_eq!(server.received().len(), 1);
    assert!(got.last_error.unwrap().ends_with("rejected 3 of 10 spans: too old"));
}

#[test]
fn a_malformed_endpoint_url_is_a_build_error() {
    for endpoint in ["not a url", "127.0.0.1:4318", "http://", "ftp://127.0.0.1:21", "http://[::1"] {
        match builder(endpoint).build() {
            Err(error @ Error::InvalidEndpoint { .. }) => assert!(error.to_string().contains("invalid")),
            other => panic!("{endpoint:?}: {other:?}"),
        }
    }
}

#[test]
fn requests_are_protobuf_posts_with_headers_and_gzip() {
    let server = Server::start(Vec::new());
    let mut reporter = builder(&server.url())
        .header("authorization", "Bearer secret")
        .compression(Compression::Gzip)
        .build()
        .unwrap();
    reporter.report(&records(5));
    reporter.wait_for_delivery();
    let received = server.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.line, "POST /v1/traces HTTP/1.1");
    assert_eq!(request.header("content-type"), Some("application/x-protobuf"));
    assert_eq!(request.header("content-encoding"), Some("gzip"));
    assert_eq!(request.header("authorization"), Some("Bearer secret"));
    assert_eq!(spans_in(&request.body), 5);
    assert_eq!(reporter.stats().get().spans_sent, 5);
}

#[test]
fn a_large_report_goes_in_several_requests() {
    let server = Server::start(Vec::new());
    let mut reporter = builder(&server.url()).max_spans_per_request(1000).build().unwrap();
    reporter.report(&records(4500));
    reporter.wait_for_delivery();
    let counts: Vec<usize> = server.received().iter().map(|r| spans_in(&r.body)).collect();
    assert_eq!(counts, [1000, 1000, 1000, 1000, 500]);
    assert_eq!(reporter.stats().get().spans_sent, 4500);
}

/// OTLP/JSON as the spec writes it: lowerCamelCase names, ids in hex,
/// enums as numbers, 64-bit numbers as strings, values as `AnyValue`s.
#[cfg(feature = "http-json")]
#[test]
fn json_bodies_follow_otlp_json() {
    let server = Server::start(Vec::new());
    let mut reporter = builder(&server.url()).protocol(minitrace_otlp::Protocol::HttpJson).build().unwrap();
    let mut records = records(2);
    records[0].properties =
        vec![("span.kind".into(), "server".into()), ("http.route".into(), "/cart".into())];
    records[0].begin_time_unix_ns = 1_700_000_000_000_000_000;
    reporter.report(&records);
    reporter.wait_for_delivery();
    let received = server.received();
    assert_eq!(received[0].header("content-type"), Some("application/json"));
    let json: serde_json::Value = serde_json::from_slice(&received[0].body).unwrap();
    let resource = &json["resourceSpans"][0]["resource"]["attributes"];
    assert!(resource
        .as_array()
        .unwrap()
        .iter()
        .any(|kv| kv["key"] == "service.name"
            && kv["value"] == serde_json::json!({ "stringValue": "failures" })));
    let spans = &json["resourceSpans"][0]["scopeSpans"][0]["spans"];
    assert_eq!(json["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"], "minitrace");
    let root = &spans[0];
    assert_eq!(root["traceId"], "0000000000000000000000000000004d");
    assert_eq!(root["spanId"], "0000000000000001");
    assert_eq!(root["parentSpanId"], "");
    assert_eq!(spans[1]["parentSpanId"], "0000000000000001");
    assert_eq!(root["kind"], 2, "SPAN_KIND_SERVER, as a number");
    assert_eq!(root["startTimeUnixNano"], "1700000000000000000");
    assert_eq!(
        root["attributes"],
        serde_json::json!([{ "key": "http.route", "value": { "stringValue": "/cart" } }])
    );
    assert_eq!(reporter.stats().get().spans_sent, 2);
}
