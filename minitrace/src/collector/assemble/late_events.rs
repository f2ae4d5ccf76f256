//! Events of late parts whose span is not in the part: an event added
//! through the local parent on a thread other than its span's, in a batch
//! that reached the collector after the trace was reported and before the
//! span itself. They wait (a few cycles, in bounded number) for their span
//! to arrive in a later part, and are counted as dropped otherwise.

use std::collections::HashSet;

use crate::data::convert::attach_events;
use crate::data::id::SpanId;
use crate::data::record::{EventRecord, SpanRecord};
use crate::transport::stats;
use crate::util::id_hasher::BuildIdHasher;

/// Cycles an event waits for its span.
const WAIT_CYCLES: u64 = 3;
/// Events that may wait at once; more are dropped and counted.
const MAX_WAITING: usize = 1 << 14;

struct Waiting {
    collect_id: u64,
    parent: SpanId,
    event: EventRecord,
    since: u64,
}

#[derive(Default)]
pub(super) struct LateEvents {
    waiting: Vec<Waiting>,
}

impl LateEvents {
    /// Attaches `events` (and those waiting for this trace) to their spans
    /// among `records`, a late part of `collect_id`'s trace; the rest wait.
    pub(super) fn attach(
        &mut self,
        collect_id: u64,
        records: &mut [SpanRecord],
        mut events: Vec<(SpanId, EventRecord)>,
        cycle: u64,
    ) {
        if events.is_empty() && self.waiting.is_empty() {
            return;
        }
        let ids: HashSet<SpanId, BuildIdHasher> = records.iter().map(|record| record.span_id).collect();
        // Those that waited for a span of this part come along.
        let mut still = Vec::with_capacity(self.waiting.len());
        for waiting in self.waiting.drain(..) {
            if waiting.collect_id == collect_id && ids.contains(&waiting.parent) {
                events.push((waiting.parent, waiting.event));
            } else {
                still.push(waiting);
            }
        }
        self.waiting = still;
        let (here, elsewhere): (Vec<_>, Vec<_>) =
            events.into_iter().partition(|(parent, _)| ids.contains(parent));
        attach_events(records, here);
        for (parent, event) in elsewhere {
            if self.waiting.len() < MAX_WAITING {
                self.waiting.push(Waiting { collect_id, parent, event, since: cycle });
            } else {
                stats::count_dropped_events(1);
            }
        }
    }

    /// Drops, counted, the events that waited too long.
    pub(super) fn expire(&mut self, cycle: u64) {
        let before = self.waiting.len();
        self.waiting.retain(|waiting| cycle.saturating_sub(waiting.since) < WAIT_CYCLES);
        stats::count_dropped_events(before - self.waiting.len());
    }
}
