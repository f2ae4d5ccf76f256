//! 8 threads × 100 000 traces, each randomly fast (thrown away by the
//! latency threshold), slow (reported), cancelled, unsampled by head
//! sampling or begun while a separate thread had switched recording off,
//! with 0..20 local spans, a thread-safe child finished on another thread,
//! a root moved to another thread to end there, or a guard outliving its
//! root. In the lossless mode (`wait_when_queue_full`) every fate is exact:
//! each trace expected kept arrives whole (every span, every parent in its
//! trace), no trace thrown away or unrecorded leaves a record, and the
//! counters add up to the span: made = reported + sampled out, none dropped.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use minitrace::collector::{stats, Config, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

const THREADS: usize = 8;
const TRACES_PER_THREAD: usize = 100_000;
const THRESHOLD: Duration = Duration::from_millis(2);
/// Roots measured this close to the threshold may go either way: the
/// library reads its own clock inside the drop.
const MARGIN: Duration = Duration::from_micros(100);
const HEAD_SAMPLING: f64 = 0.75;

/// xorshift64: deterministic per thread, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True once in `n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// The documented head-sampling rule: the low 64 bits of the trace id,
/// halved, below ratio × 2⁶³.
fn sampled_by_rule(trace_id: TraceId) -> bool {
    ((trace_id.0 as u64) >> 1) < (HEAD_SAMPLING * (1u64 << 63) as f64) as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Fate {
    Kept,
    ThrownAway,
    /// Measured within `MARGIN` of the threshold: whole or nothing.
    Either,
}

/// A recording trace: how many spans it made and what should become of them.
#[derive(Clone, Copy, Debug)]
struct Made {
    trace_id: TraceId,
    spans: u64,
    fate: Fate,
    escaped: bool,
    moved: bool,
    cancelled: bool,
    outlived: bool,
    /// The root's age just before its drop, and how long the drop took.
    #[allow(dead_code)] // shown in failure messages
    measured: (Duration, Duration),
}

enum Handoff {
    /// A thread-safe child to finish here, with this many local spans under it.
    Child(Span, u64),
    /// A root to end here, what it made (`None`: not recording), and
    /// whether it was cancelled.
    Root(Span, Option<Made>, bool),
}

#[derive(Default)]
struct Log {
    made: Vec<Made>,
    unrecorded: Vec<TraceId>,
    unsampled_by_rule: usize,
    switched_off: usize,
}

/// Ends a recording root and tells its fate from its duration, which the
/// library reads inside the drop: at least its age before the drop, at most
/// that plus the time from just before that reading to just after the drop
/// (however long the thread was descheduled in between).
fn end_root(root: Span, cancelled: bool) -> (Fate, (Duration, Duration)) {
    let start = Instant::now();
    let before = root.elapsed().expect("a recording root");
    drop(root);
    let took = start.elapsed();
    let fate = if cancelled {
        Fate::ThrownAway
    } else if before >= THRESHOLD + MARGIN {
        Fate::Kept
    } else if before + took + MARGIN < THRESHOLD {
        Fate::ThrownAway
    } else {
        Fate::Either
    };
    (fate, (before, took))
}

/// `count` local spans under the current local parent, randomly nested.
fn local_spans(rng: &mut Rng, mut count: u64) {
    while count > 0 {
        let _span = LocalSpan::enter_with_local_parent("local");
        count -= 1;
        let nested = rng.below(count + 1);
        local_spans(rng, nested);
        count -= nested;
    }
}

fn receive(handoff: Handoff, rng: &mut Rng, log: &mut Log) {
    match handoff {
        Handoff::Child(child, locals) => {
            let _guard = child.set_local_parent();
            local_spans(rng, locals);
        }
        Handoff::Root(root, made, cancelled) => match made {
            Some(made) => {
                let (fate, measured) = end_root(root, cancelled);
                log.made.push(Made { fate, measured, ..made });
            }
            None => drop(root),
        },
    }
}

fn produce(seed: u64, next: mpsc::Sender<Handoff>, mine: mpsc::Receiver<Handoff>) -> Log {
    let mut rng = Rng(seed);
    let mut log = Log::default();
    for _ in 0..TRACES_PER_THREAD {
        let context = SpanContext::random();
        let mut root = Span::root("root", context);
        let recording = root.elapsed().is_some();
        if !recording {
            // Head sampling never records an id its rule leaves out.
            if sampled_by_rule(context.trace_id) {
                log.switched_off += 1;
            } else {
                log.unsampled_by_rule += 1;
            }
            log.unrecorded.push(context.trace_id);
        } else {
            assert!(
                sampled_by_rule(context.trace_id),
                "{} recorded against the sampling rule",
                context.trace_id
            );
        }
        let locals = rng.below(20);
        let escaped = rng.one_in(5);
        let moved = rng.one_in(8);
        let cancelled = rng.one_in(10);
        let outlived = rng.one_in(20);
        let slow = rng.one_in(256);
        let mut spans = 1 + locals;

        let guard = root.set_local_parent();
        local_spans(&mut rng, locals);
        if escaped {
            // Either way of making a thread-safe child, finished on a neighbour.
            let child = if rng.one_in(2) {
                Span::enter_with_parent("escaped", &root)
            } else {
                Span::enter_with_local_parent("escaped")
            };
            let child_locals = rng.below(4);
            spans += 1 + child_locals;
            next.send(Handoff::Child(child, child_locals)).unwrap();
        }
        if slow {
            std::thread::sleep(THRESHOLD * 2);
        }
        if cancelled {
            root.cancel();
        }
        // The guard's batch is sent after the root ended when it outlives it.
        let guard = if outlived {
            Some(guard)
        } else {
            drop(guard);
            None
        };
        let made = recording.then_some(Made {
            trace_id: context.trace_id,
            spans,
            fate: Fate::Either,
            escaped,
            moved,
            cancelled,
            outlived,
            measured: Default::default(),
        });
        if moved {
            next.send(Handoff::Root(root, made, cancelled)).unwrap();
        } else if let Some(made) = made {
            let (fate, measured) = end_root(root, cancelled);
            log.made.push(Made { fate, measured, ..made });
        } else {
            drop(root);
        }
        drop(guard);

        while let Ok(handoff) = mine.try_recv() {
            receive(handoff, &mut rng, &mut log);
        }
    }
    drop(next);
    for handoff in mine {
        receive(handoff, &mut rng, &mut log);
    }
    log
}

// One test: the reporter, the switch and the counters are global to the process.
#[test]
fn every_trace_meets_its_fate_whole_and_every_span_is_counted() {
    let (reporter, spans) = TestReporter::new();
    minitrace::set_reporter(
        reporter,
        Config::default()
            .report_slow_traces_only(THRESHOLD)
            .head_sampling(HEAD_SAMPLING)
            .wait_when_queue_full(true),
    );
    let before = stats();

    // Flips recording off for a while, over and over, until the producers are done.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut flips = 0;
            while !stop.load(Ordering::Relaxed) {
                minitrace::set_enabled(false);
                std::thread::sleep(Duration::from_micros(200));
                minitrace::set_enabled(true);
                std::thread::sleep(Duration::from_micros(800));
                flips += 1;
            }
            flips
        })
    };

    // Each thread hands its children and moved roots to a neighbour.
    let logs: Vec<Log> = common::in_a_ring(THREADS, |i, next, mine| {
        produce(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1), next, mine)
    });
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    minitrace::set_enabled(true);
    minitrace::flush();
    let after = stats();

    let records = spans.lock();
    let mut by_trace: HashMap<TraceId, Vec<&SpanRecord>> = HashMap::new();
    for record in records.iter() {
        by_trace.entry(record.trace_id).or_default().push(record);
    }

    let (mut kept, mut thrown_away, mut either_kept, mut either_thrown_away) = (0u64, 0u64, 0u64, 0u64);
    let mut traces = HashMap::<(Fate, bool, bool, bool), usize>::new();
    let mut cancelled = 0;
    for made in logs.iter().flat_map(|log| &log.made) {
        *traces.entry((made.fate, made.escaped, made.moved, made.outlived)).or_default() += 1;
        cancelled += usize::from(made.cancelled);
        let arrived = by_trace.get(&made.trace_id).map_or(0, Vec::len) as u64;
        let whole = || {
            assert_eq!(arrived, made.spans, "{made:?} did not arrive whole");
            let records = &by_trace[&made.trace_id];
            common::assert_linked(records.iter().copied());
            assert_eq!(records.iter().filter(|r| r.name == "root").count(), 1, "{made:?}: not one root");
        };
        match made.fate {
            Fate::Kept => {
                whole();
                kept += made.spans;
            }
            Fate::ThrownAway => {
                let root = by_trace.get(&made.trace_id).and_then(|r| r.iter().find(|r| r.name == "root"));
                assert_eq!(
                    arrived,
                    0,
                    "{made:?} was thrown away, yet {arrived} of its spans were reported (root lasting {:?})",
                    root.map(|r| Duration::from_nanos(r.duration_ns))
                );
                thrown_away += made.spans;
            }
            Fate::Either if arrived == 0 => either_thrown_away += made.spans,
            Fate::Either => {
                whole();
                either_kept += made.spans;
            }
        }
    }
    for trace_id in logs.iter().flat_map(|log| &log.unrecorded) {
        assert!(!by_trace.contains_key(trace_id), "{trace_id} was not recording, yet was reported");
    }

    let made_spans = kept + thrown_away + either_kept + either_thrown_away;
    let reported = after.spans_reported - before.spans_reported;
    let sampled_out = after.spans_sampled_out - before.spans_sampled_out;
    let dropped = after.dropped() - before.dropped();
    let unsampled: usize = logs.iter().map(|log| log.unsampled_by_rule).sum();
    let switched_off: usize = logs.iter().map(|log| log.switched_off).sum();
    let mut kinds: Vec<_> = traces.iter().collect();
    kinds.sort();
    println!(
        "spans made {made_spans}: reported {reported}, sampled out {sampled_out}, dropped {dropped}; \
         unrecorded roots: {unsampled} by head sampling, {switched_off} switched off ({flips} flips); \
         {cancelled} cancelled; traces by (fate, escaped, moved, outlived by its guard): {kinds:?}"
    );

    assert_eq!(dropped, 0, "nothing may be dropped in the lossless mode: {after:?}");
    assert_eq!(
        made_spans,
        reported + sampled_out + dropped,
        "made = reported + sampled out + dropped: {after:?}"
    );
    assert_eq!(reported, records.len() as u64, "the reporter got what was counted as reported");
    assert_eq!(reported, kept + either_kept, "reported = the spans of the traces kept");
    assert_eq!(
        sampled_out,
        thrown_away + either_thrown_away,
        "sampled out = the spans of the traces thrown away"
    );
    assert_eq!(after.roots_without_reporter, before.roots_without_reporter);

    // Every path was taken, so that none of the checks above held vacuously.
    for escaped in [false, true] {
        for moved in [false, true] {
            for outlived in [false, true] {
                for fate in [Fate::Kept, Fate::ThrownAway] {
                    let kind = (fate, escaped, moved, outlived);
                    assert!(traces.contains_key(&kind), "no trace of the kind {kind:?}");
                }
            }
        }
    }
    assert!(cancelled > 0 && unsampled > 0 && switched_off > 0);
}
