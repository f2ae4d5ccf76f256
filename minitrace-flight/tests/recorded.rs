//! The core's flight recorder to a dump: on demand, and at exit through
//! the guard.

use minitrace::collector::{Config, ConsoleReporter, SpanContext};
use minitrace::local::LocalSpan;
use minitrace::recorder::FlightRecorder;
use minitrace::Span;
use minitrace_flight::{DumpOnExit, Reader};

#[test]
fn recorded_requests_reach_the_dump_on_demand_and_at_exit() {
    minitrace::set_reporter(
        ConsoleReporter,
        Config::default().report_slow_traces_only(std::time::Duration::from_secs(60)),
    );
    FlightRecorder::new().enable();
    let context = SpanContext::random();
    {
        let root = Span::root("request", context);
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent("step");
        let _inner = LocalSpan::enter_with_local_parent("inner");
    }
    let dir = std::env::temp_dir().join(format!("minitrace-flight-recorded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let read = |path: &std::path::Path| -> Vec<minitrace_flight::Request> {
        Reader::new(std::fs::File::open(path).unwrap()).unwrap().map(Result::unwrap).collect()
    };

    let now = dir.join("now.mtf");
    assert_eq!(minitrace_flight::dump_recorder(&now).unwrap().requests, 1);
    let [request] = &read(&now)[..] else { panic!("one request") };
    assert_eq!((request.trace_id, request.name.as_str()), (context.trace_id.0, "request"));
    let spans: Vec<(&str, Option<u32>)> = request.spans.iter().map(|s| (s.name.as_str(), s.parent)).collect();
    assert_eq!(spans, [("step", None), ("inner", Some(0))]);

    let at_exit = dir.join("at-exit.mtf");
    drop(DumpOnExit::new(&at_exit));
    // The same request (its times may differ by the two snapshots' anchors).
    let [again] = &read(&at_exit)[..] else { panic!("one request") };
    assert_eq!((again.trace_id, again.spans.len()), (request.trace_id, request.spans.len()));
    std::fs::remove_dir_all(&dir).unwrap();
}
