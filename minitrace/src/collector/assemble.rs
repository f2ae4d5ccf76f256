//! The collector thread's work: group finished spans by trace, decide each
//! trace's fate when its root finishes, and turn raw spans into records.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant as StdInstant};

use minstant::Anchor;

use crate::collector::message::{Batch, Message, Role};
use crate::collector::target::{Target, Targets};
use crate::collector::{queue, stats, Config, EventRecord, Reporter, SpanId, SpanRecord};
use crate::local::raw_span::{RawSpan, LINE_PARENT};
use crate::util::span_buffers;

/// Spans of a trace whose root has not finished are reported anyway after
/// this long (the root was leaked, or lives on a thread that exited).
const OPEN_TRACE_TIMEOUT: Duration = Duration::from_secs(10);
/// Emptied trace buffers kept for reuse.
const MAX_SPARE_PARTS: usize = 1024;
/// Finished traces are remembered for one to two generations...
const FATE_GENERATION: Duration = Duration::from_secs(2);
/// ...of at most this many traces each (a few MiB).
const RECENT_FATES: usize = 1 << 18;

pub(crate) struct Collector {
    reporter: Box<dyn Reporter>,
    config: Config,
    open: HashMap<u64, OpenTrace, BuildIdHasher>,
    finished: RecentFates,
    /// Reused between cycles and traces.
    inbox: Vec<Message>,
    spare_parts: Vec<Vec<(Batch, Target)>>,
    /// Local span buffers emptied this cycle, returned to the pool at its end.
    emptied: Vec<Vec<RawSpan>>,
    outbox: Vec<SpanRecord>,
}

struct OpenTrace {
    parts: Vec<(Batch, Target)>,
    spans: usize,
    opened: StdInstant,
}

impl OpenTrace {
    fn add(&mut self, batch: Batch, target: Target, spans: usize, config: &Config) {
        if config.max_spans_per_trace.is_some_and(|max| self.spans + spans > max) {
            stats::count_trace_too_large(spans);
        } else {
            self.spans += spans;
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
            inbox: Vec::new(),
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
        let mut inbox = std::mem::take(&mut self.inbox);
        // Drained twice: a child pushed to one thread's ring before its root
        // was pushed to another's may be missed by a single sweep that visits
        // the child's ring first, but not by a second sweep.
        queue::drain_into(&mut inbox);
        queue::drain_into(&mut inbox);

        let anchor = Anchor::new();
        let mut roots = Vec::new();
        for message in inbox.drain(..) {
            match message.role {
                Role::Child => self.add_child(message, &anchor),
                Role::Root | Role::CancelledRoot => roots.push(message),
            }
        }
        for root in roots {
            self.finish_root(root, &anchor);
        }
        for collect_id in queue::take_dropped_roots() {
            if let Some(trace) = self.open.remove(&collect_id) {
                stats::count_queue_full(trace.spans);
            }
            self.finished.insert(collect_id, Fate::RootDropped);
        }
        self.inbox = inbox;

        self.expire(&anchor);
        if self.config.report_before_root_finish && self.config.slow_trace_threshold.is_none() {
            let parts: Vec<_> = self.open.values_mut().flat_map(|trace| trace.parts.drain(..)).collect();
            into_records_recycling(parts, &anchor, &mut self.outbox, &mut self.emptied);
        }
        self.report();
        span_buffers::recycle(&mut self.emptied);
    }

    fn add_child(&mut self, message: Message, anchor: &Anchor) {
        match message.targets {
            Targets::One(target) => self.add_part(message.batch, target, message.spans_per_target, anchor),
            Targets::Many(targets) => {
                for (batch, target) in message.batch.share(targets.len()).into_iter().zip(targets) {
                    self.add_part(batch, target, message.spans_per_target, anchor);
                }
            }
        }
    }

    fn add_part(&mut self, batch: Batch, target: Target, spans: usize, anchor: &Anchor) {
        // Most parts belong to a trace that is still open: one lookup.
        if let Some(trace) = self.open.get_mut(&target.collect_id) {
            return trace.add(batch, target, spans, &self.config);
        }
        match self.finished.get(target.collect_id) {
            Some(Fate::Reported) => {
                into_records_recycling([(batch, target)], anchor, &mut self.outbox, &mut self.emptied)
            }
            Some(Fate::Discarded) => stats::count_sampled_out(spans),
            Some(Fate::RootDropped) => stats::count_queue_full(spans),
            None => {
                let parts = self.spare_parts.pop().unwrap_or_default();
                let trace = OpenTrace { parts, spans: 0, opened: StdInstant::now() };
                self.open.entry(target.collect_id).or_insert(trace).add(batch, target, spans, &self.config);
            }
        }
    }

    fn finish_root(&mut self, root: Message, anchor: &Anchor) {
        let target = *root.targets.first();
        let trace = self.open.remove(&target.collect_id);
        let spans = 1 + trace.as_ref().map_or(0, |trace| trace.spans);
        let too_fast = match (&root.batch, self.config.slow_trace_threshold) {
            (Batch::Span(raw), Some(threshold)) => raw.end.duration_since(raw.begin) < threshold,
            _ => false,
        };
        let fate = if root.role == Role::CancelledRoot || too_fast {
            stats::count_sampled_out(spans);
            Fate::Discarded
        } else {
            let mut parts =
                trace.map_or_else(|| self.spare_parts.pop().unwrap_or_default(), |trace| trace.parts);
            parts.push((root.batch, target));
            into_records_recycling(parts.drain(..), anchor, &mut self.outbox, &mut self.emptied);
            if self.spare_parts.len() < MAX_SPARE_PARTS {
                self.spare_parts.push(parts);
            }
            Fate::Reported
        };
        self.finished.insert(target.collect_id, fate);
    }

    fn expire(&mut self, anchor: &Anchor) {
        let now = StdInstant::now();
        let stale: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, trace)| now.duration_since(trace.opened) >= OPEN_TRACE_TIMEOUT)
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            if let Some(trace) = self.open.remove(&id) {
                into_records_recycling(trace.parts, anchor, &mut self.outbox, &mut self.emptied);
                self.finished.insert(id, Fate::Reported);
            }
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
        self.outbox.clear();
    }
}

/// Appends the records of `parts` (typically one trace) to `out`, with
/// events attached to their spans. Events whose span is not among them
/// (their span was reported earlier) go to the last record, the root when a
/// trace is finished, rather than being lost.
pub(crate) fn into_records(
    parts: impl IntoIterator<Item = (Batch, Target)>,
    anchor: &Anchor,
    out: &mut Vec<SpanRecord>,
) {
    let mut emptied = Vec::new();
    into_records_recycling(parts, anchor, out, &mut emptied);
    span_buffers::recycle(&mut emptied);
}

/// [`into_records`], collecting the emptied local buffers in `emptied`.
fn into_records_recycling(
    parts: impl IntoIterator<Item = (Batch, Target)>,
    anchor: &Anchor,
    out: &mut Vec<SpanRecord>,
    emptied: &mut Vec<Vec<RawSpan>>,
) {
    let first = out.len();
    let mut events = Vec::new();
    for (batch, target) in parts {
        match batch {
            Batch::Span(raw) => {
                let (span_id, parent_id) = (raw.id, target.parent_id);
                out.push(record(raw, &target, span_id, parent_id, anchor));
            }
            Batch::Local(mut spans) => {
                out.reserve(spans.len());
                for raw in spans.drain(..) {
                    push_raw(raw, &target, IdMap::Keep, anchor, out, &mut events);
                }
                emptied.push(spans);
            }
            Batch::Shared(spans) => {
                for raw in spans.iter() {
                    push_raw(raw.clone(), &target, IdMap::Keep, anchor, out, &mut events);
                }
            }
            Batch::Mounted(spans) => {
                for raw in spans.iter() {
                    push_raw(raw.clone(), &target, IdMap::PerParent, anchor, out, &mut events);
                }
            }
        }
    }
    attach_events(&mut out[first..], events);
}

#[derive(Clone, Copy)]
enum IdMap {
    Keep,
    /// Ids mixed with the mounting parent's, so that one batch mounted twice
    /// in a trace yields distinct, consistently linked spans.
    PerParent,
}

impl IdMap {
    fn apply(self, id: SpanId, target: &Target) -> SpanId {
        match self {
            IdMap::Keep => id,
            IdMap::PerParent => {
                let mixed = id.0 ^ target.parent_id.0.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
                SpanId(mixed.max(1))
            }
        }
    }
}

fn push_raw(
    raw: RawSpan,
    target: &Target,
    ids: IdMap,
    anchor: &Anchor,
    out: &mut Vec<SpanRecord>,
    events: &mut Vec<(SpanId, EventRecord)>,
) {
    let parent_id =
        if raw.parent_id == LINE_PARENT { target.parent_id } else { ids.apply(raw.parent_id, target) };
    if raw.is_event {
        events.push((parent_id, event_record(raw, anchor)));
    } else {
        let span_id = ids.apply(raw.id, target);
        out.push(record(raw, target, span_id, parent_id, anchor));
    }
}

#[inline]
fn record(raw: RawSpan, target: &Target, span_id: SpanId, parent_id: SpanId, anchor: &Anchor) -> SpanRecord {
    let begin = raw.begin.as_unix_nanos(anchor);
    SpanRecord {
        trace_id: target.trace_id,
        span_id,
        parent_id,
        begin_time_unix_ns: begin,
        // Both ends through the anchor: a multiply each, where a `Duration`
        // would cost a division.
        duration_ns: raw.end.as_unix_nanos(anchor).saturating_sub(begin),
        name: raw.name,
        properties: raw.properties,
        events: Vec::new(),
    }
}

fn event_record(raw: RawSpan, anchor: &Anchor) -> EventRecord {
    EventRecord {
        name: raw.name,
        timestamp_unix_ns: raw.begin.as_unix_nanos(anchor),
        properties: raw.properties,
    }
}

fn attach_events(records: &mut [SpanRecord], events: Vec<(SpanId, EventRecord)>) {
    if events.is_empty() || records.is_empty() {
        return;
    }
    let index: HashMap<SpanId, usize> = records.iter().enumerate().map(|(i, r)| (r.span_id, i)).collect();
    let last = records.len() - 1;
    for (parent, event) in events {
        let at = index.get(&parent).copied().unwrap_or(last);
        records[at].events.push(event);
    }
}

/// The fates of recently finished traces, so that children finishing after
/// their root follow it. Two generations of maps: the older one is dropped
/// wholesale every [`FATE_GENERATION`] or when the newer one holds
/// [`RECENT_FATES`] entries, so memory is bounded and nothing is scanned. A
/// late span whose trace was forgotten is kept as an open trace and reported
/// after [`OPEN_TRACE_TIMEOUT`].
struct RecentFates {
    current: HashMap<u64, Fate, BuildIdHasher>,
    previous: HashMap<u64, Fate, BuildIdHasher>,
    since: StdInstant,
}

impl RecentFates {
    fn new() -> RecentFates {
        RecentFates { current: HashMap::default(), previous: HashMap::default(), since: StdInstant::now() }
    }

    fn insert(&mut self, collect_id: u64, fate: Fate) {
        if self.current.len() >= RECENT_FATES || self.since.elapsed() >= FATE_GENERATION {
            self.previous = std::mem::take(&mut self.current);
            self.since = StdInstant::now();
        }
        self.current.insert(collect_id, fate);
    }

    fn get(&self, collect_id: u64) -> Option<Fate> {
        self.current.get(&collect_id).or_else(|| self.previous.get(&collect_id)).copied()
    }
}

/// Collect ids are already well spread (sequential within per-thread
/// blocks), so hashing them is one multiply instead of SipHash.
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
