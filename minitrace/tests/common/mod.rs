//! One `TestReporter` per test process (the reporter is global), and
//! helpers that pick one trace's records out of everything reported.

#![allow(dead_code)]

pub mod shapes;

use std::sync::{mpsc, Arc, OnceLock};

use parking_lot::Mutex;

use minitrace::collector::{Config, SpanRecord, TestReporter, TraceId};
use minitrace::util::tree::tree_str_from_span_records;

/// A new root in a trace of its own (setting the reporter up if needed).
pub fn new_root(name: &'static str) -> (minitrace::Span, TraceId) {
    reported();
    let context = minitrace::collector::SpanContext::random();
    (minitrace::Span::root(name, context), context.trace_id)
}

pub fn reported() -> Arc<Mutex<Vec<SpanRecord>>> {
    static SPANS: OnceLock<Arc<Mutex<Vec<SpanRecord>>>> = OnceLock::new();
    SPANS
        .get_or_init(|| {
            let (reporter, spans) = TestReporter::new();
            minitrace::set_reporter(reporter, Config::default());
            spans
        })
        .clone()
}

/// Flushes, then returns the records of `trace_id`.
pub fn trace(trace_id: TraceId) -> Vec<SpanRecord> {
    let spans = reported();
    minitrace::flush();
    let all = spans.lock();
    all.iter().filter(|record| record.trace_id == trace_id).cloned().collect()
}

pub fn tree(trace_id: TraceId) -> String {
    tree_str_from_span_records(trace(trace_id))
}

/// Every parent id names a span of the trace, except the root's.
pub fn assert_linked<'a>(records: impl IntoIterator<Item = &'a SpanRecord>) {
    let records: Vec<&SpanRecord> = records.into_iter().collect();
    let ids: std::collections::HashSet<_> = records.iter().map(|r| r.span_id).collect();
    assert_eq!(ids.len(), records.len(), "duplicate span ids");
    let roots = records.iter().filter(|r| !ids.contains(&r.parent_id)).count();
    assert_eq!(roots, 1, "expected exactly one root in {records:#?}");
}

/// Runs `threads` threads in a ring: thread `i` gets the sender of channel
/// `i` and the receiver of channel `i + 1` (wrapping), so each hands things
/// to a neighbour. Returns what each returned, in order.
pub fn in_a_ring<T: Send + 'static, R: Send + 'static>(
    threads: usize,
    work: impl Fn(usize, mpsc::Sender<T>, mpsc::Receiver<T>) -> R + Send + Clone + 'static,
) -> Vec<R> {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads).map(|_| mpsc::channel()).unzip();
    let mut receivers: Vec<Option<_>> = receivers.into_iter().map(Some).collect();
    let workers: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(i, sender)| {
            let (receiver, work) = (receivers[(i + 1) % threads].take().unwrap(), work.clone());
            std::thread::spawn(move || work(i, sender, receiver))
        })
        .collect();
    workers.into_iter().map(|worker| worker.join().unwrap()).collect()
}
