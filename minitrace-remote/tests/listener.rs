//! The retrieval listener on 127.0.0.1: forged, malformed, unauthenticated
//! and unknown requests refused and counted; a request for a trace held
//! here reports it through this process's reporter, once.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use minitrace::collector::{Config, SpanContext, TestReporter, TraceId};
use minitrace::prelude::*;
use minitrace::recorder::FlightRecorder;
use minitrace_remote::{Error, Listener, PATH};

/// One HTTP/1.1 request; the answer's status code.
fn post(address: SocketAddr, method: &str, path: &str, authorization: Option<&str>, body: &str) -> u16 {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let authorization = authorization.map_or(String::new(), |value| format!("authorization: {value}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n{authorization}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

fn request_for(trace_id: TraceId) -> String {
    format!(r#"{{"trace_id":"{:032x}","hops":3,"visited":[]}}"#, trace_id.0)
}

#[test]
fn the_listener_refuses_what_it_should_and_reports_what_it_holds() {
    let (reporter, reported) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(Duration::from_secs(60)));
    FlightRecorder::new().enable();

    // Off loopback, a token is required.
    let everywhere = Listener::builder().address("0.0.0.0:0".parse().unwrap()).start();
    assert!(matches!(everywhere, Err(Error::TokenRequired(_))));
    let listener = Listener::builder()
        .token("s3cret")
        .fetch_kept_traces(false)
        .wait_for_roots(Duration::from_millis(200))
        .start()
        .unwrap();
    assert!(!format!("{:?}", Listener::builder().token("s3cret")).contains("s3cret"));
    let address = listener.address();
    assert!(matches!(Listener::builder().start(), Err(Error::AlreadyRunning)));

    let context = SpanContext::random();
    drop(Span::root("thrown away here", context));
    let body = request_for(context.trace_id);
    let auth = Some("Bearer s3cret");
    assert_eq!(post(address, "POST", PATH, None, &body), 401);
    assert_eq!(post(address, "POST", PATH, Some("Bearer wrong!"), &body), 401);
    assert_eq!(post(address, "POST", "/other", auth, &body), 404);
    assert_eq!(post(address, "GET", PATH, auth, ""), 405);
    assert_eq!(post(address, "POST", PATH, auth, "{\"trace_id\":\"forged\",\"hops\":1}"), 400);
    assert_eq!(post(address, "POST", PATH, auth, &"x".repeat(20_000)), 400);
    assert_eq!(post(address, "POST", PATH, auth, &body), 202);
    // Handled once: the second is a duplicate.
    assert_eq!(post(address, "POST", PATH, auth, &body), 202);
    assert_eq!(post(address, "POST", PATH, auth, &request_for(TraceId(0x5eed))), 202);

    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while listener.stats().found + listener.stats().not_found + listener.stats().duplicates < 3 {
        assert!(std::time::Instant::now() < deadline, "{:?}", listener.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    minitrace::flush();
    let stats = listener.stats();
    assert_eq!(
        (stats.refused_unauthorized, stats.refused_unknown, stats.refused_malformed, stats.accepted),
        (2, 2, 2, 3),
        "{stats:?}"
    );
    // The id no root of which ends here waited for one, in vain.
    assert_eq!((stats.found, stats.duplicates, stats.awaited, stats.not_found), (1, 1, 1, 1), "{stats:?}");
    let delivered: Vec<_> =
        reported.lock().iter().filter(|r| r.trace_id == context.trace_id).cloned().collect();
    assert_eq!(delivered.len(), 1, "reported once: {delivered:?}");
    assert_eq!(delivered[0].name, "thrown away here");
}
