//! What happens in the awkward cases: each has a defined, tested outcome.

mod common;

use common::{assert_linked, new_root, reported, trace, tree};
use minitrace::local::{LocalCollector, LocalSpan};
use minitrace::prelude::*;

/// A panic unwinds through traced code: every span is still closed and
/// reported, and the panic reaches the caller unchanged.
#[test]
fn a_panic_inside_traced_code_reports_the_spans() {
    let (root, trace_id) = new_root("request");
    let result = std::panic::catch_unwind(|| {
        let _guard = root.set_local_parent();
        let _outer = LocalSpan::enter_with_local_parent("outer");
        let _inner = LocalSpan::enter_with_local_parent("inner");
        panic!("boom");
    });
    assert!(result.is_err());
    drop(root);
    assert_eq!(tree(trace_id), "\nrequest []\n    outer []\n        inner []\n");
}

/// A thread that exits while a local parent guard and local spans are still
/// open (here leaked with `mem::forget`): its spans are closed at exit and
/// reported with their trace.
#[test]
fn a_thread_exiting_with_open_spans_reports_them() {
    let (root, trace_id) = new_root("request");
    let child = Span::enter_with_parent("worker", &root);
    std::thread::spawn(move || {
        let guard = child.set_local_parent();
        let open = LocalSpan::enter_with_local_parent("still open");
        std::mem::forget(open);
        std::mem::forget(guard);
        drop(child);
    })
    .join()
    .unwrap();
    drop(root);
    assert_eq!(tree(trace_id), "\nrequest []\n    worker []\n        still open []\n");
    let records = trace(trace_id);
    let open = records.iter().find(|r| r.name == "still open").unwrap();
    assert!(open.duration_ns > 0);
}

/// A local parent set from a thread-local destructor that runs after the
/// thread's exit has closed its span lines is a no-op: its local spans are
/// not recorded (a guard leaked then could never be closed for the thread),
/// and nothing panics. The thread-safe span itself is still reported.
#[test]
fn a_local_parent_set_after_the_thread_closed_its_lines_is_a_no_op() {
    use std::cell::RefCell;

    struct TracesOnDrop(Option<Span>);
    impl Drop for TracesOnDrop {
        fn drop(&mut self) {
            if let Some(span) = self.0.take() {
                let _guard = span.set_local_parent();
                drop(LocalSpan::enter_with_local_parent("too late"));
            }
        }
    }
    thread_local! {
        static LATE: RefCell<TracesOnDrop> = const { RefCell::new(TracesOnDrop(None)) };
    }

    let (root, trace_id) = new_root("request");
    let worker = Span::enter_with_parent("worker", &root);
    let late = Span::enter_with_parent("in a destructor", &root);
    std::thread::spawn(move || {
        // Registered first, so destroyed after the span lines are closed
        // (thread-local destructors run in reverse order of registration).
        LATE.with(|cell| cell.borrow_mut().0 = Some(late));
        let _guard = worker.set_local_parent();
        drop(LocalSpan::enter_with_local_parent("in time"));
    })
    .join()
    .unwrap();
    drop(root);
    assert_eq!(tree(trace_id), "\nrequest []\n    in a destructor []\n    worker []\n        in time []\n");
}

/// Local spans dropped out of order keep their own end times; later spans
/// attach to the parent of the span dropped last.
#[test]
fn local_spans_dropped_out_of_order() {
    let (root, trace_id) = new_root("request");
    {
        let _guard = root.set_local_parent();
        let outer = LocalSpan::enter_with_local_parent("outer");
        let inner = LocalSpan::enter_with_local_parent("inner");
        drop(outer);
        let _after_outer = LocalSpan::enter_with_local_parent("after outer");
        drop(inner);
        let _after_inner = LocalSpan::enter_with_local_parent("after inner");
    }
    drop(root);
    let records = trace(trace_id);
    assert_linked(&records);
    assert_eq!(
        tree(trace_id),
        "\nrequest []\n    after outer []\n    outer []\n        after inner []\n        inner []\n"
    );
}

/// A guard dropped after a newer guard on the same thread: both lines are
/// reported to their own spans.
#[test]
fn guards_dropped_out_of_order() {
    let (a, trace_a) = new_root("a");
    let (b, trace_b) = new_root("b");
    let guard_a = a.set_local_parent();
    let guard_b = b.set_local_parent();
    drop(LocalSpan::enter_with_local_parent("under b"));
    drop(guard_a);
    drop(LocalSpan::enter_with_local_parent("still under b"));
    drop(guard_b);
    drop((a, b));
    assert_eq!(tree(trace_a), "\na []\n");
    assert_eq!(tree(trace_b), "\nb []\n    still under b []\n    under b []\n");
}

/// A `LocalCollector` collected after a newer one on the same thread: each
/// gets the spans recorded while it was the newest, and the newer one's
/// line stays in place until it is collected.
#[test]
fn local_collectors_collected_out_of_order() {
    let names = |collector: LocalCollector| -> Vec<String> {
        let records = collector.collect().to_span_records(SpanContext::random());
        records.into_iter().map(|record| record.name.into_owned()).collect()
    };
    let older = LocalCollector::start();
    drop(LocalSpan::enter_with_local_parent("under older"));
    let newer = LocalCollector::start();
    drop(LocalSpan::enter_with_local_parent("under newer"));
    assert_eq!(names(older), ["under older"]);
    drop(LocalSpan::enter_with_local_parent("still under newer"));
    assert_eq!(names(newer), ["under newer", "still under newer"]);
}

#[test]
fn flush_inside_a_tokio_runtime_returns_with_spans_reported() {
    reported();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let trace_id = runtime.block_on(async {
        let context = SpanContext::random();
        drop(Span::root("async request", context));
        minitrace::flush();
        context.trace_id
    });
    let spans = reported();
    let all = spans.lock();
    assert!(all.iter().any(|r| r.trace_id == trace_id));
}

#[test]
fn local_spans_without_a_parent_are_noops() {
    drop(LocalSpan::enter_with_local_parent("no parent"));
    assert!(SpanContext::current_local_parent().is_none());
    // A collector dropped without collecting discards its spans.
    let collector = LocalCollector::start();
    drop(LocalSpan::enter_with_local_parent("discarded"));
    drop(collector);
    // Neither span leaks into a later batch.
    let later = LocalCollector::start();
    drop(LocalSpan::enter_with_local_parent("kept"));
    let records = later.collect().to_span_records(SpanContext::random());
    let names: Vec<_> = records.iter().map(|record| record.name.to_string()).collect();
    assert_eq!(names, ["kept"]);
}

#[test]
fn a_huge_number_of_local_spans_is_bounded_and_counted() {
    let before = minitrace::collector::stats();
    let (root, trace_id) = new_root("huge");
    {
        let _guard = root.set_local_parent();
        for _ in 0..150_000 {
            drop(LocalSpan::enter_with_local_parent("span"));
        }
    }
    drop(root);
    let reported = trace(trace_id).len() as u64;
    let after = minitrace::collector::stats();
    let too_large = after.dropped_trace_too_large - before.dropped_trace_too_large;
    assert_eq!(reported + after.dropped() - before.dropped(), 150_001);
    assert!(too_large >= 100_000, "the per-parent bound dropped {too_large}");
}
