//! The collector hands the reporter bounded batches of whole traces: a busy
//! cycle is split into several `report` calls, never in the middle of a
//! trace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use minitrace::collector::{Config, Reporter, SpanRecord, TraceId};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

struct Batches(Arc<Mutex<Vec<Vec<TraceId>>>>);

impl Reporter for Batches {
    fn report(&mut self, spans: &[SpanRecord]) {
        self.0.lock().unwrap().push(spans.iter().map(|span| span.trace_id).collect());
    }
}

#[test]
fn a_busy_cycle_is_reported_in_bounded_batches_of_whole_traces() {
    let batches = Arc::new(Mutex::new(Vec::new()));
    // A long interval, so that batches end at the size limit (or where a
    // cycle ends: a quarter-full queue also wakes the collector).
    minitrace::set_reporter(
        Batches(batches.clone()),
        Config::default().report_interval(std::time::Duration::from_secs(60)),
    );
    let (traces, children) = (2_000, 9);
    for _ in 0..traces {
        let root = Span::root("request", SpanContext::random());
        let _guard = root.set_local_parent();
        for _ in 0..children {
            let _step = LocalSpan::enter_with_local_parent("step");
        }
    }
    // One trace larger than a batch still arrives whole.
    let big_trace = SpanContext::random();
    let big = Span::root("big", big_trace);
    {
        let _guard = big.set_local_parent();
        for _ in 0..10_000 {
            let _step = LocalSpan::enter_with_local_parent("step");
        }
    }
    drop(big);
    minitrace::flush();

    let batches = batches.lock().unwrap();
    let spans: usize = batches.iter().map(Vec::len).sum();
    assert_eq!(spans, traces * (children + 1) + 10_001);
    // (Cycles with nothing to report call the reporter with no spans.)
    let filled = batches.iter().filter(|batch| !batch.is_empty()).count();
    assert!(filled > 2, "{filled} batches for {spans} spans");
    let mut batch_of_trace = HashMap::new();
    for (batch, trace_ids) in batches.iter().enumerate() {
        for trace_id in trace_ids {
            assert_eq!(
                *batch_of_trace.entry(*trace_id).or_insert(batch),
                batch,
                "a trace split over batches"
            );
        }
        // A batch ends at the first trace that brings it to 4 096 spans:
        // below that, plus the last trace it took (10 spans, or the big one).
        let last_trace = if trace_ids.contains(&big_trace.trace_id) { 10_001 } else { children + 1 };
        assert!(trace_ids.len() < 4_096 + last_trace, "a batch of {}", trace_ids.len());
    }
    assert_eq!(batch_of_trace.len(), traces + 1);
}
