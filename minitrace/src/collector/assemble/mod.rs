//! The collector thread's work: group finished spans by trace, decide each
//! trace's fate when its root finishes, and turn raw spans into records.
//!
//! Each part of a trace is converted to records as it arrives, on the
//! process's one time line (`data::timeline`), so that its timestamps agree
//! even when its parts arrive in different cycles. The newest trace is built in place at
//! the end of the outbox (it is *staged*): in the usual case, a thread's
//! batch of local spans followed by its root, or spans ended one by one
//! before their root, its records are written once, where they are
//! reported. A trace that stops being the newest before its root arrives
//! moves its records to a vector of its own until then.
//!
//! Conversion to records is `data::convert`; what a finished trace's fate
//! was is kept in [`fates`]; the outbox is handed to the reporter in
//! [`report`].

mod close;
mod early;
mod fates;
mod keep;
mod late_events;
mod open;
mod report;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant as StdInstant;

use crate::collector::assemble::fates::{Fate, RecentFates};
use crate::collector::assemble::late_events::LateEvents;
use crate::collector::assemble::open::{Dropped, OpenTrace};
use crate::collector::retrieve::{self, Gathering};
use crate::data::batch::{Batch, Role};
use crate::data::config::{Config, FatePolicy};
use crate::data::convert::{convert, Emptied, Part};
use crate::data::escape;
use crate::data::id::SpanId;
use crate::data::raw_span::RawSpan;
use crate::data::record::{Reporter, SpanRecord};
use crate::data::target::{Target, Targets};
use crate::data::timeline::Timeline;
use crate::transport::message::{EndedSpan, Message};
use crate::transport::property_lists::Pooled;
use crate::transport::queue::Thread;
use crate::transport::{exited, history};
use crate::transport::{gate, queue, span_buffers, stats};
use crate::util::id_hasher::BuildIdHasher;
use crate::util::prefetch;

/// Emptied span buffers returned to the pool at once: one lock per this many.
const RECYCLE_EVERY: usize = 64;
/// Emptied record vectors of open traces kept for reuse.
const MAX_SPARE_RECORDS: usize = 1024;
/// A batch is handed to the reporter once it holds this many spans (at a
/// trace's end, so a trace is never split for it), so that its records are
/// still in cache when they are built, reported and dropped
/// (PERFORMANCE.md, "The collector: batches to the reporter").
pub(super) const REPORT_BATCH: usize = 4096;
/// Spans an open trace holds before they are reported early or, when its
/// fate is not known yet, later parts are dropped (see
/// [`Collector::outgrown`]): about 8 MiB of records.
pub(super) const MAX_OPEN_TRACE_SPANS: usize = 1 << 16;
/// Records of a trace worth moving between vectors one by one; a larger
/// trace's vector is swapped whole instead, which needs it to start at the
/// front of the outbox, so that no large trace's records move twice
/// (PERFORMANCE.md, "The collector: filing").
const MOVE_LIMIT: usize = 64;

pub(crate) struct Collector {
    reporter: Box<dyn Reporter>,
    config: Config,
    /// Traces whose root has not finished, but the staged one.
    open: HashMap<u64, OpenTrace, BuildIdHasher>,
    finished: RecentFates,
    /// The newest open trace, whose records are at the end of the outbox.
    staged: Option<Staged>,
    /// Record vectors of finished traces, reused by new ones.
    spare: Vec<Vec<SpanRecord>>,
    /// When the current cycle started: the time for everything it files.
    now: StdInstant,
    /// The process's time line, as decided at the cycle's start.
    timeline: Timeline,
    /// Local span buffers emptied and not yet returned to the pool, and
    /// property lists emptied into records.
    emptied: Emptied,
    /// Property lists refilled with reported records' vectors, to return
    /// to the pool.
    refilled: Vec<Pooled>,
    /// Records of finished traces (and late spans of reported ones), then
    /// the staged trace's.
    outbox: Vec<SpanRecord>,
    /// Lossy traces closed in this cycle and in the one before: a part of
    /// theirs that ended before the root, on another thread, may be filed
    /// after it, and be an orphan too.
    lossy: HashMap<u64, LossyTrace, BuildIdHasher>,
    lossy_before: HashMap<u64, LossyTrace, BuildIdHasher>,
    /// The trace of the last late part filed: reported.
    last_late: Option<u64>,
    /// Events of late parts whose span has not arrived yet.
    late_events: LateEvents,
    /// Cycles run, to age what waits.
    cycles: u64,
    /// The flight recorder is on: what is filed is kept intact, to be
    /// given back to the threads it came from (see [`keep`]).
    keep: bool,
    /// What was filed in the last cycle, by thread, to give back.
    to_return: Vec<(Arc<Thread>, Vec<Message>)>,
    /// What exited threads kept, while the recorder is on.
    exited: exited::Exited,
    /// Emptied outboxes, to give threads at the next harvest.
    spares: Vec<Vec<Message>>,
}

/// A lossy trace, reported: its root, and the ids of its dropped spans.
pub(super) struct LossyTrace {
    root: SpanId,
    dropped: Dropped,
}

struct Staged {
    collect_id: u64,
    /// Where its records start in the outbox.
    first: usize,
    /// Its state; its `records` stay empty while it is staged.
    trace: OpenTrace,
}

impl Collector {
    pub(crate) fn new(reporter: Box<dyn Reporter>, config: Config) -> Collector {
        Collector {
            reporter,
            config,
            open: HashMap::default(),
            finished: RecentFates::new(),
            staged: None,
            spare: Vec::new(),
            now: StdInstant::now(),
            timeline: Timeline::current(),
            emptied: Emptied::default(),
            refilled: Vec::new(),
            outbox: Vec::new(),
            lossy: HashMap::default(),
            lossy_before: HashMap::default(),
            last_late: None,
            late_events: LateEvents::default(),
            cycles: 0,
            keep: false,
            to_return: Vec::new(),
            exited: exited::Exited::default(),
            spares: Vec::new(),
        }
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Swaps the reporter; the old one is dropped here, on the collector thread.
    pub(crate) fn replace(&mut self, reporter: Box<dyn Reporter>, config: Config) {
        self.reporter = reporter;
        self.config = config;
    }

    /// One collection: gather, assemble, report. `true`: a thread's queue
    /// was filling faster than the interval drains it (see
    /// [`queue::behind`]), so the next cycle should start at once.
    pub(crate) fn cycle(&mut self) -> bool {
        self.timeline = Timeline::current();
        self.now = StdInstant::now();
        std::mem::swap(&mut self.lossy, &mut self.lossy_before);
        self.lossy.clear();
        // Every thread's messages at once, a consistent cut (see
        // `transport::handoff`): a root in it comes with every part that
        // ended before it, or they came in an earlier cut.
        self.keep = history::limit() > 0;
        let mut gathering = Gathering::new(retrieve::take_requests());
        let mut cut = self.harvest(&mut gathering);
        let behind = self.file_cut(&mut cut);
        self.keep_cut(cut, gathering);
        self.apply_drops();
        self.cycles += 1;
        self.late_events.expire(self.cycles);
        self.expire();
        self.finished.forget_older_than(self.now);
        if FatePolicy::of(&self.config).reports_open_traces() {
            self.report_open_traces();
        }
        self.report();
        span_buffers::recycle(&mut self.emptied.buffers);
        behind
    }

    /// Files a cut, each thread's messages in the order it sent them, but
    /// the roots of traces with parts elsewhere (`data::escape`), which come
    /// last, after every part of the cut: so a trace whose parts all ended
    /// before its root is reported whole, in one report. A trace that never
    /// left its thread sends its parts before its root, on its own thread:
    /// filed in order, its records are built in place (see [`Staged`]).
    /// Returns whether a thread is behind (see [`queue::behind`]).
    fn file_cut(&mut self, cut: &mut [(Option<Arc<Thread>>, Vec<Message>)]) -> bool {
        let mut last = Vec::new();
        let mut behind = false;
        for (index, (thread, messages)) in cut.iter_mut().enumerate() {
            let mut credit = queue::Credit::new(thread.as_deref());
            let mut harvested = 0;
            for (at, message) in messages.iter_mut().enumerate() {
                match message.role() {
                    Role::Root | Role::CancelledRoot
                        if escape::is_marked(message.targets().first().collect_id) =>
                    {
                        harvested += queue::cost(message.span_count());
                        last.push((index, at));
                    }
                    _ => {
                        // Its budget goes back to its thread once it is filed,
                        // so that a thread cannot queue again what the
                        // collector still holds.
                        harvested += credit.add(message);
                        self.file(message);
                    }
                }
            }
            behind |= queue::behind(harvested);
        }
        for (index, at) in last {
            let (thread, messages) = &mut cut[index];
            let mut credit = queue::Credit::new(thread.as_deref());
            credit.add(&messages[at]);
            self.file(&mut messages[at]);
        }
        behind
    }

    /// Files a message where it lies: what it owns is taken out of it, and
    /// the rest is dropped there.
    fn file(&mut self, message: &mut Message) {
        match message {
            // Kept for the flight recorder: converted from clones.
            Message::Ended(EndedSpan { state, end }) if self.keep => {
                let (targets, role) = (state.targets(), state.role());
                self.file_part(Part::KeptEnded(state, *end), &targets, role, 1);
            }
            Message::Ended(EndedSpan { state, end }) => {
                // Converted from where it lies, not taken apart into a raw
                // span first (PERFORMANCE.md, "Building values where they live").
                let (targets, role) = (state.targets(), state.role());
                self.file_part(Part::Ended(state, *end), &targets, role, 1);
            }
            Message::Parts(parts) if self.keep => self.file_part(
                Part::KeptBatch(&parts.batch),
                &parts.targets,
                parts.role,
                parts.spans_per_target,
            ),
            Message::Parts(parts) => self.file_part(
                Part::Batch(&mut parts.batch),
                &parts.targets,
                parts.role,
                parts.spans_per_target,
            ),
        }
        // Returned during a sweep too, as a long sweep left a producer
        // allocating a buffer per line (PERFORMANCE.md, "Recycled span buffers").
        if self.emptied.buffers.len() >= RECYCLE_EVERY {
            span_buffers::recycle(&mut self.emptied.buffers);
        }
    }

    fn file_part(&mut self, part: Part<'_>, targets: &Targets, role: Role, spans_per_target: usize) {
        match role {
            Role::Child => self.add_child(part, targets, spans_per_target),
            Role::Root | Role::CancelledRoot => {
                // A child dropped before this root on any thread is noted
                // before the root was queued: mark its trace first.
                if queue::drops_pending() {
                    self.apply_drops();
                }
                self.finish_root(part, targets.first(), role);
            }
        }
        // Reported between traces, so that a trace is never split. (While a
        // trace is staged, the records before it are fewer than a batch:
        // they were reported when the last of them arrived.)
        if self.staged.is_none() && self.outbox.len() >= REPORT_BATCH {
            self.report();
        }
    }

    /// Messages dropped at a full queue: a dropped root takes the rest of
    /// its trace along; a dropped child's children are re-parented.
    fn apply_drops(&mut self) {
        for dropped in queue::take_dropped() {
            if dropped.root {
                stats::count_queue_full(self.discard_open(dropped.collect_id));
                self.finished.insert(dropped.collect_id, Fate::RootDropped, self.now);
                self.forget_late(dropped.collect_id);
            } else if self.finished.get(dropped.collect_id).is_none() {
                match self.open_trace(dropped.collect_id) {
                    Some(trace) => trace.dropped.insert_range(dropped.first, dropped.last),
                    None => {
                        let mut trace = self.new_trace();
                        trace.dropped.insert_range(dropped.first, dropped.last);
                        self.open.insert(dropped.collect_id, trace);
                    }
                }
            } else if let Some(lossy) = self.lossy.get_mut(&dropped.collect_id) {
                lossy.dropped.insert_range(dropped.first, dropped.last);
            }
        }
    }

    fn add_child(&mut self, part: Part<'_>, targets: &Targets, spans: usize) {
        match targets {
            Targets::One(target) => self.add_part(part, target, spans),
            Targets::Many(targets) => {
                let batches = part.take_batch().share(targets.len());
                for (mut batch, target) in batches.into_iter().zip(targets) {
                    self.add_part(Part::Batch(&mut batch), target, spans);
                }
            }
        }
    }

    fn add_part(&mut self, part: Part<'_>, target: &Target, spans: usize) {
        // Asked for all at once as soon as the batch arrives, so that the
        // misses on spans written on another core overlap (PERFORMANCE.md,
        // "The collector: filing").
        if let Part::Batch(Batch::Local { spans, .. }) = &part {
            prefetch(spans);
        }
        let collect_id = target.collect_id;
        // Spans ended one by one after their root come in runs: the fate
        // of the last one's trace is known without a lookup.
        if self.last_late == Some(collect_id) {
            return self.add_late(part, target, collect_id);
        }
        // Most parts belong to the staged trace, or to another open one.
        if let Some(staged) = self.staged.as_mut().filter(|staged| staged.collect_id == collect_id) {
            let one_span = matches!(part, Part::Ended(..));
            staged.trace.add(
                part,
                target,
                spans,
                &self.config,
                &self.timeline,
                Some(&mut self.outbox),
                &mut self.emptied,
            );
            if staged.trace.spans >= MAX_OPEN_TRACE_SPANS || staged.trace.full {
                return self.outgrown(collect_id);
            }
            // A trace growing span by span moves to the front of the outbox
            // while still small, to be moved on later by a swap; a local
            // batch stays, as its root usually comes next (PERFORMANCE.md,
            // "The collector: filing").
            if one_span && staged.first > 0 && self.outbox.len() - staged.first >= MOVE_LIMIT {
                self.report();
            }
            return;
        }
        if let Some(trace) = self.open.get_mut(&collect_id) {
            trace.add(part, target, spans, &self.config, &self.timeline, None, &mut self.emptied);
            if trace.spans >= MAX_OPEN_TRACE_SPANS || trace.full {
                self.outgrown(collect_id);
            }
            return;
        }
        match self.finished.get(collect_id) {
            Some(Fate::Reported) => {
                self.last_late = Some(collect_id);
                self.add_late(part, target, collect_id);
            }
            Some(Fate::Discarded) => {
                stats::count_sampled_out(spans);
                self.recycle(part);
            }
            Some(Fate::RootDropped) => {
                stats::count_queue_full(spans);
                self.recycle(part);
            }
            None => {
                // A new trace: it becomes the staged one.
                self.unstage();
                let mut trace = self.new_trace();
                let first = self.outbox.len();
                trace.add(
                    part,
                    target,
                    spans,
                    &self.config,
                    &self.timeline,
                    Some(&mut self.outbox),
                    &mut self.emptied,
                );
                self.staged = Some(Staged { collect_id, first, trace });
            }
        }
    }

    /// The memo of the last late trace no longer holds once its fate is
    /// noted otherwise (a trace reported early by `expire`, then cancelled).
    fn forget_late(&mut self, collect_id: u64) {
        if self.last_late == Some(collect_id) {
            self.last_late = None;
        }
    }

    /// A late part of a reported trace: reported on its own.
    fn add_late(&mut self, part: Part<'_>, target: &Target, collect_id: u64) {
        self.unstage();
        let (first, mut events) = (self.outbox.len(), Vec::new());
        convert(part, target, &self.timeline, &mut self.outbox, &mut events, &mut self.emptied);
        self.late_events.attach(collect_id, &mut self.outbox[first..], events, self.cycles);
        self.reparent_late(collect_id, first);
    }

    fn finish_root(&mut self, root: Part<'_>, target: &Target, role: Role) {
        // The root's duration is worked out only when it is compared.
        let policy = FatePolicy::of(&self.config);
        let too_fast = policy.threshold().is_some()
            && root.span_duration().is_some_and(|duration| {
                !gate::root_is_kept(&policy, duration, || {
                    let (name, properties) = root.name_and_properties();
                    (name, properties, target.trace_id())
                })
            });
        if role == Role::CancelledRoot || too_fast {
            stats::count_sampled_out(1 + self.discard_open(target.collect_id));
            self.finished.insert(target.collect_id, Fate::Discarded, self.now);
            self.forget_late(target.collect_id);
            return;
        }
        // The trace's records end up together at the end of the outbox,
        // where the root is converted last: it is the last record, where
        // orphans and stray events go.
        if let Some(staged) = self.staged.as_mut().filter(|staged| staged.collect_id == target.collect_id) {
            // The usual case, finished from where the trace lies, not moved
            // out first (PERFORMANCE.md, "Building values where they live").
            let (first, dropped) = (staged.first, std::mem::take(&mut staged.trace.dropped));
            let mut events = std::mem::take(&mut staged.trace.events);
            let spare = std::mem::take(&mut staged.trace.records);
            convert(root, target, &self.timeline, &mut self.outbox, &mut events, &mut self.emptied);
            self.staged = None;
            self.keep_spare(spare);
            return self.close_trace(target.collect_id, first, events, dropped);
        }
        let mut trace = self.open.remove(&target.collect_id);
        self.unstage();
        let first = match trace.as_mut().filter(|trace| trace.records.len() >= MOVE_LIMIT) {
            // Its records become the outbox rather than being moved into it.
            Some(large) => {
                self.report();
                std::mem::swap(&mut self.outbox, &mut large.records);
                0
            }
            None => self.outbox.len(),
        };
        let (mut events, mut dropped) = (Vec::new(), Dropped::default());
        if let Some(mut trace) = trace {
            self.outbox.append(&mut trace.records);
            events = std::mem::take(&mut trace.events);
            dropped = std::mem::take(&mut trace.dropped);
            self.retire(trace);
        }
        convert(root, target, &self.timeline, &mut self.outbox, &mut events, &mut self.emptied);
        self.close_trace(target.collect_id, first, events, dropped);
    }

    /// The staged trace becomes an ordinary open trace, its records moved
    /// out of the outbox.
    fn unstage(&mut self) {
        if let Some(Staged { collect_id, first, mut trace }) = self.staged.take() {
            match first {
                // Its `records` are empty while staged: a spare buffer for the outbox.
                0 => std::mem::swap(&mut self.outbox, &mut trace.records),
                _ => trace.records.extend(self.outbox.drain(first..)),
            }
            self.open.insert(collect_id, trace);
        }
    }

    /// Drops an open trace, staged or not, with its records; returns how
    /// many spans it held (0 for no such trace).
    fn discard_open(&mut self, collect_id: u64) -> usize {
        let (spans, trace) = match self.take_staged(collect_id) {
            // Its records truncated where they are, not moved out first.
            Some(Staged { first, trace, .. }) => {
                let spans = self.outbox.len() - first;
                self.outbox.truncate(first);
                (spans, trace)
            }
            None => match self.open.remove(&collect_id) {
                Some(trace) => (trace.records.len(), trace),
                None => return 0,
            },
        };
        self.retire(trace);
        spans
    }

    /// The staged trace, taken, if it is this one.
    fn take_staged(&mut self, collect_id: u64) -> Option<Staged> {
        self.staged.take_if(|staged| staged.collect_id == collect_id)
    }

    fn open_trace(&mut self, collect_id: u64) -> Option<&mut OpenTrace> {
        match &mut self.staged {
            Some(staged) if staged.collect_id == collect_id => Some(&mut staged.trace),
            _ => self.open.get_mut(&collect_id),
        }
    }

    /// A trace, with a reused records buffer.
    fn new_trace(&mut self) -> OpenTrace {
        OpenTrace {
            records: self.spare.pop().unwrap_or_default(),
            events: Vec::new(),
            spans: 0,
            dropped: Dropped::default(),
            full: false,
            opened: self.now,
        }
    }

    /// Done with a trace: its records vector is kept for the next one.
    fn retire(&mut self, trace: OpenTrace) {
        self.keep_spare(trace.records);
    }

    fn keep_spare(&mut self, mut records: Vec<SpanRecord>) {
        records.clear();
        if self.spare.len() < MAX_SPARE_RECORDS {
            self.spare.push(records);
        }
    }

    /// A batch that will not be converted: its buffer is still recycled.
    fn recycle(&mut self, part: Part<'_>) {
        if let Part::Batch(Batch::Local { spans, .. }) = part {
            self.emptied.buffers.push(std::mem::take(spans));
        }
    }
}

/// Asks for a batch's spans, written on another core, all at once, so that
/// the cache misses overlap (PERFORMANCE.md, "The collector: filing"); then
/// for the lists their properties are in, one more line each.
#[inline]
fn prefetch(spans: &[RawSpan]) {
    prefetch::items(spans, 64);
    for list in spans.iter().take(64).filter_map(|span| span.properties.as_deref()) {
        prefetch::line(list);
    }
}
