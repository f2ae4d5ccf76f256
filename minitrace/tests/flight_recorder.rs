//! The flight recorder: what it keeps of each request whatever its fate,
//! its memory bound, snapshots taken while threads record, and threads
//! that exit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use minitrace::collector::{Config, SpanContext, TestReporter, TraceId};
use minitrace::local::LocalSpan;
use minitrace::recorder::{snapshot, FlightRecorder, RecordedRequest};
use minitrace::Span;

/// The recorder and the reporter are global: one test at a time, each
/// starting from an empty recorder.
fn exclusive(bytes_per_thread: usize) -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    static SET: std::sync::Once = std::sync::Once::new();
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    SET.call_once(|| {
        let (reporter, _) = TestReporter::new();
        // Every trace thrown away on its thread: the recorder still keeps it.
        minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(Duration::from_secs(60)));
    });
    FlightRecorder::disable();
    FlightRecorder::new().bytes_per_thread(bytes_per_thread).enable();
    guard
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

fn on_this_thread(trace_ids: &[TraceId]) -> Vec<RecordedRequest> {
    snapshot().requests.into_iter().filter(|request| trace_ids.contains(&request.trace_id)).collect()
}

#[test]
fn a_request_thrown_away_is_recorded_whole() {
    let _one = exclusive(1 << 20);
    let trace_id = request("get", 3);
    let requests = on_this_thread(&[trace_id]);
    let [request] = &requests[..] else { panic!("one request, not {requests:?}") };
    assert_eq!(request.name, "get");
    assert_eq!(request.properties, vec![("user".into(), "42".into())]);
    let names: Vec<&str> = request.spans.iter().map(|span| span.name.as_ref()).collect();
    assert_eq!(names, ["outer", "step 1", "step 2"]);
    let parents: Vec<Option<u32>> = request.spans.iter().map(|span| span.parent).collect();
    assert_eq!(parents, [None, Some(0), Some(0)]);
    for span in &request.spans {
        assert!(
            span.begin_unix_ns >= request.begin_unix_ns
                && span.begin_unix_ns + span.duration_ns <= request.end_unix_ns()
        );
    }
    minitrace::flush();
    assert_eq!(minitrace::collector::stats().spans_reported, 0, "thrown away all the same");
}

#[test]
fn the_memory_bound_keeps_the_newest_requests() {
    let _one = exclusive(64 << 10);
    let trace_ids: Vec<TraceId> = (0..10_000).map(|_| request("get", 10)).collect();
    let kept = on_this_thread(&trace_ids);
    assert!(!kept.is_empty() && kept.len() < 1_000, "bounded: {} kept", kept.len());
    // 64 KiB holds ~80 requests of 10 spans: ~56 bytes a span and ~7 for
    // its owned name, ~200 a request with its property.
    assert!((70..=90).contains(&kept.len()), "{} kept", kept.len());
    let newest = &trace_ids[trace_ids.len() - kept.len()..];
    assert_eq!(kept.iter().map(|request| request.trace_id).collect::<Vec<_>>(), newest);
    assert!(kept.iter().all(|request| request.spans.len() == 10));
}

#[test]
fn snapshots_taken_meanwhile_lose_nothing_a_thread_records() {
    let _one = exclusive(1 << 30);
    let done = Arc::new(AtomicBool::new(false));
    let snapshots = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut taken = 0;
            while !done.load(Ordering::Relaxed) {
                let _ = snapshot();
                taken += 1;
            }
            taken
        }
    });
    let trace_ids: Vec<TraceId> = (0..100_000).map(|_| request("get", 2)).collect();
    done.store(true, Ordering::Relaxed);
    assert!(snapshots.join().unwrap() > 0);
    // Requests set aside while a snapshot read the ring join it with the next one.
    request("last", 1);
    let kept = on_this_thread(&trace_ids);
    assert_eq!(kept.len(), trace_ids.len());
}

#[test]
fn threads_that_exited_are_kept_a_while() {
    let _one = exclusive(1 << 20);
    let first = std::thread::spawn(|| request("on a thread that exits", 1)).join().unwrap();
    assert_eq!(on_this_thread(&[first]).len(), 1);
    assert_eq!(on_this_thread(&[first]).len(), 1, "still there when read again");
    // Many threads come and go: the rings of the oldest are forgotten.
    let later: Vec<TraceId> = (0..100)
        .map(|_| std::thread::spawn(|| request("on a thread that exits", 1)).join().unwrap())
        .collect();
    assert!(on_this_thread(&[first]).is_empty());
    let kept = on_this_thread(&later).len();
    assert!((1..100).contains(&kept), "{kept} of the later threads' rings kept");
    // Old rings are forgotten when a thread first records: the newest 16
    // exited threads' rings, and the last thread's, which exited since.
    assert!((16..=17).contains(&kept), "{kept} rings of exited threads kept");
}

/// The bound counts what a request owns: a request with a 100 KiB
/// property takes 100 KiB of the bound, not the ~200 bytes of its entries.
#[test]
fn the_memory_bound_counts_names_and_properties() {
    let _one = exclusive(1 << 20);
    let overwritten_before = minitrace::recorder::stats().overwritten_requests;
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
    let kept = on_this_thread(&trace_ids);
    let held: usize = kept.iter().map(|request| request.properties[0].1.len()).sum();
    assert!(held <= 1 << 20, "{} requests kept, {held} bytes of properties", kept.len());
    assert!((5..=10).contains(&kept.len()), "{} kept", kept.len());
    let overwritten = minitrace::recorder::stats().overwritten_requests - overwritten_before;
    assert_eq!(overwritten as usize, trace_ids.len() - kept.len());
}

#[test]
fn off_records_nothing() {
    let _one = exclusive(1 << 20);
    FlightRecorder::disable();
    let trace_id = request("get", 2);
    assert!(on_this_thread(&[trace_id]).is_empty());
}
