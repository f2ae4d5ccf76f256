//! 8 threads × ~100 000 spans, with `Span`s handed between threads and
//! batches of local spans mounted under several parents: every span is
//! reported exactly once or counted as dropped, and every reported parent id
//! exists in its trace.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;

use minitrace::local::{LocalCollector, LocalSpan};
use minitrace::prelude::*;

const THREADS: usize = 8;
const ROOTS_PER_THREAD: usize = 1_000;
const LOCAL_UNDER_ROOT: usize = 50;
const LOCAL_UNDER_HANDED_OFF: usize = 20;
const BATCH: usize = 10;
const BATCH_PARENTS: usize = 3;
/// root + its local spans + the handed-off child + its local spans + the
/// batch under each of its parents (the root and two children).
const RECORDS_PER_ROOT: usize = 1 + LOCAL_UNDER_ROOT + 1 + LOCAL_UNDER_HANDED_OFF + 2 + BATCH * BATCH_PARENTS;

fn produce(sender: mpsc::Sender<Span>, receiver: mpsc::Receiver<Span>) -> Vec<TraceId> {
    let mut traces = Vec::with_capacity(ROOTS_PER_THREAD);
    let finish_handed_off = |child: Span| {
        let _guard = child.set_local_parent();
        for _ in 0..LOCAL_UNDER_HANDED_OFF {
            let _span = LocalSpan::enter_with_local_parent("on neighbour").with_property(|| ("k", "v"));
        }
    };
    for _ in 0..ROOTS_PER_THREAD {
        let context = SpanContext::random();
        traces.push(context.trace_id);
        let root = Span::root("root", context);
        sender.send(Span::enter_with_parent("handed off", &root)).unwrap();

        let collector = LocalCollector::start();
        for _ in 0..BATCH {
            let _span = LocalSpan::enter_with_local_parent("batched");
        }
        let batch = collector.collect();
        let (a, b) = (Span::enter_with_parent("a", &root), Span::enter_with_parent("b", &root));
        for parent in [&root, &a, &b] {
            parent.push_child_spans(batch.clone());
        }
        drop((a, b));
        {
            let _guard = root.set_local_parent();
            for depth in 0..LOCAL_UNDER_ROOT {
                let _span = LocalSpan::enter_with_local_parent(if depth % 2 == 0 { "even" } else { "odd" });
            }
        }
        drop(root);
        while let Ok(child) = receiver.try_recv() {
            finish_handed_off(child);
        }
    }
    drop(sender);
    for child in receiver {
        finish_handed_off(child);
    }
    traces
}

#[test]
fn every_span_is_reported_once_or_counted() {
    let spans = common::reported();
    let before = minitrace::collector::stats();

    // Each thread sends its handed-off children to a neighbour.
    let traces: HashSet<TraceId> =
        common::in_a_ring(THREADS, |_, sender, receiver| produce(sender, receiver))
            .into_iter()
            .flatten()
            .collect();
    minitrace::flush();

    let after = minitrace::collector::stats();
    let dropped = after.dropped() - before.dropped();
    let all = spans.lock();
    let mut by_trace: HashMap<TraceId, Vec<&SpanRecord>> = HashMap::new();
    for record in all.iter().filter(|r| traces.contains(&r.trace_id)) {
        by_trace.entry(record.trace_id).or_default().push(record);
    }
    let reported: usize = by_trace.values().map(Vec::len).sum();
    let expected = THREADS * ROOTS_PER_THREAD * RECORDS_PER_ROOT;
    println!("expected {expected}, reported {reported}, dropped {dropped}");
    assert_eq!(reported as u64 + dropped, expected as u64);

    let mut whole = 0;
    for records in by_trace.values() {
        // Duplicates are a bug whether or not anything was dropped.
        let ids: HashSet<SpanId> = records.iter().map(|r| r.span_id).collect();
        assert_eq!(ids.len(), records.len(), "a span reported twice");
        if dropped == 0 {
            assert_eq!(records.len(), RECORDS_PER_ROOT);
        }
        // A dropped span may be some reported span's parent, so the links
        // are checked in every trace that lost nothing: under this load
        // some traces usually lose spans, but most arrive whole.
        if records.len() == RECORDS_PER_ROOT {
            // Only the root may have a parent outside the trace.
            common::assert_linked(records.iter().copied());
            whole += 1;
        }
    }
    println!("{whole} of {} traces arrived whole, their links checked", by_trace.len());
    assert!(whole > 0, "no trace arrived whole: the links were never checked");
}
