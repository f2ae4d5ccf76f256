//! A seeded, randomised stress test of the core's promises, checking every
//! span, event, parent and timestamp, not only counts. Four producer
//! threads run traces of random shapes: nested local spans with properties,
//! links and events through the local parent; thread-safe children handed
//! to other threads (as `spawn_blocking` does), which set them as their
//! local parent, record local spans and events there (through the local
//! parent and through the span), and end them before or after their root;
//! roots cancelled or moved to another thread to end there; children
//! cancelled. Then a phase with recording switched off, and one with a
//! latency threshold. Under the lossless policy every fate is exact:
//!
//! - each trace expected kept arrives with every span under its parent,
//!   every event on its span, every property; nothing else arrives;
//! - every child begins after its parent (to the clock's error bound), and
//!   one that ended before its parent ends before it; every event lies in
//!   its span;
//! - the spans that ended before their root arrive in the root's
//!   `report()` call (one report per trace);
//! - made = reported + sampled out, none dropped.
//!
//! The seed is printed; `MINITRACE_STRESS_SEED=<n>` replays a run.

use std::collections::HashMap;
use std::sync::Mutex;

mod common;

use common::shapes::{phase, Calls, Trace, THRESHOLD};
use minitrace::collector::{stats, Config, SpanId, SpanRecord, TraceId};

const TRACES_PER_PRODUCER: usize = 3_000;
/// See tests/promises.rs.
const CLOCK_ERROR_NS: u64 = 1_000;

/// Checks what arrived against what should have. `Err` names the first
/// broken promise.
fn check(traces: &[Trace], calls: &[Vec<SpanRecord>]) -> Result<Counts, String> {
    let mut by_trace: HashMap<TraceId, Vec<(usize, &SpanRecord)>> = HashMap::new();
    for (call, records) in calls.iter().enumerate() {
        for record in records {
            by_trace.entry(record.trace_id).or_default().push((call, record));
        }
    }
    let mut counts = Counts::default();
    for trace in traces {
        let id = trace.id.unwrap();
        let arrived = by_trace.get(&id).map(Vec::as_slice).unwrap_or_default();
        match trace.kept {
            Some(false) if !arrived.is_empty() => {
                return Err(format!("trace {id:?} thrown away, yet {} records arrived", arrived.len()));
            }
            Some(false) => continue,
            None if arrived.is_empty() => continue,
            _ => {}
        }
        counts.traces += 1;
        let named: HashMap<&str, (usize, &SpanRecord)> =
            arrived.iter().map(|(call, record)| (record.name.as_ref(), (*call, *record))).collect();
        if named.len() != arrived.len() {
            return Err(format!("trace {id:?}: a span arrived twice"));
        }
        let unexpected: Vec<&&str> = named.keys().filter(|name| !trace.spans.contains_key(**name)).collect();
        if !unexpected.is_empty() {
            return Err(format!("trace {id:?}: spans that were not made: {unexpected:?}"));
        }
        let root_call = named.get("root").map(|(call, _)| *call);
        for (name, expected) in &trace.spans {
            let Some((call, record)) = named.get(name.as_str()) else {
                return Err(format!(
                    "trace {id:?}: {name} never arrived ({} of {} arrived; kept {:?}, root moved {})",
                    arrived.len(),
                    trace.spans.len(),
                    trace.kept,
                    trace.root_moved
                ));
            };
            counts.spans += 1;
            if expected.parent.is_empty() {
                if record.parent_id != SpanId(0) {
                    return Err(format!("trace {id:?}: the root has a parent"));
                }
            } else {
                let (_, parent) = named[expected.parent.as_str()];
                if record.parent_id != parent.span_id {
                    return Err(format!("trace {id:?}: {name}'s parent is not {}", expected.parent));
                }
                if record.begin_time_unix_ns + CLOCK_ERROR_NS < parent.begin_time_unix_ns {
                    return Err(format!("trace {id:?}: {name} begins before its parent {}", expected.parent));
                }
                if expected.before_parent && end(record) > end(parent) + CLOCK_ERROR_NS {
                    return Err(format!("trace {id:?}: {name} ends after its parent {}", expected.parent));
                }
            }
            let mut events: Vec<&str> = record.events.iter().map(|event| event.name.as_ref()).collect();
            let mut wanted: Vec<&str> = expected.events.iter().map(String::as_str).collect();
            events.sort_unstable();
            wanted.sort_unstable();
            if events != wanted {
                return Err(format!("trace {id:?}: {name}'s events are {events:?}, not {wanted:?}"));
            }
            counts.events += events.len();
            for event in &record.events {
                let (begin, end) = (record.begin_time_unix_ns, end(record));
                if event.timestamp_unix_ns + CLOCK_ERROR_NS < begin
                    || event.timestamp_unix_ns > end + CLOCK_ERROR_NS
                {
                    return Err(format!("trace {id:?}: event {} lies outside {name}", event.name));
                }
            }
            for (key, value) in &expected.properties {
                if !record.properties.iter().any(|(k, v)| k == key && v == value) {
                    return Err(format!("trace {id:?}: {name} lacks its property {key}"));
                }
            }
            counts.containments += usize::from(!expected.parent.is_empty());
            if expected.before_root && !trace.root_moved && Some(*call) != root_call {
                let mut where_: Vec<(usize, &str)> =
                    arrived.iter().map(|(call, record)| (*call, record.name.as_ref())).collect();
                where_.sort();
                return Err(format!(
                    "trace {id:?} (producer {}, number {}): {name} ended before its root but came in another report: {where_:?} (of {} calls)",
                    trace.made_at.0, trace.made_at.1,
                    calls.len()
                ));
            }
        }
    }
    Ok(counts)
}

fn end(record: &SpanRecord) -> u64 {
    record.begin_time_unix_ns + record.duration_ns
}

#[derive(Debug, Default)]
struct Counts {
    traces: usize,
    spans: usize,
    events: usize,
    containments: usize,
}

fn seed() -> u64 {
    std::env::var("MINITRACE_STRESS_SEED").ok().and_then(|seed| seed.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    })
}

/// Runs the whole test and checks it; `corrupt` may break what arrived
/// first (to show that a broken promise is caught, seed included).
fn run(seed: u64, corrupt: impl Fn(&mut Vec<Vec<SpanRecord>>)) -> Result<Counts, String> {
    let calls = Calls::default();
    let lossless = Config::default().wait_when_queue_full(true);
    minitrace::set_reporter(calls.clone(), lossless);
    let before = stats();

    // Everything reported.
    let mut traces = phase(seed, 1, TRACES_PER_PRODUCER, |_| None);
    // Switched off: nothing of these is recorded.
    minitrace::flush();
    minitrace::set_enabled(false);
    let mut off = phase(seed, 2, TRACES_PER_PRODUCER, |_| None);
    minitrace::set_enabled(true);
    for trace in &mut off {
        (trace.kept, trace.made) = (Some(false), 0);
    }
    minitrace::flush();
    // A latency threshold: the slow roots are kept, the fast thrown away.
    minitrace::set_reporter(calls.clone(), lossless.report_slow_traces_only(THRESHOLD));
    let thresholded = phase(seed, 3, TRACES_PER_PRODUCER, |rng| Some(rng.one_in(8)));
    minitrace::flush();
    minitrace::set_reporter(calls.clone(), lossless);
    minitrace::flush();
    traces.extend(off);
    traces.extend(thresholded);

    let after = stats();
    let mut arrived = calls.0.lock().unwrap().clone();
    corrupt(&mut arrived);
    let counts = check(&traces, &arrived).map_err(|broken| format!("seed {seed}: {broken}"))?;
    let reported = after.spans_reported - before.spans_reported;
    let sampled_out = after.spans_sampled_out - before.spans_sampled_out;
    let dropped = after.dropped() - before.dropped();
    let arrived_spans: usize = arrived.iter().map(Vec::len).sum();
    if dropped != 0 || after.dropped_events != before.dropped_events {
        return Err(format!("seed {seed}: {dropped} spans dropped under the lossless policy: {after:?}"));
    }
    if reported != arrived_spans as u64 || reported != counts.spans as u64 {
        return Err(format!(
            "seed {seed}: {reported} reported, {arrived_spans} arrived, {} expected",
            counts.spans
        ));
    }
    let made: usize = traces.iter().map(|trace| trace.made).sum();
    if made as u64 != reported + sampled_out {
        return Err(format!(
            "seed {seed}: {made} spans made, {reported} reported + {sampled_out} sampled out"
        ));
    }
    Ok(counts)
}

/// One process, one reporter: the tests run in turn.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn every_event_every_parent_every_time_and_one_report_per_trace() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let seed = seed();
    eprintln!("stress_random: seed {seed} (MINITRACE_STRESS_SEED={seed} replays it)");
    match run(seed, |_| {}) {
        Ok(counts) => eprintln!(
            "stress_random: {} traces, {} spans, {} events, {} parent/child containments checked: 0 violations",
            counts.traces, counts.spans, counts.events, counts.containments
        ),
        Err(broken) => panic!("{broken}"),
    }
}

/// The checker catches a broken promise, and names the seed: here one
/// event removed from what arrived.
#[test]
fn a_broken_promise_is_caught_with_its_seed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let seed = seed();
    let outcome = run(seed, |calls| {
        let with_event = calls.iter_mut().flatten().find(|record| !record.events.is_empty());
        with_event.expect("some span has an event").events.pop();
    });
    let broken = outcome.expect_err("the removed event was noticed");
    eprintln!("caught: {broken}");
    assert!(broken.starts_with(&format!("seed {seed}: ")) && broken.contains("events are"), "{broken}");
}
