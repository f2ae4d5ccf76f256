//! The collector thread's work: group finished spans by trace, decide each
//! trace's fate when its root finishes, and turn raw spans into records.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant as StdInstant};

use minstant::Anchor;

use crate::collector::global::ID_BLOCK;
use crate::collector::message::{Batch, IdMap, Message, Role};
use crate::collector::target::{Target, Targets};
use crate::collector::{queue, stats, Config, EventRecord, Reporter, SpanId, SpanRecord};
use crate::local::raw_span::{RawSpan, LINE_PARENT};
use crate::util::span_buffers;

/// Spans of a trace whose root has not finished are reported anyway after
/// this long (the root was leaked, or lives on a thread that exited), or
/// after the slow-trace threshold if that is longer.
const OPEN_TRACE_TIMEOUT: Duration = Duration::from_secs(10);
/// Emptied trace buffers kept for reuse.
const MAX_SPARE_PARTS: usize = 1024;
/// How long a finished trace's fate is remembered: as long as an open trace
/// is kept, so that a late child follows its root's fate.
const FATE_MEMORY: Duration = OPEN_TRACE_TIMEOUT;
/// A batch is handed to the reporter once it holds this many spans (at a
/// trace's end, so a trace is never split for it): ~0.6 MiB of records, so
/// that they are still in cache when they are built, reported and dropped.
/// A whole cycle's records in one vector, megabytes at high rates, would be
/// written, read and dropped from memory: measured, a sixth more collector
/// CPU per span.
const REPORT_BATCH: usize = 4096;

pub(crate) struct Collector {
    reporter: Box<dyn Reporter>,
    config: Config,
    open: HashMap<u64, OpenTrace, BuildIdHasher>,
    finished: RecentFates,
    /// The newest open trace, kept out of `open` until another trace starts.
    pending: Option<(u64, OpenTrace)>,
    /// Reused between cycles and traces.
    spare_parts: Vec<Vec<(Batch, Target)>>,
    /// When the current cycle started: the time for everything it files.
    now: StdInstant,
    /// Local span buffers emptied this cycle, returned to the pool at its end.
    emptied: Vec<Vec<RawSpan>>,
    outbox: Vec<SpanRecord>,
}

struct OpenTrace {
    parts: Vec<(Batch, Target)>,
    /// Spans accepted, for `max_spans_per_trace`.
    spans: usize,
    /// Spans accepted but not yet reported (with `report_before_root_finish`
    /// some are reported early): what a discarded or lost root takes along.
    unreported: usize,
    /// Some span of the trace was dropped: its children's parent may be
    /// missing, so they are re-parented to the root when it is reported.
    lossy: bool,
    opened: StdInstant,
}

impl OpenTrace {
    fn new(parts: Vec<(Batch, Target)>, opened: StdInstant) -> OpenTrace {
        OpenTrace { parts, spans: 0, unreported: 0, lossy: false, opened }
    }

    fn add(&mut self, batch: Batch, target: Target, spans: usize, config: &Config) {
        if config.max_spans_per_trace.is_some_and(|max| self.spans + spans > max) {
            stats::count_trace_too_large(spans);
            self.lossy = true;
        } else {
            self.spans += spans;
            self.unreported += spans;
            self.parts.push((batch, target));
        }
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
            pending: None,
            now: StdInstant::now(),
            spare_parts: Vec::new(),
            emptied: Vec::new(),
            outbox: Vec::new(),
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
        let anchor = Anchor::new();
        self.now = StdInstant::now();
        // Every message is filed as it is popped, while its bytes are still
        // in cache. A root completes its trace at once: a child still queued
        // on another thread's ring arrives after it, and is reported as a
        // late span of a reported trace, normally in the same batch.
        queue::drain(|message| self.file(message, &anchor));
        self.park_pending();
        self.apply_drops();
        self.expire(&anchor);
        self.finished.forget_older_than(self.now);
        if self.config.report_before_root_finish && self.config.slow_trace_threshold.is_none() {
            for trace in self.open.values_mut().filter(|trace| !trace.parts.is_empty()) {
                let mut records = Records::new(&mut self.outbox, &mut self.emptied, &anchor);
                records.add_all(&mut trace.parts);
                records.finish();
                trace.unreported = 0;
            }
        }
        self.report();
        span_buffers::recycle(&mut self.emptied);
    }

    /// Files a message read in place from its ring: what it owns is taken
    /// out of it, and the rest is dropped there.
    fn file(&mut self, message: &mut Message, anchor: &Anchor) {
        match message.role {
            Role::Child => self.add_child(message, anchor),
            Role::Root | Role::CancelledRoot => {
                // A child dropped before this root on any thread is noted
                // before the root was queued: mark its trace first.
                if queue::drops_pending() {
                    self.park_pending();
                    self.apply_drops();
                }
                self.finish_root(message, anchor);
            }
        }
        // Between two messages the outbox holds only whole traces and late
        // children of reported ones.
        if self.outbox.len() >= REPORT_BATCH {
            self.report();
        }
    }

    /// Messages dropped at a full queue: a dropped root takes the rest of
    /// its trace along; a dropped child makes its trace lossy.
    fn apply_drops(&mut self) {
        for dropped in queue::take_dropped() {
            if dropped.root {
                if let Some(trace) = self.open.remove(&dropped.collect_id) {
                    stats::count_queue_full(trace.unreported);
                    self.retire(trace.parts);
                }
                self.finished.insert(dropped.collect_id, Fate::RootDropped, self.now);
            } else if self.finished.get(dropped.collect_id).is_none() {
                match self.open.get_mut(&dropped.collect_id) {
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

    /// Moves the newest trace from its one-entry fast slot into the map.
    fn park_pending(&mut self) {
        if let Some((collect_id, trace)) = self.pending.take() {
            self.open.insert(collect_id, trace);
        }
    }

    fn add_child(&mut self, message: &mut Message, anchor: &Anchor) {
        let batch = std::mem::take(&mut message.batch);
        match &message.targets {
            Targets::One(target) => self.add_part(batch, *target, message.spans_per_target, anchor),
            Targets::Many(targets) => {
                for (batch, target) in batch.share(targets.len()).into_iter().zip(targets) {
                    self.add_part(batch, *target, message.spans_per_target, anchor);
                }
            }
        }
    }

    fn add_part(&mut self, batch: Batch, target: Target, spans: usize, anchor: &Anchor) {
        // Asked for as soon as the batch arrives, so that the transfer
        // overlaps with filing the messages up to its root's (measured: 5 %
        // less CPU per 10-span request).
        if let Batch::Local { spans, .. } = &batch {
            prefetch(spans);
        }
        // Most parts belong to the newest trace, or to another open one.
        if let Some((_, trace)) = self.pending.as_mut().filter(|(id, _)| *id == target.collect_id) {
            return trace.add(batch, target, spans, &self.config);
        }
        if let Some(trace) = self.open.get_mut(&target.collect_id) {
            return trace.add(batch, target, spans, &self.config);
        }
        match self.finished.get(target.collect_id) {
            Some(Fate::Reported) => {
                let mut batch = batch;
                let mut records = Records::new(&mut self.outbox, &mut self.emptied, anchor);
                records.add(&mut batch, &target);
                records.finish();
            }
            Some(Fate::Discarded) => {
                stats::count_sampled_out(spans);
                self.recycle(batch);
            }
            Some(Fate::RootDropped) => {
                stats::count_queue_full(spans);
                self.recycle(batch);
            }
            None => {
                // A new trace: typically its root is the next message from
                // the same thread, so it waits in the fast slot, not the map.
                self.park_pending();
                let mut trace = self.new_trace();
                trace.add(batch, target, spans, &self.config);
                self.pending = Some((target.collect_id, trace));
            }
        }
    }

    fn finish_root(&mut self, root: &mut Message, anchor: &Anchor) {
        let target = *root.targets.first();
        let mut trace = match self.pending.take() {
            Some((collect_id, trace)) if collect_id == target.collect_id => Some(trace),
            other => {
                self.pending = other;
                self.open.remove(&target.collect_id)
            }
        };
        let spans = 1 + trace.as_ref().map_or(0, |trace| trace.unreported);
        let lossy = trace.as_ref().is_some_and(|trace| trace.lossy);
        let too_fast = match (&root.batch, self.config.slow_trace_threshold) {
            (Batch::Span(raw, _), Some(threshold)) => raw.end.duration_since(raw.begin) < threshold,
            _ => false,
        };
        let fate = if root.role == Role::CancelledRoot || too_fast {
            stats::count_sampled_out(spans);
            if let Some(trace) = trace {
                self.retire(trace.parts);
            }
            Fate::Discarded
        } else {
            let first = self.outbox.len();
            // The root is converted last, where it lies in its message: it
            // is the last record, where orphans and stray events go.
            let mut records = Records::new(&mut self.outbox, &mut self.emptied, anchor);
            if let Some(trace) = &mut trace {
                records.add_all(&mut trace.parts);
            }
            records.add(&mut root.batch, &target);
            records.finish();
            if let Some(trace) = trace {
                self.retire(trace.parts);
            }
            if lossy {
                reparent_orphans(&mut self.outbox[first..]);
            }
            Fate::Reported
        };
        self.finished.insert(target.collect_id, fate, self.now);
    }

    fn expire(&mut self, anchor: &Anchor) {
        let now = self.now;
        // A trace open this long has a root at least this slow, so the
        // slow-trace filter would report it too.
        let timeout = OPEN_TRACE_TIMEOUT.max(self.config.slow_trace_threshold.unwrap_or_default());
        let stale: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, trace)| now.duration_since(trace.opened) >= timeout)
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            if let Some(mut trace) = self.open.remove(&id) {
                let mut records = Records::new(&mut self.outbox, &mut self.emptied, anchor);
                records.add_all(&mut trace.parts);
                records.finish();
                self.retire(trace.parts);
                self.finished.insert(id, Fate::Reported, now);
            }
        }
    }

    /// A trace, with a reused parts buffer.
    fn new_trace(&mut self) -> OpenTrace {
        OpenTrace::new(self.spare_parts.pop().unwrap_or_default(), self.now)
    }

    /// Done with a trace's parts, reported or not: their local span buffers
    /// go back to the traced threads (not freed here, across threads), and
    /// the parts buffer is kept for the next trace.
    fn retire(&mut self, mut parts: Vec<(Batch, Target)>) {
        for (batch, _) in parts.drain(..) {
            self.recycle(batch);
        }
        if self.spare_parts.len() < MAX_SPARE_PARTS {
            self.spare_parts.push(parts);
        }
    }

    /// A batch that will not be converted: its buffer is still recycled.
    fn recycle(&mut self, batch: Batch) {
        match batch {
            Batch::Local { spans, .. } if spans.capacity() > 0 => self.emptied.push(spans),
            _ => {}
        }
    }

    fn report(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        let spans = self.outbox.len();
        let reporter = &mut self.reporter;
        let outbox = &self.outbox;
        match catch_unwind(AssertUnwindSafe(|| reporter.report(outbox))) {
            Ok(()) => stats::count_reported(spans),
            Err(_) => stats::count_dropped_by_reporter(spans as u64),
        }
        // Most batches own no heap memory at all (static names, no
        // properties, no events): emptied without a drop call per record
        // (measured: 4-6 % less CPU per span).
        if self.outbox.iter().all(owns_nothing) {
            // SAFETY: shrinking the length leaves no uninitialised element
            // in it; the records are not dropped, which leaks nothing, as
            // `owns_nothing` checked every field that could own memory.
            unsafe { self.outbox.set_len(0) };
        } else {
            self.outbox.clear();
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
    let mut emptied = Vec::new();
    let mut records = Records::new(out, &mut emptied, anchor);
    for (mut batch, target) in parts {
        records.add(&mut batch, &target);
    }
    records.finish();
    span_buffers::recycle(&mut emptied);
}

/// Builds the records of a trace's parts at the end of `out`, taking what
/// the parts own out of them: a part is converted where it lies (in its
/// message's ring slot, or in its trace's parts), as moving a 128-byte
/// message or an 80-byte batch from place to place cost the collector a
/// stall for each copy read back. Events whose span is not among the
/// records (their span was reported earlier) go to the last record, the
/// root when a trace is finished, rather than being lost.
struct Records<'a> {
    out: &'a mut Vec<SpanRecord>,
    /// Emptied local span buffers, for the pool.
    emptied: &'a mut Vec<Vec<RawSpan>>,
    anchor: &'a Anchor,
    first: usize,
    events: Vec<(SpanId, EventRecord)>,
}

impl<'a> Records<'a> {
    fn new(
        out: &'a mut Vec<SpanRecord>,
        emptied: &'a mut Vec<Vec<RawSpan>>,
        anchor: &'a Anchor,
    ) -> Records<'a> {
        let first = out.len();
        Records { out, emptied, anchor, first, events: Vec::new() }
    }

    /// Converts every part, leaving `parts` empty.
    fn add_all(&mut self, parts: &mut Vec<(Batch, Target)>) {
        for (batch, target) in parts.iter_mut() {
            self.add(batch, target);
        }
        parts.clear();
    }

    /// Converts a part, leaving `batch` without spans.
    fn add(&mut self, batch: &mut Batch, target: &Target) {
        let (anchor, out, events) = (self.anchor, &mut *self.out, &mut self.events);
        match batch {
            Batch::Span(raw, span_events) => {
                let (span_id, parent_id) = (raw.id, target.parent_id);
                out.push(record(raw, target, span_id, parent_id, anchor));
                if let Some(span_events) = span_events.take() {
                    events
                        .extend(span_events.into_iter().map(|event| (span_id, event_record(event, anchor))));
                }
            }
            Batch::Local { spans, events: has_events } => {
                prefetch(spans);
                if *has_events {
                    out.reserve(spans.len());
                    for raw in spans.drain(..) {
                        push_raw(raw, target, IdMap::Keep, anchor, out, events);
                    }
                } else {
                    // The common case, spans only: `extend` over a drain
                    // builds each record in place in `out` (measured: a
                    // loop of `push` built it on the stack and copied it,
                    // a tenth more collector CPU per span).
                    out.extend(spans.drain(..).map(|raw| span_record(raw, target, IdMap::Keep, anchor)));
                }
                if spans.capacity() > 0 {
                    self.emptied.push(std::mem::take(spans));
                }
            }
            Batch::Shared { spans, ids } => {
                for raw in spans.iter() {
                    push_raw(raw.clone(), target, *ids, anchor, out, events);
                }
            }
        }
    }

    fn finish(self) {
        if !self.events.is_empty() {
            attach_events(&mut self.out[self.first..], self.events);
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
    let (span_id, parent_id) = (ids.apply(raw.id, target), parent_id(&raw, target, ids));
    record(&mut raw, target, span_id, parent_id, anchor)
}

/// `raw`'s record; its name and properties are taken, the rest is left.
#[inline(always)]
fn record(
    raw: &mut RawSpan,
    target: &Target,
    span_id: SpanId,
    parent_id: SpanId,
    anchor: &Anchor,
) -> SpanRecord {
    let begin = raw.begin.as_unix_nanos(anchor);
    SpanRecord {
        trace_id: target.trace_id(),
        span_id,
        parent_id,
        begin_time_unix_ns: begin,
        // Both ends through the anchor: a multiply each, where a `Duration`
        // would cost a division.
        duration_ns: raw.end.as_unix_nanos(anchor).saturating_sub(begin),
        properties: raw.take_properties(),
        name: std::mem::take(&mut raw.name),
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
    let ids: std::collections::HashSet<SpanId, BuildIdHasher> =
        children.iter().map(|r| r.span_id).chain([root.span_id]).collect();
    for child in children.iter_mut().filter(|child| !ids.contains(&child.parent_id)) {
        child.parent_id = root.span_id;
        child.properties.push(("minitrace.reparented".into(), "parent span was dropped".into()));
    }
}

#[cold]
fn attach_events(records: &mut [SpanRecord], events: Vec<(SpanId, EventRecord)>) {
    if records.is_empty() {
        return;
    }
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
/// small bitmap per block (16 KiB), and a block untouched for
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
    use super::*;

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
