//! minitrace 0.6.7's public API, used the way 0.6 code uses it: the collector types, `Span`,
//! the local spans, events, the future adapters, the reporter plumbing and `util::tree`.
//! Signatures are pinned by explicit types and fn pointers, structs are built by literal and
//! destructured exhaustively, 0.6.7's trait impls are relied on, and the behaviour 0.6.7
//! documents is asserted through `TestReporter`. `#[trace]` and the naming macros are in
//! macro_api.rs.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt::Debug;
use std::future::{Future, Ready};
use std::hash::Hash;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use minitrace::collector::{
    Config, ConsoleReporter, EventRecord, Reporter, SpanContext, SpanId, SpanRecord, TestReporter, TraceId,
};
use minitrace::future::{EnterOnPoll, FutureExt, InSpan};
use minitrace::local::{LocalCollector, LocalParentGuard, LocalSpan, LocalSpans};
use minitrace::util::tree::tree_str_from_span_records;
use minitrace::{Event, Span};
use minitrace_compat_06::{block_on, block_on_counting, noop_waker, serial, yield_once};

/// Installs a fresh `TestReporter` with `config`, as 0.6 tests do.
fn install(config: Config) -> Arc<parking_lot::Mutex<Vec<SpanRecord>>> {
    let (reporter, spans): (TestReporter, Arc<parking_lot::Mutex<Vec<SpanRecord>>>) = TestReporter::new();
    minitrace::set_reporter(reporter, config);
    spans
}

/// Flushes, then returns everything reported so far.
fn reported(spans: &parking_lot::Mutex<Vec<SpanRecord>>) -> Vec<SpanRecord> {
    minitrace::flush();
    let records: Vec<SpanRecord> = spans.lock().clone();
    records
}

/// The single record called `name`.
fn the<'a>(records: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    let found: Vec<&SpanRecord> = records.iter().filter(|record| record.name == name).collect();
    assert_eq!(found.len(), 1, "expected one span {name:?} in {records:#?}");
    found[0]
}

/// All records called `name`.
fn all<'a>(records: &'a [SpanRecord], name: &str) -> Vec<&'a SpanRecord> {
    records.iter().filter(|record| record.name == name).collect()
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// The property list of a record, borrowed as plain strings for comparison.
fn props(record: &SpanRecord) -> Vec<(&str, &str)> {
    record.properties.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()
}

// Bounds 0.6.7 satisfies (derives and auto traits), grouped by kind of type.
fn id_like<
    T: Copy
        + Clone
        + Debug
        + Default
        + PartialEq
        + Eq
        + Hash
        + Send
        + Sync
        + Unpin
        + UnwindSafe
        + RefUnwindSafe
        + 'static,
>() {
}
fn context_like<
    T: Copy + Clone + Debug + Default + Send + Sync + Unpin + UnwindSafe + RefUnwindSafe + 'static,
>() {
}
fn record_like<
    T: Clone + Debug + Default + PartialEq + Send + Sync + Unpin + UnwindSafe + RefUnwindSafe + 'static,
>() {
}
fn config_like<T: Copy + Clone + Debug + Default + PartialEq + Eq + Send + Sync + Unpin + 'static>() {}
fn thread_safe<T: Send + Sync + Unpin + 'static>() {}
fn defaulted<T: Default>() {}
fn cloned_debug<T: Clone + Debug>() {}
fn a_reporter<T: Reporter + Send + Sync + 'static>() {}
fn a_sendable_future<F: Future<Output = u8> + Send + Sync + Unpin + 'static>(_: &F) {}

#[test]
fn the_trait_impls_of_067_are_present() {
    id_like::<TraceId>();
    id_like::<SpanId>();
    context_like::<SpanContext>();
    record_like::<SpanRecord>();
    record_like::<EventRecord>();
    config_like::<Config>();
    // Spans move between threads and are shared by reference (`enter_with_parent` from many threads).
    thread_safe::<Span>();
    defaulted::<Span>();
    // Collected local spans are sent to the thread that owns their parent.
    thread_safe::<LocalSpans>();
    cloned_debug::<LocalSpans>();
    defaulted::<LocalSpan>();
    defaulted::<LocalCollector>();
    defaulted::<LocalParentGuard>();
    thread_safe::<Event>();
    a_reporter::<ConsoleReporter>();
    a_reporter::<TestReporter>();
    // The adapters keep the Send, Sync and Unpin of the future they wrap.
    let in_span: InSpan<Ready<u8>> = std::future::ready(1).in_span(Span::noop());
    a_sendable_future(&in_span);
    let on_poll: EnterOnPoll<Ready<u8>> = std::future::ready(1).enter_on_poll("poll");
    a_sendable_future(&on_poll);
    // `Reporter` is object safe.
    let boxed: Box<dyn Reporter> = Box::new(ConsoleReporter);
    drop(boxed);
}

#[test]
#[allow(clippy::type_complexity)] // Spelling the types out is the point.
fn the_signatures_are_067s() {
    // Coercing to fn pointers pins every argument and return type.
    let _: fn(TraceId, SpanId) -> SpanContext = SpanContext::new;
    let _: fn() -> SpanContext = SpanContext::random;
    let _: fn(&Span) -> Option<SpanContext> = SpanContext::from_span;
    let _: fn() -> Option<SpanContext> = SpanContext::current_local_parent;
    let _: fn(&str) -> Option<SpanContext> = SpanContext::decode_w3c_traceparent;
    let _: fn(&SpanContext) -> String = SpanContext::encode_w3c_traceparent;
    let _: fn(&SpanContext, bool) -> String = SpanContext::encode_w3c_traceparent_with_sampled;
    let _: fn(Config, Option<usize>) -> Config = Config::max_spans_per_trace;
    let _: fn(Config, Duration) -> Config = Config::report_interval;
    let _: fn(Config, bool) -> Config = Config::report_before_root_finish;
    #[allow(deprecated)]
    let _: fn(Config, Duration) -> Config = Config::batch_report_interval;
    #[allow(deprecated)]
    let _: fn(Config, Option<usize>) -> Config = Config::batch_report_max_spans;
    let _: fn(ConsoleReporter, Config) = minitrace::set_reporter;
    let _: fn(TestReporter, Config) = minitrace::set_reporter;
    let _: fn() = minitrace::flush;
    let _: fn() -> (TestReporter, Arc<parking_lot::Mutex<Vec<SpanRecord>>>) = TestReporter::new;
    let _: fn(&mut ConsoleReporter, &[SpanRecord]) = <ConsoleReporter as Reporter>::report;
    let _: fn(&mut TestReporter, &[SpanRecord]) = <TestReporter as Reporter>::report;
    let _: fn() -> Span = Span::noop;
    let _: fn(&'static str, SpanContext) -> Span = Span::root;
    let _: fn(String, SpanContext) -> Span = Span::root;
    let _: fn(Cow<'static, str>, &Span) -> Span = Span::enter_with_parent;
    let _: fn(&'static str) -> Span = Span::enter_with_local_parent;
    let _: fn(&Span) -> LocalParentGuard = Span::set_local_parent;
    let _: fn(Span, fn() -> (&'static str, String)) -> Span = Span::with_property;
    let _: fn(Span, fn() -> Vec<(String, Cow<'static, str>)>) -> Span = Span::with_properties;
    let _: fn(&Span, LocalSpans) = Span::push_child_spans;
    let _: fn(&Span) -> Option<Duration> = Span::elapsed;
    let _: fn(&mut Span) = Span::cancel;
    let _: fn(&'static str) -> LocalSpan = LocalSpan::enter_with_local_parent;
    let _: fn(fn() -> (&'static str, &'static str)) = LocalSpan::add_property;
    let _: fn(fn() -> [(String, String); 2]) = LocalSpan::add_properties;
    let _: fn(LocalSpan, fn() -> (String, &'static str)) -> LocalSpan = LocalSpan::with_property;
    let _: fn(LocalSpan, fn() -> Vec<(&'static str, String)>) -> LocalSpan = LocalSpan::with_properties;
    let _: fn() -> LocalCollector = LocalCollector::start;
    let _: fn(LocalCollector) -> LocalSpans = LocalCollector::collect;
    let _: fn(&LocalSpans, SpanContext) -> Vec<SpanRecord> = LocalSpans::to_span_records;
    let _: fn(&'static str, &Span, fn() -> [(Cow<'static, str>, Cow<'static, str>); 1]) =
        Event::add_to_parent;
    let _: fn(String, fn() -> Vec<(Cow<'static, str>, Cow<'static, str>)>) = Event::add_to_local_parent;
    let _: fn(Ready<u8>, Span) -> InSpan<Ready<u8>> = FutureExt::in_span;
    let _: fn(Ready<u8>, &'static str) -> EnterOnPoll<Ready<u8>> = FutureExt::enter_on_poll;
    let _: fn(Vec<SpanRecord>) -> String = tree_str_from_span_records;
}

#[test]
fn the_public_structs_are_built_by_literal_and_destructured() {
    let trace_id: TraceId = TraceId(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    let span_id: SpanId = SpanId(0x8899_aabb_ccdd_eeff);
    let TraceId(raw_trace): TraceId = trace_id;
    let SpanId(raw_span): SpanId = span_id;
    assert_eq!((raw_trace, raw_span), (trace_id.0, span_id.0));

    let context: SpanContext = SpanContext { trace_id, span_id };
    // An exhaustive pattern: 0.6 code that destructures breaks if a public field is added.
    let SpanContext { trace_id: context_trace, span_id: context_span } = context;
    assert_eq!((context_trace, context_span), (trace_id, span_id));

    let event: EventRecord = EventRecord {
        name: Cow::Borrowed("event"),
        timestamp_unix_ns: 42,
        properties: vec![(Cow::Borrowed("k"), Cow::Owned("v".to_string()))],
    };
    let record: SpanRecord = SpanRecord {
        trace_id,
        span_id,
        parent_id: SpanId(7),
        begin_time_unix_ns: 1_000,
        duration_ns: 20,
        name: "span".into(),
        properties: vec![("a".into(), "b".into())],
        events: vec![event.clone()],
    };
    let SpanRecord {
        trace_id: t,
        span_id: s,
        parent_id,
        begin_time_unix_ns,
        duration_ns,
        name,
        properties,
        events,
    } = record.clone();
    assert_eq!((t, s, parent_id, begin_time_unix_ns, duration_ns), (trace_id, span_id, SpanId(7), 1_000, 20));
    assert_eq!((name.as_ref(), properties.len(), events.len()), ("span", 1, 1));
    let EventRecord { name, timestamp_unix_ns, properties } = events[0].clone();
    assert_eq!((name.as_ref(), timestamp_unix_ns, properties), ("event", 42, event.properties.clone()));
    assert_eq!(record.clone(), record);
    assert_ne!(SpanRecord { duration_ns: 21, ..record.clone() }, record);

    let shared: Arc<parking_lot::Mutex<Vec<SpanRecord>>> = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let reporter: TestReporter = TestReporter { spans: shared.clone() };
    let TestReporter { spans } = reporter;
    assert!(Arc::ptr_eq(&spans, &shared));
    let _: ConsoleReporter = ConsoleReporter;
    let _: Event = Event;

    // The derived defaults are all zeros and empties.
    assert_eq!(TraceId::default(), TraceId(0));
    assert_eq!(SpanId::default(), SpanId(0));
    let SpanContext { trace_id, span_id } = SpanContext::default();
    assert_eq!((trace_id, span_id), (TraceId(0), SpanId(0)));
    assert_eq!(
        SpanRecord::default(),
        SpanRecord {
            trace_id: TraceId(0),
            span_id: SpanId(0),
            parent_id: SpanId(0),
            begin_time_unix_ns: 0,
            duration_ns: 0,
            name: Cow::Borrowed(""),
            properties: vec![],
            events: vec![],
        }
    );
    assert_eq!(
        EventRecord::default(),
        EventRecord { name: Cow::Borrowed(""), timestamp_unix_ns: 0, properties: vec![] }
    );

    // Ids are hashable values.
    let ids: HashSet<SpanId> = [SpanId(1), SpanId(2), SpanId(1)].into_iter().collect();
    assert_eq!(ids.len(), 2);
    let traces: HashSet<TraceId> = [TraceId(1), TraceId(1)].into_iter().collect();
    assert_eq!(traces.len(), 1);

    // `ConsoleReporter` prints records with these derived `Debug` formats.
    assert_eq!(format!("{:?}", TraceId(5)), "TraceId(5)");
    assert_eq!(format!("{:?}", SpanId(6)), "SpanId(6)");
    assert_eq!(
        format!("{:?}", SpanContext::new(TraceId(1), SpanId(2))),
        "SpanContext { trace_id: TraceId(1), span_id: SpanId(2) }"
    );
    assert_eq!(
        format!("{:?}", SpanRecord { events: vec![], ..record }),
        "SpanRecord { trace_id: TraceId(1512366075204170928972419503379277431), \
         span_id: SpanId(9843086184167632639), parent_id: SpanId(7), begin_time_unix_ns: 1000, \
         duration_ns: 20, name: \"span\", properties: [(\"a\", \"b\")], events: [] }"
    );
    assert_eq!(
        format!("{event:?}"),
        "EventRecord { name: \"event\", timestamp_unix_ns: 42, properties: [(\"k\", \"v\")] }"
    );
}

#[test]
fn span_context_constructors_and_w3c_traceparent() {
    let context: SpanContext = SpanContext::new(TraceId(12), SpanId(34));
    assert_eq!((context.trace_id, context.span_id), (TraceId(12), SpanId(34)));

    // A random context has a random trace id and no parent span.
    let first: SpanContext = SpanContext::random();
    let second: SpanContext = SpanContext::random();
    assert_eq!((first.span_id, second.span_id), (SpanId(0), SpanId(0)));
    assert_ne!(first.trace_id, second.trace_id);

    let header: String = context.encode_w3c_traceparent();
    assert_eq!(header, "00-0000000000000000000000000000000c-0000000000000022-01");
    let unsampled: String = context.encode_w3c_traceparent_with_sampled(false);
    assert_eq!(unsampled, "00-0000000000000000000000000000000c-0000000000000022-00");
    let sampled: String = context.encode_w3c_traceparent_with_sampled(true);
    assert_eq!(sampled, header);

    let decoded: Option<SpanContext> =
        SpanContext::decode_w3c_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    let decoded = decoded.expect("a valid traceparent");
    assert_eq!(decoded.trace_id, TraceId(0x0af7651916cd43dd8448eb211c80319c));
    assert_eq!(decoded.span_id, SpanId(0xb7ad6b7169203331));
    assert_eq!(decoded.encode_w3c_traceparent(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    // The sampled flag does not stop a context from decoding.
    let unsampled = SpanContext::decode_w3c_traceparent(&unsampled).expect("an unsampled traceparent");
    assert_eq!((unsampled.trace_id, unsampled.span_id), (TraceId(12), SpanId(34)));

    for malformed in [
        "",
        "garbage",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        "00-xyz-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-xyz-01",
    ] {
        assert!(SpanContext::decode_w3c_traceparent(malformed).is_none(), "{malformed:?} decoded");
    }
}

#[test]
fn config_builders_and_defaults() {
    // The documented defaults: no span limit, a 10 ms report interval, report at root end.
    let explicit: Config = Config::default()
        .max_spans_per_trace(None)
        .report_interval(Duration::from_millis(10))
        .report_before_root_finish(false);
    assert_eq!(Config::default(), explicit);
    assert_ne!(Config::default().max_spans_per_trace(Some(100)), Config::default());
    assert_ne!(Config::default().report_interval(Duration::ZERO), Config::default());
    assert_ne!(Config::default().report_before_root_finish(true), Config::default());
    let copied: Config = explicit;
    assert_eq!(copied, explicit.clone());
    assert!(!format!("{copied:?}").is_empty());
    // The deprecated batch settings are no-ops since 0.6.7.
    #[allow(deprecated)]
    let batched: Config =
        Config::default().batch_report_interval(Duration::from_secs(9)).batch_report_max_spans(Some(3));
    assert_eq!(batched, Config::default());
}

#[test]
fn a_root_and_its_children_are_reported_with_067_fields() {
    let _serial = serial();
    let spans = install(Config::default());
    let before_ns = unix_now_ns();
    let parent: SpanContext = SpanContext { trace_id: TraceId(0xabc), span_id: SpanId(0xdef) };
    let root: Span = Span::root("root", parent);
    let child: Span = Span::enter_with_parent(String::from("child"), &root);
    let grandchild: Span = Span::enter_with_parent(Cow::Borrowed("grandchild"), &child);
    std::thread::sleep(Duration::from_millis(2));
    let root_context: SpanContext = SpanContext::from_span(&root).expect("a recording root");
    let child_context: SpanContext = SpanContext::from_span(&child).expect("a recording child");
    drop(grandchild);
    drop(child);
    drop(root);
    let after_ns = unix_now_ns();

    let records = reported(&spans);
    assert_eq!(records.len(), 3, "{records:#?}");
    let (root, child, grandchild) =
        (the(&records, "root"), the(&records, "child"), the(&records, "grandchild"));
    // The root hangs under the span id of the context it was started from.
    assert_eq!(root.parent_id, SpanId(0xdef));
    assert_eq!(child.parent_id, root.span_id);
    assert_eq!(grandchild.parent_id, child.span_id);
    assert_eq!((root_context.trace_id, root_context.span_id), (TraceId(0xabc), root.span_id));
    assert_eq!((child_context.trace_id, child_context.span_id), (TraceId(0xabc), child.span_id));
    let ids: HashSet<SpanId> = records.iter().map(|record| record.span_id).collect();
    assert_eq!(ids.len(), 3);
    assert!(!ids.contains(&SpanId(0)));
    let slack = Duration::from_secs(1).as_nanos() as u64;
    for record in &records {
        assert_eq!(record.trace_id, TraceId(0xabc));
        // Times are nanoseconds since the Unix epoch.
        assert!(record.begin_time_unix_ns + slack >= before_ns, "{record:?}");
        assert!(record.begin_time_unix_ns + record.duration_ns <= after_ns + slack, "{record:?}");
        assert!(record.properties.is_empty() && record.events.is_empty());
    }
    assert!(root.duration_ns >= 2_000_000, "{root:?}");
    // Children lie within their parents.
    let tolerance = 1_000;
    assert!(child.begin_time_unix_ns + tolerance >= root.begin_time_unix_ns);
    assert!(
        child.begin_time_unix_ns + child.duration_ns
            <= root.begin_time_unix_ns + root.duration_ns + tolerance
    );
    assert!(grandchild.begin_time_unix_ns + tolerance >= child.begin_time_unix_ns);
}

#[test]
fn enter_with_parents_gives_a_replica_per_parent() {
    let _serial = serial();
    let spans = install(Config::default());
    let first = Span::root("first", SpanContext::random());
    let second = Span::root("second", SpanContext::random());
    {
        let _both: Span = Span::enter_with_parents("both", [&first, &second]);
    }
    {
        let parents: Vec<&Span> = vec![&second];
        let _one: Span = Span::enter_with_parents("from a vec", parents);
    }
    let (first_context, second_context) =
        (SpanContext::from_span(&first).unwrap(), SpanContext::from_span(&second).unwrap());
    {
        // A span with several parents reports the first parent's trace as its context.
        let joined = Span::enter_with_parents("context of both", [&first, &second]);
        let context = SpanContext::from_span(&joined).unwrap();
        assert_eq!(context.trace_id, first_context.trace_id);
        assert_ne!(context.span_id, first_context.span_id);
    }
    drop(first);
    drop(second);

    let records = reported(&spans);
    assert_eq!(all(&records, "context of both").len(), 2);
    let both = all(&records, "both");
    assert_eq!(both.len(), 2, "{records:#?}");
    let in_first = both.iter().find(|r| r.trace_id == first_context.trace_id).expect("a replica in `first`");
    let in_second =
        both.iter().find(|r| r.trace_id == second_context.trace_id).expect("a replica in `second`");
    assert_eq!(in_first.parent_id, first_context.span_id);
    assert_eq!(in_second.parent_id, second_context.span_id);
    // A replica is the same span in another trace.
    assert_eq!(in_first.span_id, in_second.span_id);
    let from_vec = the(&records, "from a vec");
    assert_eq!((from_vec.trace_id, from_vec.parent_id), (second_context.trace_id, second_context.span_id));

    // Two parents in one trace: the child is recorded under each of them.
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    let child = Span::enter_with_parent("child", &root);
    drop(Span::enter_with_parents("joined", [&root, &child]));
    drop(child);
    drop(root);
    let records = reported(&spans);
    let (root, child) = (the(&records, "root"), the(&records, "child"));
    let mut parents: Vec<SpanId> = all(&records, "joined").iter().map(|r| r.parent_id).collect();
    parents.sort_by_key(|id| id.0);
    let mut expected = vec![root.span_id, child.span_id];
    expected.sort_by_key(|id| id.0);
    assert_eq!(parents, expected, "{records:#?}");
}

#[test]
fn local_parents_and_local_spans() {
    let _serial = serial();
    let spans = install(Config::default());
    // Without a local parent, everything local is a no-op.
    assert!(SpanContext::current_local_parent().is_none());
    let orphan: Span = Span::enter_with_local_parent("orphan");
    assert!(orphan.elapsed().is_none());
    drop(LocalSpan::enter_with_local_parent("orphan local"));

    let root = Span::root("root", SpanContext::random());
    let root_context = SpanContext::from_span(&root).unwrap();
    let (local_context, thread_child_id) = {
        let guard: LocalParentGuard = root.set_local_parent();
        let current: SpanContext = SpanContext::current_local_parent().expect("root is the local parent");
        assert_eq!((current.trace_id, current.span_id), (root_context.trace_id, root_context.span_id));
        let local: LocalSpan = LocalSpan::enter_with_local_parent("local");
        // The innermost local span becomes the local parent.
        let local_context = SpanContext::current_local_parent().unwrap();
        assert_ne!(local_context.span_id, root_context.span_id);
        let under_local: Span = Span::enter_with_local_parent("span under local");
        drop(LocalSpan::enter_with_local_parent(String::from("local under local")));
        // A child moved to another thread becomes the local parent there.
        let thread_child = Span::enter_with_parent("thread child", &under_local);
        let thread_child_id = SpanContext::from_span(&thread_child).unwrap().span_id;
        std::thread::spawn(move || {
            let _guard = thread_child.set_local_parent();
            drop(LocalSpan::enter_with_local_parent("in thread"));
        })
        .join()
        .unwrap();
        drop(under_local);
        drop(local);
        drop(guard);
        (local_context, thread_child_id)
    };
    assert!(SpanContext::current_local_parent().is_none());
    drop(LocalSpan::enter_with_local_parent("after the guard"));
    drop(root);

    let records = reported(&spans);
    let names: HashSet<&str> = records.iter().map(|r| r.name.as_ref()).collect();
    let expected: HashSet<&str> =
        ["root", "local", "span under local", "local under local", "thread child", "in thread"].into();
    assert_eq!(names, expected, "{records:#?}");
    assert_eq!(records.len(), expected.len());
    let root = the(&records, "root");
    let local = the(&records, "local");
    assert_eq!(local.parent_id, root.span_id);
    assert_eq!(local.span_id, local_context.span_id);
    let under_local = the(&records, "span under local");
    assert_eq!(under_local.parent_id, local.span_id);
    assert_eq!(the(&records, "local under local").parent_id, local.span_id);
    assert_eq!(the(&records, "thread child").parent_id, under_local.span_id);
    assert_eq!(the(&records, "in thread").parent_id, thread_child_id);
    assert!(records.iter().all(|r| r.trace_id == root.trace_id));
}

#[test]
fn properties_on_spans_and_local_spans() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random())
        .with_property(|| ("k1", "v1"))
        .with_property(|| (String::from("k2"), format!("v{}", 2)))
        .with_properties(|| [("k3", "v3"), ("k4", "v4")])
        .with_properties(|| vec![(Cow::Borrowed("k5"), Cow::<'static, str>::Owned("v5".into()))]);
    {
        let _guard = root.set_local_parent();
        let _local = LocalSpan::enter_with_local_parent("local")
            .with_property(|| ("a", "1"))
            .with_properties(|| [("b", String::from("2"))]);
        // `add_property` goes to the innermost open local span.
        LocalSpan::add_property(|| ("c", "3"));
        LocalSpan::add_properties(|| [("d", "4"), ("e", "5")]);
        {
            let _inner = LocalSpan::enter_with_local_parent("inner");
            LocalSpan::add_property(|| ("only", "inner"));
        }
        LocalSpan::add_property(|| ("f", "6"));
    }
    drop(root);

    let records = reported(&spans);
    assert_eq!(
        props(the(&records, "root")),
        [("k1", "v1"), ("k2", "v2"), ("k3", "v3"), ("k4", "v4"), ("k5", "v5")]
    );
    assert_eq!(
        props(the(&records, "local")),
        [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "5"), ("f", "6")]
    );
    assert_eq!(props(the(&records, "inner")), [("only", "inner")]);

    // Properties of spans that do not record are never computed.
    let computed = Cell::new(0);
    let noop = Span::noop()
        .with_property(|| {
            computed.set(computed.get() + 1);
            ("k", "v")
        })
        .with_properties(|| {
            computed.set(computed.get() + 1);
            [("k", "v")]
        });
    drop(noop);
    LocalSpan::add_property(|| {
        computed.set(computed.get() + 1);
        ("k", "v")
    });
    drop(LocalSpan::enter_with_local_parent("no parent").with_property(|| {
        computed.set(computed.get() + 1);
        ("k", "v")
    }));
    assert_eq!(computed.get(), 0);
}

#[test]
fn local_add_property_without_an_open_local_span_is_ignored() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    {
        let _guard = root.set_local_parent();
        // 0.6.7 adds to the innermost *local* span only, never to the `Span` that is the local parent.
        LocalSpan::add_property(|| ("ignored", "1"));
        LocalSpan::add_properties(|| [("ignored", "2")]);
    }
    drop(root);
    let records = reported(&spans);
    assert!(props(the(&records, "root")).is_empty(), "{records:#?}");
}

#[test]
fn events_are_attached_to_their_parents() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    Event::add_to_parent("on root", &root, || [("key".into(), "value".into())]);
    {
        let _guard = root.set_local_parent();
        Event::add_to_local_parent("on the local parent", || [("k".into(), "v".into())]);
        let _local = LocalSpan::enter_with_local_parent("local");
        Event::add_to_local_parent(String::from("on the local span"), || {
            vec![(Cow::Borrowed("a"), Cow::Owned(String::from("b")))]
        });
        Event::add_to_local_parent("without properties", || []);
    }
    let child = Span::enter_with_parent("child", &root);
    Event::add_to_parent(Cow::Borrowed("on child"), &child, || []);
    drop(child);
    // Properties of events that go nowhere are never computed.
    let computed = Cell::new(false);
    Event::add_to_parent("on noop", &Span::noop(), || {
        computed.set(true);
        [("k".into(), "v".into())]
    });
    Event::add_to_local_parent("no local parent", || {
        computed.set(true);
        [("k".into(), "v".into())]
    });
    assert!(!computed.get());
    drop(root);

    let records = reported(&spans);
    // Events are not spans.
    let names: HashSet<&str> = records.iter().map(|r| r.name.as_ref()).collect();
    assert_eq!(names, HashSet::from(["root", "local", "child"]), "{records:#?}");
    let event_names = |record: &SpanRecord| -> Vec<String> {
        let mut names: Vec<String> = record.events.iter().map(|e| e.name.to_string()).collect();
        names.sort();
        names
    };
    let root = the(&records, "root");
    assert_eq!(event_names(root), ["on root", "on the local parent"]);
    assert_eq!(event_names(the(&records, "local")), ["on the local span", "without properties"]);
    assert_eq!(event_names(the(&records, "child")), ["on child"]);
    let event_props = |record: &SpanRecord, name: &str| -> Vec<(String, String)> {
        let event = record.events.iter().find(|e| e.name == name).unwrap();
        event.properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    assert_eq!(event_props(root, "on root"), [("key".to_string(), "value".to_string())]);
    assert_eq!(
        event_props(the(&records, "local"), "on the local span"),
        [("a".to_string(), "b".to_string())]
    );
    assert!(event_props(the(&records, "local"), "without properties").is_empty());
    // An event happens while its span is open.
    for record in &records {
        for event in &record.events {
            assert!(event.timestamp_unix_ns + 1_000 >= record.begin_time_unix_ns, "{record:?}");
            assert!(event.timestamp_unix_ns <= record.begin_time_unix_ns + record.duration_ns + 1_000);
        }
    }
}

#[test]
fn local_collector_turns_local_spans_into_records() {
    let _serial = serial();
    let collector: LocalCollector = LocalCollector::start();
    {
        let _a = LocalSpan::enter_with_local_parent("a").with_property(|| ("k", "v"));
        let _b = LocalSpan::enter_with_local_parent("b");
        Event::add_to_local_parent("event in b", || [("e".into(), "1".into())]);
    }
    drop(LocalSpan::enter_with_local_parent("c"));
    let local_spans: LocalSpans = collector.collect();
    let parent = SpanContext::new(TraceId(77), SpanId(88));
    let records: Vec<SpanRecord> = local_spans.to_span_records(parent);
    assert_eq!(records.len(), 3, "{records:#?}");
    let (a, b, c) = (the(&records, "a"), the(&records, "b"), the(&records, "c"));
    assert!(records.iter().all(|r| r.trace_id == TraceId(77)));
    assert_eq!((a.parent_id, b.parent_id, c.parent_id), (SpanId(88), a.span_id, SpanId(88)));
    assert_eq!(props(a), [("k", "v")]);
    assert_eq!(b.events.len(), 1);
    assert_eq!(b.events[0].name, "event in b");
    assert!(a.begin_time_unix_ns > 0 && a.duration_ns >= b.duration_ns);
    // Converting again gives the same spans (the times may be rounded differently).
    let shape = |records: &[SpanRecord]| -> Vec<(SpanId, SpanId, String)> {
        records.iter().map(|r| (r.span_id, r.parent_id, r.name.to_string())).collect()
    };
    assert_eq!(shape(&local_spans.clone().to_span_records(parent)), shape(&records));

    // A default collector collects nothing.
    let empty: LocalSpans = LocalCollector::default().collect();
    assert!(empty.to_span_records(parent).is_empty());
    assert!(!format!("{empty:?}").is_empty());
}

#[test]
fn a_local_collector_keeps_its_spans_from_the_local_parent() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    let parent = SpanContext::new(TraceId(5), SpanId(6));
    let collected: LocalSpans = {
        let _guard = root.set_local_parent();
        let collector = LocalCollector::start();
        drop(LocalSpan::enter_with_local_parent("collected"));
        // The collector belongs to no trace: no context, and no parent for a `Span`.
        assert!(SpanContext::current_local_parent().is_none());
        assert!(Span::enter_with_local_parent("span in collector").elapsed().is_none());
        // Collectors nest.
        let inner = LocalCollector::start();
        drop(LocalSpan::enter_with_local_parent("inner"));
        let inner: Vec<SpanRecord> = inner.collect().to_span_records(parent);
        assert_eq!(inner.len(), 1);
        assert_eq!(inner[0].name, "inner");
        let collected = collector.collect();
        // Once collected, local spans go to the local parent again.
        drop(LocalSpan::enter_with_local_parent("after collect"));
        collected
    };
    let records: Vec<SpanRecord> = collected.to_span_records(parent);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0].name, "collected");
    drop(root);
    let records = reported(&spans);
    let mut names: Vec<&str> = records.iter().map(|r| r.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["after collect", "root"]);
}

#[test]
fn nested_local_parents_restore_the_outer_one() {
    let _serial = serial();
    let spans = install(Config::default());
    let outer = Span::root("outer", SpanContext::random());
    let inner = Span::root("inner", SpanContext::random());
    {
        let _outer_guard = outer.set_local_parent();
        {
            let _inner_guard = inner.set_local_parent();
            drop(LocalSpan::enter_with_local_parent("under inner"));
        }
        drop(LocalSpan::enter_with_local_parent("under outer"));
    }
    drop((outer, inner));
    let records = reported(&spans);
    assert_eq!(the(&records, "under inner").parent_id, the(&records, "inner").span_id);
    assert_eq!(the(&records, "under outer").parent_id, the(&records, "outer").span_id);
    assert_eq!(records.len(), 4);
}

#[test]
fn local_spans_collected_on_a_thread_are_pushed_to_parents() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    let local_spans: LocalSpans = std::thread::spawn(|| {
        let collector = LocalCollector::start();
        {
            let _work = LocalSpan::enter_with_local_parent("work");
            drop(LocalSpan::enter_with_local_parent("step"));
        }
        collector.collect()
    })
    .join()
    .unwrap();
    let other = Span::enter_with_parent("other", &root);
    root.push_child_spans(local_spans.clone());
    other.push_child_spans(local_spans);
    Span::noop().push_child_spans(LocalCollector::default().collect());
    drop(other);
    drop(root);

    let records = reported(&spans);
    let root = the(&records, "root");
    let other = the(&records, "other");
    let mut work_parents: Vec<SpanId> = all(&records, "work").iter().map(|r| r.parent_id).collect();
    work_parents.sort_by_key(|id| id.0);
    let mut expected = vec![root.span_id, other.span_id];
    expected.sort_by_key(|id| id.0);
    assert_eq!(work_parents, expected, "{records:#?}");
    assert_eq!(all(&records, "step").len(), 2);
    assert_eq!(records.len(), 6);
}

#[test]
fn cancel_drops_a_trace_from_its_root_or_a_single_span() {
    let _serial = serial();
    let spans = install(Config::default());
    let mut root = Span::root("cancelled root", SpanContext::random());
    drop(Span::enter_with_parent("child of a cancelled root", &root));
    {
        let _guard = root.set_local_parent();
        drop(LocalSpan::enter_with_local_parent("local of a cancelled root"));
    }
    root.cancel();
    drop(root);

    let kept = Span::root("kept root", SpanContext::random());
    let mut child = Span::enter_with_parent("cancelled child", &kept);
    drop(Span::enter_with_parent("kept child", &kept));
    child.cancel();
    assert!(child.elapsed().is_none());
    drop(child);
    drop(kept);

    let records = reported(&spans);
    let mut names: Vec<&str> = records.iter().map(|r| r.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["kept child", "kept root"]);
}

#[test]
fn noop_spans_record_nothing() {
    let _serial = serial();
    let spans = install(Config::default());
    let noop: Span = Span::noop();
    let default: Span = Span::default();
    for span in [&noop, &default] {
        assert!(span.elapsed().is_none());
        assert!(SpanContext::from_span(span).is_none());
        let child = Span::enter_with_parent("child of noop", span);
        assert!(child.elapsed().is_none());
        let _guard = span.set_local_parent();
        assert!(SpanContext::current_local_parent().is_none());
        drop(LocalSpan::enter_with_local_parent("local under noop"));
    }
    let mut cancelled = Span::noop();
    cancelled.cancel();
    let _: LocalSpan = LocalSpan::default();
    let _: LocalCollector = LocalCollector::default();
    let _: LocalParentGuard = LocalParentGuard::default();
    drop((noop, default));
    assert!(reported(&spans).is_empty());
}

#[test]
fn elapsed_grows_while_a_span_is_open() {
    let _serial = serial();
    let _spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    let first: Duration = root.elapsed().expect("a recording span");
    std::thread::sleep(Duration::from_millis(5));
    let second: Duration = root.elapsed().unwrap();
    assert!(second >= first + Duration::from_millis(4), "{first:?} then {second:?}");
    let child = Span::enter_with_parent("child", &root);
    assert!(child.elapsed().unwrap() <= root.elapsed().unwrap());
    drop(child);
    drop(root);
    // Leave nothing in flight for the next test's reporter.
    minitrace::flush();
}

#[test]
fn futures_in_span_and_enter_on_poll() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    let task = async {
        drop(LocalSpan::enter_with_local_parent("before yield"));
        yield_once().await;
        async { yield_once().await }.enter_on_poll("polled").await;
        drop(LocalSpan::enter_with_local_parent("after yield"));
        5u8
    };
    let traced: InSpan<_> = task.in_span(Span::enter_with_parent("task", &root));
    let (output, polls): (u8, usize) = block_on_counting(traced);
    assert_eq!((output, polls), (5, 3));

    // A traced future is `Send` and may finish on another thread.
    let on_thread = async {
        drop(LocalSpan::enter_with_local_parent("on thread"));
        6u8
    }
    .in_span(Span::enter_with_parent("moved", &root));
    assert_eq!(std::thread::spawn(move || block_on(on_thread)).join().unwrap(), 6);

    // `enter_on_poll` without a local parent records nothing.
    assert_eq!(block_on(async { 7u8 }.enter_on_poll("no parent")), 7);
    drop(root);

    let records = reported(&spans);
    let root = the(&records, "root");
    let task = the(&records, "task");
    assert_eq!(task.parent_id, root.span_id);
    for name in ["before yield", "after yield"] {
        assert_eq!(the(&records, name).parent_id, task.span_id);
    }
    // One local span per poll of the wrapped future.
    let polled = all(&records, "polled");
    assert_eq!(polled.len(), 2, "{records:#?}");
    assert!(polled.iter().all(|r| r.parent_id == task.span_id));
    assert_eq!(the(&records, "on thread").parent_id, the(&records, "moved").span_id);
    assert_eq!(records.len(), 8);
}

#[test]
fn in_span_ends_its_span_when_the_future_completes() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    let mut traced = pin!(std::future::ready(1u8).in_span(Span::enter_with_parent("completed", &root)));
    let waker: Waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert_eq!(traced.as_mut().poll(&mut cx), Poll::Ready(1));
    drop(root);
    // The adapter is still alive, but its span already ended.
    let records = reported(&spans);
    assert_eq!(the(&records, "completed").parent_id, the(&records, "root").span_id);
}

/// A reporter written by a user: counts every call, empty or not.
struct CountingReporter {
    calls: Arc<AtomicUsize>,
    names: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Reporter for CountingReporter {
    fn report(&mut self, spans: &[SpanRecord]) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.names.lock().extend(spans.iter().map(|span| span.name.to_string()));
    }
}

#[test]
fn a_user_reporter_is_called_every_interval_and_gets_the_spans() {
    let _serial = serial();
    let calls = Arc::new(AtomicUsize::new(0));
    let names = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let reporter = CountingReporter { calls: calls.clone(), names: names.clone() };
    minitrace::set_reporter(reporter, Config::default().report_interval(Duration::from_millis(5)));
    // 0.6.7 documents that the reporter is invoked every interval, even with nothing to report.
    std::thread::sleep(Duration::from_millis(300));
    assert!(calls.load(Ordering::SeqCst) >= 3, "{} calls", calls.load(Ordering::SeqCst));
    drop(Span::root("by a user reporter", SpanContext::random()));
    minitrace::flush();
    assert_eq!(*names.lock(), ["by a user reporter"]);

    // The console reporter prints to stderr; it only has to accept records.
    minitrace::set_reporter(ConsoleReporter, Config::default());
    drop(Span::root("printed", SpanContext::random()));
    minitrace::flush();
    ConsoleReporter.report(&[SpanRecord::default()]);
}

#[test]
fn spans_are_reported_every_interval_without_flush() {
    let _serial = serial();
    let spans = install(Config::default().report_interval(Duration::from_millis(10)));
    drop(Span::root("unflushed", SpanContext::random()));
    let deadline = Instant::now() + Duration::from_secs(10);
    while spans.lock().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let records: Vec<SpanRecord> = spans.lock().clone();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].name, "unflushed");
}

#[test]
fn set_reporter_again_replaces_the_reporter() {
    let _serial = serial();
    let first = install(Config::default());
    drop(Span::root("to the first", SpanContext::random()));
    minitrace::flush();
    let second = install(Config::default());
    drop(Span::root("to the second", SpanContext::random()));
    minitrace::flush();
    let names = |spans: &parking_lot::Mutex<Vec<SpanRecord>>| -> Vec<String> {
        spans.lock().iter().map(|record| record.name.to_string()).collect()
    };
    assert_eq!(names(&first), ["to the first"]);
    assert_eq!(names(&second), ["to the second"]);
    // The guard derefs mutably, as 0.6 tests that reset their records rely on.
    let taken: Vec<SpanRecord> = std::mem::take(&mut *second.lock());
    assert_eq!(taken.len(), 1);
    assert!(second.lock().is_empty());
}

#[test]
fn flush_reports_spans_of_threads_that_have_exited() {
    let _serial = serial();
    let spans = install(Config::default());
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let root = Span::root(format!("thread {i}"), SpanContext::random());
                let _guard = root.set_local_parent();
                drop(LocalSpan::enter_with_local_parent("local"));
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let records = reported(&spans);
    assert_eq!(records.len(), 8, "{records:#?}");
    assert_eq!(all(&records, "local").len(), 4);
}

#[test]
fn max_spans_per_trace_is_a_soft_limit_that_keeps_the_root() {
    let _serial = serial();
    let spans = install(Config::default().max_spans_per_trace(Some(2)));
    let root = Span::root("root", SpanContext::random());
    for _ in 0..10 {
        drop(Span::enter_with_parent("child", &root));
    }
    drop(root);
    let records = reported(&spans);
    the(&records, "root");
    let children = all(&records, "child").len();
    assert!((1..=2).contains(&children), "{children} children kept");

    // Without a limit every span is kept.
    let spans = install(Config::default().max_spans_per_trace(None));
    let root = Span::root("root", SpanContext::random());
    for _ in 0..50 {
        drop(Span::enter_with_parent("child", &root));
    }
    drop(root);
    assert_eq!(all(&reported(&spans), "child").len(), 50);
}

#[test]
fn report_before_root_finish_reports_finished_children_early() {
    let _serial = serial();
    let spans = install(Config::default().report_before_root_finish(true));
    let root = Span::root("root", SpanContext::random());
    drop(Span::enter_with_parent("early child", &root));
    let early = reported(&spans);
    assert_eq!(early.len(), 1, "{early:#?}");
    assert_eq!(early[0].name, "early child");
    drop(root);
    assert_eq!(reported(&spans).len(), 2);

    // By default nothing of a trace is reported before its root ends.
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    drop(Span::enter_with_parent("child", &root));
    assert!(reported(&spans).is_empty());
    drop(root);
    assert_eq!(reported(&spans).len(), 2);
}

/// A span record for the tree tests: only names, ids and properties matter there.
fn node(id: u64, parent: u64, name: &'static str, properties: &[(&'static str, &'static str)]) -> SpanRecord {
    SpanRecord {
        span_id: SpanId(id),
        parent_id: SpanId(parent),
        name: Cow::Borrowed(name),
        properties: properties.iter().map(|&(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v))).collect(),
        ..SpanRecord::default()
    }
}

#[test]
fn tree_str_from_span_records_has_067s_format_and_order() {
    // The root has parent id 0; each line is `name {properties:?}`, indented four spaces a level.
    let text: String = tree_str_from_span_records(vec![
        node(1, 0, "root", &[("a", "1")]),
        node(2, 1, "child", &[]),
        node(3, 2, "grandchild", &[("k", "v"), ("k2", "v2")]),
    ]);
    assert_eq!(
        text,
        r#"
root [("a", "1")]
    child []
        grandchild [("k", "v"), ("k2", "v2")]
"#
    );

    // Siblings sort by name, then by their children, then by their property lists.
    let text = tree_str_from_span_records(vec![
        node(10, 0, "root", &[]),
        node(11, 10, "b", &[]),
        node(12, 10, "a", &[("z", "1")]),
        node(13, 10, "a", &[]),
        node(14, 13, "c", &[]),
        node(15, 10, "a", &[("k", "v"), ("k2", "v2")]),
        node(16, 10, "a", &[("k", "v")]),
    ]);
    assert_eq!(
        text,
        r#"
root []
    a [("k", "v")]
    a [("k", "v"), ("k2", "v2")]
    a [("z", "1")]
    a []
        c []
    b []
"#
    );
}

#[test]
fn tree_str_from_recorded_spans() {
    let _serial = serial();
    let spans = install(Config::default());
    let root = Span::root("root", SpanContext::random());
    {
        let _guard = root.set_local_parent();
        let _local = LocalSpan::enter_with_local_parent("local").with_property(|| ("k", "v"));
        drop(Span::enter_with_local_parent("span"));
    }
    drop(Span::enter_with_parent("child", &root));
    drop(root);
    assert_eq!(
        tree_str_from_span_records(reported(&spans)),
        r#"
root []
    child []
    local [("k", "v")]
        span []
"#
    );
}

/// What `use minitrace::prelude::*;` alone gives 0.6 code.
mod prelude_only {
    use minitrace::prelude::*;

    #[test]
    fn the_prelude_has_067s_items() {
        let _serial = minitrace_compat_06::serial();
        let context: SpanContext = SpanContext { trace_id: TraceId(1), span_id: SpanId(2) };
        let root: Span = Span::root("root", context);
        let _guard = root.set_local_parent();
        let _local: LocalSpan = LocalSpan::enter_with_local_parent("local");
        Event::add_to_local_parent("event", || []);
        let record: SpanRecord = SpanRecord::default();
        assert_eq!(record.span_id, SpanId(0));
        // `FutureExt` is in scope anonymously.
        minitrace_compat_06::block_on(async {}.in_span(Span::noop()).enter_on_poll("poll"));
        let _: &str = func_name!();
        let _: &str = full_name!();
        let _: &str = file_location!();
        #[trace]
        fn traced() {}
        traced();
        drop(_local);
        drop(_guard);
        drop(root);
        // Leave nothing in flight for the next test's reporter.
        minitrace::flush();
    }
}
