//! The collector thread's work: group finished spans by trace, decide each
//! trace's fate when its root finishes, and turn raw spans into records.
//!
//! Each part of a trace is converted to records as it arrives, with an
//! anchor fixed for the trace, so that its timestamps agree even when its
//! parts arrive in different cycles. The newest trace is built in place at
//! the end of the outbox (it is *staged*): in the usual case, a thread's
//! batch of local spans followed by its root, or spans ended one by one
//! before their root, its records are written once, where they are
//! reported. A trace that stops being the newest before its root arrives
//! moves its records to a vector of its own until then.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant as StdInstant};

use minstant::{Anchor, Instant};

use crate::collector::global::ID_BLOCK;
use crate::collector::message::{Batch, EndedSpan, IdMap, Message, Role};
use crate::collector::target::{Target, Targets};
use crate::collector::{queue, stats, Config, EventRecord, Reporter, SpanId, SpanRecord};
use crate::local::raw_span::{RawSpan, LINE_PARENT};
use crate::span::SpanState;
use crate::util::span_buffers;

/// Spans of a trace whose root has not finished are reported anyway after
/// this long (the root was leaked, or lives on a thread that exited), or
/// after the slow-trace threshold if that is longer.
const OPEN_TRACE_TIMEOUT: Duration = Duration::from_secs(10);
/// Emptied record vectors of open traces kept for reuse.
const MAX_SPARE_RECORDS: usize = 1024;
/// How long a finished trace's fate is remembered: as long as an open trace
/// is kept, so that a late child follows its root's fate.
const FATE_MEMORY: Duration = OPEN_TRACE_TIMEOUT;
/// A batch is handed to the reporter once it holds this many spans (at a
/// trace's end, so a trace is never split for it): ~0.5 MiB of records, so
/// that they are still in cache when they are built, reported and dropped.
/// A whole cycle's records in one vector, megabytes at high rates, would be
/// written, read and dropped from memory: measured, a sixth more collector
/// CPU per span.
const REPORT_BATCH: usize = 4096;
/// Records of a trace worth moving between vectors one by one; a larger
/// trace's vector is swapped whole instead, which needs it to start at the
/// front of the outbox (measured: with 1 000 spans ended on another thread
/// than their root, each record was moved twice, and the collector spent a
/// fifth more per span).
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
    /// The current cycle's anchor, for traces opened in it.
    anchor: Anchor,
    /// Local span buffers emptied this cycle, returned to the pool at its end.
    emptied: Vec<Vec<RawSpan>>,
    /// Records of finished traces (and late spans of reported ones), then
    /// the staged trace's.
    outbox: Vec<SpanRecord>,
    /// Lossy traces closed in this cycle and in the one before: a part of
    /// theirs that ended before the root, on another thread, may be filed
    /// after it, and be an orphan too.
    lossy: HashMap<u64, LossyTrace, BuildIdHasher>,
    lossy_before: HashMap<u64, LossyTrace, BuildIdHasher>,
}

/// A lossy trace, reported: its root, and the ids of its records so far.
struct LossyTrace {
    root: SpanId,
    ids: HashSet<SpanId, BuildIdHasher>,
}

struct Staged {
    collect_id: u64,
    /// Where its records start in the outbox.
    first: usize,
    /// Its state; its `records` stay empty while it is staged.
    trace: OpenTrace,
}

struct OpenTrace {
    /// Records of the spans received so far.
    records: Vec<SpanRecord>,
    /// Events received so far, attached to their spans when the trace ends.
    events: Vec<(SpanId, EventRecord)>,
    /// Every part of the trace is converted with this anchor.
    anchor: Anchor,
    /// Spans accepted, for `max_spans_per_trace`.
    spans: usize,
    /// Some span of the trace was dropped: its children's parent may be
    /// missing, so they are re-parented to the root when it is reported.
    lossy: bool,
    opened: StdInstant,
}

/// A part of a trace as it is filed: a batch lying in its message, or a
/// thread-safe span lying in its message as it was kept.
enum Part<'a> {
    Batch(&'a mut Batch),
    Ended(&'a mut SpanState, Instant),
}

impl Part<'_> {
    /// As a batch of its own (for a span with several parents, shared
    /// between them).
    fn take_batch(self) -> Batch {
        match self {
            Part::Batch(batch) => std::mem::take(batch),
            Part::Ended(state, end) => state.take_batch(end),
        }
    }

    /// How long it lasted, if it is one span.
    fn span_duration(&self) -> Option<Duration> {
        match self {
            Part::Batch(_) => None,
            Part::Ended(state, end) => Some(end.duration_since(state.begin())),
        }
    }
}

impl OpenTrace {
    /// Converts a part of `spans` spans into the trace: into `staged_at`,
    /// the outbox, when the trace is staged, else into its own records. A
    /// part past `max_spans_per_trace` is counted as dropped instead, and
    /// makes the trace lossy.
    fn add(
        &mut self,
        part: Part<'_>,
        target: &Target,
        spans: usize,
        config: &Config,
        staged_at: Option<&mut Vec<SpanRecord>>,
        emptied: &mut Vec<Vec<RawSpan>>,
    ) {
        if config.max_spans_per_trace.is_some_and(|max| self.spans + spans > max) {
            stats::count_trace_too_large(spans);
            self.lossy = true;
            return;
        }
        self.spans += spans;
        let out = staged_at.unwrap_or(&mut self.records);
        convert(part, target, &self.anchor, out, &mut self.events, emptied);
    }

    /// Appends the records so far to `outbox`; events whose span is not
    /// among them go to the last record.
    fn report_early(&mut self, outbox: &mut Vec<SpanRecord>) {
        let first = outbox.len();
        outbox.append(&mut self.records);
        attach_events(&mut outbox[first..], std::mem::take(&mut self.events));
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Reported,
    Discarded,
    /// The root was dropped on its way here: the rest is counted as dropped.
    RootDropped,
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
            anchor: Anchor::new(),
            emptied: Vec::new(),
            outbox: Vec::new(),
            lossy: HashMap::default(),
            lossy_before: HashMap::default(),
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

    /// One collection: gather, assemble, report.
    pub(crate) fn cycle(&mut self) {
        self.anchor = Anchor::new();
        self.now = StdInstant::now();
        std::mem::swap(&mut self.lossy, &mut self.lossy_before);
        self.lossy.clear();
        // Every message is filed as it is read, while its bytes are still in
        // cache. A root completes its trace at once: a child still queued
        // on another thread's ring arrives after it, and is reported as a
        // late span of a reported trace, normally in the same batch.
        queue::drain(|message| self.file(message));
        self.apply_drops();
        self.expire();
        self.finished.forget_older_than(self.now);
        if self.config.report_before_root_finish && self.config.slow_trace_threshold.is_none() {
            self.report_open_traces();
        }
        self.report();
        span_buffers::recycle(&mut self.emptied);
    }

    /// Files a message read in place from its ring: what it owns is taken
    /// out of it, and the rest is dropped there.
    fn file(&mut self, message: &mut Message) {
        match message {
            Message::Ended(EndedSpan { state, end }) => {
                // Converted from where it lies: taken apart into a raw span
                // first, its pieces were copied on 16 bytes at a time from
                // 8-byte writes, a store-forwarding stall each.
                let (targets, role) = (state.targets(), state.role());
                self.file_part(Part::Ended(state, *end), &targets, role, 1);
            }
            Message::Parts(parts) => self.file_part(
                Part::Batch(&mut parts.batch),
                &parts.targets,
                parts.role,
                parts.spans_per_target,
            ),
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
    /// its trace along; a dropped child makes its trace lossy.
    fn apply_drops(&mut self) {
        for dropped in queue::take_dropped() {
            if dropped.root {
                stats::count_queue_full(self.discard_open(dropped.collect_id));
                self.finished.insert(dropped.collect_id, Fate::RootDropped, self.now);
            } else if self.finished.get(dropped.collect_id).is_none() {
                match self.open_trace(dropped.collect_id) {
                    Some(trace) => trace.lossy = true,
                    None => {
                        let mut trace = self.new_trace();
                        trace.lossy = true;
                        self.open.insert(dropped.collect_id, trace);
                    }
                }
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
        // misses on spans written on another core overlap (measured: ~8 %
        // less collector CPU per 10-span request, ~15 % per 101-span trace).
        if let Part::Batch(Batch::Local { spans, .. }) = &part {
            prefetch(spans);
        }
        let collect_id = target.collect_id;
        // Most parts belong to the staged trace, or to another open one.
        if let Some(staged) = self.staged.as_mut().filter(|staged| staged.collect_id == collect_id) {
            let one_span = matches!(part, Part::Ended(..));
            staged.trace.add(part, target, spans, &self.config, Some(&mut self.outbox), &mut self.emptied);
            // A trace growing span by span (thread-safe spans ended one by
            // one, often on several threads, so that other traces come in
            // between) is brought to the front of the outbox while it is
            // still small to move, so that it can be unstaged or finished
            // by a swap. A batch of local spans is left where it is: its
            // root usually comes next, from the same thread, and moving it
            // would cost a copy and a report call for nothing.
            if one_span && staged.first > 0 && self.outbox.len() - staged.first >= MOVE_LIMIT {
                self.report();
            }
            return;
        }
        if let Some(trace) = self.open.get_mut(&collect_id) {
            return trace.add(part, target, spans, &self.config, None, &mut self.emptied);
        }
        match self.finished.get(collect_id) {
            Some(Fate::Reported) => {
                // A late span of a reported trace: reported on its own.
                self.unstage();
                let (first, mut events) = (self.outbox.len(), Vec::new());
                convert(part, target, &self.anchor, &mut self.outbox, &mut events, &mut self.emptied);
                attach_events(&mut self.outbox[first..], events);
                self.reparent_late(collect_id, first);
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
                trace.add(part, target, spans, &self.config, Some(&mut self.outbox), &mut self.emptied);
                self.staged = Some(Staged { collect_id, first, trace });
            }
        }
    }

    fn finish_root(&mut self, root: Part<'_>, target: &Target, role: Role) {
        // The root's duration is worked out only when it is compared.
        let too_fast = self
            .config
            .slow_trace_threshold
            .is_some_and(|threshold| root.span_duration().is_some_and(|duration| duration < threshold));
        if role == Role::CancelledRoot || too_fast {
            stats::count_sampled_out(1 + self.discard_open(target.collect_id));
            self.finished.insert(target.collect_id, Fate::Discarded, self.now);
            return;
        }
        // The trace's records end up together at the end of the outbox,
        // where the root is converted last: it is the last record, where
        // orphans and stray events go.
        if let Some(staged) = self.staged.as_mut().filter(|staged| staged.collect_id == target.collect_id) {
            // The usual case, finished from where the trace lies: moved out
            // whole first, it was copied through the stack in pieces read
            // back in other sizes, a store-forwarding stall each.
            let (first, lossy) = (staged.first, staged.trace.lossy);
            let mut events = std::mem::take(&mut staged.trace.events);
            let spare = std::mem::take(&mut staged.trace.records);
            convert(root, target, &staged.trace.anchor, &mut self.outbox, &mut events, &mut self.emptied);
            self.staged = None;
            self.keep_spare(spare);
            return self.close_trace(target.collect_id, first, events, lossy);
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
        let (mut events, lossy) = (Vec::new(), trace.as_ref().is_some_and(|trace| trace.lossy));
        let anchor = trace.as_ref().map_or(self.anchor, |trace| trace.anchor);
        if let Some(mut trace) = trace {
            self.outbox.append(&mut trace.records);
            events = std::mem::take(&mut trace.events);
            self.retire(trace);
        }
        convert(root, target, &anchor, &mut self.outbox, &mut events, &mut self.emptied);
        self.close_trace(target.collect_id, first, events, lossy);
    }

    /// A trace's records, from `first` to the end of the outbox, made
    /// whole: its events attached and, if some span was lost, orphans
    /// re-parented to the root. Its fate is noted as reported: the records
    /// go to the reporter with the outbox's next report.
    fn close_trace(
        &mut self,
        collect_id: u64,
        first: usize,
        events: Vec<(SpanId, EventRecord)>,
        lossy: bool,
    ) {
        attach_events(&mut self.outbox[first..], events);
        if lossy {
            let records = &mut self.outbox[first..];
            reparent_orphans(records);
            let root = records.last().map_or(SpanId(0), |root| root.span_id);
            let ids = records.iter().map(|record| record.span_id).collect();
            self.lossy.insert(collect_id, LossyTrace { root, ids });
        }
        self.finished.insert(collect_id, Fate::Reported, self.now);
    }

    /// A late part of a lossy trace, from `first` to the end of the outbox:
    /// records whose parent is neither among the trace's records so far
    /// nor the part's own are re-parented to the root, as at the close.
    fn reparent_late(&mut self, collect_id: u64, first: usize) {
        if self.lossy.is_empty() && self.lossy_before.is_empty() {
            return;
        }
        let trace = match self.lossy.get_mut(&collect_id) {
            Some(trace) => trace,
            None => match self.lossy_before.get_mut(&collect_id) {
                Some(trace) => trace,
                None => return,
            },
        };
        let late = &mut self.outbox[first..];
        trace.ids.extend(late.iter().map(|record| record.span_id));
        for record in late.iter_mut().filter(|record| !trace.ids.contains(&record.parent_id)) {
            reparent(record, trace.root);
        }
    }

    /// Reports the spans of traces open too long; they are then treated as
    /// reported (later spans follow as late spans).
    fn expire(&mut self) {
        let now = self.now;
        // A trace open this long has a root at least this slow, so the
        // slow-trace filter would report it too.
        let timeout = OPEN_TRACE_TIMEOUT.max(self.config.slow_trace_threshold.unwrap_or_default());
        let stale = |trace: &OpenTrace| now.duration_since(trace.opened) >= timeout;
        if self.staged.as_ref().is_some_and(|staged| stale(&staged.trace)) {
            self.unstage();
        }
        let expired: Vec<u64> =
            self.open.iter().filter(|(_, trace)| stale(trace)).map(|(&id, _)| id).collect();
        for collect_id in expired {
            if let Some(mut trace) = self.open.remove(&collect_id) {
                trace.report_early(&mut self.outbox);
                self.retire(trace);
                self.finished.insert(collect_id, Fate::Reported, now);
            }
        }
    }

    /// With `report_before_root_finish`: every open trace's spans so far.
    fn report_open_traces(&mut self) {
        self.unstage();
        for trace in self.open.values_mut() {
            trace.report_early(&mut self.outbox);
        }
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

    /// A trace, with a reused records buffer, converted with this cycle's anchor.
    fn new_trace(&mut self) -> OpenTrace {
        OpenTrace {
            records: self.spare.pop().unwrap_or_default(),
            events: Vec::new(),
            anchor: self.anchor,
            spans: 0,
            lossy: false,
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
            self.emptied.push(std::mem::take(spans));
        }
    }

    /// Hands every record but the staged trace's to the reporter.
    fn report(&mut self) {
        let end = self.staged.as_ref().map_or(self.outbox.len(), |staged| staged.first);
        if end == 0 {
            // Still called once a cycle, as minitrace 0.6 does: a reporter
            // that batches on its own flushes on this call.
            let reporter = &mut self.reporter;
            let _ = catch_unwind(AssertUnwindSafe(|| reporter.report(&[])));
            return;
        }
        let reporter = &mut self.reporter;
        let batch = &self.outbox[..end];
        match catch_unwind(AssertUnwindSafe(|| reporter.report(batch))) {
            Ok(()) => stats::count_reported(end),
            Err(_) => stats::count_dropped_by_reporter(end as u64),
        }
        // The staged trace's records leave first (a few, see `MOVE_LIMIT`),
        // so that the reported ones are emptied as a whole.
        let staged_records = self.staged.as_mut().map(|staged| {
            staged.first = 0;
            let mut records = self.spare.pop().unwrap_or_default();
            records.extend(self.outbox.drain(end..));
            records
        });
        if self.outbox.iter().all(owns_nothing) {
            // Most batches own no heap memory at all (static names, no
            // properties, no events): emptied without a drop call per
            // record (measured: 4-6 % less CPU per span).
            // SAFETY: shrinking the length leaves no uninitialised element
            // in it; the records are not dropped, which leaks nothing, as
            // `owns_nothing` checked every field that could own memory.
            unsafe { self.outbox.set_len(0) };
        } else {
            self.outbox.clear();
        }
        if let Some(mut records) = staged_records {
            std::mem::swap(&mut self.outbox, &mut records);
            self.keep_spare(records);
        }
    }
}

/// Appends the records of `parts` (typically one trace) to `out`, with
/// events attached to their spans.
pub(crate) fn into_records(
    parts: impl IntoIterator<Item = (Batch, Target)>,
    anchor: &Anchor,
    out: &mut Vec<SpanRecord>,
) {
    let (first, mut events, mut emptied) = (out.len(), Vec::new(), Vec::new());
    for (mut batch, target) in parts {
        convert(Part::Batch(&mut batch), &target, anchor, out, &mut events, &mut emptied);
    }
    attach_events(&mut out[first..], events);
    span_buffers::recycle(&mut emptied);
}

/// Appends `batch`'s records to `out` and its events to `events`, taking
/// what the batch owns out of it (it lies in a message's ring slot, and is
/// dropped there). An emptied local buffer goes to `emptied`.
fn convert(
    part: Part<'_>,
    target: &Target,
    anchor: &Anchor,
    out: &mut Vec<SpanRecord>,
    events: &mut Vec<(SpanId, EventRecord)>,
    emptied: &mut Vec<Vec<RawSpan>>,
) {
    // What a batch owns is taken out and converted by value: moving fields
    // out of an owned span needs no drop call per span, and draining an
    // owned vector keeps it in registers (measured: converted where they
    // lay, behind a reference, local spans cost the collector half as much
    // again). The rest stays where it lies: copying a whole thread-safe
    // span's message out of its ring slot first cost the collector a sixth
    // more per span (1 000 spans ended on another thread).
    match part {
        Part::Ended(state, end) => convert_ended(state, end, target, anchor, out, events),
        Part::Batch(Batch::Local { spans, events: has_events }) => {
            let mut spans = std::mem::take(spans);
            if *has_events {
                out.reserve(spans.len());
                for raw in spans.drain(..) {
                    push_raw(raw, target, IdMap::Keep, anchor, out, events);
                }
            } else {
                // The common case, spans only: `extend` over a drain builds
                // each record in place in `out` (measured: a loop of `push`
                // built it on the stack and copied it, a tenth more
                // collector CPU per span).
                out.extend(spans.drain(..).map(|raw| span_record(raw, target, IdMap::Keep, anchor)));
            }
            emptied.push(spans);
        }
        Part::Batch(Batch::Shared { spans, ids }) => {
            for raw in spans.iter() {
                push_raw(raw.clone(), target, *ids, anchor, out, events);
            }
        }
    }
}

/// A thread-safe span's record, read from where the span lies.
#[inline(always)]
fn convert_ended(
    state: &mut SpanState,
    end: Instant,
    target: &Target,
    anchor: &Anchor,
    out: &mut Vec<SpanRecord>,
    events: &mut Vec<(SpanId, EventRecord)>,
) {
    let begin = state.begin().as_unix_nanos(anchor);
    let duration_ns = end.as_unix_nanos(anchor).saturating_sub(begin);
    // Built in place in `out`: `extend` makes room before the record is
    // made, where `push` made it on the stack in 8-byte pieces and copied it
    // on 16 bytes at a time after its capacity check, a store-forwarding
    // stall per piece (measured: ~3 ns per span ended on another thread).
    // Two arms, each one expression: one record expression for both, with
    // the extras' parts defaulted for the common span, was built on the
    // stack again (measured: twice the collector's time per such span).
    match state.take_extra() {
        None => out.extend(std::iter::once_with(|| SpanRecord {
            trace_id: target.trace_id(),
            span_id: state.id(),
            parent_id: target.parent_id,
            begin_time_unix_ns: begin,
            duration_ns,
            name: Cow::Borrowed(state.static_name()),
            properties: Vec::new(),
            events: Vec::new(),
        })),
        Some(extra) => {
            let (name, properties, span_events) = extra.into_parts();
            out.extend(std::iter::once_with(|| SpanRecord {
                trace_id: target.trace_id(),
                span_id: state.id(),
                parent_id: target.parent_id,
                begin_time_unix_ns: begin,
                duration_ns,
                name: name.unwrap_or(Cow::Borrowed(state.static_name())),
                properties,
                events: Vec::new(),
            }));
            events.extend(span_events.into_iter().map(|event| (state.id(), event_record(event, anchor))));
        }
    }
}

#[inline(always)]
fn push_raw(
    raw: RawSpan,
    target: &Target,
    ids: IdMap,
    anchor: &Anchor,
    out: &mut Vec<SpanRecord>,
    events: &mut Vec<(SpanId, EventRecord)>,
) {
    if raw.is_event() {
        events.push((parent_id(&raw, target, ids), event_record(raw, anchor)));
    } else {
        out.push(span_record(raw, target, ids, anchor));
    }
}

/// The id of a raw span's (or event's) parent in the record.
#[inline(always)]
fn parent_id(raw: &RawSpan, target: &Target, ids: IdMap) -> SpanId {
    if raw.parent_id == LINE_PARENT {
        target.parent_id
    } else {
        ids.apply(raw.parent_id, target)
    }
}

#[inline(always)]
fn span_record(mut raw: RawSpan, target: &Target, ids: IdMap, anchor: &Anchor) -> SpanRecord {
    let begin = raw.begin.as_unix_nanos(anchor);
    SpanRecord {
        trace_id: target.trace_id(),
        span_id: ids.apply(raw.id, target),
        parent_id: parent_id(&raw, target, ids),
        begin_time_unix_ns: begin,
        // Both ends through the anchor: a multiply each, where a `Duration`
        // would cost a division.
        duration_ns: raw.end.as_unix_nanos(anchor).saturating_sub(begin),
        properties: raw.take_properties(),
        name: raw.name,
        events: Vec::new(),
    }
}

fn event_record(mut raw: RawSpan, anchor: &Anchor) -> EventRecord {
    EventRecord {
        timestamp_unix_ns: raw.begin.as_unix_nanos(anchor),
        properties: raw.take_properties(),
        name: raw.name,
    }
}

/// Whether dropping the record would free nothing. Every field is named,
/// so that a field added to `SpanRecord` must be considered here.
fn owns_nothing(record: &SpanRecord) -> bool {
    let SpanRecord {
        trace_id: _,
        span_id: _,
        parent_id: _,
        begin_time_unix_ns: _,
        duration_ns: _,
        name,
        properties,
        events,
    } = record;
    matches!(name, std::borrow::Cow::Borrowed(_)) && properties.capacity() == 0 && events.capacity() == 0
}

/// Gives records whose parent is missing from the trace (it was dropped) the
/// root, the last record, as parent, and says so in a property.
fn reparent_orphans(records: &mut [SpanRecord]) {
    let Some((root, children)) = records.split_last_mut() else { return };
    let ids: HashSet<SpanId, BuildIdHasher> =
        children.iter().map(|r| r.span_id).chain([root.span_id]).collect();
    for child in children.iter_mut().filter(|child| !ids.contains(&child.parent_id)) {
        reparent(child, root.span_id);
    }
}

/// Gives an orphan the root as parent, and says so in a property.
fn reparent(record: &mut SpanRecord, root: SpanId) {
    record.parent_id = root;
    record.properties.push(("minitrace.reparented".into(), "parent span was dropped".into()));
}

/// Attaches events to their spans among `records`; the others go to the
/// last record.
#[inline]
fn attach_events(records: &mut [SpanRecord], events: Vec<(SpanId, EventRecord)>) {
    if !events.is_empty() && !records.is_empty() {
        attach_events_slowly(records, events);
    }
}

#[cold]
fn attach_events_slowly(records: &mut [SpanRecord], events: Vec<(SpanId, EventRecord)>) {
    let index: HashMap<SpanId, usize, BuildIdHasher> =
        records.iter().enumerate().map(|(i, r)| (r.span_id, i)).collect();
    let last = records.len() - 1;
    for (parent, event) in events {
        let at = index.get(&parent).copied().unwrap_or(last);
        records[at].events.push(event);
    }
}

/// The fates of recently finished traces, so that children finishing after
/// their root follow it. Collect ids are handed out in per-thread blocks of
/// [`ID_BLOCK`] consecutive ids, so fates are kept as two bits per id in one
/// small bitmap per block (1 KiB), and a block untouched for
/// [`FATE_MEMORY`] is forgotten: exact for that long, whatever the rate,
/// in memory proportional to the blocks in use. A late span whose trace
/// was forgotten is kept as an open trace and reported after the open-trace
/// timeout.
struct RecentFates {
    blocks: HashMap<u64, FateBlock, BuildIdHasher>,
    /// The block last written, kept out of `blocks`: consecutive traces of
    /// a thread fall in the same block, so most updates skip the map.
    current: Option<(u64, FateBlock)>,
}

struct FateBlock {
    /// Two bits per id: 0 unknown, then [`Fate`] as 1, 2, 3.
    bits: Box<[u64]>,
    touched: StdInstant,
}

impl RecentFates {
    fn new() -> RecentFates {
        RecentFates { blocks: HashMap::default(), current: None }
    }

    fn locate(collect_id: u64) -> (u64, usize, u32) {
        let offset = (collect_id % ID_BLOCK) as usize;
        (collect_id / ID_BLOCK, offset / 32, (offset % 32) as u32 * 2)
    }

    fn insert(&mut self, collect_id: u64, fate: Fate, now: StdInstant) {
        let (block, word, shift) = Self::locate(collect_id);
        let current = match &mut self.current {
            Some((id, current)) if *id == block => current,
            other => {
                if let Some((id, previous)) = other.take() {
                    self.blocks.insert(id, previous);
                }
                let taken = self.blocks.remove(&block).unwrap_or_else(|| FateBlock {
                    bits: vec![0; ID_BLOCK as usize / 32].into_boxed_slice(),
                    touched: now,
                });
                &mut other.insert((block, taken)).1
            }
        };
        let code = match fate {
            Fate::Reported => 1,
            Fate::Discarded => 2,
            Fate::RootDropped => 3,
        };
        current.bits[word] = (current.bits[word] & !(3 << shift)) | (code << shift);
        current.touched = now;
    }

    fn get(&self, collect_id: u64) -> Option<Fate> {
        let (block, word, shift) = Self::locate(collect_id);
        let bits = match &self.current {
            Some((id, current)) if *id == block => &current.bits,
            _ => &self.blocks.get(&block)?.bits,
        };
        match (bits[word] >> shift) & 3 {
            1 => Some(Fate::Reported),
            2 => Some(Fate::Discarded),
            3 => Some(Fate::RootDropped),
            _ => None,
        }
    }

    fn forget_older_than(&mut self, now: StdInstant) {
        let fresh = |block: &FateBlock| now.duration_since(block.touched) < FATE_MEMORY;
        self.blocks.retain(|_, block| fresh(block));
        self.current = self.current.take().filter(|(_, block)| fresh(block));
    }
}

/// Collect ids are already well spread (sequential within per-thread
/// blocks), and span ids random or sequential from a random base, so hashing
/// them is one multiply instead of SipHash: a lossy trace, whose records are
/// all looked up to find orphans, must not cost the collector much more
/// than a whole one, or losing spans makes it lose more.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;

/// Asks for a batch's spans, written on another core, all at once, so that
/// the cache misses overlap instead of being paid one by one (measured: a
/// tenth less CPU per traced request).
#[inline]
fn prefetch(spans: &[RawSpan]) {
    #[cfg(target_arch = "x86_64")]
    for span in spans.iter().take(64) {
        // SAFETY: a prefetch is only a hint: it never faults and changes no
        // program state; the address is that of a live span.
        #[allow(unused_unsafe)] // a safe function in newer compilers
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (span as *const RawSpan).cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = spans;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;
    use crate::collector::{TestReporter, TraceId};

    /// A collector fed messages by hand, reporting into `records`.
    fn collector(config: Config) -> (Collector, Arc<Mutex<Vec<SpanRecord>>>) {
        let (reporter, records) = TestReporter::new();
        (Collector::new(Box::new(reporter), config), records)
    }

    fn target(trace: u64, parent: u64) -> Targets {
        // Collect id = trace id: one trace per root here.
        Targets::One(Target::new(TraceId(trace.into()), SpanId(parent), trace))
    }

    fn raw(id: u64, parent: u64, name: &'static str) -> RawSpan {
        let now = minstant::Instant::now();
        let mut raw = RawSpan::begin(SpanId(id), SpanId(parent), name.into(), now);
        raw.end = now;
        raw
    }

    /// A thread-safe span, ended, as a traced thread queues it.
    fn ended(id: u64, name: &'static str, targets: Targets, role: Role) -> Message {
        let now = minstant::Instant::now();
        let state = SpanState::new(name.into(), targets, role, now).with_id(SpanId(id));
        Message::Ended(EndedSpan { state, end: now })
    }

    fn root(trace: u64) -> Message {
        ended(trace * 100, "root", target(trace, 0), Role::Root)
    }

    /// Local spans `ids` (each under the previous one, the first under the root).
    fn local(trace: u64, ids: &[u64]) -> Message {
        let spans = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| raw(id, if i == 0 { 0 } else { ids[i - 1] }, "local"))
            .collect::<Vec<_>>();
        Message::new(
            Batch::Local { spans, events: false },
            target(trace, trace * 100),
            Role::Child,
            ids.len(),
        )
    }

    /// A thread-safe child of the root.
    fn child(trace: u64, id: u64) -> Message {
        ended(id, "child", target(trace, trace * 100), Role::Child)
    }

    /// (trace, span id, parent id) of every record reported so far, in the
    /// order reported.
    fn reported(collector: &mut Collector, records: &Mutex<Vec<SpanRecord>>) -> Vec<(u128, u64, u64)> {
        collector.report();
        records.lock().iter().map(|r| (r.trace_id.0, r.span_id.0, r.parent_id.0)).collect()
    }

    #[test]
    fn a_trace_whose_parts_arrive_together_is_reported_whole() {
        let (mut collector, records) = collector(Config::default());
        for mut message in [local(1, &[11, 12]), child(1, 13), root(1)] {
            collector.file(&mut message);
        }
        assert!(collector.staged.is_none() && collector.open.is_empty());
        assert_eq!(
            reported(&mut collector, &records),
            [(1, 11, 100), (1, 12, 11), (1, 13, 100), (1, 100, 0)]
        );
    }

    #[test]
    fn interleaved_traces_are_each_reported_whole() {
        let (mut collector, records) = collector(Config::default());
        // Trace 1 is staged, then trace 2 takes its place; each root finds
        // its trace, staged or not; trace 3's root comes without children.
        let messages =
            [local(1, &[11]), local(2, &[21]), child(1, 12), root(2), root(3), child(1, 13), root(1)];
        for mut message in messages {
            collector.file(&mut message);
            assert!(collector.outbox.len() <= 7);
        }
        assert!(collector.staged.is_none() && collector.open.is_empty());
        // Each trace's records together, its root last.
        let expected =
            [(2, 21, 200), (2, 200, 0), (3, 300, 0), (1, 11, 100), (1, 12, 100), (1, 13, 100), (1, 100, 0)];
        assert_eq!(reported(&mut collector, &records), expected);
    }

    #[test]
    fn a_late_child_follows_its_reported_root_without_disturbing_the_staged_trace() {
        let (mut collector, records) = collector(Config::default());
        for mut message in [root(1), local(2, &[21]), child(1, 11), root(2)] {
            collector.file(&mut message);
        }
        assert_eq!(
            reported(&mut collector, &records),
            [(1, 100, 0), (1, 11, 100), (2, 21, 200), (2, 200, 0)]
        );
    }

    #[test]
    fn a_discarded_trace_leaves_nothing_in_the_outbox() {
        let config = Config::default().report_slow_traces_only(Duration::from_secs(3600));
        let (mut collector, records) = collector(config);
        let before = crate::collector::stats().spans_sampled_out;
        for mut message in [local(1, &[11, 12]), child(1, 13), root(1), child(1, 14)] {
            collector.file(&mut message);
        }
        assert!(collector.outbox.is_empty() && collector.staged.is_none());
        assert!(reported(&mut collector, &records).is_empty());
        assert!(crate::collector::stats().spans_sampled_out >= before + 5);
    }

    #[test]
    fn a_report_while_a_trace_is_staged_keeps_the_staged_records() {
        let (mut collector, records) = collector(Config::default());
        // Whole traces, then a staged one when the cycle's report comes:
        // the whole ones are reported, the staged one stays for its root.
        for trace in 1..=3 {
            for mut message in [child(trace, trace * 100 + 1), root(trace)] {
                collector.file(&mut message);
            }
        }
        collector.file(&mut local(4, &[41, 42]));
        collector.report();
        assert_eq!(records.lock().len(), 6);
        assert!(collector.staged.as_ref().is_some_and(|staged| staged.first == 0));
        assert_eq!(collector.outbox.len(), 2);
        collector.file(&mut child(4, 43));
        collector.file(&mut root(4));
        let links = reported(&mut collector, &records);
        assert_eq!(links[6..], [(4, 41, 400), (4, 42, 41), (4, 43, 400), (4, 400, 0)]);
    }

    #[test]
    fn large_interleaved_traces_are_each_reported_whole() {
        let (mut collector, records) = collector(Config::default());
        let children = |trace: u64| (1..=MOVE_LIMIT as u64).map(move |id| child(trace, trace * 1000 + id));
        collector.file(&mut local(3, &[31]));
        collector.file(&mut root(3));
        // Trace 1 grows behind trace 3's records until it is large: they
        // are reported then, and trace 1 starts the outbox.
        for mut message in children(1) {
            collector.file(&mut message);
        }
        assert!(collector.staged.as_ref().is_some_and(|staged| staged.first == 0));
        assert_eq!(records.lock().len(), 2);
        // Trace 2 takes its place (trace 1's records leave by a swap), then
        // trace 1's root finishes it from its own vector, then trace 2's.
        for mut message in children(2).chain([root(1), root(2)]) {
            collector.file(&mut message);
        }
        assert!(collector.staged.is_none() && collector.open.is_empty());
        let reported = reported(&mut collector, &records);
        let expected: Vec<(u128, u64, u64)> = [(3, 31, 300), (3, 300, 0)]
            .into_iter()
            .chain([1u64, 2].into_iter().flat_map(|trace| {
                let ids =
                    (1..=MOVE_LIMIT as u64).map(move |id| (trace.into(), trace * 1000 + id, trace * 100));
                ids.chain([(trace.into(), trace * 100, 0)])
            }))
            .collect();
        assert_eq!(reported, expected);
    }

    #[test]
    fn a_large_batch_of_local_spans_waits_for_its_root_where_it_lies() {
        let (mut collector, records) = collector(Config::default());
        for mut message in [local(3, &[31]), root(3)] {
            collector.file(&mut message);
        }
        // Trace 1 grows by a second, large batch (a second guard on its thread).
        let ids: Vec<u64> = (1..=2 * MOVE_LIMIT as u64).map(|id| 1000 + id).collect();
        collector.file(&mut local(1, &[11]));
        collector.file(&mut local(1, &ids));
        // No report made to move it: it stays behind trace 3's records.
        assert!(records.lock().is_empty());
        assert!(collector.staged.as_ref().is_some_and(|staged| staged.first == 2));
        collector.file(&mut root(1));
        assert_eq!(reported(&mut collector, &records).len(), 2 + 1 + ids.len() + 1);
    }

    #[test]
    fn a_record_owns_memory_through_its_name_properties_or_events() {
        let plain = SpanRecord { name: "static".into(), ..SpanRecord::default() };
        assert!(owns_nothing(&plain));
        let owned_name = SpanRecord { name: String::from("owned").into(), ..plain.clone() };
        let property = SpanRecord { properties: vec![("k".into(), "v".into())], ..plain.clone() };
        let emptied = SpanRecord { properties: Vec::with_capacity(1), ..plain.clone() };
        let event = SpanRecord { events: vec![EventRecord::default()], ..plain.clone() };
        for record in [owned_name, property, emptied, event] {
            assert!(!owns_nothing(&record), "{record:?}");
        }
    }

    #[test]
    fn fates_are_kept_across_blocks_and_forgotten_when_stale() {
        let start = StdInstant::now();
        let mut fates = RecentFates::new();
        // Two threads' blocks written in turn: each switch parks the
        // current block in the map and takes the other out.
        let (a, b) = (ID_BLOCK + 5, 3 * ID_BLOCK + 7);
        fates.insert(a, Fate::Reported, start);
        fates.insert(b, Fate::Discarded, start);
        fates.insert(a + 1, Fate::RootDropped, start);
        assert_eq!(fates.get(a), Some(Fate::Reported));
        assert_eq!(fates.get(a + 1), Some(Fate::RootDropped));
        assert_eq!(fates.get(b), Some(Fate::Discarded));
        assert_eq!(fates.get(b + 1), None);
        assert_eq!(fates.get(2 * ID_BLOCK), None);
        // Block `b` refreshed later than `a`: only `a` is forgotten.
        let later = start + FATE_MEMORY / 2;
        fates.insert(b + 2, Fate::Reported, later);
        fates.forget_older_than(start + FATE_MEMORY);
        assert_eq!((fates.get(a), fates.get(b)), (None, Some(Fate::Discarded)));
        fates.forget_older_than(later + FATE_MEMORY);
        assert_eq!(fates.get(b), None);
    }
}
