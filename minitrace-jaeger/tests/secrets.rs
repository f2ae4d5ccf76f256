//! Secrets stay secret: credentials in a URL are refused without being
//! shown, and a header's value appears in no error, no log line, no
//! `last_error` and no `Debug` output, even when the collector quotes it.

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery::testing::capture_log;
use minitrace_delivery_testkit::{Answer, Server};
use minitrace_jaeger::JaegerReporter;

#[test]
fn credentials_in_the_url_are_refused_and_never_shown() {
    for url in
        ["http://user:SECRET@127.0.0.1:14268/api/traces", "http://SECRET@collector", "http://u:SECRET@[::1"]
    {
        let error = JaegerReporter::http_endpoint(url, "secrets").unwrap_err();
        let shown = format!("{error} {error:?} {}", error.url());
        assert!(!shown.contains("SECRET"), "{shown}");
    }
    let error = JaegerReporter::http_endpoint("http://user:SECRET@127.0.0.1:14268", "secrets").unwrap_err();
    assert_eq!(error.url(), "http://***@127.0.0.1:14268");
    assert!(error.to_string().contains("user information"), "{error}");
}

#[test]
fn header_values_never_show() {
    // The collector refuses the key, quoting it, as some gateways do.
    let server = Server::start(vec![Answer::Status(401, Vec::new(), b"unknown key SECRET".to_vec())]);
    let (mut reporter, mut lines) = capture_log(|| {
        JaegerReporter::http(server.addr(), "secrets")
            .with_error_interval(std::time::Duration::ZERO)
            .with_header("authorization", "Bearer SECRET")
            // Refused (a line break), and said so without its value.
            .with_header("x-other", "SECRET\nmore")
    });
    let handle = reporter.stats();
    let span = SpanRecord { trace_id: TraceId(5), span_id: SpanId(1), ..SpanRecord::default() };
    let ((), report_lines) = capture_log(|| {
        reporter.report(&[span]);
        reporter.wait_for_delivery();
    });
    lines.extend(report_lines);
    assert_eq!(server.received()[0].header("authorization"), Some("Bearer SECRET"));
    assert_eq!(handle.get().spans_failed, 1);

    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("\"x-other\" left out"), "{lines:?}");
    assert!(lines[1].ends_with("HTTP 401: unknown key ***"), "{lines:?}");
    let last_error = handle.last_error().unwrap();
    assert!(last_error.ends_with("HTTP 401: unknown key ***"), "{last_error}");
    let debug = format!("{reporter:?} {handle:?}");
    assert!(debug.contains("authorization"), "{debug}");
    for shown in lines.iter().chain([&last_error, &debug]) {
        assert!(!shown.contains("SECRET"), "{shown}");
    }
}
