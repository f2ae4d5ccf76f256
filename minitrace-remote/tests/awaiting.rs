//! A retrieval that comes while the trace's root still runs here waits for
//! it: the root is kept when it ends, the whole trace is reported once,
//! and the retrieval goes on, as it came, to the processes the trace's
//! breadcrumbs name (here a stand-in listener that records what it gets).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use minitrace::collector::{Config, SpanContext, SpanKind, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace::recorder::FlightRecorder;
use minitrace_remote::{breadcrumbs, Listener, PATH};

/// A listener stand-in: answers 202 to each request and sends its body.
fn stand_in() -> (SocketAddr, mpsc::Receiver<String>) {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = server.local_addr().unwrap();
    let (bodies, received) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in server.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let _ = bodies.send(String::from_utf8(body).unwrap());
                    let _ = reader.get_mut().write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n");
                    length = 0;
                }
            }
        }
    });
    (address, received)
}

fn post(address: SocketAddr, body: &str) -> u16 {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST {PATH} HTTP/1.1\r\nhost: {address}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

#[test]
fn a_retrieval_before_the_root_ended_waits_for_it_then_goes_on() {
    let (reporter, reported) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(Duration::from_secs(60)));
    FlightRecorder::new().enable();
    let listener = Listener::builder().start().unwrap();
    let (downstream, received) = stand_in();

    // A request still served here, that called `downstream`.
    let context = SpanContext::random();
    let root = Span::root("serving", context);
    let guard = root.set_local_parent();
    {
        let _call = LocalSpan::enter_with_local_parent("call downstream")
            .with_kind(SpanKind::Client)
            .with_property(|| (breadcrumbs::TO_KEY, downstream.to_string()));
    }
    let upstream = "127.0.0.1:9";
    let body = format!(r#"{{"trace_id":"{:032x}","hops":3,"visited":["{upstream}"]}}"#, context.trace_id.0);
    assert_eq!(post(listener.address(), &body), 202);
    let deadline = Instant::now() + Duration::from_secs(10);
    while listener.stats().awaited == 0 {
        assert!(Instant::now() < deadline, "{:?}", listener.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    minitrace::flush();
    assert!(reported.lock().iter().all(|record| record.trace_id != context.trace_id), "not in pieces");
    assert!(received.try_recv().is_err(), "not passed on before its root ended");

    drop(guard);
    drop(root);
    let forwarded = received.recv_timeout(Duration::from_secs(10)).expect("passed on once the root ended");
    let forwarded: serde_json::Value = serde_json::from_str(&forwarded).unwrap();
    assert_eq!(forwarded["trace_id"], format!("{:032x}", context.trace_id.0));
    assert_eq!(forwarded["hops"], 2);
    let visited: Vec<&str> =
        forwarded["visited"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let here = listener.address().to_string();
    let there = downstream.to_string();
    assert_eq!(
        visited,
        [upstream, here.as_str(), there.as_str()],
        "as it came, with this process and the next"
    );

    minitrace::flush();
    let names: Vec<String> = reported
        .lock()
        .iter()
        .filter(|record| record.trace_id == context.trace_id)
        .map(|record| record.name.to_string())
        .collect();
    assert_eq!(names, ["call downstream", "serving"], "whole, once");
    // The stand-in's answer may still be on its way back.
    while listener.stats().forwarded == 0 {
        assert!(Instant::now() < deadline, "{:?}", listener.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = listener.stats();
    assert_eq!(
        (stats.accepted, stats.awaited, stats.found, stats.not_found, stats.triggered, stats.forwarded),
        (1, 1, 1, 0, 0, 1),
        "{stats:?}"
    );
    assert!(received.recv_timeout(Duration::from_millis(200)).is_err(), "passed on once");
}
