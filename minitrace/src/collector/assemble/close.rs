//! A trace made whole when its root arrives: events on their spans, the
//! children of dropped spans under the root, the traces beside a slow root
//! dumped; and late parts of a lossy trace re-parented the same way.

use crate::collector::assemble::fates::Fate;
use crate::collector::assemble::open::Dropped;
use crate::collector::assemble::{Collector, LossyTrace};
use crate::data::config::FatePolicy;
use crate::data::id::SpanId;
use crate::data::record::{EventRecord, SpanRecord};
use crate::transport::gate;

impl Collector {
    /// A trace's records, from `first` to the end of the outbox (its root
    /// last), made whole: its events attached (those whose span has not
    /// arrived wait for it, see [`LateEvents`]) and the children of its
    /// dropped spans re-parented to the root. Its fate is noted as
    /// reported: the records go to the reporter with the outbox's next
    /// report.
    pub(super) fn close_trace(
        &mut self,
        collect_id: u64,
        first: usize,
        events: Vec<(SpanId, EventRecord)>,
        dropped: Dropped,
    ) {
        self.late_events.attach(collect_id, &mut self.outbox[first..], events, self.cycles);
        if let (Some(threshold), Some(root)) = (FatePolicy::of(&self.config).threshold(), self.outbox.last())
        {
            // Asked for before its root ended (see `transport::wanted`):
            // reported now, wanted no longer.
            gate::reported(root.trace_id);
            // Kept for its length or a trigger: the recorder's hook hears of
            // it (e.g. to fetch its parts from other processes).
            crate::recorder::kept(root.trace_id);
            // A root kept for its length: the traces beside it are dumped
            // (when the recorder has a callback for them).
            if u128::from(root.duration_ns) >= threshold.as_nanos() {
                let end = root.begin_time_unix_ns.saturating_add(root.duration_ns);
                crate::recorder::slow_root(root.trace_id, root.begin_time_unix_ns, end);
            }
        }
        if !dropped.is_empty() {
            let records = &mut self.outbox[first..];
            if let Some((root, children)) = records.split_last_mut() {
                for child in children.iter_mut().filter(|child| dropped.contains(&child.parent_id)) {
                    reparent(child, root.span_id);
                }
                self.lossy.insert(collect_id, LossyTrace { root: root.span_id, dropped });
            }
        }
        self.finished.insert(collect_id, Fate::Reported, self.now);
    }

    /// A late part of a lossy trace, from `first` to the end of the outbox:
    /// records whose parent was dropped are re-parented to the root, as at
    /// the close.
    pub(super) fn reparent_late(&mut self, collect_id: u64, first: usize) {
        if self.lossy.is_empty() && self.lossy_before.is_empty() {
            return;
        }
        let trace = match self.lossy.get(&collect_id) {
            Some(trace) => trace,
            None => match self.lossy_before.get(&collect_id) {
                Some(trace) => trace,
                None => return,
            },
        };
        for record in
            self.outbox[first..].iter_mut().filter(|record| trace.dropped.contains(&record.parent_id))
        {
            reparent(record, trace.root);
        }
    }
}

/// Gives an orphan the root as parent, and says so in a property.
fn reparent(record: &mut SpanRecord, root: SpanId) {
    record.parent_id = root;
    record.properties.push(("minitrace.reparented".into(), "parent span was dropped".into()));
}
