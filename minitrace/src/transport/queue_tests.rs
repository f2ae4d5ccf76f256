//! The handover's tests: harvests of threads that write, exit and
//! register, and the budget they are given back.

use super::*;
use crate::data::id::{SpanId, TraceId};
use crate::data::span_state::SpanState;
use crate::data::target::Target;
use crate::transport::message::EndedSpan;

/// A thread-safe span of trace `trace`, ended.
fn message(role: Role, trace: u128) -> Message {
    let targets = Targets::One(Target::new(TraceId(trace), SpanId(0), 1));
    let now = minstant::Instant::now();
    Message::Ended(EndedSpan { state: SpanState::new("span".into(), targets, role, now), end: now })
}

// Without a reporter no collector thread runs in this test process, so
// `harvest` in these tests is the only consumer; one test at a time, as
// a harvest takes every thread's messages.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Every thread's messages, with the threads' numbers; credited.
fn harvest_all() -> Vec<(Option<u32>, Vec<Message>)> {
    let mut cut = Vec::new();
    harvest(&mut Vec::new(), |thread, cells, _, _| {
        let mut credit = Credit::new(thread.map(Arc::as_ref));
        cells.outbox.iter().for_each(|message| {
            credit.add(message);
        });
        drop(credit);
        cut.push((thread.map(|thread| thread.number), cells.outbox));
    });
    cut
}

fn trace_of(message: &Message) -> u128 {
    message.targets().first().trace_id().0
}

/// Closed at the thread's exit, an exited thread's handover is taken to
/// the end and then let go, not kept for ever: at the harvest after the
/// one that took its last message (which the collector may give back).
#[test]
fn an_exited_threads_handover_is_harvested_and_let_go() {
    let _serial = lock(&ONE_AT_A_TIME);
    harvest_all();
    let threads = lock(&THREADS).len();
    std::thread::spawn(|| submit(message(Role::Child, 1))).join().unwrap();
    assert_eq!(lock(&THREADS).len(), threads + 1);
    let filed: usize = harvest_all().iter().map(|(_, messages)| messages.len()).sum();
    assert_eq!(filed, 1);
    assert_eq!(lock(&THREADS).len(), threads + 1);
    let filed: usize = harvest_all().iter().map(|(_, messages)| messages.len()).sum();
    assert_eq!(filed, 0);
    assert_eq!(lock(&THREADS).len(), threads);
}

/// Filing returns what a message was charged, even a span's with
/// several parents.
#[test]
fn a_span_with_several_parents_gives_back_its_whole_charge() {
    let _serial = lock(&ONE_AT_A_TIME);
    let in_flight = std::thread::spawn(|| {
        let targets =
            Targets::Many(vec![Target::new(TraceId(1), SpanId(0), 1), Target::new(TraceId(2), SpanId(0), 2)]);
        for _ in 0..10 {
            let now = minstant::Instant::now();
            let state = SpanState::new("span".into(), targets.clone(), Role::Child, now);
            submit(Message::Ended(EndedSpan { state, end: now }));
        }
        harvest_all();
        QUEUE.with(|slot| match &**slot.borrow() {
            Slot::Open(queue) => queue.queued.wrapping_sub(queue.thread.drained.load(Ordering::Relaxed)),
            _ => usize::MAX,
        })
    })
    .join()
    .unwrap();
    assert_eq!(in_flight, 0);
}

#[test]
fn a_producer_kept_up_with_never_drops() {
    let _serial = lock(&ONE_AT_A_TIME);
    let budget = MAX_SPANS_IN_FLIGHT / (1 + MESSAGE_COST);
    let before = stats::stats().dropped_queue_full;
    // Three quarters of the budget queued, then harvested, four times
    // over: what is in flight never exceeds the budget.
    let filed = std::thread::spawn(move || {
        let mut filed = 0;
        for _ in 0..4 {
            for _ in 0..3 * budget / 4 {
                submit(message(Role::Child, 1));
            }
            filed += harvest_all().iter().map(|(_, messages)| messages.len()).sum::<usize>();
        }
        filed
    })
    .join()
    .unwrap();
    assert_eq!(stats::stats().dropped_queue_full, before);
    assert_eq!(filed, 4 * (3 * budget / 4));
}

/// As below, with four root threads and a pool of two part threads
/// fed through one channel, all exiting while harvests run.
#[test]
fn parts_from_a_pool_are_never_harvested_after_their_roots() {
    let _serial = lock(&ONE_AT_A_TIME);
    harvest_all();
    const PER_THREAD: u128 = 5_000;
    let done = Arc::new(AtomicBool::new(false));
    let harvester = harvest_until(done.clone());
    let (jobs, queue) = std::sync::mpsc::channel::<(u128, std::sync::mpsc::Sender<()>)>();
    let queue = Arc::new(Mutex::new(queue));
    let pool: Vec<_> = (0..2)
        .map(|_| {
            let queue = queue.clone();
            std::thread::spawn(move || loop {
                let job = lock(&queue).recv();
                let Ok((trace, ack)) = job else { return };
                submit(message(Role::Child, trace));
                ack.send(()).unwrap();
            })
        })
        .collect();
    let roots: Vec<_> = (0..4u128)
        .map(|thread| {
            let jobs = jobs.clone();
            std::thread::spawn(move || {
                for n in 0..PER_THREAD {
                    let trace = 1 + thread * PER_THREAD + n;
                    let (ack, acked) = std::sync::mpsc::channel();
                    jobs.send((trace, ack)).unwrap();
                    acked.recv().unwrap();
                    submit(message(Role::Root, trace));
                }
            })
        })
        .collect();
    drop(jobs);
    roots.into_iter().for_each(|thread| thread.join().unwrap());
    pool.into_iter().for_each(|thread| thread.join().unwrap());
    done.store(true, Ordering::Release);
    assert_no_part_after_its_root(&harvester.join().unwrap(), 4 * PER_THREAD);
}

/// Harvests taken while threads write are consistent cuts: a root's
/// part, sent on another thread before the root was sent, is never
/// harvested after the root; and every message is harvested once.
#[test]
fn a_part_sent_before_its_root_is_never_harvested_after_it() {
    let _serial = lock(&ONE_AT_A_TIME);
    harvest_all();
    const TRACES: u128 = 20_000;
    let done = Arc::new(AtomicBool::new(false));
    let harvester = harvest_until(done.clone());
    let (parts, roots) = (std::sync::mpsc::channel::<u128>(), std::sync::mpsc::channel::<u128>());
    let part_sender = std::thread::spawn(move || {
        for trace in parts.1 {
            submit(message(Role::Child, trace));
            roots.0.send(trace).unwrap();
        }
    });
    for trace in 1..=TRACES {
        parts.0.send(trace).unwrap();
        // The part was sent before the root: the channel orders them.
        let sent = roots.1.recv().unwrap();
        submit(message(Role::Root, sent));
    }
    drop(parts.0);
    part_sender.join().unwrap();
    done.store(true, Ordering::Release);
    assert_no_part_after_its_root(&harvester.join().unwrap(), TRACES);
}

/// For each trace: the harvest that took its part, and its root's.
type Seen = std::collections::HashMap<u128, (Option<usize>, Option<usize>)>;

/// Harvests, numbering each harvest, until `done` is set (and once more
/// after): where each trace's part and root were taken, each exactly once.
fn harvest_until(done: Arc<AtomicBool>) -> std::thread::JoinHandle<Seen> {
    std::thread::spawn(move || {
        let mut seen = Seen::default();
        let mut number = 0;
        loop {
            let finished = done.load(Ordering::Acquire);
            number += 1;
            for (_, messages) in harvest_all() {
                for message in &messages {
                    let entry = seen.entry(trace_of(message)).or_default();
                    let slot = if message.role() == Role::Child { &mut entry.0 } else { &mut entry.1 };
                    assert!(slot.is_none(), "a message harvested twice");
                    *slot = Some(number);
                }
            }
            if finished {
                return seen;
            }
        }
    })
}

/// Every trace `1..=traces` had its part and its root harvested, the part
/// never in a later harvest than the root.
fn assert_no_part_after_its_root(seen: &Seen, traces: u128) {
    let mut late = Vec::new();
    for trace in 1..=traces {
        let (part, root) = seen.get(&trace).copied().unwrap_or_default();
        let (part, root) = (part.expect("every part harvested"), root.expect("every root harvested"));
        if part > root {
            late.push((trace, part, root));
        }
    }
    assert!(
        late.is_empty(),
        "{} parts harvested after their roots (trace, its part's harvest, its root's): {:?}",
        late.len(),
        &late[..late.len().min(5)]
    );
}
