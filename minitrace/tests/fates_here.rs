//! A root that ends on the thread that started it has its trace's fate
//! decided there: a trace thrown away (faster than the threshold, or
//! cancelled) is counted on that thread at once, before the collector runs,
//! and never reaches it; one kept reaches the reporter whole. Traces with
//! parts elsewhere (a thread-safe child, a guard that outlives its root, a
//! root that moved to another thread) follow their root's fate through the
//! collector, and every span is counted once.
//!
//! The collector wakes only once a minute here (and on `flush`), so a count
//! that moves before `flush` was made on the traced thread.

use std::sync::Arc;
use std::time::Duration;

use minitrace::collector::{stats, Config, SpanRecord, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use parking_lot::Mutex;

const THRESHOLD: Duration = Duration::from_millis(20);

fn sampled_out() -> u64 {
    stats().spans_sampled_out
}

/// A root and `children` local spans under it, on this thread, lasting
/// about `lasting`.
fn request(name: &'static str, children: usize, lasting: Duration) -> (Span, TraceId) {
    let context = SpanContext::random();
    let root = Span::root(name, context);
    {
        let _guard = root.set_local_parent();
        for _ in 0..children {
            let _step = LocalSpan::enter_with_local_parent("step");
        }
        std::thread::sleep(lasting);
    }
    (root, context.trace_id)
}

fn names_of(spans: &Arc<Mutex<Vec<SpanRecord>>>, trace_id: TraceId) -> Vec<String> {
    let mut names: Vec<String> = spans
        .lock()
        .iter()
        .filter(|span| span.trace_id == trace_id)
        .map(|span| span.name.to_string())
        .collect();
    names.sort();
    names
}

// One test: the reporter and the counters are global to the process.
#[test]
fn fates_are_decided_where_the_root_ends() {
    let (reporter, spans) = TestReporter::new();
    minitrace::set_reporter(
        reporter,
        Config::default().report_slow_traces_only(THRESHOLD).report_interval(Duration::from_secs(60)),
    );
    let reported_before = stats().spans_reported;

    // Fast: thrown away here, counted before the collector runs.
    let before = sampled_out();
    let (fast, fast_id) = request("fast", 9, Duration::ZERO);
    drop(fast);
    assert_eq!(sampled_out() - before, 10, "root + 9 counted on the traced thread");

    // Cancelled, however slow: the same.
    let before = sampled_out();
    let (mut cancelled, cancelled_id) = request("cancelled", 3, THRESHOLD);
    cancelled.cancel();
    drop(cancelled);
    assert_eq!(sampled_out() - before, 4);

    // Slow: kept, reported whole.
    let (slow, slow_id) = request("slow", 2, THRESHOLD + Duration::from_millis(5));
    drop(slow);

    // A thread-safe child: the trace escaped, so the collector is told.
    let before = sampled_out();
    let (fast_with_child, child_id) = request("with a child", 2, Duration::ZERO);
    drop(Span::enter_with_parent("thread-safe child", &fast_with_child));
    drop(fast_with_child);

    // A guard that outlives its root: its spans follow the root's fate.
    let context = SpanContext::random();
    let outlived = Span::root("outlived by its guard", context);
    let guard = outlived.set_local_parent();
    drop(LocalSpan::enter_with_local_parent("under the late guard"));
    drop(outlived);
    drop(guard);

    // A root that moved to another thread after its local spans: it ends
    // there, through the collector; what waited here is sent by `flush`.
    let (moved, moved_id) = request("moved", 2, Duration::ZERO);
    std::thread::spawn(move || drop(moved)).join().unwrap();

    minitrace::flush();
    assert_eq!(sampled_out() - before, 4 + 2 + 3, "the escaped traces, counted by the collector");
    assert!(names_of(&spans, fast_id).is_empty());
    assert!(names_of(&spans, cancelled_id).is_empty());
    assert!(names_of(&spans, child_id).is_empty());
    assert!(names_of(&spans, context.trace_id).is_empty());
    assert!(names_of(&spans, moved_id).is_empty());
    assert_eq!(names_of(&spans, slow_id), ["slow", "step", "step"]);
    assert_eq!(stats().spans_reported - reported_before, 3);
    assert_eq!(stats().dropped(), 0);

    // Kept traces whose roots end elsewhere keep every span: a slow root
    // moved to another thread after its guard.
    let (slow_moved, slow_moved_id) = request("slow, moved", 2, THRESHOLD + Duration::from_millis(5));
    std::thread::spawn(move || drop(slow_moved)).join().unwrap();
    minitrace::flush();
    assert_eq!(names_of(&spans, slow_moved_id), ["slow, moved", "step", "step"]);

    // A future whose spans stayed on this thread: thrown away here too.
    let before = sampled_out();
    let context = SpanContext::random();
    futures_lite_block_on(
        async {
            let _step = LocalSpan::enter_with_local_parent("in the future");
        }
        .in_span(Span::root("fast future", context)),
    );
    assert_eq!(sampled_out() - before, 2);
    minitrace::flush();
    assert!(names_of(&spans, context.trace_id).is_empty());
}

/// Polls a future to completion on this thread.
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
            return output;
        }
    }
}
