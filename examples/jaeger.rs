//! Sends a traced workload to a local Jaeger and prints where to see it.
//!
//! ```sh
//! bash scripts/jaeger.sh                          # a Jaeger all-in-one on 127.0.0.1
//! cargo run --example jaeger                      # over UDP to the agent (6831)
//! cargo run --example jaeger -- --http            # over HTTP to the collector (14268)
//! ```
//!
//! Other addresses: `JAEGER_AGENT`, `JAEGER_COLLECTOR` and `JAEGER_QUERY`
//! (host:port each).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use minitrace::collector::{Config, SpanContext};
use minitrace::prelude::*;
use minitrace_jaeger::JaegerReporter;

fn addr(variable: &str, default: &str) -> SocketAddr {
    let value = std::env::var(variable).unwrap_or_else(|_| default.to_string());
    value.parse().unwrap_or_else(|_| panic!("{variable}={value:?} is not an ip:port"))
}

/// A request handler with a little of everything: nested local spans,
/// properties, events and a span on another thread.
fn handle_request(user: u32) {
    let _guard =
        LocalSpan::enter_with_local_parent("handle_request").with_property(|| ("user", user.to_string()));
    {
        let _span = LocalSpan::enter_with_local_parent("authenticate");
        std::thread::sleep(Duration::from_millis(2));
    }
    let rows = {
        let _span = LocalSpan::enter_with_local_parent("query").with_property(|| ("table", "orders"));
        for attempt in 1..=2 {
            let _attempt = LocalSpan::enter_with_local_parent("attempt")
                .with_property(|| ("attempt", attempt.to_string()));
            std::thread::sleep(Duration::from_millis(3));
            if attempt == 1 {
                Event::add_to_local_parent("retry", || [("reason".into(), "timeout".into())]);
            }
        }
        42
    };
    let _span = LocalSpan::enter_with_local_parent("render").with_property(|| ("rows", rows.to_string()));
    std::thread::sleep(Duration::from_millis(1));
}

/// Asks Jaeger's query API how many spans of `trace` it holds.
fn spans_in_jaeger(query: SocketAddr, trace: &str) -> Option<usize> {
    let mut stream = TcpStream::connect_timeout(&query, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET /api/traces/{trace} HTTP/1.0\r\nHost: {query}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.starts_with("HTTP/1.0 200").then(|| answer.matches("\"operationName\"").count())
}

fn main() {
    let over_http = std::env::args().any(|arg| arg == "--http");
    let query = addr("JAEGER_QUERY", "127.0.0.1:16686");
    let reporter = if over_http {
        JaegerReporter::http(addr("JAEGER_COLLECTOR", "127.0.0.1:14268"), "minitrace-example")
    } else {
        JaegerReporter::new(addr("JAEGER_AGENT", "127.0.0.1:6831"), "minitrace-example")
            .expect("a UDP socket for the agent")
    };
    let stats = reporter.stats();
    let reporter = reporter.with_process_tag("example", "examples/jaeger.rs");
    minitrace::set_reporter(reporter, Config::default());

    let context = SpanContext::random();
    {
        let root = Span::root("checkout", context)
            .with_property(|| ("transport", if over_http { "http" } else { "udp" }));
        let worker = Span::enter_with_parent("send confirmation email", &root);
        let email = std::thread::spawn(move || {
            let _worker = worker;
            std::thread::sleep(Duration::from_millis(5));
        });
        {
            let _guard = root.set_local_parent();
            for user in 0..3 {
                handle_request(user);
            }
        }
        email.join().unwrap();
    }
    minitrace::flush();
    // The reporter's sender thread may still be waiting for the answers.
    stats.wait_for_delivery(std::time::Duration::from_secs(10));

    let sent = stats.get();
    let trace = context.trace_id.to_string();
    println!(
        "sent {} spans in {} messages ({} lost)",
        sent.spans_sent, sent.messages_sent, sent.spans_failed
    );
    println!("trace: http://{query}/trace/{trace}");

    // Jaeger stores spans a moment after they arrive.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match spans_in_jaeger(query, &trace) {
            Some(spans) if spans as u64 >= sent.spans_sent => {
                println!("Jaeger has all {spans} spans of it");
                break;
            }
            found if Instant::now() > deadline => {
                println!("Jaeger at {query} has {} spans of it so far", found.unwrap_or(0));
                break;
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}
