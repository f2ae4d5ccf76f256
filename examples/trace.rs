//! The main job: trace a small key-value service, threads and async tasks
//! alike, and print each request's trace as a tree with its timings.
//!
//! `cargo run --release --example trace`
//!
//! Every request is traced. A few are slow (a simulated cache miss that
//! goes to "disk"); the collector is configured to report only traces whose
//! root took at least 200 µs, so only those are printed, while the counters
//! at the end show how many fast ones were traced and not reported. The
//! flight recorder keeps every request meanwhile, fast or slow: the run
//! ends with the whole population's latency percentiles and slowest
//! requests, and a page (`target/trace-example/requests.html`) that plots
//! every request.
//!
//! The steps of a request are plain fns with `#[trace]`; the spans that
//! `#[trace]` cannot express (a root per request, one span with several
//! parents, a batch mounted under several requests) are written by hand.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use minitrace::collector::Config;
use minitrace::local::{LocalCollector, LocalSpan};
use minitrace::prelude::*;
use minitrace::recorder::FlightRecorder;
use minitrace_flight::Reader;
use minitrace_suite::busy_work;

mod support;

type Store = Arc<Mutex<HashMap<u64, u64>>>;

/// A synchronous request handled on a worker thread: parse, look up (with
/// an occasional slow miss), encode. The steps are `#[trace]` fns: each call
/// records a local span (a push each) under the request's root.
fn handle_get(store: &Store, key: u64) -> u64 {
    let root = Span::root("kv::get", SpanContext::random()).with_property(|| ("key", key.to_string()));
    let _guard = root.set_local_parent();
    parse();
    let value = lookup(store, key);
    encode();
    value
}

#[trace(short_name = true)]
fn parse() {
    busy_work(200);
}

#[trace(short_name = true)]
fn lookup(store: &Store, key: u64) -> u64 {
    let cached = store.lock().unwrap().get(&key).copied();
    cached.unwrap_or_else(|| read_from_disk(store, key))
}

#[trace(name = "read from disk")]
fn read_from_disk(store: &Store, key: u64) -> u64 {
    Event::add_to_local_parent("cache miss", || [("key".into(), key.to_string().into())]);
    std::thread::sleep(Duration::from_micros(300));
    store.lock().unwrap().insert(key, key * 2);
    key * 2
}

#[trace(short_name = true)]
fn encode() {
    busy_work(100);
}

/// An asynchronous batch write: the request's span follows the task across
/// `.await`s and threads; one disk write serves every key of the batch, so
/// its local spans are mounted under each request.
async fn handle_batch_put(keys: Vec<u64>) {
    let roots: Vec<Span> = keys
        .iter()
        .map(|key| Span::root("kv::put", SpanContext::random()).with_property(|| ("key", key.to_string())))
        .collect();
    // One span with every request as its parent: written by hand, as
    // `#[trace]` gives a span a single parent, the caller's.
    tokio::time::sleep(Duration::from_micros(100))
        .in_span(Span::enter_with_parents("wait for batch", &roots))
        .await;
    let collector = LocalCollector::start();
    write_batch(&keys);
    let batch = collector.collect();
    for root in &roots {
        root.push_child_spans(batch.clone());
    }
}

/// Recorded by the `LocalCollector` (which has no parent span): the spans
/// are mounted under the requests afterwards.
#[trace(name = "write batch")]
fn write_batch(keys: &[u64]) {
    LocalSpan::add_property(|| ("keys", keys.len().to_string()));
    std::thread::sleep(Duration::from_micros(250));
    fsync();
}

#[trace(short_name = true)]
fn fsync() {}

fn main() {
    minitrace::set_reporter(
        support::TreePrinter::new().0,
        Config::default().report_slow_traces_only(Duration::from_micros(200)),
    );
    // Every request kept, whatever its fate, for the population at the end.
    FlightRecorder::new().enable();

    let store: Store = Arc::default();
    let workers: Vec<_> = (0..2)
        .map(|worker| {
            let store = store.clone();
            std::thread::spawn(move || {
                // Keys repeat, so most lookups hit the cache and are fast.
                (0..200u64).map(|i| handle_get(&store, (i * 7 + worker) % 16)).sum::<u64>()
            })
        })
        .collect();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    runtime.block_on(async {
        let batches = (0..2u64)
            .map(|batch| tokio::spawn(handle_batch_put(vec![batch * 3, batch * 3 + 1, batch * 3 + 2])));
        for batch in batches.collect::<Vec<_>>() {
            batch.await.unwrap();
        }
    });
    let checksum: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    minitrace::flush();

    let stats = minitrace::collector::stats();
    let requests = 2 * 200 + 2 * 3;
    println!(
        "traced {requests} requests (checksum {checksum}); reported {} spans of the slow ones, \
         sampled out {} spans of fast ones, dropped {}",
        stats.spans_reported,
        stats.spans_sampled_out,
        stats.dropped()
    );
    if let Err(error) = show_every_request(Path::new("target/trace-example")) {
        eprintln!("no flight recorder page: {error}");
    }
}

/// The whole population, slow or not: the flight recorder's requests as a
/// dump, its summary, and a page that shows them all.
fn show_every_request(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let dump = minitrace_flight::dump_recorder(dir.join("requests.mtf"))?.into_inner();
    let summary = minitrace_view::summarize(Reader::new(BufReader::new(File::open(&dump)?))?)?;
    println!("\nevery request the flight recorder kept, fast or slow:\n{summary}");
    let page = dir.join("requests.html");
    let reader = Reader::new(BufReader::new(File::open(&dump)?))?;
    minitrace_view::render_page(
        reader,
        "minitrace: the trace example's requests",
        BufWriter::new(File::create(&page)?),
    )?;
    println!("dump: {}\npage: {} (open it in a browser)", dump.display(), page.display());
    Ok(())
}
