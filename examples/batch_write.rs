//! One piece of work done for several requests at once, shown in each
//! request's trace: a group commit. Writers hand their writes to a commit
//! thread, which appends a whole batch and syncs it once; the local spans
//! of that work are collected once with a `LocalCollector` and mounted under
//! every waiting request's span with `Span::push_child_spans`.
//!
//! `cargo run --release --example batch_write`
//!
//! The recorded spans are shared, not copied per request: mounting a batch
//! under another parent costs one message to the collector.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use minitrace::collector::Config;
use minitrace::local::LocalCollector;
use minitrace::prelude::*;

/// A write waiting to be committed, with the span that waits for it.
struct Write {
    key: u64,
    value: String,
    waiting: Span,
    done: mpsc::Sender<()>,
}

/// A client request: runs on its own thread, and waits for its write to be
/// committed by the commit thread.
fn put(key: u64, commits: &mpsc::Sender<Write>) {
    let root = Span::root("put", SpanContext::random()).with_property(|| ("key", key.to_string()));
    let _guard = root.set_local_parent();
    let value = encode(key);
    let (done, committed) = mpsc::channel();
    // A `Span` can be handed to another thread: the commit thread mounts
    // the batch's spans under it.
    let waiting = Span::enter_with_local_parent("wait for commit");
    commits.send(Write { key, value, waiting, done }).unwrap();
    committed.recv().unwrap();
}

#[trace(short_name = true)]
fn encode(key: u64) -> String {
    format!("value of {key}")
}

/// The commit thread: takes up to `MAX_BATCH` writes that arrive close
/// together and commits them at once.
fn commit_loop(writes: mpsc::Receiver<Write>) -> usize {
    const MAX_BATCH: usize = 4;
    let mut batches = 0;
    while let Ok(first) = writes.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match writes.recv_timeout(Duration::from_micros(500)) {
                Ok(write) => batch.push(write),
                Err(_) => break,
            }
        }

        // Record the commit's local spans without a parent...
        let collector = LocalCollector::start();
        commit(&batch);
        let spans = collector.collect();
        // ...and mount the same spans under every request of the batch.
        for write in batch {
            write.waiting.push_child_spans(spans.clone());
            drop(write.waiting);
            write.done.send(()).unwrap();
        }
        batches += 1;
    }
    batches
}

#[trace(name = "commit batch")]
fn commit(batch: &[Write]) {
    minitrace::local::LocalSpan::add_properties(|| {
        let keys: Vec<String> = batch.iter().map(|write| write.key.to_string()).collect();
        [("writes", batch.len().to_string()), ("keys", keys.join(","))]
    });
    append(batch);
    fsync();
}

#[trace(short_name = true)]
fn append(batch: &[Write]) {
    let bytes: usize = batch.iter().map(|write| write.value.len()).sum();
    minitrace::local::LocalSpan::add_property(|| ("bytes", bytes.to_string()));
    thread::sleep(Duration::from_micros(100 * batch.len() as u64));
}

#[trace(short_name = true)]
fn fsync() {
    thread::sleep(Duration::from_micros(500));
}

fn main() {
    let (reporter, traces) = support::TreePrinter::new();
    minitrace::set_reporter(reporter, Config::default());

    let (commits, writes) = mpsc::channel();
    let committer = thread::spawn(move || commit_loop(writes));
    thread::scope(|scope| {
        for key in 0..6 {
            let commits = commits.clone();
            scope.spawn(move || put(key, &commits));
        }
    });
    drop(commits);
    let batches = committer.join().unwrap();

    minitrace::flush();
    println!(
        "committed 6 puts in {batches} batches; printed {} traces",
        traces.load(std::sync::atomic::Ordering::Relaxed)
    );
}
