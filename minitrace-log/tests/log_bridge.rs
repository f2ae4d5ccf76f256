//! The `log` bridge as an application installs it: records logged inside
//! a trace become events of the current span and their lines carry its
//! ids; outside a trace, lines go through unchanged and nothing is
//! recorded. One logger and one reporter for the process; tests tell their
//! records apart by trace id and message.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};
use minitrace::collector::{Config, SpanRecord, TestReporter, TraceId};
use minitrace::prelude::*;

/// The application's own logger: keeps each line it would print.
struct Lines(Mutex<Vec<String>>);

impl Log for Lines {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.target() != "muted"
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            self.0.lock().unwrap().push(format!("{} {}", record.level(), record.args()));
        }
    }

    fn flush(&self) {}
}

static LINES: Lines = Lines(Mutex::new(Vec::new()));

type Records = Arc<parking_lot::Mutex<Vec<SpanRecord>>>;

fn setup() -> &'static Records {
    static RECORDS: OnceLock<Records> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let logger =
            minitrace_log::Logger::new(&LINES).with_event_level(LevelFilter::Info).with_ids_stamped();
        log::set_boxed_logger(Box::new(logger)).unwrap();
        log::set_max_level(LevelFilter::Debug);
        let (reporter, records) = TestReporter::new();
        minitrace::set_reporter(reporter, Config::default());
        records
    })
}

/// The line whose message ends with `message`.
fn line(message: &str) -> Option<String> {
    LINES.0.lock().unwrap().iter().find(|line| line.ends_with(message)).cloned()
}

fn spans_of(trace_id: TraceId) -> Vec<SpanRecord> {
    minitrace::flush();
    setup().lock().iter().filter(|span| span.trace_id == trace_id).cloned().collect()
}

fn property<'a>(properties: &'a [(Cow<'static, str>, Cow<'static, str>)], key: &str) -> Option<&'a str> {
    properties.iter().find(|(k, _)| k == key).map(|(_, value)| value.as_ref())
}

#[test]
fn records_become_events_of_the_current_span_and_lines_carry_its_ids() {
    setup();
    let context = SpanContext::random();
    let (root_ids, step_ids);
    {
        let root = Span::root("request", context);
        let _guard = root.set_local_parent();
        root_ids = minitrace_log::current_ids().unwrap();
        log::info!("checkout started");
        let _step = LocalSpan::enter_with_local_parent("step");
        step_ids = minitrace_log::current_ids().unwrap();
        log::warn!(target: "payments", "card declined");
    }
    let spans = spans_of(context.trace_id);
    let span = |name: &str| spans.iter().find(|span| span.name == name).unwrap();
    assert_eq!(root_ids, (context.trace_id, span("request").span_id));
    assert_eq!(step_ids, (context.trace_id, span("step").span_id));

    let started = &span("request").events[0];
    assert_eq!(started.name, "checkout started");
    assert_eq!(property(&started.properties, "log.level"), Some("INFO"));
    assert_eq!(property(&started.properties, "log.target"), Some("log_bridge"));
    let declined = &span("step").events[0];
    assert_eq!(declined.name, "card declined");
    assert_eq!(property(&declined.properties, "log.level"), Some("WARN"));
    assert_eq!(property(&declined.properties, "log.target"), Some("payments"));

    let stamp = |(trace_id, span_id): (TraceId, SpanId)| format!("trace_id={trace_id} span_id={span_id}");
    assert_eq!(line("checkout started").unwrap(), format!("INFO {} checkout started", stamp(root_ids)));
    assert_eq!(line("card declined").unwrap(), format!("WARN {} card declined", stamp(step_ids)));
}

#[test]
fn outside_a_trace_lines_are_unchanged_and_nothing_is_recorded() {
    setup();
    assert_eq!(minitrace_log::current_ids(), None);
    log::info!("outside any trace");
    assert_eq!(line("outside any trace").unwrap(), "INFO outside any trace");
    minitrace::flush();
    let recorded =
        setup().lock().iter().any(|span| span.events.iter().any(|e| e.name == "outside any trace"));
    assert!(!recorded);
}

#[test]
fn below_the_event_level_a_stamped_line_but_no_event() {
    setup();
    let context = SpanContext::random();
    {
        let root = Span::root("request", context);
        let _guard = root.set_local_parent();
        log::debug!("cache warm");
        log::trace!("below the max level: nowhere");
    }
    let spans = spans_of(context.trace_id);
    assert!(spans[0].events.is_empty(), "{spans:#?}");
    let expected = format!("DEBUG trace_id={} span_id={} cache warm", context.trace_id, spans[0].span_id);
    assert_eq!(line("cache warm").unwrap(), expected);
    assert_eq!(line("nowhere"), None);
}

#[test]
fn a_record_the_inner_logger_drops_is_still_an_event() {
    setup();
    assert!(log::log_enabled!(target: "muted", Level::Info));
    let context = SpanContext::random();
    {
        let root = Span::root("request", context);
        let _guard = root.set_local_parent();
        log::info!(target: "muted", "hushed");
    }
    let spans = spans_of(context.trace_id);
    assert_eq!(spans[0].events[0].name, "hushed");
    assert_eq!(line("hushed"), None);
}

#[test]
fn records_from_several_threads_go_to_each_ones_span() {
    setup();
    let context = SpanContext::random();
    {
        let root = Span::root("request", context);
        let threads: Vec<_> = (0..3)
            .map(|thread| {
                let span = Span::enter_with_parent(format!("worker {thread}"), &root);
                std::thread::spawn(move || {
                    let _guard = span.set_local_parent();
                    log::info!("worker {thread} done");
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }
    let spans = spans_of(context.trace_id);
    for thread in 0..3 {
        let worker = spans.iter().find(|span| span.name == format!("worker {thread}")).unwrap();
        assert_eq!(worker.events[0].name, format!("worker {thread} done"));
        let stamp = format!("trace_id={} span_id={}", context.trace_id, worker.span_id);
        assert_eq!(
            line(&format!("worker {thread} done")).unwrap(),
            format!("INFO {stamp} worker {thread} done")
        );
    }
}

/// As a `spawn_blocking` handler: a request's child span moved to a worker
/// thread of a pool, made the worker's local parent while it logs, ended
/// there, then the request ends. Every line becomes an event of the child,
/// within its time, in every one of the 300 requests.
#[test]
fn records_on_a_pool_thread_reach_the_request_span_every_time() {
    setup();
    let (jobs, queue) = std::sync::mpsc::channel::<(Span, std::sync::mpsc::Sender<()>)>();
    let pool = std::thread::spawn(move || {
        for (span, done) in queue {
            {
                let _guard = span.set_local_parent();
                for line in 0..3 {
                    log::info!("blocking step {line}");
                }
            }
            drop(span);
            done.send(()).unwrap();
        }
    });
    let mut traces = Vec::new();
    for _ in 0..300 {
        let context = SpanContext::random();
        let root = Span::root("request", context);
        let (done, finished) = std::sync::mpsc::channel();
        jobs.send((Span::enter_with_parent("blocking", &root), done)).unwrap();
        finished.recv().unwrap();
        drop(root);
        traces.push(context.trace_id);
    }
    drop(jobs);
    pool.join().unwrap();
    for trace in traces {
        let spans = spans_of(trace);
        let blocking = spans.iter().find(|span| span.name == "blocking").expect("the blocking span");
        let names: Vec<&str> = blocking.events.iter().map(|event| event.name.as_ref()).collect();
        assert_eq!(names, ["blocking step 0", "blocking step 1", "blocking step 2"], "trace {trace:?}");
        let end = blocking.begin_time_unix_ns + blocking.duration_ns;
        for event in &blocking.events {
            assert!((blocking.begin_time_unix_ns..=end).contains(&event.timestamp_unix_ns), "{event:?}");
        }
    }
}
