//! A reporter made from an endpoint URL: the host name resolved, the path
//! and the headers sent as given. Needs no Jaeger.

use std::io::Write;
use std::net::TcpListener;

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_jaeger::JaegerReporter;

#[path = "common/http_server.rs"]
mod http_server;
use http_server::read_request;

#[test]
fn a_url_with_a_host_name_path_and_header_reaches_the_collector() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let request = read_request(&mut stream);
        stream.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").unwrap();
        String::from_utf8_lossy(&request).to_lowercase()
    });
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

    let request = server.join().unwrap();
    assert!(request.starts_with("post /tenant/api/traces?format=jaeger.thrift http/1.1\r\n"), "{request}");
    assert!(request.contains(&format!("\r\nhost: localhost:{port}\r\n")), "{request}");
    assert!(request.contains("\r\nauthorization: bearer s3cret\r\n"), "{request}");
    assert_eq!(stats.get().spans_sent, 1, "{:?}", stats.get());
}

#[test]
fn a_malformed_url_is_refused_saying_why() {
    for (url, why) in [
        ("127.0.0.1:14268", "no scheme"),
        ("udp://127.0.0.1:6831", "neither http:// nor https://"),
        ("http:///api/traces", "not a URL"),
    ] {
        let error = JaegerReporter::http_endpoint(url, "endpoint").unwrap_err();
        let message = error.to_string();
        assert!(message.contains(url) && message.contains(why), "{url}: {message}");
    }
    let https = JaegerReporter::http_endpoint("https://collector.example/api/traces", "endpoint");
    #[cfg(not(feature = "tls"))]
    assert!(https.unwrap_err().to_string().contains("`tls` feature"));
    #[cfg(feature = "tls")]
    assert!(https.is_ok());
}
