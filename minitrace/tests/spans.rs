//! The shape of recorded traces: local and thread-safe spans, properties,
//! events, batches mounted under several parents, and futures.

mod common;

use std::time::{Duration, Instant};

use common::{assert_linked, new_root, reported, trace, tree};
use minitrace::local::{LocalCollector, LocalSpan};
use minitrace::prelude::*;

#[test]
fn local_spans_nest_under_the_local_parent() {
    let (root, trace_id) = new_root("root");
    {
        let _guard = root.set_local_parent();
        let _a = LocalSpan::enter_with_local_parent("a").with_property(|| ("k", "v"));
        {
            let _b = LocalSpan::enter_with_local_parent("b");
            LocalSpan::add_property(|| ("on", "b"));
        }
        let _c = LocalSpan::enter_with_local_parent("c");
    }
    drop(root);
    assert_eq!(
        tree(trace_id),
        r#"
root []
    a [("k", "v")]
        b [("on", "b")]
        c []
"#
    );
    assert_linked(&trace(trace_id));
}

#[test]
fn thread_safe_spans_cross_threads_and_keep_their_parents() {
    let (root, trace_id) = new_root("root");
    let child = Span::enter_with_parent("child", &root).with_property(|| ("thread", "worker"));
    std::thread::spawn(move || {
        let _guard = child.set_local_parent();
        let _local = LocalSpan::enter_with_local_parent("local on worker");
        let _grandchild = Span::enter_with_local_parent("grandchild");
    })
    .join()
    .unwrap();
    drop(root);
    assert_eq!(
        tree(trace_id),
        r#"
root []
    child [("thread", "worker")]
        local on worker []
            grandchild []
"#
    );
}

#[test]
fn events_attach_to_their_spans() {
    let (root, trace_id) = new_root("root");
    Event::add_to_parent("on root", &root, || [("k".into(), "v".into())]);
    {
        let _guard = root.set_local_parent();
        let _local = LocalSpan::enter_with_local_parent("local");
        Event::add_to_local_parent("on local", || []);
    }
    drop(root);
    let records = trace(trace_id);
    let events_of = |name: &str| {
        let record = records.iter().find(|r| r.name == name).unwrap();
        record.events.iter().map(|e| e.name.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(events_of("root"), ["on root"]);
    assert_eq!(events_of("local"), ["on local"]);
}

#[test]
fn a_batch_of_local_spans_mounts_under_several_requests() {
    let collector = LocalCollector::start();
    {
        let _write = LocalSpan::enter_with_local_parent("write");
        let _sync = LocalSpan::enter_with_local_parent("fsync");
    }
    let batch = collector.collect();
    let (a, trace_a) = new_root("put a");
    let (b, trace_b) = new_root("put b");
    a.push_child_spans(batch.clone());
    b.push_child_spans(batch.clone());
    // Twice under one trace: the ids stay unique.
    let inner = Span::enter_with_parent("inner", &b);
    inner.push_child_spans(batch);
    drop((inner, a, b));
    assert_eq!(tree(trace_a), "\nput a []\n    write []\n        fsync []\n");
    assert_eq!(
        tree(trace_b),
        "\nput b []\n    inner []\n        write []\n            fsync []\n    write []\n        fsync []\n"
    );
    assert_linked(&trace(trace_b));
}

#[test]
fn a_span_with_several_parents_is_reported_under_each() {
    let (a, trace_a) = new_root("a");
    let (b, trace_b) = new_root("b");
    drop(Span::enter_with_parents("shared", [&a, &b]));
    drop((a, b));
    assert_eq!(tree(trace_a), "\na []\n    shared []\n");
    assert_eq!(tree(trace_b), "\nb []\n    shared []\n");
}

/// How far a span's length may differ from std's clock over the same
/// interval: 1 000 ppm (the TSC's calibrated rate is within ~20 ppm of
/// `CLOCK_MONOTONIC`, which NTP slews by at most 500 ppm) plus 1 µs (the
/// order and rounding of the reads).
fn slack(interval: Duration) -> i128 {
    nanos(interval / 1000 + Duration::from_micros(1))
}

fn nanos(interval: Duration) -> i128 {
    interval.as_nanos() as i128
}

#[test]
fn times_match_readings_taken_around_and_inside_the_spans() {
    // std's clock is read on this thread around and inside each span: a
    // loaded machine that delays this thread only widens the outer
    // intervals, so the bounds below hold however long each step takes.
    reported();
    let wall_before = std::time::SystemTime::now();
    let before_root = Instant::now();
    let (root, trace_id) = new_root("root");
    let (before_child, inside_begin, inside_end, after_child);
    {
        let _guard = root.set_local_parent();
        before_child = Instant::now();
        let child = LocalSpan::enter_with_local_parent("sleep");
        inside_begin = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        inside_end = Instant::now();
        drop(child);
        after_child = Instant::now();
    }
    drop(root);
    let after_root = Instant::now();

    let records = trace(trace_id);
    let root = records.iter().find(|r| r.name == "root").unwrap();
    let child = records.iter().find(|r| r.name == "sleep").unwrap();
    let within = |what: &str, got: i128, low: Duration, high: Duration| {
        let (low, high) = (nanos(low) - slack(low), nanos(high) + slack(high));
        assert!((low..=high).contains(&got), "{what}: {got} ns, not within {low}..={high} ns");
    };
    let (root_begin, child_begin) =
        (i128::from(root.begin_time_unix_ns), i128::from(child.begin_time_unix_ns));
    let (root_end, child_end) =
        (root_begin + i128::from(root.duration_ns), child_begin + i128::from(child.duration_ns));
    // The child contains the sleep and lies within the readings around it.
    within("child's length", child_end - child_begin, inside_end - inside_begin, after_child - before_child);
    // The root contains the child's outer readings and lies within its own.
    within("root's length", root_end - root_begin, after_child - before_child, after_root - before_root);
    // Both are converted with the trace's one anchor: their offsets are as exact as their lengths.
    within(
        "child's start after the root's",
        child_begin - root_begin,
        Duration::ZERO,
        inside_begin - before_root,
    );
    within("root's end after the child's", root_end - child_end, Duration::ZERO, after_root - inside_end);
    // The anchor reads the counter before the wall clock, so a delay
    // between the two makes timestamps late, never early: only this side
    // of the wall clock is exact (the other is late by whatever preempted
    // the collector's thread between its two reads).
    let early = nanos(wall_before.duration_since(std::time::UNIX_EPOCH).unwrap()) - root_begin;
    assert!(early <= slack(after_root - before_root), "the root starts {early} ns before the wall clock did");
}

#[test]
fn remote_parents_and_w3c_context_are_kept() {
    reported();
    let remote =
        SpanContext::decode_w3c_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            .unwrap();
    let root = Span::root("continued", remote);
    let context = SpanContext::from_span(&root).unwrap();
    assert_eq!(context.trace_id, remote.trace_id);
    {
        let _guard = root.set_local_parent();
        assert_eq!(SpanContext::current_local_parent().unwrap().span_id, context.span_id);
    }
    drop(root);
    let records = trace(remote.trace_id);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].parent_id, remote.span_id);
}

#[test]
fn unsampled_contexts_and_cancelled_roots_report_nothing() {
    reported();
    // A caller's unsampled traceparent: the request runs under a no-op root.
    let header =
        SpanContext::new(TraceId::random(), SpanId::random()).encode_w3c_traceparent_with_sampled(false);
    let (unsampled, sampled) = SpanContext::decode_w3c_traceparent_with_sampled(&header).unwrap();
    assert!(!sampled);
    let root = if sampled { Span::root("unsampled", unsampled) } else { Span::noop() };
    assert!(root.elapsed().is_none());
    drop(root);

    let (mut cancelled, trace_id) = new_root("cancelled");
    drop(Span::enter_with_parent("child", &cancelled));
    cancelled.cancel();
    drop(cancelled);
    assert!(trace(trace_id).is_empty());
    assert!(trace(unsampled.trace_id).is_empty());
}

#[test]
fn futures_are_traced_across_polls_and_threads() {
    let (root, trace_id) = new_root("root");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    runtime.block_on(
        async {
            // Pending once, then ready: a local span per poll. (A short
            // sleep was ready at its first poll when the thread was
            // preempted past its deadline, as on a loaded machine.)
            tokio::task::yield_now().enter_on_poll("polled").await;
            let _local = LocalSpan::enter_with_local_parent("after await");
            let child = Span::enter_with_local_parent("spawned");
            // Recorded on whichever worker thread polls the spawned task.
            let spawned = async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _local = LocalSpan::enter_with_local_parent("in spawned");
            };
            tokio::spawn(spawned.in_span(child)).await.unwrap();
        }
        .in_span(Span::enter_with_parent("task", &root)),
    );
    drop(root);
    let text = tree(trace_id);
    let expected = "\nroot []\n    task []\n        after await []\n            spawned []\n                in spawned []\n        polled []\n        polled []\n";
    assert!(text.starts_with(expected), "{text}");
    // A spurious wake-up may add polls, never anything else.
    assert!(text[expected.len()..].lines().all(|line| line == "        polled []"), "{text}");
}

#[test]
fn cancelling_a_child_reparents_what_was_recorded_under_it() {
    let (root, trace_id) = new_root("root");
    let mut child = Span::enter_with_parent("cancelled", &root);
    {
        let _guard = child.set_local_parent();
        let _local = LocalSpan::enter_with_local_parent("under cancelled");
    }
    child.cancel();
    drop(child);
    drop(root);
    let records = trace(trace_id);
    assert_linked(&records);
    let orphan = records.iter().find(|r| r.name == "under cancelled").unwrap();
    assert!(orphan.properties.iter().any(|(k, _)| k == "minitrace.reparented"));
}

#[test]
fn an_event_added_after_the_root_finished_stays_on_its_span() {
    let (root, trace_id) = new_root("root");
    let background = Span::enter_with_parent("background", &root);
    drop(root);
    common::trace(trace_id);
    Event::add_to_parent("retry", &background, || [("attempt".into(), "2".into())]);
    drop(background);
    let records = trace(trace_id);
    let background = records.iter().find(|r| r.name == "background").unwrap();
    assert_eq!(background.events.len(), 1);
    assert_eq!(background.events[0].name, "retry");
}

#[test]
fn events_inside_a_local_collector_are_kept() {
    let collector = LocalCollector::start();
    {
        let _span = LocalSpan::enter_with_local_parent("work");
        Event::add_to_local_parent("step done", || []);
    }
    let records = collector.collect().to_span_records(SpanContext::random());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].events[0].name, "step done");
}
