//! The collector thread's work: group finished spans by trace, decide each
//! trace's fate when its root finishes, and turn raw spans into records.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant as StdInstant};

use minstant::Anchor;

use crate::collector::message::{Batch, Message, Role};
use crate::collector::target::Target;
use crate::collector::{queue, stats, Config, EventRecord, Reporter, SpanId, SpanRecord};
use crate::local::raw_span::{RawSpan, LINE_PARENT};

/// Spans of a trace whose root has not finished are reported anyway after
/// this long (the root was leaked, or lives on a thread that exited).
const OPEN_TRACE_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished traces are remembered for one to two generations...
const FATE_GENERATION: Duration = Duration::from_secs(2);
/// ...of at most this many traces each (a few MiB).
const RECENT_FATES: usize = 1 << 18;

pub(crate) struct Collector {
    reporter: Box<dyn Reporter>,
    config: Config,
    open: HashMap<u64, OpenTrace, BuildIdHasher>,
    finished: RecentFates,
    /// Reused between cycles.
    inbox: Vec<Message>,
    outbox: Vec<SpanRecord>,
}

struct OpenTrace {
    parts: Vec<(Batch, Target)>,
    spans: usize,
    opened: StdInstant,
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
            let parts: Vec<_> = self
                .open
                .values_mut()
                .flat_map(|trace| trace.parts.drain(..))
                .collect();
            into_records(parts, &anchor, &mut self.outbox);
        }
        self.report();
    }

    fn add_child(&mut self, message: Message, anchor: &Anchor) {
        for (batch, target) in split_by_target(message) {
            let spans = batch.span_count();
            match self.finished.get(target.collect_id) {
                Some(Fate::Reported) => into_records(vec![(batch, target)], anchor, &mut self.outbox),
                Some(Fate::Discarded) => stats::count_sampled_out(spans),
                Some(Fate::RootDropped) => stats::count_queue_full(spans),
                None => {
                    let trace = self.open.entry(target.collect_id).or_insert_with(|| OpenTrace {
                        parts: Vec::new(),
                        spans: 0,
                        opened: StdInstant::now(),
                    });
                    if self
                        .config
                        .max_spans_per_trace
                        .is_some_and(|max| trace.spans + spans > max)
                    {
                        stats::count_trace_too_large(spans);
                    } else {
                        trace.spans += spans;
                        trace.parts.push((batch, target));
                    }
                }
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
            let mut parts = trace.map_or_else(Vec::new, |trace| trace.parts);
            parts.push((root.batch, target));
            into_records(parts, anchor, &mut self.outbox);
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
                into_records(trace.parts, anchor, &mut self.outbox);
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

/// One `(batch, target)` per target, sharing the batch when there are several.
fn split_by_target(message: Message) -> Vec<(Batch, Target)> {
    let targets = message.targets.as_slice();
    if targets.len() == 1 {
        return vec![(message.batch, targets[0])];
    }
    message
        .batch
        .share(targets.len())
        .into_iter()
        .zip(targets.iter().copied())
        .collect()
}

/// Appends the records of `parts` (typically one trace) to `out`, with
/// events attached to their spans. Events whose span is not among them
/// (their span was reported earlier) go to the last record, the root when a
/// trace is finished, rather than being lost.
pub(crate) fn into_records(parts: Vec<(Batch, Target)>, anchor: &Anchor, out: &mut Vec<SpanRecord>) {
    let first = out.len();
    let mut events = Vec::new();
    for (batch, target) in parts {
        match batch {
            Batch::Span(raw) => {
                let parent_id = target.parent_id;
                out.push(record(raw, &target, parent_id, anchor));
            }
            Batch::Local(spans) => {
                for raw in spans {
                    push_raw(raw, &target, IdMap::Keep, anchor, out, &mut events);
                }
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
                let mixed = id.0
                    ^ target
                        .parent_id
                        .0
                        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                        .rotate_left(29);
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
    let parent_id = if raw.parent_id == LINE_PARENT {
        target.parent_id
    } else {
        ids.apply(raw.parent_id, target)
    };
    if raw.is_event {
        events.push((parent_id, event_record(raw, anchor)));
    } else {
        let id = ids.apply(raw.id, target);
        out.push(record(RawSpan { id, ..raw }, target, parent_id, anchor));
    }
}

fn record(raw: RawSpan, target: &Target, parent_id: SpanId, anchor: &Anchor) -> SpanRecord {
    SpanRecord {
        trace_id: target.trace_id,
        span_id: raw.id,
        parent_id,
        begin_time_unix_ns: raw.begin.as_unix_nanos(anchor),
        duration_ns: raw.end.duration_since(raw.begin).as_nanos() as u64,
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
