//! `tracing` spans across `.await`s and threads: an instrumented future is
//! one span however often it is polled, wherever; a span shared by several
//! threads is the local parent of each while entered; concurrent traces
//! stay apart.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{finished, install, property, trace};
use minitrace::future::FutureExt;
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace_tracing::MinitraceLayer;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

fn setup() {
    install(|| Box::new(tracing_subscriber::registry().with(MinitraceLayer::new())));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap()
}

/// An instrumented library future that suspends between its steps.
#[tracing::instrument]
async fn fetch(key: u32) -> u32 {
    for attempt in 0..3 {
        tokio::task::yield_now().await;
        step(key, attempt);
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    key
}

#[minitrace::trace(short_name = true, properties = { "key": "{key}" })]
fn step(key: u32, attempt: u32) {
    let _ = attempt;
}

/// Checks that each `fetch` of `keys` is one span under `parent`, with its
/// three steps under it, and that no other `fetch` was recorded.
fn assert_fetches(trace: &common::Trace, keys: &[&str], parent: &str) {
    let fetches = trace.all("fetch");
    for key in keys {
        let mut this_key = fetches.iter().filter(|span| property(&span.properties, "key") == Some(key));
        let fetch = this_key.next().unwrap_or_else(|| panic!("no fetch {key} in {:#?}", trace.spans));
        assert!(this_key.next().is_none(), "two spans for fetch {key}");
        assert_eq!(trace.parent(fetch), parent);
        let steps: Vec<_> = trace
            .all("step")
            .into_iter()
            .filter(|span| property(&span.properties, "key") == Some(key))
            .collect();
        assert_eq!(steps.len(), 3, "{:#?}", trace.spans);
        assert!(steps.iter().all(|step| step.parent_id == fetch.span_id), "{:#?}", trace.spans);
    }
    let known = ["1", "2", "3", "4", "5", "6"];
    assert!(fetches.iter().all(|fetch| known.contains(&property(&fetch.properties, "key").unwrap())));
}

#[test]
fn an_instrumented_future_is_one_span_across_its_awaits() {
    setup();
    let runtime = runtime();
    let context = SpanContext::random();
    let task = async {
        assert_eq!(fetch(1).await, 1);
        // Two at once in one task: polled in turns, each its own parent.
        let (a, b) = tokio::join!(fetch(2), fetch(3));
        assert_eq!(a + b, 5);
        // `#[instrument]` opens its span at the first poll: a bare spawn
        // starts on a worker with no local parent, so is not recorded...
        tokio::spawn(fetch(9)).await.unwrap();
        // ...while a span made here travels with the spawned future.
        tokio::spawn(fetch(4).instrument(tracing::info_span!("spawned"))).await.unwrap();
    };
    runtime.block_on(runtime.spawn(task.in_span(Span::root("root", context)))).unwrap();
    let trace = finished(context.trace_id);
    assert_fetches(&trace, &["1", "2", "3"], "root");
    assert_eq!(trace.parent_of("spawned"), "root");
    assert_fetches(&trace, &["4"], "spawned");
}

#[test]
fn a_future_instrumented_by_hand_nests_under_the_span_it_was_made_in() {
    setup();
    let runtime = runtime();
    let context = SpanContext::random();
    let task = async {
        let batch = tracing::info_span!("batch");
        async {
            fetch(5).await;
            fetch(6).await;
        }
        .instrument(batch)
        .await;
    };
    runtime.block_on(runtime.spawn(task.in_span(Span::root("root", context)))).unwrap();
    let trace = finished(context.trace_id);
    assert_eq!(trace.parent_of("batch"), "root");
    assert_fetches(&trace, &["5", "6"], "batch");
}

#[tracing::instrument]
fn work(thread: usize) {
    drop(LocalSpan::enter_with_local_parent("local work").with_property(|| ("thread", thread.to_string())));
}

#[test]
fn a_span_entered_on_several_threads_is_each_ones_local_parent() {
    setup();
    let trace = trace(|| {
        let shared = tracing::info_span!("fan out");
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    // Entered twice on each thread: still one span.
                    shared.in_scope(|| work(thread));
                    shared.in_scope(|| drop(LocalSpan::enter_with_local_parent("second visit")));
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    });
    let fan_out = trace.span("fan out");
    assert_eq!(trace.parent(fan_out), "root");
    let works = trace.all("work");
    assert_eq!(works.len(), 4);
    assert!(works.iter().all(|work| work.parent_id == fan_out.span_id));
    for local in trace.all("local work") {
        let thread = property(&local.properties, "thread").unwrap();
        let work = works.iter().find(|work| property(&work.properties, "thread") == Some(thread)).unwrap();
        assert_eq!(local.parent_id, work.span_id);
    }
    assert_eq!(trace.all("second visit").len(), 4);
    assert!(trace.all("second visit").iter().all(|visit| visit.parent_id == fan_out.span_id));
}

/// Events on every thread a span visits, 200 times over: each reaches the
/// span, within its time.
#[test]
fn events_from_every_thread_a_span_visits_reach_it() {
    setup();
    for _ in 0..200 {
        let trace = trace(|| {
            let shared = tracing::info_span!("visited");
            let threads: Vec<_> = (0..3)
                .map(|thread| {
                    let shared = shared.clone();
                    std::thread::spawn(move || shared.in_scope(|| tracing::info!(thread, "on a thread")))
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
        });
        let visited = trace.span("visited");
        let mut threads: Vec<&str> = visited
            .events
            .iter()
            .filter(|event| event.name == "on a thread")
            .filter_map(|event| property(&event.properties, "thread"))
            .collect();
        threads.sort_unstable();
        assert_eq!(threads, ["0", "1", "2"], "{visited:?}");
        let end = visited.begin_time_unix_ns + visited.duration_ns;
        assert!(visited
            .events
            .iter()
            .all(|event| (visited.begin_time_unix_ns..=end).contains(&event.timestamp_unix_ns)));
    }
}

#[test]
fn concurrent_traces_on_several_threads_stay_apart() {
    setup();
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                trace(|| {
                    for _ in 0..10 {
                        work(thread);
                    }
                })
            })
        })
        .collect();
    for (thread, handle) in threads.into_iter().enumerate() {
        let trace = handle.join().unwrap();
        let thread = thread.to_string();
        assert_eq!(trace.all("work").len(), 10, "{:#?}", trace.spans);
        for work in trace.all("work") {
            assert_eq!(trace.parent(work), "root");
            assert_eq!(property(&work.properties, "thread"), Some(thread.as_str()));
        }
        assert_eq!(trace.spans.len(), 21);
    }
}
