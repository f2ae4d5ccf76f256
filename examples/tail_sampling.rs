//! Tail (latency-based) sampling: trace *every* request, report only the
//! slow ones.
//!
//! `cargo run --release --example tail_sampling`
//!
//! Head sampling decides at the start of a request whether to trace it, so
//! the one slow request in a thousand is usually not among those traced.
//! Here every request is traced in full, and the collector decides when the
//! root span finishes: with [`Config::report_slow_traces_only`] a trace is
//! reported only if its root lasted at least the threshold; the others are
//! discarded whole on the collector thread and counted in
//! `minitrace::collector::stats()` as sampled out. Tracing a fast request
//! costs only its spans' recording; reporting is paid for the slow ones
//! alone.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use minitrace::collector::Config;
use minitrace::prelude::*;

const REQUESTS: u64 = 2_000;
const THRESHOLD: Duration = Duration::from_millis(1);

/// A request of three steps. One in 500 (key 250) misses the cache and
/// waits 2 ms for the disk; the others take a few microseconds.
fn handle(request: u64) {
    let root = Span::root("request", SpanContext::random()).with_property(|| ("id", request.to_string()));
    let _guard = root.set_local_parent();
    let key = parse(request);
    let value = lookup(key);
    encode(value);
}

#[trace(short_name = true)]
fn parse(request: u64) -> u64 {
    std::hint::black_box(request % 500)
}

#[trace(short_name = true, properties = { "key": "{key}" })]
fn lookup(key: u64) -> u64 {
    if key == 250 {
        read_from_disk(key)
    } else {
        key * 2
    }
}

#[trace(name = "read from disk")]
fn read_from_disk(key: u64) -> u64 {
    Event::add_to_local_parent("cache miss", || [("key".into(), key.to_string().into())]);
    std::thread::sleep(Duration::from_millis(2));
    key * 2
}

#[trace(short_name = true)]
fn encode(value: u64) -> String {
    value.to_string()
}

fn main() {
    let (reporter, traces) = support::TreePrinter::new();
    minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(THRESHOLD));

    let start = Instant::now();
    for request in 0..REQUESTS {
        handle(request);
    }
    let elapsed = start.elapsed();
    minitrace::flush();

    let stats = minitrace::collector::stats();
    println!("traced {REQUESTS} requests in {elapsed:?}");
    println!(
        "reported {} traces slower than {THRESHOLD:?} ({} spans); sampled out {} spans of fast traces; \
         dropped {}",
        traces.load(Ordering::Relaxed),
        stats.spans_reported,
        stats.spans_sampled_out,
        stats.dropped()
    );
    println!("{stats:#?}");
}
