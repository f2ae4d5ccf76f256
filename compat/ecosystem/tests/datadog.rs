//! `minitrace-datadog` 0.6.7, as published, reporting this workspace's spans
//! to a local HTTP server standing in for the Datadog agent: the msgpack
//! body it receives holds the trace, whole, with its parents and properties.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use minitrace::collector::Config;
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace_datadog::DatadogReporter;
use serde::Deserialize;

/// The fields of the agent's v0.4 span that this test checks.
#[derive(Debug, Deserialize)]
struct AgentSpan {
    name: String,
    service: String,
    trace_id: u64,
    span_id: u64,
    parent_id: u64,
    #[serde(default)]
    meta: HashMap<String, String>,
}

/// Answers each POST with 200, and sends its path and body on.
fn stand_in_agent() -> (std::net::SocketAddr, mpsc::Receiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let (sender, received) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}").unwrap();
            if sender.send((path, body)).is_err() {
                break;
            }
        }
    });
    (address, received)
}

#[test]
fn a_trace_reaches_a_stand_in_agent_through_minitrace_datadog() {
    let (agent, received) = stand_in_agent();
    minitrace::set_reporter(DatadogReporter::new(agent, "checkout", "POST /cart", "web"), Config::default());

    let context = SpanContext::random();
    {
        let root = Span::root("request", context);
        let _guard = root.set_local_parent();
        let _query = LocalSpan::enter_with_local_parent("query").with_property(|| ("table", "carts"));
    }
    minitrace::flush();

    let (path, body) = received.recv_timeout(Duration::from_secs(20)).expect("a POST to the agent");
    assert_eq!(path, "/v0.4/traces");
    let traces: Vec<Vec<AgentSpan>> = rmp_serde::from_slice(&body).expect("a msgpack array of traces");
    let spans: Vec<&AgentSpan> = traces.iter().flatten().collect();
    assert_eq!(spans.len(), 2, "{spans:?}");
    let by_name = |name: &str| spans.iter().find(|span| span.name == name).unwrap();
    let (root, query) = (by_name("request"), by_name("query"));
    assert_eq!(root.trace_id, context.trace_id.0 as u64);
    assert_eq!(query.trace_id, root.trace_id);
    assert_eq!(query.parent_id, root.span_id);
    assert_eq!(root.parent_id, 0);
    assert_eq!(query.meta.get("table").map(String::as_str), Some("carts"));
    assert!(spans.iter().all(|span| span.service == "checkout"));
}
