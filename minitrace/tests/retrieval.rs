//! Retrieval after the fact delivers a trace exactly as a report of it
//! would have. 100 000 traces of every shape the stress test knows (local
//! spans, `Span`s ended on other threads before and after their roots,
//! events through spans and through the local parent, properties, links,
//! roots ended on other threads, children cancelled) run twice: once
//! reported when their roots end, once thrown away and then retrieved by
//! id through the reporter. The two deliveries are the same, trace by
//! trace: every span under the same parent, with the same properties and
//! events. In the first run, what the recorder holds of each reported
//! trace is also compared with the report itself, record for record (ids
//! and times included).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::shapes::{phase, Calls, Trace};
use minitrace::collector::{stats, Config, SpanRecord, TraceId, LINK_KEY};
use minitrace::recorder::{self, FlightRecorder};

const TRACES_PER_PRODUCER: usize = 25_000;
/// Retrievals asked for before the collector is flushed.
const CHUNK: usize = 2_000;

/// A trace's shape: per span (by name, unique in a trace), its parent's
/// name, its properties (a link's random target left out) and its events.
type Shape = BTreeMap<String, (String, Vec<(String, String)>, Vec<String>)>;

fn shape(records: &[&SpanRecord]) -> Shape {
    let names: BTreeMap<_, _> =
        records.iter().map(|record| (record.span_id, record.name.to_string())).collect();
    records
        .iter()
        .map(|record| {
            let parent = names.get(&record.parent_id).cloned().unwrap_or_default();
            let mut properties: Vec<(String, String)> = record
                .properties
                .iter()
                .map(|(key, value)| {
                    (key.to_string(), if key == LINK_KEY { "link".into() } else { value.to_string() })
                })
                .collect();
            properties.sort();
            let mut events: Vec<String> =
                record.events.iter().map(|event| format!("{} {:?}", event.name, event.properties)).collect();
            events.sort();
            (record.name.to_string(), (parent, properties, events))
        })
        .collect()
}

fn by_trace(calls: &Calls) -> BTreeMap<TraceId, Vec<SpanRecord>> {
    let mut by_trace: BTreeMap<TraceId, Vec<SpanRecord>> = BTreeMap::new();
    for record in calls.0.lock().unwrap().iter().flatten() {
        by_trace.entry(record.trace_id).or_default().push(record.clone());
    }
    by_trace
}

fn kept(trace: &Trace) -> bool {
    trace.kept == Some(true)
}

#[test]
fn a_trace_retrieved_after_the_fact_is_delivered_as_its_report_would_be() {
    let seed = 0x5eed_0034;
    FlightRecorder::new().bytes_per_thread(1 << 30).enable();

    // Reported when their roots end.
    let reported = Calls::default();
    minitrace::set_reporter(reported.clone(), Config::default().wait_when_queue_full(true));
    let first = phase(seed, 1, TRACES_PER_PRODUCER, |_| None);
    minitrace::flush();
    let first_delivery = by_trace(&reported);
    // What the recorder holds of a reported trace is that report, exactly.
    let held: BTreeMap<TraceId, Vec<SpanRecord>> =
        recorder::snapshot().traces.into_iter().map(|trace| (trace.trace_id, trace.spans)).collect();
    for trace in first.iter().filter(|trace| kept(trace)) {
        let id = trace.id.unwrap();
        let mut held = held.get(&id).cloned().expect("the recorder holds a reported trace");
        let mut delivered = first_delivery[&id].clone();
        // Events of one span stamped at the same instant have no defined
        // order (they may come through the span and through the local
        // parent): compare them in (time, name) order.
        for record in held.iter_mut().chain(delivered.iter_mut()) {
            record.events.sort_by(|a, b| (a.timestamp_unix_ns, &a.name).cmp(&(b.timestamp_unix_ns, &b.name)));
        }
        held.sort_by_key(|record| record.span_id);
        delivered.sort_by_key(|record| record.span_id);
        assert_eq!(held, delivered, "trace {id:?}: held and reported differ");
    }

    // The same shapes, thrown away (no root is that slow), then retrieved.
    FlightRecorder::disable();
    minitrace::flush();
    FlightRecorder::new().bytes_per_thread(1 << 30).enable();
    let retrieved = Calls::default();
    let threshold =
        Config::default().wait_when_queue_full(true).report_slow_traces_only(Duration::from_secs(3600));
    minitrace::set_reporter(retrieved.clone(), threshold);
    let second = phase(seed, 1, TRACES_PER_PRODUCER, |_| None);
    minitrace::flush();
    assert!(retrieved.0.lock().unwrap().is_empty(), "everything was thrown away");
    let (before, recorder_before) = (stats(), recorder::stats());
    let wanted: Vec<TraceId> =
        second.iter().filter(|trace| kept(trace)).map(|trace| trace.id.unwrap()).collect();
    let started = std::time::Instant::now();
    for chunk in wanted.chunks(CHUNK) {
        for &id in chunk {
            recorder::retrieve(id);
        }
        minitrace::flush();
    }
    eprintln!("retrieval: {} traces asked for in {:?}", wanted.len(), started.elapsed());
    let (after, recorder_after) = (stats(), recorder::stats());
    let second_delivery = by_trace(&retrieved);

    assert_eq!(first.len(), second.len());
    let mut compared = (0, 0);
    for (one, other) in first.iter().zip(&second) {
        if !kept(one) {
            continue;
        }
        let (first_id, second_id) = (one.id.unwrap(), other.id.unwrap());
        let first_records: Vec<&SpanRecord> = first_delivery[&first_id].iter().collect();
        let second_records: Vec<&SpanRecord> =
            second_delivery.get(&second_id).map(|records| records.iter().collect()).unwrap_or_default();
        assert_eq!(
            shape(&first_records),
            shape(&second_records),
            "trace {:?} delivered differently",
            one.made_at
        );
        compared = (compared.0 + 1, compared.1 + first_records.len());
    }
    eprintln!("retrieval: {} traces, {} spans delivered identically", compared.0, compared.1);
    assert_eq!(compared.0, wanted.len());
    let (retrieved, partly, not_found) = (
        recorder_after.retrieved - recorder_before.retrieved,
        recorder_after.partly_overwritten - recorder_before.partly_overwritten,
        recorder_after.not_found - recorder_before.not_found,
    );
    assert_eq!((retrieved as usize, partly, not_found), (wanted.len(), 0, 0));
    assert_eq!(after.spans_retrieved - before.spans_retrieved, compared.1 as u64);
    FlightRecorder::disable();
}
