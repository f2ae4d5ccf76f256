//! `tracing` spans on one thread: which become minitrace spans, under
//! which parent, with which name and properties; and that nothing is
//! recorded outside a trace.

mod common;

use common::{any_span_named, install, property, trace};
use minitrace::collector::SpanContext;
use minitrace::local::LocalSpan;
use minitrace_tracing::MinitraceLayer;
use tracing::field;
use tracing_subscriber::layer::SubscriberExt;

fn setup() {
    install(|| Box::new(tracing_subscriber::registry().with(MinitraceLayer::new())));
}

#[derive(Debug)]
#[allow(dead_code)] // read through `Debug` only
struct Order {
    id: u32,
}

/// A library function, as a crate instrumented with `tracing` writes it.
#[tracing::instrument(fields(kind = "lookup"))]
fn find_user(name: &str, id: u64, admin: bool, ratio: f64, order: &Order) -> usize {
    name.len()
}

#[test]
fn an_instrumented_fn_is_a_child_with_its_fields_as_properties() {
    setup();
    let trace = trace(|| {
        find_user("alice", 42, true, 0.5, &Order { id: 7 });
    });
    assert_eq!(trace.parent_of("find_user"), "root");
    let properties = &trace.span("find_user").properties;
    for (key, value) in [
        ("tracing.target", "spans"),
        ("tracing.level", "INFO"),
        ("kind", "lookup"),
        ("name", "alice"),
        ("id", "42"),
        ("admin", "true"),
        ("ratio", "0.5"),
        ("order", "Order { id: 7 }"),
    ] {
        assert_eq!(property(properties, key), Some(value), "{key} in {properties:?}");
    }
}

#[test]
fn integers_and_bools_read_as_written_small_or_large() {
    setup();
    let trace = trace(|| {
        let span = tracing::info_span!(
            "numbers",
            zero = 0u64,
            small = 7i64,
            status = 404u16,
            large = 1_000u64,
            max = u64::MAX,
            negative = -3i64,
            min = i64::MIN,
            no = false,
            yes = true,
        );
        span.in_scope(|| {});
    });
    let properties = &trace.span("numbers").properties;
    let max = u64::MAX.to_string();
    let min = i64::MIN.to_string();
    for (key, value) in [
        ("zero", "0"),
        ("small", "7"),
        ("status", "404"),
        ("large", "1000"),
        ("max", max.as_str()),
        ("negative", "-3"),
        ("min", min.as_str()),
        ("no", "false"),
        ("yes", "true"),
    ] {
        assert_eq!(property(properties, key), Some(value), "{key} in {properties:?}");
    }
}

#[test]
fn display_and_debug_fields_are_formatted_as_asked() {
    setup();
    let trace = trace(|| {
        let span =
            tracing::warn_span!("manual", answer = %"forty two", list = ?vec![1, 2], quoted = ?"debug");
        span.in_scope(|| {});
    });
    let properties = &trace.span("manual").properties;
    assert_eq!(property(properties, "answer"), Some("forty two"));
    assert_eq!(property(properties, "list"), Some("[1, 2]"));
    assert_eq!(property(properties, "quoted"), Some("\"debug\""));
    assert_eq!(property(properties, "tracing.level"), Some("WARN"));
}

#[tracing::instrument]
fn outer() {
    middle();
    traced_step();
}

#[tracing::instrument]
fn middle() {
    inner();
}

#[tracing::instrument]
fn inner() {}

#[minitrace::trace(short_name = true)]
fn traced_step() {
    leaf();
}

#[tracing::instrument]
fn leaf() {}

#[test]
fn instrumented_fns_and_trace_fns_nest_in_each_other() {
    setup();
    let trace = trace(outer);
    assert_eq!(trace.parent_of("outer"), "root");
    assert_eq!(trace.parent_of("middle"), "outer");
    assert_eq!(trace.parent_of("inner"), "middle");
    // A `#[trace]` span inside a `tracing` span, and the other way round.
    assert_eq!(trace.parent_of("traced_step"), "outer");
    assert_eq!(trace.parent_of("leaf"), "traced_step");
    assert_eq!(trace.spans.len(), 6, "{:#?}", trace.spans);
}

#[test]
fn a_span_entered_many_times_is_one_span_and_takes_late_fields() {
    setup();
    let trace = trace(|| {
        let span = tracing::info_span!("repeated", status = field::Empty);
        for _ in 0..5 {
            span.in_scope(|| drop(LocalSpan::enter_with_local_parent("work")));
        }
        span.record("status", 200);
        // Back under the root once the span is exited.
        drop(LocalSpan::enter_with_local_parent("after"));
    });
    let repeated = trace.span("repeated");
    assert_eq!(property(&repeated.properties, "status"), Some("200"));
    let work = trace.all("work");
    assert_eq!(work.len(), 5);
    assert!(work.iter().all(|span| span.parent_id == repeated.span_id), "{:#?}", trace.spans);
    assert_eq!(trace.parent_of("after"), "root");
}

#[test]
fn spans_exited_out_of_order_leave_the_other_one_the_local_parent() {
    setup();
    let trace = trace(|| {
        let first = tracing::info_span!("first");
        let entered_first = first.enter();
        let second = tracing::info_span!("second");
        let entered_second = second.enter();
        drop(entered_first);
        drop(LocalSpan::enter_with_local_parent("inside second"));
        drop(entered_second);
    });
    assert_eq!(trace.parent_of("second"), "first");
    assert_eq!(trace.parent_of("inside second"), "second");
}

#[tracing::instrument]
fn outside_only(attempt: u32) {
    // Entered, yet outside any trace: no local parent was set.
    assert_eq!(SpanContext::current_local_parent(), None);
    tracing::info!("outside_only event");
}

#[test]
fn spans_outside_a_trace_record_nothing() {
    setup();
    outside_only(1);
    tracing::info_span!("outside_only manual").in_scope(|| outside_only(2));
    assert!(!any_span_named("outside_only"));
    assert!(!any_span_named("outside_only manual"));
    // The same calls inside a trace are recorded.
    let trace = trace(|| tracing::info_span!("outside_only manual").in_scope(|| {}));
    assert_eq!(trace.parent_of("outside_only manual"), "root");
}

#[test]
fn an_explicit_parent_is_followed_to_another_thread() {
    setup();
    let trace = trace(|| {
        let dispatch = tracing::info_span!("dispatch");
        let parent = dispatch.clone();
        std::thread::spawn(move || {
            // This thread has no local parent: only the explicit one counts.
            tracing::info_span!(parent: &parent, "job").in_scope(inner);
            let orphan = tracing::info_span!(parent: None, "explicit root");
            orphan.in_scope(|| assert_eq!(SpanContext::current_local_parent(), None));
        })
        .join()
        .unwrap();
        // An explicit root is left out even inside a trace.
        tracing::info_span!(parent: None, "explicit root").in_scope(|| {});
    });
    assert_eq!(trace.parent_of("dispatch"), "root");
    assert_eq!(trace.parent_of("job"), "dispatch");
    assert_eq!(trace.parent_of("inner"), "job");
    assert!(trace.all("explicit root").is_empty());
}

#[test]
fn follows_from_becomes_a_link() {
    setup();
    let trace = trace(|| {
        let producer = tracing::info_span!("producer");
        let consumer = tracing::info_span!("consumer");
        consumer.follows_from(&producer);
    });
    let producer = trace.span("producer");
    let links = trace.span("consumer").links();
    assert_eq!(links, [SpanContext::new(producer.trace_id, producer.span_id)]);
}
