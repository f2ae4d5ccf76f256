//! A reporter made from an endpoint URL: the host name resolved, the path
//! and the headers sent as given. Needs no Jaeger.

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::Server;
use minitrace_jaeger::JaegerReporter;

#[test]
fn a_url_with_a_host_name_path_and_header_reaches_the_collector() {
    let server = Server::start(Vec::new());
    let port = server.addr().port();
    // `localhost` may resolve to ::1 first, where nothing listens: the next
    // address is tried.
    let url = format!("http://localhost:{port}/tenant/api/traces?format=jaeger.thrift");
    let mut reporter = JaegerReporter::http_endpoint(&url, "endpoint")
        .unwrap()
        .with_header("Authorization", "Bearer s3cret");
    let stats = reporter.stats();
    assert!(!format!("{reporter:?}").contains("s3cret"), "{reporter:?}");
    let span =
        SpanRecord { trace_id: TraceId(7), span_id: SpanId(1), name: "span".into(), ..SpanRecord::default() };
    reporter.report(&[span]);
    reporter.wait_for_delivery();

    let received = server.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.line, "POST /tenant/api/traces?format=jaeger.thrift HTTP/1.1");
    assert_eq!(request.header("host"), Some(format!("localhost:{port}").as_str()));
    assert_eq!(request.header("authorization"), Some("Bearer s3cret"));
    assert_eq!(request.header("content-type"), Some("application/x-thrift"));
    assert_eq!(stats.get().spans_sent, 1, "{:?}", stats.get());
}

#[test]
fn a_malformed_url_is_refused_saying_why() {
    for (url, why) in [
        ("127.0.0.1:14268", "no scheme"),
        ("udp://127.0.0.1:6831", "neither http:// nor https://"),
        ("http:///api/traces", "not a URL"),
        ("http://collector:port/api/traces", "not a URL"),
    ] {
        let error = JaegerReporter::http_endpoint(url, "endpoint").unwrap_err();
        let message = error.to_string();
        assert!(message.contains(url) && message.contains(why), "{url}: {message}");
        assert_eq!(error.url(), url);
    }
    let https = JaegerReporter::http_endpoint("https://collector.example/api/traces", "endpoint");
    #[cfg(not(feature = "tls"))]
    assert!(https.unwrap_err().to_string().contains("`tls` feature"));
    #[cfg(feature = "tls")]
    assert!(https.is_ok());
}
