//! The story the flight recorder is for, in miniature: one slow `KEYS`
//! request holds a lock that many fast `GET`s wait for. Reporting only slow
//! traces shows the victims; the automatic dump around each slow trace also
//! shows the blocker, and everything else that ran beside it: in the
//! window handed to the callback, in the dump written from it, and on the
//! page drawn from that dump, in headless Chromium.

mod support;

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use minitrace::collector::{Config, SpanContext, TestReporter};
use minitrace::local::LocalSpan;
use minitrace::recorder::{FlightRecorder, SlowTraceWindow};
use minitrace::Span;
use minitrace_flight::Reader;
use serde_json::Value;
use support::{artifacts, browser_ready, check, scratch};

const THRESHOLD: Duration = Duration::from_millis(20);
const KEYS_HOLDS_THE_LOCK: Duration = Duration::from_millis(80);

fn serve(name: &'static str, store: &Mutex<()>, hold: Duration) {
    let root = Span::root(name, SpanContext::random());
    let _guard = root.set_local_parent();
    let _wait = LocalSpan::enter_with_local_parent("lock");
    let _locked = store.lock().unwrap();
    let _work = LocalSpan::enter_with_local_parent("work");
    std::thread::sleep(hold);
}

#[test]
fn the_dump_around_a_slow_get_holds_the_keys_that_blocked_it() {
    let (reporter, reported) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(THRESHOLD));
    let windows = Arc::new(Mutex::new(Vec::<SlowTraceWindow>::new()));
    FlightRecorder::new()
        .settle_time(Duration::from_millis(20))
        .min_interval(Duration::ZERO)
        .on_slow_trace({
            let windows = windows.clone();
            move |window| windows.lock().unwrap().push(window)
        })
        .enable();

    let store = Arc::new(Mutex::new(()));
    // Fast GETs before, during and after one KEYS.
    let keys_started = Arc::new(Barrier::new(4));
    let mut threads = Vec::new();
    for _ in 0..3 {
        let (store, keys_started) = (store.clone(), keys_started.clone());
        threads.push(std::thread::spawn(move || {
            for _ in 0..100 {
                serve("GET", &store, Duration::ZERO);
            }
            keys_started.wait();
            std::thread::sleep(Duration::from_millis(10));
            for _ in 0..100 {
                serve("GET", &store, Duration::ZERO);
            }
        }));
    }
    {
        let store = store.clone();
        let root = Span::root("KEYS", SpanContext::random());
        let _guard = root.set_local_parent();
        keys_started.wait();
        // The GETs sleep a moment after the barrier: the KEYS locks first.
        let _locked = store.lock().unwrap();
        let _scan = LocalSpan::enter_with_local_parent("scan");
        std::thread::sleep(KEYS_HOLDS_THE_LOCK);
    }
    for thread in threads {
        thread.join().unwrap();
    }
    minitrace::flush();
    std::thread::sleep(Duration::from_millis(200));

    // What reporting alone shows: the KEYS and the GETs it blocked.
    let slow_gets = reported.lock().iter().filter(|record| record.name == "GET").count();
    assert!(slow_gets >= 1, "a GET waited for the KEYS");

    let windows = windows.lock().unwrap();
    let around_a_get = windows
        .iter()
        .find(|window| {
            let slow = window.traces.iter().find(|trace| trace.trace_id == window.trace_id);
            slow.and_then(|trace| trace.root()).is_some_and(|root| root.name == "GET")
        })
        .expect("an automatic dump around a slow GET");
    // The blocker is in it, whole, with its span, and it overlapped the victim.
    let keys = around_a_get
        .traces
        .iter()
        .find(|trace| trace.root().is_some_and(|root| root.name == "KEYS"))
        .expect("the KEYS beside it");
    let names: Vec<&str> = keys.spans.iter().map(|span| span.name.as_ref()).collect();
    assert_eq!(names, ["scan", "KEYS"]);
    assert!(keys.duration_ns() >= KEYS_HOLDS_THE_LOCK.as_nanos() as u64);
    assert!(keys.overlaps(around_a_get.begin_unix_ns, around_a_get.end_unix_ns));
    // So is every request that overlapped the slow GET, and nothing else.
    assert!(around_a_get
        .traces
        .iter()
        .all(|r| r.overlaps(around_a_get.begin_unix_ns, around_a_get.end_unix_ns)));
    let snapshot = minitrace::recorder::snapshot();
    let overlapping = snapshot
        .traces
        .iter()
        .filter(|r| r.overlaps(around_a_get.begin_unix_ns, around_a_get.end_unix_ns))
        .count();
    assert_eq!(around_a_get.traces.len(), overlapping);
    assert_eq!(minitrace::recorder::automatic_dumps().done as usize, windows.len());

    // Written as a dump: the same requests read back.
    let dir = scratch("keys-story");
    let dump = minitrace_flight::dump_window(around_a_get, dir.join("window.mtf")).unwrap().into_inner();
    let read: Vec<minitrace_flight::RecordedTrace> =
        Reader::new(std::fs::File::open(&dump).unwrap()).unwrap().map(Result::unwrap).collect();
    // The recorder's own records, read back equal (the dump keeps them oldest
    // first, as the window hands them out).
    assert_eq!(read, around_a_get.traces);
    assert!(read.iter().any(|trace| trace == keys));

    // Drawn: the KEYS is the topmost point; a click shows its trace.
    let page = dir.join("window.html");
    let reader = Reader::new(std::fs::File::open(&dump).unwrap()).unwrap();
    let stats =
        minitrace_view::render_page(reader, "KEYS story", std::fs::File::create(&page).unwrap()).unwrap();
    assert_eq!(stats.requests as usize, read.len());
    if !browser_ready() {
        return;
    }
    let results = check(&page, &artifacts("keys-story"));
    assert_eq!(results["errors"], Value::Array(vec![]));
    assert!(results["scatterPixels"].as_u64().unwrap() > 0);
    assert_eq!(results["selectedTrace"].as_str().unwrap(), keys.trace_id.to_string());
    assert_eq!(results["bars"], 2, "the KEYS and its scan");
    assert_eq!(results["spanDetail"], Value::Null, "no span has events");
}
