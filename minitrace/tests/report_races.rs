//! `recorder::report` racing the root's end: whichever comes first, every
//! trace is reported exactly once, whole, and the recorder's hook hears of
//! each one the report did not return. The race the collector must close:
//! a root that ends after a cycle's harvest but before the report's want
//! reaches the threads (it is thrown away into the history, and found
//! there at the next cycle).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use minitrace::collector::{Config, SpanContext, TestReporter, TraceId};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;
use minitrace::recorder::{self, FlightRecorder};

#[test]
fn a_report_racing_the_root_s_end_reports_each_trace_once_whole() {
    let seed: u64 = std::env::var("SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("seed {seed} (SEED={seed} to repeat)");
    let mut state = seed | 1;
    let mut next = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };

    let (reporter, reported) = TestReporter::new();
    minitrace::set_reporter(
        reporter,
        Config::default()
            .report_slow_traces_only(Duration::from_secs(60))
            .report_interval(Duration::from_micros(200)),
    );
    FlightRecorder::new().enable();
    let heard = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let hook = heard.clone();
    recorder::on_kept(Some(Arc::new(move |trace_id| hook.lock().push(trace_id))));

    let mut returned: HashMap<TraceId, bool> = HashMap::new();
    for _ in 0..1_000 {
        let context = SpanContext::random();
        let root = Span::root("request", context);
        let guard = root.set_local_parent();
        drop(LocalSpan::enter_with_local_parent("part"));
        let asking = std::thread::spawn(move || recorder::report(context.trace_id).is_some());
        std::thread::sleep(Duration::from_micros(next(1_500)));
        drop(guard);
        drop(root);
        returned.insert(context.trace_id, asking.join().unwrap());
    }
    // Every root has ended; the last wants are looked for at the next cycles.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        minitrace::flush();
        let count = reported.lock().len();
        if count >= 2 * returned.len() || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    minitrace::flush();

    let mut names: HashMap<TraceId, Vec<String>> = HashMap::new();
    for record in reported.lock().iter() {
        names.entry(record.trace_id).or_default().push(record.name.to_string());
    }
    let heard = heard.lock().clone();
    for (trace_id, got_it) in &returned {
        let mut spans = names.get(trace_id).cloned().unwrap_or_default();
        spans.sort();
        assert_eq!(spans, ["part", "request"], "trace {trace_id} (seed {seed}): reported once, whole");
        let hooked = heard.iter().filter(|id| *id == trace_id).count();
        assert_eq!(
            hooked,
            usize::from(!got_it),
            "trace {trace_id} (seed {seed}): the hook hears of it iff awaited"
        );
    }
    let raced = returned.values().filter(|got| !**got).count();
    println!("{raced} of {} reports came before their root ended", returned.len());
    recorder::on_kept(None);
}
