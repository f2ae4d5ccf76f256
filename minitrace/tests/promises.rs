//! The core's promises under concurrency, each as the reproduction that
//! once broke it: an event added through the local parent on another
//! thread arrives on its span; a child dropped just after its root begins
//! after it; a trace whose spans ended before its root is handed to the
//! reporter in one `report()` call. (A slow-trace window holding other
//! requests' spans is `slow_window.rs`.)

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use minitrace::collector::{Config, Reporter, SpanRecord, TraceId};
use minitrace::prelude::*;

/// The clock's error bound between threads, in nanoseconds: what a child
/// may appear to begin before its parent, or end after it. Spans start on
/// the cheaper unordered reading, which may be taken up to what the CPU had
/// in flight early (a few hundred cycles), and the per-core offsets of the
/// TSC are calibrated to well under this (minstant's own tests).
const CLOCK_ERROR_NS: u64 = 1_000;

/// Every report() call's records, in order.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<Vec<SpanRecord>>>>);

impl Reporter for Calls {
    fn report(&mut self, spans: &[SpanRecord]) {
        if !spans.is_empty() {
            self.0.lock().unwrap().push(spans.to_vec());
        }
    }
}

fn calls() -> &'static Calls {
    static CALLS: OnceLock<Calls> = OnceLock::new();
    CALLS.get_or_init(|| {
        let calls = Calls::default();
        minitrace::set_reporter(calls.clone(), Config::default());
        calls
    })
}

/// The records of `trace`, with the index of the call that delivered each.
fn delivered(trace: TraceId) -> Vec<(usize, SpanRecord)> {
    minitrace::flush();
    let calls = calls().0.lock().unwrap();
    calls
        .iter()
        .enumerate()
        .flat_map(|(call, records)| {
            records.iter().filter(|r| r.trace_id == trace).map(move |r| (call, r.clone()))
        })
        .collect()
}

/// Issue 33, 1: all 200 `child` spans must carry both events.
#[test]
fn an_event_through_the_local_parent_on_another_thread_reaches_its_span() {
    calls();
    let mut traces = Vec::new();
    for _ in 0..200 {
        let context = SpanContext::random();
        let root = Span::root("root", context);
        let child = Span::enter_with_parent("child", &root);
        std::thread::spawn(move || {
            let _guard = child.set_local_parent();
            Event::add_to_local_parent("via local parent", || []);
            child.add_event("via the span", || [("k", "v")]);
        })
        .join()
        .unwrap();
        drop(root);
        traces.push(context.trace_id);
    }
    for trace in traces {
        let records = delivered(trace);
        let (_, child) = records.iter().find(|(_, record)| record.name == "child").expect("the child");
        let mut names: Vec<&str> = child.events.iter().map(|event| event.name.as_ref()).collect();
        names.sort();
        assert_eq!(names, ["via local parent", "via the span"], "trace {trace:?}");
    }
}

/// Issue 33, 2: a trace opened in an earlier collector cycle, with a child
/// dropped just after its root.
#[test]
fn a_child_dropped_just_after_its_root_begins_after_it() {
    calls();
    let mut worst = 0i128;
    for _ in 0..300 {
        let context = SpanContext::random();
        let root = Span::root("root", context);
        // A first part reaches the collector in an earlier cycle.
        drop(Span::enter_with_parent("early", &root));
        minitrace::flush();
        let late = Span::enter_with_parent("late", &root);
        drop(root);
        drop(late);
        let records: Vec<SpanRecord> = delivered(context.trace_id).into_iter().map(|(_, r)| r).collect();
        let root = records.iter().find(|r| r.name == "root").unwrap();
        for child in records.iter().filter(|r| r.name != "root") {
            let early_by = i128::from(root.begin_time_unix_ns) - i128::from(child.begin_time_unix_ns);
            worst = worst.max(early_by);
            assert!(
                early_by <= i128::from(CLOCK_ERROR_NS),
                "{} begins {early_by} ns before its root",
                child.name
            );
        }
    }
    eprintln!("worst child start before its root: {worst} ns (bound {CLOCK_ERROR_NS} ns)");
}

/// Issue 33, 3: spans ended on a joined thread, then the root: one call.
#[test]
fn a_trace_whose_spans_ended_before_its_root_is_reported_in_one_call() {
    calls();
    let mut traces = Vec::new();
    for _ in 0..2_000 {
        let context = SpanContext::random();
        let root = Span::root("root", context);
        let child = Span::enter_with_parent("on a joined thread", &root);
        std::thread::spawn(move || {
            let _guard = child.set_local_parent();
            let _local = minitrace::local::LocalSpan::enter_with_local_parent("local there");
        })
        .join()
        .unwrap();
        {
            let _guard = root.set_local_parent();
            let _local = minitrace::local::LocalSpan::enter_with_local_parent("local here");
        }
        drop(root);
        traces.push(context.trace_id);
    }
    minitrace::flush();
    let mut split = HashMap::new();
    for trace in &traces {
        let records = delivered(*trace);
        let calls: HashSet<usize> = records.iter().map(|(call, _)| *call).collect();
        assert_eq!(records.len(), 4, "trace {trace:?}: {records:?}");
        if calls.len() != 1 {
            split.insert(*trace, calls);
        }
    }
    assert!(
        split.is_empty(),
        "{} of {} traces split over several calls: {split:?}",
        split.len(),
        traces.len()
    );
}

/// Roots moved to short-lived threads, each the only message its thread
/// ever sends, while the collector harvests: none is lost (a thread that
/// exited was once let go before its last message was taken).
#[test]
fn roots_ended_on_threads_that_exit_at_once_all_arrive() {
    calls();
    let mut traces = Vec::new();
    for _ in 0..5_000 {
        let context = SpanContext::random();
        let root = Span::root("moved root", context);
        std::thread::spawn(move || drop(root)).join().unwrap();
        traces.push(context.trace_id);
    }
    minitrace::flush();
    let calls = calls().0.lock().unwrap();
    let arrived: HashSet<TraceId> = calls.iter().flatten().map(|record| record.trace_id).collect();
    let lost = traces.iter().filter(|trace| !arrived.contains(trace)).count();
    assert_eq!(lost, 0, "{lost} of {} roots lost", traces.len());
}
