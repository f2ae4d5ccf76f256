//! The flight recorder: every span of every request kept whatever its
//! trace's fate, retrieved after the fact by id, by time and by trigger;
//! its memory bound; threads that exit; retention visible.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use minitrace::collector::{Config, SpanContext, SpanStatus, TestReporter, TraceId};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace::recorder::{self, FlightRecorder};

/// The recorder and the reporter are global: one test at a time, each
/// starting from an empty recorder, with every trace thrown away by a
/// threshold no request reaches.
fn exclusive(
    recorder: FlightRecorder,
) -> (MutexGuard<'static, ()>, Arc<parking_lot::Mutex<Vec<SpanRecord>>>) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    static REPORTED: std::sync::OnceLock<Arc<parking_lot::Mutex<Vec<SpanRecord>>>> =
        std::sync::OnceLock::new();
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let reported = REPORTED
        .get_or_init(|| {
            let (reporter, reported) = TestReporter::new();
            minitrace::set_reporter(
                reporter,
                Config::default().report_slow_traces_only(Duration::from_secs(60)),
            );
            reported
        })
        .clone();
    FlightRecorder::disable();
    minitrace::flush();
    reported.lock().clear();
    recorder.enable();
    (guard, reported)
}

fn request(name: &'static str, steps: usize) -> TraceId {
    let context = SpanContext::random();
    let root = Span::root(name, context).with_property(|| ("user", "42"));
    let _guard = root.set_local_parent();
    let _outer = LocalSpan::enter_with_local_parent("outer");
    for step in 1..steps {
        let _step = LocalSpan::enter_with_local_parent(format!("step {step}"));
    }
    context.trace_id
}

fn held(trace_ids: &[TraceId]) -> Vec<recorder::RecordedTrace> {
    recorder::snapshot().traces.into_iter().filter(|trace| trace_ids.contains(&trace.trace_id)).collect()
}

#[test]
fn a_request_thrown_away_is_kept_whole() {
    let (_one, reported) = exclusive(FlightRecorder::new().bytes_per_thread(1 << 20));
    let context = SpanContext::random();
    {
        let root = Span::root("get", context).with_property(|| ("user", "42"));
        let handed_off = Span::enter_with_parent("on another thread", &root);
        std::thread::spawn(move || {
            let _guard = handed_off.set_local_parent();
            Event::add_to_local_parent("there", || []);
            let _local = LocalSpan::enter_with_local_parent("local there");
        })
        .join()
        .unwrap();
        let _guard = root.set_local_parent();
        let _outer = LocalSpan::enter_with_local_parent("outer").with_property(|| ("k", "v"));
        Event::add_to_local_parent("here", || [("e".into(), "1".into())]);
        let _inner = LocalSpan::enter_with_local_parent(String::from("inner (owned)"));
    }
    let trace = recorder::trace(context.trace_id).expect("the recorder holds it");
    assert!(trace.complete);
    let root = trace.root().unwrap();
    assert_eq!(
        (root.name.as_ref(), root.properties.as_slice()),
        ("get", &[("user".into(), "42".into())][..])
    );
    let span = |name: &str| trace.spans.iter().find(|span| span.name == name).unwrap();
    assert_eq!(span("outer").parent_id, root.span_id);
    assert_eq!(span("inner (owned)").parent_id, span("outer").span_id);
    assert_eq!(span("on another thread").parent_id, root.span_id);
    assert_eq!(span("local there").parent_id, span("on another thread").span_id);
    assert_eq!(span("outer").properties, [("k".into(), "v".into())]);
    assert_eq!(span("outer").events[0].name, "here");
    assert_eq!(span("on another thread").events[0].name, "there");
    for span in &trace.spans {
        assert!(span.begin_time_unix_ns >= root.begin_time_unix_ns);
    }
    minitrace::flush();
    assert!(
        reported.lock().iter().all(|record| record.trace_id != context.trace_id),
        "thrown away all the same"
    );
}

#[test]
fn a_trace_is_retrieved_through_the_reporter_after_the_fact() {
    let (_one, reported) = exclusive(FlightRecorder::new());
    let before = (minitrace::collector::stats(), recorder::stats());
    let trace_id = request("later found to matter", 5);
    minitrace::flush();
    assert!(reported.lock().is_empty());
    recorder::retrieve(trace_id);
    recorder::retrieve(TraceId(0x5eed));
    minitrace::flush();
    let delivered: Vec<SpanRecord> =
        reported.lock().iter().filter(|r| r.trace_id == trace_id).cloned().collect();
    assert_eq!(delivered.len(), 6, "{delivered:?}");
    assert_eq!(delivered.last().unwrap().name, "later found to matter");
    let after = (minitrace::collector::stats(), recorder::stats());
    assert_eq!(after.0.spans_retrieved - before.0.spans_retrieved, 6);
    // The id no root of which ended here is awaited (in vain).
    assert_eq!((after.1.retrieved - before.1.retrieved, after.1.awaited - before.1.awaited), (1, 1));
}

#[test]
fn a_trace_asked_for_before_its_root_ended_is_reported_whole_when_it_ends() {
    let (_one, reported) = exclusive(FlightRecorder::new());
    let kept = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let heard = kept.clone();
    recorder::on_kept(Some(Arc::new(move |trace_id| heard.lock().push(trace_id))));
    let before = recorder::stats();
    let context = SpanContext::random();
    let root = Span::root("still serving", context);
    let child = Span::enter_with_parent("called out", &root);
    let guard = root.set_local_parent();
    let early = LocalSpan::enter_with_local_parent("early");
    drop(early);
    drop(child);
    minitrace::flush();
    // Its root has not ended: nothing reported in pieces.
    assert!(recorder::report(context.trace_id).is_none());
    minitrace::flush();
    assert!(reported.lock().iter().all(|record| record.trace_id != context.trace_id));
    {
        let _late = LocalSpan::enter_with_local_parent("late");
    }
    drop(guard);
    drop(root);
    minitrace::flush();
    let delivered: Vec<String> = reported
        .lock()
        .iter()
        .filter(|record| record.trace_id == context.trace_id)
        .map(|record| record.name.to_string())
        .collect();
    assert_eq!(delivered.len(), 4, "{delivered:?}");
    for name in ["still serving", "called out", "early", "late"] {
        assert_eq!(delivered.iter().filter(|d| *d == name).count(), 1, "{name} once: {delivered:?}");
    }
    assert_eq!(recorder::stats().awaited - before.awaited, 1);
    assert_eq!(*kept.lock(), [context.trace_id], "the hook hears of it when it is kept");
    // Another root of the trace, later, is not wanted any more.
    drop(Span::root("again", context));
    minitrace::flush();
    assert!(reported.lock().iter().all(|record| record.name != "again"));
    recorder::on_kept(None);
}

#[test]
fn a_window_holds_the_traces_that_overlapped_it() {
    let (_one, _) = exclusive(FlightRecorder::new());
    let early = request("early", 1);
    std::thread::sleep(Duration::from_millis(5));
    let start = recorder::trace(early).unwrap().end_unix_ns() + 1;
    let during: Vec<TraceId> = (0..10).map(|_| request("during", 2)).collect();
    let held = recorder::window(start, u64::MAX);
    let ids: Vec<TraceId> = held.iter().map(|trace| trace.trace_id).collect();
    assert!(during.iter().all(|id| ids.contains(id)), "{ids:?}");
    assert!(!ids.contains(&early));
}

#[test]
fn triggers_report_errors_and_what_a_predicate_picks() {
    let (_one, reported) =
        exclusive(FlightRecorder::new().report_errors().report_if(|root| root.name == "picked"));
    let failed = SpanContext::random();
    drop(Span::root("failed", failed).with_status(SpanStatus::error("boom")));
    let picked = SpanContext::random();
    drop(Span::root("picked", picked));
    let plain = request("plain", 1);
    minitrace::flush();
    let ids: Vec<TraceId> = reported.lock().iter().map(|record| record.trace_id).collect();
    assert!(ids.contains(&failed.trace_id) && ids.contains(&picked.trace_id), "{ids:?}");
    assert!(!ids.contains(&plain));
}

#[test]
fn the_memory_bound_keeps_the_newest_requests() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(64 << 10));
    let before = recorder::stats();
    let trace_ids: Vec<TraceId> = (0..10_000).map(|_| request("get", 10)).collect();
    let kept = held(&trace_ids);
    assert!(!kept.is_empty() && kept.len() < 200, "bounded: {} kept", kept.len());
    let newest = &trace_ids[trace_ids.len() - kept.len()..];
    let mut kept_ids: Vec<TraceId> = kept.iter().map(|trace| trace.trace_id).collect();
    let mut newest = newest.to_vec();
    kept_ids.sort();
    newest.sort();
    // The newest, but the oldest of them may have lost its first part.
    assert!(kept.iter().filter(|trace| trace.complete).count() + 1 >= kept.len());
    assert!(newest.iter().skip(1).all(|id| kept_ids.contains(id)));
    let after = recorder::stats();
    assert!(
        after.overwritten_parts - before.overwritten_parts >= 2 * (trace_ids.len() - kept.len()) as u64 - 1
    );
}

/// Where the bound cuts, a trace whose local spans made room is not held
/// as a root alone that claims to be whole: whatever the cut's place, every
/// trace held and marked complete has all its spans.
#[test]
fn no_trace_held_as_complete_lacks_spans_the_bound_made_room_for() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(16 << 10));
    // Requests of 2 to 14 spans, so that the cut falls everywhere.
    let mut spans = std::collections::HashMap::new();
    let mut checked = 0;
    for round in 0..300 {
        let steps = 2 + round % 13;
        spans.insert(request("get", steps), steps + 1);
        if round < 40 {
            continue; // not wrapped yet
        }
        let trace_ids: Vec<TraceId> = spans.keys().copied().collect();
        for trace in held(&trace_ids) {
            if trace.complete {
                let names: Vec<&str> = trace.spans.iter().map(|span| span.name.as_ref()).collect();
                assert_eq!(
                    trace.spans.len(),
                    spans[&trace.trace_id],
                    "round {round}: held as complete: {names:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0);
}

/// The bound counts what a request owns: a request with a 100 KiB
/// property takes 100 KiB of the bound, not the ~200 bytes of its entries.
#[test]
fn the_memory_bound_counts_names_and_properties() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(1 << 20));
    let large = "x".repeat(100 << 10);
    let trace_ids: Vec<TraceId> = (0..1_000)
        .map(|_| {
            let context = SpanContext::random();
            let root = Span::root("put", context).with_property(|| ("value", large.clone()));
            let _guard = root.set_local_parent();
            let _step = LocalSpan::enter_with_local_parent(format!("write {}", large.len()));
            context.trace_id
        })
        .collect();
    let kept = held(&trace_ids);
    let bytes: usize =
        kept.iter().filter_map(|trace| trace.root()).map(|root| root.properties[0].1.len()).sum();
    assert!(bytes <= 1 << 20, "{} requests kept, {bytes} bytes of properties", kept.len());
    assert!((5..=10).contains(&kept.len()), "{} kept", kept.len());
}

#[test]
fn snapshots_taken_meanwhile_lose_nothing_a_thread_records() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(1 << 30));
    let done = Arc::new(AtomicBool::new(false));
    let snapshots = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut taken = 0;
            while !done.load(Ordering::Relaxed) {
                let _ = recorder::snapshot();
                taken += 1;
            }
            taken
        }
    });
    let trace_ids: Vec<TraceId> = (0..50_000).map(|_| request("get", 2)).collect();
    done.store(true, Ordering::Relaxed);
    assert!(snapshots.join().unwrap() > 0);
    let kept = held(&trace_ids);
    assert_eq!(kept.len(), trace_ids.len());
    assert!(kept.iter().all(|trace| trace.complete && trace.spans.len() == 3));
}

/// Threads come and go (a pool's workers, a root moved to a thread that
/// exits): what they kept stays, in a pool of 16 threads' worth of memory,
/// the newest first.
#[test]
fn threads_that_exited_are_kept_a_while() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(16 << 10));
    let on_a_thread_that_exits =
        || std::thread::spawn(|| request("on a thread that exits", 4)).join().unwrap();
    let first = on_a_thread_that_exits();
    minitrace::flush();
    assert_eq!(held(&[first]).len(), 1);
    assert_eq!(held(&[first]).len(), 1, "still there when read again");
    let later: Vec<TraceId> = (0..1_000).map(|_| on_a_thread_that_exits()).collect();
    minitrace::flush();
    assert!(held(&[first]).is_empty(), "the oldest made room");
    let kept = held(&later);
    // ~600 bytes a request: 16 threads × 16 KiB hold ~400 of them.
    assert!((100..1_000).contains(&kept.len()), "{} kept", kept.len());
    let newest: Vec<TraceId> = later[later.len() - kept.len() + 1..].to_vec();
    let kept_ids: Vec<TraceId> = kept.iter().map(|trace| trace.trace_id).collect();
    assert!(newest.iter().all(|id| kept_ids.contains(id)), "the newest are kept");
    // Retention tells each exited thread's memory apart, by the number
    // its traces carry.
    let retention = recorder::retention();
    let exited: Vec<_> = retention.threads.iter().filter(|thread| thread.exited).collect();
    let bytes: usize = exited.iter().map(|thread| thread.bytes).sum();
    assert!(bytes <= 16 * (16 << 10), "{bytes} bytes kept of exited threads");
    let mut numbers: Vec<u32> = exited.iter().map(|thread| thread.thread).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers.len(), exited.len(), "one entry per exited thread");
    for trace in &kept {
        let memory = exited.iter().find(|thread| thread.thread == trace.thread);
        let memory = memory.unwrap_or_else(|| panic!("thread {} of a kept trace", trace.thread));
        assert!(memory.roots >= 1 && memory.oldest_unix_ns <= Some(trace.begin_unix_ns()));
    }
    let roots: usize = exited.iter().map(|thread| thread.roots).sum();
    assert_eq!(roots, kept.len(), "every root held is one kept trace");
}

/// The recorder given more memory while on: a thread's memory grows to it
/// and keeps what it held, and the traces still read back whole.
#[test]
fn more_memory_given_while_on_keeps_what_was_held_and_holds_more() {
    let small = 32 << 10;
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(small));
    let before: Vec<TraceId> = (0..1_000).map(|_| request("before", 4)).collect();
    let held_before = held(&before);
    assert!(!held_before.is_empty() && held_before.len() < 1_000, "{} of 1 000 held", held_before.len());
    FlightRecorder::new().bytes_per_thread(1 << 20).enable();
    let after: Vec<TraceId> = (0..1_000).map(|_| request("after", 4)).collect();
    let all: Vec<TraceId> = before.iter().chain(&after).copied().collect();
    let held_now = held(&all);
    for trace in &held_before {
        let now = held_now.iter().find(|held| held.trace_id == trace.trace_id);
        assert_eq!(now, Some(trace), "held before, held the same now");
    }
    for trace_id in &after {
        let trace =
            held_now.iter().find(|held| held.trace_id == *trace_id).expect("every later request held");
        let names: Vec<&str> = trace.spans.iter().map(|span| span.name.as_ref()).collect();
        assert_eq!(names, ["outer", "step 1", "step 2", "step 3", "after"][..], "whole");
    }
    let thread = held_now[0].thread;
    let retention = recorder::retention();
    let here = retention.threads.iter().find(|memory| memory.thread == thread).expect("this thread");
    assert!(here.bytes > small && here.roots >= held_before.len() + 1_000, "{here:?}");
}

#[test]
fn retention_says_how_far_back_each_thread_reaches() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(1 << 20));
    let first = request("first", 3);
    for _ in 0..99 {
        request("more", 3);
    }
    let begun = recorder::trace(first).unwrap().begin_unix_ns();
    let retention = recorder::retention();
    let here =
        retention.threads.iter().find(|thread| thread.oldest_unix_ns == Some(begun)).expect("this thread");
    assert_eq!(here.roots, 100);
    assert!(here.bytes > 100 * 3 * 64 && here.bytes <= 1 << 20);
}

#[test]
fn off_records_nothing() {
    let (_one, _) = exclusive(FlightRecorder::new());
    FlightRecorder::disable();
    let trace_id = request("get", 2);
    assert!(held(&[trace_id]).is_empty());
    assert!(recorder::trace(trace_id).is_none());
}

/// A seeded generator for the shapes below; the seed is printed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Per span name: its parent's name, its properties and its events' names.
type Shape = std::collections::BTreeMap<String, (String, Vec<(String, String)>, Vec<String>)>;

/// Requests of every local shape, once the thread's memory wraps: their
/// spans are written where the recorder keeps them (the stretch its ring
/// lends), and come back as recorded: every span under its parent, with
/// its properties and events, owned names and all. Among them, requests
/// larger than a stretch, and roots of other traces ended inside a
/// request, which its memory keeps apart.
#[test]
fn requests_written_where_they_are_kept_come_back_as_recorded() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(64 << 10));
    let seed = std::env::var("MINITRACE_SEED").ok().and_then(|seed| seed.parse().ok()).unwrap_or(0x34_5eed);
    eprintln!("seed {seed} (MINITRACE_SEED replays it)");
    let mut rng = Rng(seed);
    let mut expected: Vec<(TraceId, Shape)> = Vec::new();
    let mut checked = 0;
    for number in 0..3_000u64 {
        let context = SpanContext::random();
        let mut shape = Shape::new();
        {
            let root = Span::root("request", context).with_property(|| ("number", number.to_string()));
            shape.insert(
                "request".into(),
                (String::new(), vec![("number".into(), number.to_string())], vec![]),
            );
            let _guard = root.set_local_parent();
            let spans = match rng.below(10) {
                0 => 0,
                1 => 65 + rng.below(30), // more than a stretch holds
                _ => 1 + rng.below(12),
            };
            let mut open: Vec<(String, LocalSpan)> = Vec::new();
            for index in 0..spans {
                if !open.is_empty() && rng.below(3) == 0 {
                    open.pop();
                }
                let name = format!("s{index}");
                let parent = open.last().map_or("request".to_string(), |(name, _)| name.clone());
                let span = match rng.below(3) {
                    0 => LocalSpan::enter_with_local_parent(name.clone()),
                    _ => LocalSpan::enter_with_local_parent(["a", "b", "c"][index as usize % 3])
                        .with_property(|| ("was", name.clone())),
                };
                let mut entry = (parent, vec![], vec![]);
                if rng.below(4) == 0 {
                    let span = span.with_property(|| ("k", "v"));
                    entry.1.push(("k".into(), "v".into()));
                    open.push((name.clone(), span));
                } else {
                    open.push((name.clone(), span));
                }
                if rng.below(5) == 0 {
                    Event::add_to_local_parent(format!("e{index}"), || []);
                    entry.2.push(format!("e{index}"));
                }
                shape.insert(name, entry);
                if rng.below(50) == 0 {
                    // Another trace's request, thrown away here meanwhile.
                    let inside = Span::root("inside", SpanContext::random());
                    let _guard = inside.set_local_parent();
                    let _step = LocalSpan::enter_with_local_parent("inside step");
                }
            }
            // Closed innermost first, as scopes close them.
            while open.pop().is_some() {}
        }
        expected.push((context.trace_id, shape));
        if number % 300 == 299 {
            checked += check_shapes(&expected, seed);
        }
    }
    assert!(checked >= 100, "seed {seed}: {checked} checked");
}

/// Checks every trace of `expected` held whole against its shape; returns
/// how many.
fn check_shapes(expected: &[(TraceId, Shape)], seed: u64) -> usize {
    let ids: Vec<TraceId> = expected.iter().map(|(id, _)| *id).collect();
    let held = held(&ids);
    let shapes: std::collections::HashMap<TraceId, &Shape> =
        expected.iter().map(|(id, shape)| (*id, shape)).collect();
    let mut checked = 0;
    for trace in held.iter().filter(|trace| trace.complete) {
        let names: std::collections::HashMap<_, String> = trace
            .spans
            .iter()
            .map(|span| {
                let was = span.properties.iter().find(|(key, _)| key == "was");
                (span.span_id, was.map_or(span.name.to_string(), |(_, name)| name.to_string()))
            })
            .collect();
        let got: Shape = trace
            .spans
            .iter()
            .map(|span| {
                let parent = names.get(&span.parent_id).cloned().unwrap_or_default();
                let properties = span
                    .properties
                    .iter()
                    .filter(|(key, _)| key != "was")
                    .map(|(k, v)| (k.to_string(), v.to_string()));
                let events = span.events.iter().map(|event| event.name.to_string()).collect();
                (names[&span.span_id].clone(), (parent, properties.collect(), events))
            })
            .collect();
        assert_eq!(&got, shapes[&trace.trace_id], "seed {seed}: trace {:?}", trace.trace_id);
        // Every span's times inside its parent's, every event's inside its span's.
        let by_id: std::collections::HashMap<_, _> =
            trace.spans.iter().map(|span| (span.span_id, span)).collect();
        let end = |span: &SpanRecord| span.begin_time_unix_ns + span.duration_ns;
        for span in &trace.spans {
            if let Some(parent) = by_id.get(&span.parent_id) {
                assert!(
                    parent.begin_time_unix_ns <= span.begin_time_unix_ns && end(span) <= end(parent),
                    "seed {seed}: {} outside its parent {}",
                    span.name,
                    parent.name
                );
            }
            for event in &span.events {
                let at = event.timestamp_unix_ns;
                assert!(
                    span.begin_time_unix_ns <= at && at <= end(span),
                    "seed {seed}: {} outside",
                    event.name
                );
            }
        }
        checked += 1;
    }
    // What is held is the newest requests, every one of them whole but
    // maybe the oldest (whose first spans made room).
    let whole = |id: &TraceId| held.iter().any(|trace| trace.trace_id == *id && trace.complete);
    let oldest = ids.iter().position(|id| held.iter().any(|trace| trace.trace_id == *id)).expect("some held");
    assert!(ids.len() - oldest >= 3, "seed {seed}: {} held", ids.len() - oldest);
    assert!(ids[oldest + 1..].iter().all(whole), "seed {seed}: the newest are held whole");
    checked
}

/// Runs `requests` requests on this thread, each a root and a local span
/// in it; those `elsewhere` picks have their root ended on another thread.
/// Returns their trace ids.
fn requests_ending_here_or_elsewhere(requests: usize, elsewhere: impl Fn(usize) -> bool) -> Vec<TraceId> {
    let (moved, ending) = std::sync::mpsc::channel::<(Span, std::sync::mpsc::Sender<()>)>();
    let ender = std::thread::spawn(move || {
        for (root, ended) in ending {
            drop(root);
            ended.send(()).unwrap();
        }
    });
    let ids = (0..requests)
        .map(|number| {
            let context = SpanContext::random();
            let root = Span::root("request", context);
            {
                let _guard = root.set_local_parent();
                let _step = LocalSpan::enter_with_local_parent("step");
            }
            if elsewhere(number) {
                let (ended, wait) = std::sync::mpsc::channel();
                moved.send((root, ended)).unwrap();
                wait.recv().unwrap();
            }
            context.trace_id
        })
        .collect();
    drop(moved);
    ender.join().unwrap();
    minitrace::flush();
    ids
}

/// The requests that ended on this thread held, from the oldest of them
/// on: each held whole, as is every request after it, and as it was
/// recorded (its root, and its one step inside it). Returns how many.
fn newest_held_whole(ids: &[TraceId], here: impl Fn(usize) -> bool) -> usize {
    let held = held(ids);
    // The other thread holds every root it ended: the oldest is found
    // among the requests that ended here.
    let oldest = (0..ids.len())
        .find(|&number| here(number) && held.iter().any(|trace| trace.trace_id == ids[number]))
        .expect("some held");
    let whole = |id: &TraceId| held.iter().any(|trace| trace.trace_id == *id && trace.complete);
    assert!(ids[oldest + 1..].iter().all(whole), "every request since the oldest held is held whole");
    for id in &ids[oldest + 1..] {
        let trace = held.iter().find(|trace| trace.trace_id == *id).expect("held");
        let root = trace.root().expect("its root");
        let [step, _] = &trace.spans[..] else { panic!("{id:?}: {} spans, not 2", trace.spans.len()) };
        assert_eq!((&*root.name, &*step.name, step.parent_id), ("request", "step", root.span_id), "{id:?}");
        let inside = root.begin_time_unix_ns <= step.begin_time_unix_ns
            && step.begin_time_unix_ns + step.duration_ns <= root.begin_time_unix_ns + root.duration_ns;
        assert!(inside, "{id:?}: the step's times lie inside its root's");
    }
    ids.len() - oldest
}

/// A thread whose requests' roots sometimes end on another thread keeps
/// its newest requests: its ring of spans fills its memory while only its
/// own thrown-away requests come, then the parts of the others come back
/// from the collector and need room. The ring stops growing where the
/// history is full, parts and all, and gives back the slots of requests
/// that went early, rather than letting every thrown-away request go
/// without freeing a byte (which held 20 of the newest 100).
#[test]
fn a_thread_whose_roots_sometimes_end_elsewhere_keeps_its_newest_requests() {
    let (_one, _) = exclusive(FlightRecorder::new().bytes_per_thread(1 << 20));
    let ids = requests_ending_here_or_elsewhere(20_000, |number| number % 5 == 0);
    let held = newest_held_whole(&ids, |number| number % 5 != 0);
    assert!(held >= 750, "{held} held");
}

/// A thread whose first requests all had their roots end on another
/// thread, then none, fills its memory with its newest requests again:
/// the ring its history fixed small, next to the parts filed back, grows
/// back once those parts go.
#[test]
fn a_thread_whose_roots_stop_ending_elsewhere_fills_its_memory_again() {
    let recorder = || FlightRecorder::new().bytes_per_thread(1 << 20);
    let (_one, _) = exclusive(recorder());
    let ids = requests_ending_here_or_elsewhere(30_000, |_| false);
    let alone = newest_held_whole(&ids, |_| true);
    FlightRecorder::disable();
    minitrace::flush();
    recorder().enable();
    let ids = requests_ending_here_or_elsewhere(30_000, |number| number < 5_000);
    let held = newest_held_whole(&ids, |number| number >= 5_000);
    assert!(held * 8 >= alone * 7, "{held} held, {alone} with none ended elsewhere");
}
