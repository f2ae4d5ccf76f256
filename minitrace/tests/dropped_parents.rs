//! Spans dropped at a full queue, for real: every reported trace still has
//! every parent it names (children of a dropped span are re-parented to the
//! root, as the README promises), a trace is reported only with its root,
//! and every span made is either reported or counted as dropped in
//! `stats()`.
//!
//! Two tests: producers far faster than a deliberately slow reporter,
//! overflowing their threads' queues as they will; and one exact case, a
//! queue filled on purpose while the collector waits, where the dropped
//! parent's child and the root travel in different queues and the root is
//! filed first.
//!
//! In the first test every other trace crosses two threads, so that its
//! parts travel in two queues and reach the collector in either order:
//!
//! ```text
//! root                    started on thread 1, ended on thread 2
//!   r.local               local span on thread 1
//!   a                     started on thread 1, ended on thread 2
//!     a.local             a batch of local spans on thread 1 ...
//!       a.local.leaf × 50
//!       a.local.span      ... and a thread-safe span under one of them
//!     b                   on thread 2
//!       b.local           local spans on thread 2
//!         b.local.inner
//! ```
//!
//! The batch under `a` is large, so that the queue's budget often runs out
//! in it while the smaller messages around it still fit: `a.local.span`
//! then arrives without its parent. The other traces stay on one thread.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use minitrace::collector::{Config, Reporter, SpanRecord, Stats};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

const THREADS: usize = 4;
const TRACES_PER_ROUND: usize = 5_000;
const LEAVES: usize = 50;
const SPANS_PER_TRACE: u64 = 8 + LEAVES as u64;
/// Rounds are repeated until one has dropped spans and re-parented some; a
/// round usually does both.
const MAX_ROUNDS: usize = 10;

/// What the checks need of a record.
struct Row {
    trace_id: TraceId,
    span_id: SpanId,
    parent_id: SpanId,
    name: String,
    reparented: bool,
}

/// Whether the reporter takes 5 ms per batch, so that the collector falls
/// far behind the producers and their queues fill.
static SLOW: AtomicBool = AtomicBool::new(false);
/// While closed (`true`), the reporter waits, and with it the collector.
static GATE: Mutex<bool> = Mutex::new(false);
static GATE_CHANGED: Condvar = Condvar::new();
/// Set by the reporter when it waits at the closed gate.
static WAITING: Mutex<bool> = Mutex::new(false);
static WAITING_CHANGED: Condvar = Condvar::new();

/// Keeps what it is given; slow, or held at the gate, as the test asks.
struct TestingReporter(Arc<Mutex<Vec<Row>>>);

impl Reporter for TestingReporter {
    fn report(&mut self, spans: &[SpanRecord]) {
        let mut closed = GATE.lock().unwrap();
        if *closed {
            *WAITING.lock().unwrap() = true;
            WAITING_CHANGED.notify_all();
            while *closed {
                closed = GATE_CHANGED.wait(closed).unwrap();
            }
        }
        drop(closed);
        if SLOW.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let rows = spans.iter().map(|record| Row {
            trace_id: record.trace_id,
            span_id: record.span_id,
            parent_id: record.parent_id,
            name: record.name.to_string(),
            reparented: record.properties.iter().any(|(key, _)| key == "minitrace.reparented"),
        });
        self.0.lock().unwrap().extend(rows);
    }
}

/// The reporter's rows (set up on first use), and the lock that keeps this
/// file's tests apart: they share the reporter and the counters.
fn setup() -> (MutexGuard<'static, ()>, Arc<Mutex<Vec<Row>>>) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    static ROWS: OnceLock<Arc<Mutex<Vec<Row>>>> = OnceLock::new();
    let serial = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let rows = ROWS.get_or_init(|| {
        let rows = Arc::new(Mutex::new(Vec::new()));
        minitrace::set_reporter(TestingReporter(rows.clone()), Config::default());
        rows
    });
    minitrace::flush();
    rows.lock().unwrap().clear();
    (serial, rows.clone())
}

fn set_gate(closed: bool) {
    *GATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = closed;
    GATE_CHANGED.notify_all();
}

/// Opens the gate when dropped, so that a failing test does not leave the
/// collector held for the next one.
struct OpenGateOnDrop;

impl Drop for OpenGateOnDrop {
    fn drop(&mut self) {
        set_gate(false);
    }
}

/// The batch of local spans under `a`, large, and a thread-safe span whose
/// parent is one of them: orphaned if the batch is dropped.
fn under_a(a: &Span) {
    let _guard = a.set_local_parent();
    let _local = LocalSpan::enter_with_local_parent("a.local");
    drop(Span::enter_with_local_parent("a.local.span"));
    for _ in 0..LEAVES {
        let _leaf = LocalSpan::enter_with_local_parent("a.local.leaf");
    }
}

/// `b` under `a`, with its local spans.
fn under_b(a: &Span) {
    let b = Span::enter_with_parent("b", a);
    let _guard = b.set_local_parent();
    let _local = LocalSpan::enter_with_local_parent("b.local");
    let _inner = LocalSpan::enter_with_local_parent("b.local.inner");
}

fn under_root(root: &Span) {
    let _guard = root.set_local_parent();
    let _local = LocalSpan::enter_with_local_parent("r.local");
}

/// Thread 1's part of a trace that crosses threads: its large batch is the
/// last it queues.
fn start_trace() -> (Span, Span) {
    let root = Span::root("root", SpanContext::random());
    let a = Span::enter_with_parent("a", &root);
    under_root(&root);
    under_a(&a);
    (root, a)
}

/// Thread 2's part: `b` and its local spans, then `a`, then the root.
fn finish_trace((root, a): (Span, Span)) {
    under_b(&a);
    drop(a);
    drop(root);
}

/// A trace on one thread, its large batch followed only by `a` and the
/// root, so that a budget spent in the batch often leaves them room.
fn whole_trace() {
    let root = Span::root("root", SpanContext::random());
    let a = Span::enter_with_parent("a", &root);
    under_root(&root);
    under_b(&a);
    under_a(&a);
    drop(a);
    drop(root);
}

fn produce(sender: mpsc::Sender<(Span, Span)>, receiver: mpsc::Receiver<(Span, Span)>) {
    for i in 0..TRACES_PER_ROUND {
        match i % 2 {
            0 => sender.send(start_trace()).unwrap(),
            _ => whole_trace(),
        }
        while let Ok(handed) = receiver.try_recv() {
            finish_trace(handed);
        }
    }
    drop(sender);
    receiver.into_iter().for_each(finish_trace);
}

/// One round: every thread starts `TRACES_PER_ROUND` traces and hands
/// every other one to the next thread to finish.
fn run_round() {
    common::in_a_ring(THREADS, |_, sender, receiver| produce(sender, receiver));
}

/// Flushes until the `made` spans are all reported or counted as dropped
/// since `before` (a flush waits 10 s at most: on a very slow machine the
/// slow reporter's backlog may need more); returns the counters then.
fn flush_all(made: u64, before: &Stats) -> Stats {
    for _ in 0..5 {
        minitrace::flush();
        let after = minitrace::collector::stats();
        let accounted = (after.spans_reported - before.spans_reported) + (after.dropped() - before.dropped());
        if accounted >= made {
            break;
        }
    }
    minitrace::collector::stats()
}

/// Checks the counters since `before` against `made`, and every reported
/// trace's links; returns how many records were re-parented.
fn check(rows: &[Row], made: u64, before: &Stats, after: &Stats) -> usize {
    let reported = after.spans_reported - before.spans_reported;
    let dropped = after.dropped() - before.dropped();
    println!("made {made}, reported {reported}, dropped {dropped}; {after:?}");
    assert_eq!(reported + dropped, made, "made = reported + dropped");
    assert_eq!(rows.len() as u64, reported, "the reporter got what stats() counts as reported");
    assert_eq!(after.spans_sampled_out, before.spans_sampled_out, "nothing is sampled out here");
    assert_eq!(after.dropped_queue_full - before.dropped_queue_full, dropped, "only full queues drop");

    let mut by_trace: HashMap<TraceId, Vec<&Row>> = HashMap::new();
    for row in rows {
        by_trace.entry(row.trace_id).or_default().push(row);
    }
    for (trace_id, trace) in &by_trace {
        let ids: HashSet<SpanId> = trace.iter().map(|row| row.span_id).collect();
        assert_eq!(ids.len(), trace.len(), "{trace_id}: a span reported twice");
        let roots: Vec<&&Row> = trace.iter().filter(|row| row.parent_id == SpanId(0)).collect();
        // Made by `SpanContext::random()`, a root has no remote parent: its parent id is 0.
        assert_eq!(roots.len(), 1, "{trace_id}: reported without its root (or with two)");
        for row in trace.iter().filter(|row| row.parent_id != SpanId(0)) {
            assert!(
                ids.contains(&row.parent_id),
                "{trace_id}: {} names parent {}, which is not in its trace (re-parented: {}); trace: {:?}",
                row.name,
                row.parent_id,
                row.reparented,
                trace.iter().map(|r| (&r.name, r.span_id, r.parent_id)).collect::<Vec<_>>()
            );
            if row.reparented {
                assert_eq!(row.parent_id, roots[0].span_id, "re-parented elsewhere than to the root");
            }
        }
    }
    let reparented = rows.iter().filter(|row| row.reparented).count();
    println!("{} traces reported, {reparented} spans re-parented", by_trace.len());
    reparented
}

#[test]
fn queues_overflowed_by_fast_producers_lose_no_link_and_no_count() {
    let (_serial, rows) = setup();
    SLOW.store(true, Ordering::Relaxed);
    let (mut dropped_total, mut reparented_total) = (0, 0);
    for round in 1..=MAX_ROUNDS {
        let before = minitrace::collector::stats();
        run_round();
        let made = (THREADS * TRACES_PER_ROUND) as u64 * SPANS_PER_TRACE;
        let after = flush_all(made, &before);
        let rows = std::mem::take(&mut *rows.lock().unwrap());
        println!("round {round}:");
        reparented_total += check(&rows, made, &before, &after);
        dropped_total += after.dropped_queue_full - before.dropped_queue_full;
        if dropped_total > 0 && reparented_total > 0 {
            SLOW.store(false, Ordering::Relaxed);
            return;
        }
    }
    panic!(
        "after {MAX_ROUNDS} rounds, {dropped_total} spans dropped at full queues and \
         {reparented_total} re-parented: the test never exercised re-parenting"
    );
}

/// The parent `a` is dropped at a full queue; the local span under it was
/// queued before, on the same thread; the root ends on another thread,
/// whose queue the collector reads first. The root completes its trace
/// before the orphan is filed, and the orphan must still be re-parented.
#[test]
fn an_orphan_filed_after_its_root_is_reparented() {
    let (_serial, rows) = setup();
    let before = minitrace::collector::stats();
    set_gate(true);
    let gate = OpenGateOnDrop;
    // This thread's queue is registered before the filler's, so the
    // collector reads it first in each round of a sweep; the warm-up root's
    // report holds the collector at the gate meanwhile.
    drop(Span::root("warm-up", SpanContext::random()));
    let mut waiting = WAITING.lock().unwrap();
    while !*waiting {
        // Not a timing check: a bound on the wait, so that a collector that never reports fails the test.
        let timeout;
        (waiting, timeout) = WAITING_CHANGED.wait_timeout(waiting, Duration::from_secs(60)).unwrap();
        assert!(!timeout.timed_out() || *waiting, "the collector never reported the warm-up root");
    }
    *waiting = false;
    drop(waiting);

    let context = SpanContext::random();
    let root = Span::root("root", context);
    let a = Span::enter_with_parent("a", &root);
    let fillers = std::thread::spawn(move || {
        {
            let _guard = a.set_local_parent();
            let _orphan = LocalSpan::enter_with_local_parent("under a");
        }
        // Fills this thread's queue: the collector is held at the gate.
        let (mut fillers, full) = (0, minitrace::collector::stats().dropped_queue_full);
        while minitrace::collector::stats().dropped_queue_full == full {
            drop(Span::root("filler", SpanContext::random()));
            fillers += 1;
        }
        let full = minitrace::collector::stats().dropped_queue_full;
        drop(a);
        assert_eq!(minitrace::collector::stats().dropped_queue_full, full + 1, "`a` was not dropped");
        fillers
    })
    .join()
    .unwrap();
    drop(root);
    drop(gate);

    // The warm-up root, the root, `under a`, `a` and the fillers.
    let made = 3 + 1 + fillers;
    let after = flush_all(made, &before);
    let rows = std::mem::take(&mut *rows.lock().unwrap());
    let trace: Vec<&Row> = rows.iter().filter(|row| row.trace_id == context.trace_id).collect();
    let names: Vec<(&str, SpanId, SpanId, bool)> =
        trace.iter().map(|r| (r.name.as_str(), r.span_id, r.parent_id, r.reparented)).collect();
    println!("{fillers} fillers; the trace: {names:?}");
    assert_eq!(trace.len(), 2, "{names:?}");
    check(&rows, made, &before, &after);
    let orphan = trace.iter().find(|row| row.name == "under a").unwrap();
    assert!(orphan.reparented, "{names:?}");
}
