//! `tracing` events: attached to the current span (a recorded `tracing`
//! span, a local span, the root) or to their explicit parent, named by
//! their message, with their fields as properties.

mod common;

use common::{any_span_named, install, property, trace};
use minitrace::local::LocalSpan;
use minitrace_tracing::MinitraceLayer;
use tracing_subscriber::layer::SubscriberExt;

fn setup() {
    install(|| Box::new(tracing_subscriber::registry().with(MinitraceLayer::new())));
}

#[tracing::instrument]
fn query(table: &str) -> usize {
    tracing::info!(rows = 3, table, "query done");
    3
}

#[test]
fn an_event_is_attached_to_its_span_named_by_its_message() {
    setup();
    let trace = trace(|| {
        query("users");
    });
    let events = &trace.span("query").events;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].name, "query done");
    for (key, value) in
        [("rows", "3"), ("table", "users"), ("tracing.level", "INFO"), ("tracing.target", "events")]
    {
        assert_eq!(property(&events[0].properties, key), Some(value), "{key} in {events:?}");
    }
    assert_eq!(property(&events[0].properties, "message"), None);
}

#[test]
fn events_go_to_the_innermost_span_whatever_its_kind() {
    setup();
    let trace = trace(|| {
        tracing::warn!("on the root");
        let _span = tracing::info_span!("outer").entered();
        let _local = LocalSpan::enter_with_local_parent("local");
        tracing::error!(code = 7, "on the local span");
    });
    let names =
        |name: &str| trace.span(name).events.iter().map(|event| event.name.to_string()).collect::<Vec<_>>();
    assert_eq!(names("root"), ["on the root"]);
    assert!(names("outer").is_empty());
    assert_eq!(names("local"), ["on the local span"]);
    let event = &trace.span("local").events[0];
    assert_eq!(property(&event.properties, "tracing.level"), Some("ERROR"));
    assert_eq!(property(&event.properties, "code"), Some("7"));
}

#[test]
fn an_event_without_a_message_is_named_after_its_callsite() {
    setup();
    let trace = trace(|| tracing::debug!(code = 404));
    let event = &trace.span("root").events[0];
    assert!(event.name.starts_with("event ") && event.name.contains("events.rs"), "{event:?}");
    assert_eq!(property(&event.properties, "code"), Some("404"));
}

#[test]
fn an_event_with_an_explicit_parent_goes_to_it_from_any_thread() {
    setup();
    let trace = trace(|| {
        let span = tracing::info_span!("target span");
        let parent = span.clone();
        std::thread::spawn(move || tracing::info!(parent: &parent, "from afar")).join().unwrap();
        // An explicit parent wins over the local parent.
        tracing::info!(parent: &span, "explicitly there");
        tracing::info!(parent: None, "explicit root: dropped");
    });
    let names: Vec<_> = trace.span("target span").events.iter().map(|event| event.name.as_ref()).collect();
    assert_eq!(names, ["from afar", "explicitly there"]);
    assert!(trace.span("root").events.is_empty());
}

#[test]
fn events_outside_a_trace_record_nothing() {
    setup();
    tracing::info!("outside any trace");
    tracing::info_span!("events outside").in_scope(|| tracing::info!("still outside"));
    minitrace::flush();
    assert!(!any_span_named("events outside"));
    // Neither event went anywhere: not to another test's trace either.
    let records = common::records().lock();
    let stray: Vec<_> = records
        .iter()
        .flat_map(|record| record.events.iter().map(move |event| (record.name.as_ref(), event.name.as_ref())))
        .filter(|(_, event)| *event == "outside any trace" || *event == "still outside")
        .collect();
    assert!(stray.is_empty(), "events recorded outside any trace: {stray:?}");
}

#[test]
fn an_event_stays_on_a_span_that_outlives_its_root() {
    setup();
    // As tower-http's request span, which lives until the response body is sent.
    let context = minitrace::collector::SpanContext::random();
    let late = {
        let root = minitrace::Span::root("root", context);
        let _guard = root.set_local_parent();
        let late = tracing::info_span!("outlives its root");
        late.in_scope(|| tracing::info!("inside"));
        late
    };
    minitrace::flush();
    drop(late);
    let trace = common::finished(context.trace_id);
    let names: Vec<_> =
        trace.span("outlives its root").events.iter().map(|event| event.name.as_ref()).collect();
    assert_eq!(names, ["inside"]);
    assert_eq!(trace.parent_of("outlives its root"), "root");
}

/// A value whose `Debug` emits an event itself, as some do.
struct Chatty;

impl std::fmt::Debug for Chatty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        tracing::info!("formatting");
        f.write_str("chatty")
    }
}

#[test]
fn a_field_whose_debug_emits_an_event_neither_blocks_nor_is_lost() {
    setup();
    let trace = trace(|| {
        let span = tracing::info_span!("noisy fields", value = tracing::field::Empty);
        span.in_scope(|| span.record("value", tracing::field::debug(&Chatty)));
        tracing::info!(parent: &span, value = ?Chatty, "explicit");
    });
    let span = trace.span("noisy fields");
    assert_eq!(property(&span.properties, "value"), Some("chatty"));
    let names: Vec<_> = span.events.iter().map(|event| event.name.as_ref()).collect();
    assert!(names.contains(&"formatting") && names.contains(&"explicit"), "{names:?}");
    assert_eq!(
        property(&span.events.iter().find(|e| e.name == "explicit").unwrap().properties, "value"),
        Some("chatty")
    );
}
