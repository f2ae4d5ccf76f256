//! An endpoint that answers with a redirect: nothing is sent where it
//! points (neither the spans nor the vendor's key), and the request is
//! counted failed. Against scripted servers on 127.0.0.1.

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{Answer, Server};
use minitrace_otlp::OtlpReporter;

#[test]
fn redirects_are_not_followed_and_count_as_failed() {
    let elsewhere = Server::start(Vec::new());
    for code in [301, 302, 303, 307, 308] {
        let location = format!("{}/v1/traces", elsewhere.url());
        let server = Server::start(vec![Answer::redirect(code, &location)]);
        let mut reporter = OtlpReporter::builder()
            .env(|_| None)
            .endpoint(server.url())
            .header("x-api-key", "vendor-key")
            .build()
            .unwrap();
        let handle = reporter.stats();
        let spans: Vec<SpanRecord> = (1..=4)
            .map(|i| SpanRecord { trace_id: TraceId(8), span_id: SpanId(i), ..SpanRecord::default() })
            .collect();
        reporter.report(&spans);
        reporter.wait_for_delivery();
        let got = handle.get();
        assert_eq!(
            (got.spans_failed, got.spans_sent, got.spans_rejected, got.requests, got.retries),
            (4, 0, 0, 1, 0),
            "{code}: {got:?}"
        );
        let error = got.last_error.unwrap();
        assert!(error.contains(&format!("HTTP {code}: a redirect to {location}, not followed")), "{error}");
        assert_eq!(server.received().len(), 1, "{code}");
    }
    assert_eq!(elsewhere.connections(), 0);
    assert!(elsewhere.received().is_empty());
}
