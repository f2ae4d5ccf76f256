//! What the collector reports of a trace before its root arrives: an open
//! trace grown past its bound, one open too long, and every open trace
//! under `report_before_root_finish`. Its later parts follow as late ones.

use crate::collector::assemble::fates::{Fate, OPEN_TRACE_TIMEOUT};
use crate::collector::assemble::open::OpenTrace;
use crate::collector::assemble::Collector;
use crate::data::config::FatePolicy;

impl Collector {
    /// What an open trace holds, reported before its root: its events wait
    /// for their spans as late ones do.
    fn report_open(&mut self, collect_id: u64, trace: &mut OpenTrace) {
        let first = self.outbox.len();
        self.outbox.append(&mut trace.records);
        let events = std::mem::take(&mut trace.events);
        self.late_events.attach(collect_id, &mut self.outbox[first..], events, self.cycles);
    }

    /// An open trace holds [`MAX_OPEN_TRACE_SPANS`](super::MAX_OPEN_TRACE_SPANS) spans: what it holds is
    /// reported now, and the rest follows as late spans, when its fate is
    /// already known to be "reported" (no threshold, or the trace has been
    /// open at least the threshold's length, so its root is that slow);
    /// else its later parts are dropped and counted, as by
    /// `max_spans_per_trace`. Either way, the collector's memory for one
    /// trace is bounded.
    pub(super) fn outgrown(&mut self, collect_id: u64) {
        self.unstage();
        let Some(trace) = self.open.get_mut(&collect_id) else { return };
        let open_for = self.now.duration_since(trace.opened);
        if FatePolicy::of(&self.config).threshold().is_some_and(|threshold| open_for < threshold) {
            // Its fate is not known yet: it keeps what it holds, no more.
            trace.full = true;
            return;
        }
        if let Some(mut trace) = self.open.remove(&collect_id) {
            self.report_open(collect_id, &mut trace);
            self.retire(trace);
            self.finished.insert(collect_id, Fate::Reported, self.now);
        }
    }

    /// Reports the spans of traces open too long; they are then treated as
    /// reported (later spans follow as late spans).
    pub(super) fn expire(&mut self) {
        let now = self.now;
        // A trace open this long has a root at least this slow, so the
        // slow-trace filter would report it too.
        let timeout = OPEN_TRACE_TIMEOUT.max(FatePolicy::of(&self.config).threshold().unwrap_or_default());
        let stale = |trace: &OpenTrace| now.duration_since(trace.opened) >= timeout;
        if self.staged.as_ref().is_some_and(|staged| stale(&staged.trace)) {
            self.unstage();
        }
        let expired: Vec<u64> =
            self.open.iter().filter(|(_, trace)| stale(trace)).map(|(&id, _)| id).collect();
        for collect_id in expired {
            if let Some(mut trace) = self.open.remove(&collect_id) {
                self.report_open(collect_id, &mut trace);
                self.retire(trace);
                self.finished.insert(collect_id, Fate::Reported, now);
            }
        }
    }

    /// With `report_before_root_finish`: every open trace's spans so far.
    pub(super) fn report_open_traces(&mut self) {
        self.unstage();
        let mut open = std::mem::take(&mut self.open);
        for (&collect_id, trace) in open.iter_mut() {
            self.report_open(collect_id, trace);
        }
        self.open = open;
    }
}
