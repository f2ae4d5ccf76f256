//! Retrieval while two threads record flat out: every trace asked for is
//! whole and exactly as it was recorded (no record torn), the counts are
//! exact, and the recording threads never wait for it: they record on,
//! through the harvests that serve the retrievals, at the rate they record
//! without them (the figures are printed, not asserted).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use minitrace::collector::{stats, Config, Reporter, SpanRecord, TraceId};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace::recorder::{self, FlightRecorder};

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

/// Requests made per producer while `busy` holds; the trace ids of every
/// 1 000th, for the retriever, and the longest a request took.
fn produce(busy: Arc<AtomicBool>, offer: Arc<Mutex<Vec<(TraceId, u64)>>>, base: u64) -> (u64, Duration) {
    let (mut made, mut longest) = (0, Duration::ZERO);
    while busy.load(Ordering::Relaxed) {
        let started = Instant::now();
        let id = request(base + made, 9);
        longest = longest.max(started.elapsed());
        if made % 1_000 == 0 {
            offer.lock().unwrap().push((id, base + made));
        }
        made += 1;
    }
    (made, longest)
}

/// Two producers for `run` long, with or without a retriever beside them.
fn run(run: Duration, retrieving: bool) -> (u64, Duration, u64) {
    let busy = Arc::new(AtomicBool::new(true));
    let offer = Arc::new(Mutex::new(Vec::new()));
    let producers: Vec<_> = (0..2u64)
        .map(|producer| {
            let (busy, offer) = (busy.clone(), offer.clone());
            std::thread::spawn(move || produce(busy, offer, producer << 40))
        })
        .collect();
    let checked = Arc::new(AtomicU64::new(0));
    let retriever = retrieving.then(|| {
        let (busy, offer, checked) = (busy.clone(), offer.clone(), checked.clone());
        std::thread::spawn(move || {
            while busy.load(Ordering::Relaxed) {
                // The newest offered: a retrieval comes a cycle later, when
                // flat-out producers have made tens of thousands more.
                let asked: Option<(TraceId, u64)> = std::mem::take(&mut *offer.lock().unwrap()).pop();
                if let Some((id, number)) = asked {
                    let trace = recorder::trace(id).expect("a trace made a moment ago is held");
                    assert!(trace.complete, "{trace:?}");
                    assert_eq!(trace.spans.len(), 10);
                    let number = number.to_string();
                    for span in &trace.spans {
                        assert_eq!(span.trace_id, id);
                        assert_eq!(
                            span.properties,
                            [("number".into(), number.clone().into())],
                            "a torn record: {span:?}"
                        );
                        assert!(
                            span.name == "request" || span.name.starts_with(&format!("{number}/")),
                            "{span:?}"
                        );
                    }
                    checked.fetch_add(1, Ordering::Relaxed);
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
    (made, longest, checked.load(Ordering::Relaxed))
}

#[test]
fn retrieval_under_load_tears_nothing_and_holds_no_thread_up() {
    minitrace::set_reporter(Nothing, Config::default().report_slow_traces_only(Duration::from_secs(60)));
    // Enough for the ~50 ms of requests a retrieval may come after.
    FlightRecorder::new().bytes_per_thread(64 << 20).enable();
    let before = (stats(), recorder::stats());
    let (alone, alone_longest, _) = run(Duration::from_secs(1), false);
    let (beside, beside_longest, checked) = run(Duration::from_secs(1), true);
    let after = (stats(), recorder::stats());
    eprintln!(
        "2 producers, 1 s each way: {alone} requests alone (longest {alone_longest:?}), \
         {beside} beside {checked} retrievals (longest {beside_longest:?})"
    );
    assert!(checked > 0);
    assert_eq!(after.1.retrieved - before.1.retrieved, checked);
    assert_eq!(
        (after.1.partly_overwritten, after.1.not_found),
        (before.1.partly_overwritten, before.1.not_found)
    );
    // No traced thread waited for room: it never does for a retrieval.
    assert_eq!(after.0.waits_for_room, before.0.waits_for_room);
    assert_eq!(after.0.dropped(), before.0.dropped());
}
