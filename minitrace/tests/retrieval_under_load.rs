//! Retrieval while two threads record flat out: every trace asked for is
//! whole and exactly as it was recorded (no record torn), the counts are
//! exact, and the recording threads never wait for it: they record on,
//! through the harvests that serve the retrievals, at the rate they record
//! without them (the figures are printed, not asserted). A trace asked for
//! that is no longer held must be older than its producer's memory reaches
//! (the collector was held off the CPU longer than the memory lasts), and
//! counted as not found.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use minitrace::collector::{stats, Config, Reporter, SpanRecord, TraceId};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace::recorder::{self, FlightRecorder, RecordedTrace, Retention};

struct Nothing;

impl Reporter for Nothing {
    fn report(&mut self, _: &[SpanRecord]) {}
}

/// A request: a root and `steps` local spans named after the request's
/// number, each with a property saying the same: a record mixed with
/// another request's would show.
fn request(number: u64, steps: u64) -> TraceId {
    let context = SpanContext::random();
    let root = Span::root("request", context).with_property(|| ("number", number.to_string()));
    let _guard = root.set_local_parent();
    for step in 0..steps {
        let _step = LocalSpan::enter_with_local_parent(format!("{number}/{step}"))
            .with_property(|| ("number", number.to_string()));
    }
    context.trace_id
}

/// A trace offered to the retriever: its id, its request's number, and
/// when (Unix ns) the request began, at the latest.
type Offer = Arc<Mutex<Vec<(TraceId, u64, u64)>>>;

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Checks a retrieved trace against the request that made it: one root,
/// each of its steps once, each under the root and inside its times, every
/// record of this trace and this request (none torn).
fn check_whole(trace: &RecordedTrace, id: TraceId, number: u64) {
    assert!(trace.complete, "{trace:?}");
    assert_eq!(trace.spans.len(), 10);
    let number = number.to_string();
    for span in &trace.spans {
        assert_eq!(span.trace_id, id);
        assert_eq!(span.properties, [("number".into(), number.clone().into())], "a torn record: {span:?}");
        assert!(span.name == "request" || span.name.starts_with(&format!("{number}/")), "{span:?}");
    }
    let roots: Vec<_> = trace.spans.iter().filter(|span| span.name == "request").collect();
    assert_eq!(roots.len(), 1, "{trace:?}");
    let root = roots[0];
    let mut steps: Vec<_> = trace.spans.iter().filter(|span| span.name != "request").collect();
    steps.sort_by_key(|span| span.begin_time_unix_ns);
    for (step, span) in steps.iter().enumerate() {
        assert_eq!(span.name, format!("{number}/{step}"), "{trace:?}");
        assert_eq!(span.parent_id, root.span_id, "{span:?}");
        assert!(span.begin_time_unix_ns >= root.begin_time_unix_ns, "{span:?} begins before {root:?}");
        assert!(
            span.begin_time_unix_ns + span.duration_ns <= root.begin_time_unix_ns + root.duration_ns,
            "{span:?} ends after {root:?}"
        );
    }
}

/// Checks that a trace not found is one its producer's memory no longer
/// reaches back to: the producer's thread if a retrieval told it, else
/// either producer's (100 µs for the clocks' difference).
fn check_overwritten(retention: &Retention, thread: Option<u32>, number: u64, began: u64) {
    let mut live = retention.threads.iter().filter(|memory| !memory.exited);
    let past = |oldest: Option<u64>| oldest.is_some_and(|oldest| oldest + 100_000 > began);
    let explained = match thread {
        Some(thread) => live.any(|memory| memory.thread == thread && past(memory.oldest_unix_ns)),
        None => live.any(|memory| past(memory.oldest_unix_ns)),
    };
    assert!(
        explained,
        "trace {number} (began {began}, thread {thread:?}) is not held, though memory reaches back \
         to it: {retention:?}"
    );
}

/// Requests made per producer while `busy` holds; the trace ids of every
/// 1 000th, for the retriever, and the longest a request took.
fn produce(busy: Arc<AtomicBool>, offer: Offer, base: u64) -> (u64, Duration) {
    let (mut made, mut longest) = (0, Duration::ZERO);
    while busy.load(Ordering::Relaxed) {
        let (started, began) = (Instant::now(), unix_ns());
        let id = request(base + made, 9);
        longest = longest.max(started.elapsed());
        if made % 1_000 == 0 {
            offer.lock().unwrap().push((id, base + made, began));
        }
        made += 1;
    }
    (made, longest)
}

/// Two producers for `run` long, with or without a retriever beside them:
/// the requests made, the longest one, the traces retrieved and checked,
/// and those no longer held.
fn run(run: Duration, retrieving: bool) -> (u64, Duration, u64, u64) {
    let busy = Arc::new(AtomicBool::new(true));
    let offer = Arc::new(Mutex::new(Vec::new()));
    let producers: Vec<_> = (0..2u64)
        .map(|producer| {
            let (busy, offer) = (busy.clone(), offer.clone());
            std::thread::spawn(move || produce(busy, offer, producer << 40))
        })
        .collect();
    let (checked, missed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let retriever = retrieving.then(|| {
        let (busy, offer) = (busy.clone(), offer.clone());
        let (checked, missed) = (checked.clone(), missed.clone());
        std::thread::spawn(move || {
            // Each producer's thread, as retrieved traces tell it.
            let mut threads = HashMap::new();
            while busy.load(Ordering::Relaxed) {
                // The newest offered: a retrieval comes a cycle later, when
                // flat-out producers have made tens of thousands more.
                let asked = std::mem::take(&mut *offer.lock().unwrap()).pop();
                if let Some((id, number, began)) = asked {
                    let producer = number >> 40;
                    match recorder::trace(id) {
                        Some(trace) => {
                            check_whole(&trace, id, number);
                            threads.insert(producer, trace.thread);
                            checked.fetch_add(1, Ordering::Relaxed);
                        }
                        // Overwritten before the collector came to it.
                        None => {
                            let thread = threads.get(&producer).copied();
                            check_overwritten(&recorder::retention(), thread, number, began);
                            missed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    });
    std::thread::sleep(run);
    busy.store(false, Ordering::Relaxed);
    let results: Vec<(u64, Duration)> =
        producers.into_iter().map(|producer| producer.join().unwrap()).collect();
    if let Some(retriever) = retriever {
        retriever.join().unwrap();
    }
    let made = results.iter().map(|(made, _)| made).sum();
    let longest = results.iter().map(|(_, longest)| *longest).max().unwrap();
    (made, longest, checked.load(Ordering::Relaxed), missed.load(Ordering::Relaxed))
}

#[test]
fn retrieval_under_load_tears_nothing_and_holds_no_thread_up() {
    minitrace::set_reporter(Nothing, Config::default().report_slow_traces_only(Duration::from_secs(60)));
    // Enough for the ~100 ms of requests a retrieval may come after.
    FlightRecorder::new().bytes_per_thread(64 << 20).enable();
    let before = (stats(), recorder::stats());
    let (alone, alone_longest, ..) = run(Duration::from_secs(1), false);
    let (beside, beside_longest, checked, missed) = run(Duration::from_secs(1), true);
    let after = (stats(), recorder::stats());
    eprintln!(
        "2 producers, 1 s each way: {alone} requests alone (longest {alone_longest:?}), \
         {beside} beside {checked} retrievals (longest {beside_longest:?}), {missed} overwritten first"
    );
    assert_eq!(after.1.retrieved - before.1.retrieved, checked);
    assert_eq!(after.1.partly_overwritten, before.1.partly_overwritten);
    assert_eq!(after.1.not_found - before.1.not_found, missed);
    // Most are held: a miss needs the collector held off for the ~100 ms
    // the memory lasts.
    assert!(checked > 10 * missed, "{checked} retrieved, {missed} not held");
    // No traced thread waited for room: it never does for a retrieval.
    assert_eq!(after.0.waits_for_room, before.0.waits_for_room);
    assert_eq!(after.0.dropped(), before.0.dropped());
}
