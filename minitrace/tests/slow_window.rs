//! The traces an automatic dump hands to `on_slow_trace` carry exactly
//! their own spans: each one equals the same trace in a `snapshot()` of
//! the same memory.

use std::sync::{mpsc, Mutex};
use std::time::Duration;

use minitrace::collector::{Config, SpanContext, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::recorder::{snapshot, FlightRecorder, SlowTraceWindow};

use minitrace::Span;

#[test]
fn a_window_holds_each_request_with_its_own_spans() {
    let (reporter, _) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(Duration::from_millis(20)));
    let (sender, windows) = mpsc::channel::<SlowTraceWindow>();
    let sender = Mutex::new(sender);
    FlightRecorder::new()
        .bytes_per_thread(1 << 20)
        .settle_time(Duration::from_millis(10))
        .min_interval(Duration::ZERO)
        .on_slow_trace(move |window| drop(sender.lock().unwrap().send(window)))
        .enable();

    // Three fast requests, then a slow one, on one thread.
    for step in ["fast-step a", "fast-step b", "fast-step c"] {
        let root = Span::root("fast", SpanContext::random());
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent(step);
    }
    let slow_context = SpanContext::random();
    {
        let root = Span::root("slow", slow_context);
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent("slow-step");
        std::thread::sleep(Duration::from_millis(30));
    }
    let window = windows.recv_timeout(Duration::from_secs(10)).expect("an automatic dump");
    assert_eq!(window.trace_id, slow_context.trace_id);
    let snapshot = snapshot();
    assert!(!window.traces.is_empty());
    for trace in &window.traces {
        let same = snapshot.traces.iter().find(|other| other.trace_id == trace.trace_id).unwrap();
        assert_eq!(trace, same, "the window's trace differs from the snapshot's");
        let root = trace.root().unwrap();
        for span in &trace.spans {
            assert!(span.begin_time_unix_ns >= root.begin_time_unix_ns, "{span:?} begins before its root");
            assert!(span.begin_time_unix_ns + span.duration_ns <= trace.end_unix_ns());
        }
    }
    let slow = window.traces.iter().find(|trace| trace.trace_id == slow_context.trace_id).unwrap();
    let names: Vec<&str> = slow.spans.iter().map(|span| span.name.as_ref()).collect();
    assert_eq!(names, ["slow-step", "slow"]);
    FlightRecorder::disable();
}
