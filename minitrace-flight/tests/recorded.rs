//! The core's flight recorder to a dump: on demand, and at exit through
//! the guard, its traces written as it hands them out and read back equal.

use minitrace::collector::{Config, ConsoleReporter, SpanContext};
use minitrace::local::LocalSpan;
use minitrace::recorder::FlightRecorder;
use minitrace::{Event, Span};
use minitrace_flight::{DumpOnExit, Reader, RecordedTrace};

fn read(path: &std::path::Path) -> Vec<RecordedTrace> {
    Reader::new(std::fs::File::open(path).unwrap()).unwrap().map(Result::unwrap).collect()
}

#[test]
fn recorded_traces_reach_the_dump_on_demand_and_at_exit() {
    minitrace::set_reporter(
        ConsoleReporter,
        Config::default().report_slow_traces_only(std::time::Duration::from_secs(60)),
    );
    FlightRecorder::new().enable();
    let context = SpanContext::random();
    {
        let root = Span::root("request", context).with_property(|| ("user", "7"));
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent("step").with_property(|| ("rows", 3.to_string()));
        let _inner = LocalSpan::enter_with_local_parent("inner");
        Event::add_to_local_parent("cache miss", || [("key".into(), "k".into())]);
    }
    let dir = std::env::temp_dir().join(format!("minitrace-flight-recorded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let now = dir.join("now.mtf");
    assert_eq!(minitrace_flight::dump_recorder(&now).unwrap().traces, 1);
    let [trace] = &read(&now)[..] else { panic!("one trace") };
    // The recorder's own record of it, as it hands it out, read back equal.
    let held = minitrace::recorder::trace(context.trace_id).expect("the recorder holds it");
    assert_eq!(trace, &held);
    assert_eq!(trace.trace_id, context.trace_id);
    let root = trace.root().unwrap();
    assert_eq!((root.name.as_ref(), &root.properties[..]), ("request", &[("user".into(), "7".into())][..]));
    let spans: Vec<(&str, &str)> = trace
        .spans
        .iter()
        .map(|span| {
            let parent = trace.spans.iter().find(|p| p.span_id == span.parent_id);
            (span.name.as_ref(), parent.map_or("-", |parent| parent.name.as_ref()))
        })
        .collect();
    assert_eq!(spans, [("step", "request"), ("inner", "step"), ("request", "-")]);
    assert_eq!(trace.spans[0].properties, [("rows".into(), "3".into())]);
    let event = &trace.spans[1].events[0];
    assert_eq!(
        (event.name.as_ref(), &event.properties[..]),
        ("cache miss", &[("key".into(), "k".into())][..])
    );

    let at_exit = dir.join("at-exit.mtf");
    drop(DumpOnExit::new(&at_exit));
    assert_eq!(read(&at_exit), [held]);
    std::fs::remove_dir_all(&dir).unwrap();
}
