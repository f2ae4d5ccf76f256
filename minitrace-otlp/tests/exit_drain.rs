//! A program that calls `minitrace::flush()` last, then exits, loses
//! nothing that its sender thread still holds: the exit waits for it.

use std::process::Command;
use std::time::Duration;

use minitrace::collector::Config;
use minitrace::prelude::*;
use minitrace_delivery_testkit::{Answer, Server};
use minitrace_otlp::OtlpReporter;

const URL: &str = "EXIT_DRAIN_URL";

/// The program: run by the test below in a process of its own, as
/// `exit_drain child`; a no-op in any other run.
#[test]
fn child() {
    let Ok(url) = std::env::var(URL) else { return };
    let reporter = OtlpReporter::builder().env(|_| None).endpoint(url).build().unwrap();
    minitrace::set_reporter(reporter, Config::default());
    drop(Span::root("last words", SpanContext::random()));
    minitrace::flush();
    // At once, as `main` returning would: the retry is still to come.
    std::process::exit(0);
}

#[test]
fn the_exit_delivers_what_is_still_queued() {
    // The first try is answered 503 with a retry in 1 s: the body is still
    // the sender thread's when the program exits.
    let busy = Answer::Status(503, vec![("retry-after", "1".to_owned())], Vec::new());
    let server = Server::start(vec![busy]);
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--test-threads", "1"])
        .env(URL, server.url())
        .status()
        .unwrap();
    assert!(status.success());
    let received = server.received();
    assert_eq!(received.len(), 2, "the retry was made before the exit");
    assert_eq!(received[0].body, received[1].body);
    assert!(received[1].at.duration_since(received[0].at) >= Duration::from_millis(900));
}
