//! Secrets stay secret: a malformed `OTEL_EXPORTER_OTLP_HEADERS` or an
//! endpoint with credentials is refused without being shown, and a header's
//! value appears in no error, no log line, no `last_error` and no `Debug`
//! output, even when the endpoint quotes it.

use std::collections::HashMap;
use std::time::Duration;

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery::testing::capture_log;
use minitrace_delivery_testkit::{Answer, Server};
use minitrace_otlp::{Error, OtlpReporter, OtlpReporterBuilder};

fn with_env(vars: &[(&str, &str)]) -> OtlpReporterBuilder {
    let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    OtlpReporter::builder().env(move |name| vars.get(name).cloned())
}

fn assert_hidden(shown: &str) {
    assert!(!shown.contains("SECRET"), "{shown}");
}

#[test]
fn a_malformed_headers_variable_is_named_but_not_shown() {
    for variable in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
        for value in ["api-key=SECRET,oops", "api-key=SECRET,=x", "oops-SECRET", "api-key=SECRET,k=%ff"] {
            let error = with_env(&[(variable, value)]).build().unwrap_err();
            let shown = format!("{error} {error:?}");
            assert_hidden(&shown);
            match &error {
                Error::InvalidEnv { variable: named, value, reason } => {
                    assert_eq!(named, variable);
                    assert_eq!(value, "");
                    assert!(
                        reason.starts_with("item ") || reason.starts_with("the value of item"),
                        "{reason}"
                    );
                }
                other => panic!("{value}: {other:?}"),
            }
        }
    }
    let error = with_env(&[("OTEL_EXPORTER_OTLP_HEADERS", "api-key=SECRET,oops")]).build().unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid OTEL_EXPORTER_OTLP_HEADERS (its value not shown: it may hold credentials): \
         item 2 of 2 is not key=value"
    );
}

#[test]
fn credentials_in_an_endpoint_are_refused_and_never_shown() {
    let url = "http://user:SECRET@127.0.0.1:4318";
    let builders = [
        ("builder endpoint", with_env(&[]).endpoint(url)),
        ("builder traces endpoint", with_env(&[]).traces_endpoint(url)),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", with_env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", url)])),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", with_env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)])),
    ];
    for (case, builder) in builders {
        assert_hidden(&format!("{builder:?}"));
        let error = builder.build().unwrap_err();
        assert_hidden(&format!("{error} {error:?}"));
        match &error {
            Error::InvalidEndpoint { endpoint, reason } => {
                assert_eq!(endpoint, "http://***@127.0.0.1:4318", "{case}");
                assert!(reason.contains("user information"), "{case}: {reason}");
                if case.starts_with("OTEL") {
                    assert!(reason.ends_with(&format!("(in {case})")), "{reason}");
                }
            }
            other => panic!("{case}: {other:?}"),
        }
    }
}

#[test]
fn header_values_never_show() {
    // The endpoint refuses the key, quoting it, as some gateways do.
    let answer = Answer::Status(401, Vec::new(), b"unknown api key SECRET".to_vec());
    let server = Server::start(vec![answer]);
    let mut reporter = with_env(&[("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=SECRET")])
        .endpoint(server.url())
        .header("authorization", "Bearer SECRET-TOKEN")
        .error_interval(Duration::ZERO)
        .build()
        .unwrap();
    let handle = reporter.stats();
    let span = SpanRecord { trace_id: TraceId(5), span_id: SpanId(1), ..SpanRecord::default() };
    let ((), lines) = capture_log(|| {
        reporter.report(&[span]);
        reporter.wait_for_delivery();
    });
    let request = &server.received()[0];
    assert_eq!(request.header("x-api-key"), Some("SECRET"));
    assert_eq!(request.header("authorization"), Some("Bearer SECRET-TOKEN"));
    let got = handle.get();
    assert_eq!(got.spans_failed, 1, "{got:?}");

    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("minitrace-otlp: 1 spans not delivered to http://127.0.0.1:"), "{lines:?}");
    assert!(lines[0].ends_with("HTTP 401: unknown api key ***"), "{lines:?}");
    let last_error = got.last_error.unwrap();
    assert!(last_error.ends_with("HTTP 401: unknown api key ***"), "{last_error}");
    let debug = format!("{reporter:?} {handle:?}");
    assert!(debug.contains("x-api-key") && debug.contains("authorization"), "{debug}");
    for shown in lines.iter().chain([&last_error, &debug]) {
        assert_hidden(shown);
    }
}

#[test]
fn a_bad_header_is_refused_without_its_value() {
    let error = with_env(&[]).header("x-api-key", "SECRET\nnext").build().unwrap_err();
    assert!(matches!(error, Error::InvalidHeader { .. }), "{error}");
    assert_hidden(&format!("{error} {error:?}"));
}
