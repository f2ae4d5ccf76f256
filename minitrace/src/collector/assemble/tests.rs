//! The collector fed messages by hand: traces filed, staged and reported
//! whole, whatever order their parts arrive in.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::collector::reporter::TestReporter;
use crate::data::id::TraceId;
use crate::data::span_state::SpanState;

/// A collector fed messages by hand, reporting into `records`.
fn collector(config: Config) -> (Collector, Arc<Mutex<Vec<SpanRecord>>>) {
    let (reporter, records) = TestReporter::new();
    (Collector::new(Box::new(reporter), config), records)
}

fn target(trace: u64, parent: u64) -> Targets {
    // Collect id = trace id: one trace per root here.
    Targets::One(Target::new(TraceId(trace.into()), SpanId(parent), trace))
}

fn raw(id: u64, parent: u64, name: &'static str) -> RawSpan {
    let now = minstant::Instant::now();
    let mut raw = RawSpan::begin(SpanId(id), SpanId(parent), name.into(), now);
    raw.end = now;
    raw
}

/// A thread-safe span, ended, as a traced thread queues it.
fn ended(id: u64, name: &'static str, targets: Targets, role: Role) -> Message {
    let now = minstant::Instant::now();
    let state = SpanState::new(name.into(), targets, role, now).with_id(SpanId(id));
    Message::Ended(EndedSpan { state, end: now })
}

fn root(trace: u64) -> Message {
    ended(trace * 100, "root", target(trace, 0), Role::Root)
}

/// Local spans `ids` (each under the previous one, the first under the root).
fn local(trace: u64, ids: &[u64]) -> Message {
    let spans = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| raw(id, if i == 0 { 0 } else { ids[i - 1] }, "local"))
        .collect::<Vec<_>>();
    Message::new(Batch::Local { spans, events: false }, target(trace, trace * 100), Role::Child, ids.len())
}

/// A thread-safe child of the root.
fn child(trace: u64, id: u64) -> Message {
    ended(id, "child", target(trace, trace * 100), Role::Child)
}

/// (trace, span id, parent id) of every record reported so far, in the
/// order reported.
fn reported(collector: &mut Collector, records: &Mutex<Vec<SpanRecord>>) -> Vec<(u128, u64, u64)> {
    collector.report();
    records.lock().iter().map(|r| (r.trace_id.0, r.span_id.0, r.parent_id.0)).collect()
}

#[test]
fn a_trace_whose_parts_arrive_together_is_reported_whole() {
    let (mut collector, records) = collector(Config::default());
    for mut message in [local(1, &[11, 12]), child(1, 13), root(1)] {
        collector.file(&mut message);
    }
    assert!(collector.staged.is_none() && collector.open.is_empty());
    assert_eq!(reported(&mut collector, &records), [(1, 11, 100), (1, 12, 11), (1, 13, 100), (1, 100, 0)]);
}

#[test]
fn interleaved_traces_are_each_reported_whole() {
    let (mut collector, records) = collector(Config::default());
    // Trace 1 is staged, then trace 2 takes its place; each root finds
    // its trace, staged or not; trace 3's root comes without children.
    let messages = [local(1, &[11]), local(2, &[21]), child(1, 12), root(2), root(3), child(1, 13), root(1)];
    for mut message in messages {
        collector.file(&mut message);
        assert!(collector.outbox.len() <= 7);
    }
    assert!(collector.staged.is_none() && collector.open.is_empty());
    // Each trace's records together, its root last.
    let expected =
        [(2, 21, 200), (2, 200, 0), (3, 300, 0), (1, 11, 100), (1, 12, 100), (1, 13, 100), (1, 100, 0)];
    assert_eq!(reported(&mut collector, &records), expected);
}

#[test]
fn a_late_child_follows_its_reported_root_without_disturbing_the_staged_trace() {
    let (mut collector, records) = collector(Config::default());
    for mut message in [root(1), local(2, &[21]), child(1, 11), root(2)] {
        collector.file(&mut message);
    }
    assert_eq!(reported(&mut collector, &records), [(1, 100, 0), (1, 11, 100), (2, 21, 200), (2, 200, 0)]);
}

#[test]
fn a_discarded_trace_leaves_nothing_in_the_outbox() {
    let config = Config::default().report_slow_traces_only(Duration::from_secs(3600));
    let (mut collector, records) = collector(config);
    let before = stats::stats().spans_sampled_out;
    for mut message in [local(1, &[11, 12]), child(1, 13), root(1), child(1, 14)] {
        collector.file(&mut message);
    }
    assert!(collector.outbox.is_empty() && collector.staged.is_none());
    assert!(reported(&mut collector, &records).is_empty());
    assert!(stats::stats().spans_sampled_out >= before + 5);
}

#[test]
fn a_report_while_a_trace_is_staged_keeps_the_staged_records() {
    let (mut collector, records) = collector(Config::default());
    // Whole traces, then a staged one when the cycle's report comes:
    // the whole ones are reported, the staged one stays for its root.
    for trace in 1..=3 {
        for mut message in [child(trace, trace * 100 + 1), root(trace)] {
            collector.file(&mut message);
        }
    }
    collector.file(&mut local(4, &[41, 42]));
    collector.report();
    assert_eq!(records.lock().len(), 6);
    assert!(collector.staged.as_ref().is_some_and(|staged| staged.first == 0));
    assert_eq!(collector.outbox.len(), 2);
    collector.file(&mut child(4, 43));
    collector.file(&mut root(4));
    let links = reported(&mut collector, &records);
    assert_eq!(links[6..], [(4, 41, 400), (4, 42, 41), (4, 43, 400), (4, 400, 0)]);
}

#[test]
fn large_interleaved_traces_are_each_reported_whole() {
    let (mut collector, records) = collector(Config::default());
    let children = |trace: u64| (1..=MOVE_LIMIT as u64).map(move |id| child(trace, trace * 1000 + id));
    collector.file(&mut local(3, &[31]));
    collector.file(&mut root(3));
    // Trace 1 grows behind trace 3's records until it is large: they
    // are reported then, and trace 1 starts the outbox.
    for mut message in children(1) {
        collector.file(&mut message);
    }
    assert!(collector.staged.as_ref().is_some_and(|staged| staged.first == 0));
    assert_eq!(records.lock().len(), 2);
    // Trace 2 takes its place (trace 1's records leave by a swap), then
    // trace 1's root finishes it from its own vector, then trace 2's.
    for mut message in children(2).chain([root(1), root(2)]) {
        collector.file(&mut message);
    }
    assert!(collector.staged.is_none() && collector.open.is_empty());
    let reported = reported(&mut collector, &records);
    let expected: Vec<(u128, u64, u64)> = [(3, 31, 300), (3, 300, 0)]
        .into_iter()
        .chain([1u64, 2].into_iter().flat_map(|trace| {
            let ids = (1..=MOVE_LIMIT as u64).map(move |id| (trace.into(), trace * 1000 + id, trace * 100));
            ids.chain([(trace.into(), trace * 100, 0)])
        }))
        .collect();
    assert_eq!(reported, expected);
}

#[test]
fn a_large_batch_of_local_spans_waits_for_its_root_where_it_lies() {
    let (mut collector, records) = collector(Config::default());
    for mut message in [local(3, &[31]), root(3)] {
        collector.file(&mut message);
    }
    // Trace 1 grows by a second, large batch (a second guard on its thread).
    let ids: Vec<u64> = (1..=2 * MOVE_LIMIT as u64).map(|id| 1000 + id).collect();
    collector.file(&mut local(1, &[11]));
    collector.file(&mut local(1, &ids));
    // No report made to move it: it stays behind trace 3's records.
    assert!(records.lock().is_empty());
    assert!(collector.staged.as_ref().is_some_and(|staged| staged.first == 2));
    collector.file(&mut root(1));
    assert_eq!(reported(&mut collector, &records).len(), 2 + 1 + ids.len() + 1);
}

/// A cut that held a quarter of a thread's queue makes the collector ask
/// for its next cycle at once (a queue that never drains below a quarter
/// never wakes it again, and would fill while it waits for its interval);
/// a smaller one lets it wait.
#[test]
fn a_cut_of_a_quarter_full_queue_asks_for_the_next_cycle_at_once() {
    let trace = |t: u64| [local(t, &(1..=9).map(|i| t * 100 + i).collect::<Vec<_>>()), root(t)];
    let cost_of = |messages: &[Message]| messages.iter().map(|m| queue::cost(m.span_count())).sum::<usize>();
    let per_trace = cost_of(&trace(1));
    let enough = (1..).find(|&n| queue::behind(n * per_trace)).unwrap() as u64;
    for (traces, behind) in [(enough - 1, false), (enough, true)] {
        let (mut collector, records) = collector(Config::default());
        let messages: Vec<Message> = (1..=traces).flat_map(trace).collect();
        assert_eq!(queue::behind(cost_of(&messages)), behind);
        let mut cut = vec![(None, messages)];
        assert_eq!(collector.file_cut(&mut cut), behind, "{traces} traces");
        assert_eq!(reported(&mut collector, &records).len() as u64, traces * 10);
    }
}
