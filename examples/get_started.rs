//! The smallest useful program: trace two functions under one request and
//! print the finished spans.
//!
//! `cargo run --release --example get_started`
//!
//! An application turns on minitrace's `enable` feature (libraries depend on
//! minitrace without it, so that their spans cost nothing unless the
//! application asks for them):
//!
//! ```toml
//! [dependencies]
//! minitrace = { version = "0.6", features = ["enable"] }
//! ```
//!
//! Three steps: set a reporter, start a root span for the request and make it
//! the thread's local parent, and flush before the program exits. Every
//! `#[trace]` function called meanwhile records a span under it.

use minitrace::collector::{Config, ConsoleReporter};
use minitrace::prelude::*;

/// A span named after the function's path: `get_started::parse`.
#[trace]
fn parse(input: &str) -> Vec<u64> {
    input.split_whitespace().filter_map(|word| word.parse().ok()).collect()
}

/// A span named `sum`, with a property formatted from the argument (only
/// when the span is recorded).
#[trace(short_name = true, properties = { "numbers": "{numbers:?}" })]
fn sum(numbers: &[u64]) -> u64 {
    numbers.iter().sum()
}

fn main() {
    // 1. Where finished spans go: here, printed to standard error. The
    //    reporter runs on minitrace's own collector thread.
    minitrace::set_reporter(ConsoleReporter, Config::default());

    {
        // 2. A trace per request: a root span, made the local parent of
        //    everything this thread records until `_guard` is dropped.
        let root = Span::root("request", SpanContext::random());
        let _guard = root.set_local_parent();

        let total = sum(&parse("1 2 3 4"));
        println!("total = {total}");
    } // The guard and then the root end here: the trace is complete.

    // 3. Wait until the collector has reported everything.
    minitrace::flush();
}
