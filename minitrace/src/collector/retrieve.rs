//! Retrieval after the fact: traces assembled from what the traced threads
//! kept (their histories, `transport::history`) and what the collector is
//! about to give back to them, on the collector's thread, during its next
//! cycle. A traced thread never waits for it: the collector reads the
//! histories while it holds the threads off their memory, in a harvest,
//! and they write elsewhere meanwhile.
//!
//! A retrieved trace is assembled as the collector assembles a kept one:
//! the same records (one per span and target, times on the process's time
//! line), events on their spans, children of missing spans under the root
//! (marked `minitrace.reparented`), the root last. Requests come from
//! [`recorder`](crate::recorder)'s functions, from triggers, and from the
//! automatic dumps around slow traces.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use crate::data::batch::{Batch, Role};
use crate::data::convert::{attach_events, convert, Emptied, Part};
use crate::data::id::{SpanId, TraceId};
use crate::data::record::{EventRecord, SpanRecord};
use crate::data::span_state::SpanState;
use crate::data::target::Target;
use crate::data::timeline::Timeline;
use crate::transport::gate;
use crate::transport::history::Held;
use crate::transport::message::{EndedSpan, Message};
use crate::transport::wake::{on_collector_thread, wake_collector};
use crate::util::id_hasher::BuildIdHasher;
use crate::util::lock;

/// How long a caller waits for the collector's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests that may wait at once; more are refused (counted as not found).
const MAX_WAITING: usize = 1 << 12;
/// How long a trace asked to be reported before its root ended here is
/// kept for when that root ends.
pub(crate) const WANT_FOR: Duration = Duration::from_secs(10);

/// What is asked of the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ask {
    /// One trace, answered.
    Trace(TraceId),
    /// One trace, reported through the reporter (unless it was reported
    /// when its root ended), and answered.
    Report(TraceId),
    /// Every trace whose root ran at some moment of `begin..=end` (Unix ns).
    Window(u64, u64),
    /// Every trace held.
    All,
    /// A trace asked to be reported before its root was found, looked for
    /// again in each cycle until its root is found or [`RECHECK_FOR`] has
    /// passed since the ask: its root may have been judged on its thread
    /// before the want reached it, and thrown away into the history a
    /// moment later. Not counted.
    Recheck(TraceId, Instant),
    /// How far back each thread's memory reaches.
    Retention,
    /// Forget everything held (the recorder was switched off).
    Clear,
}

/// The collector's answer.
#[derive(Debug)]
pub(crate) enum Answer {
    Traces(Vec<Assembled>),
    Retention(Vec<ThreadMemory>),
    Done,
}

/// A trace assembled: its records (the root last, if it was held), the
/// thread that held its root, and whether any span is known missing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Assembled {
    pub(crate) trace_id: TraceId,
    pub(crate) thread: u32,
    pub(crate) spans: Vec<SpanRecord>,
    /// The root was held (it is the last record).
    pub(crate) rooted: bool,
    pub(crate) complete: bool,
}

/// What one thread's memory holds.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ThreadMemory {
    pub(crate) thread: u32,
    pub(crate) bytes: usize,
    pub(crate) roots: usize,
    pub(crate) oldest_unix_ns: Option<u64>,
    pub(crate) exited: bool,
}

pub(crate) struct Request {
    pub(crate) ask: Ask,
    reply: Option<mpsc::Sender<Answer>>,
}

static REQUESTS: Mutex<Vec<Request>> = Mutex::new(Vec::new());

static RETRIEVED: AtomicU64 = AtomicU64::new(0);
static PARTLY_OVERWRITTEN: AtomicU64 = AtomicU64::new(0);
static NOT_FOUND: AtomicU64 = AtomicU64::new(0);
static AWAITED: AtomicU64 = AtomicU64::new(0);

/// Traces retrieved whole, retrieved with spans missing, not found, and
/// asked to be reported before their root ended (see [`WANT_FOR`]).
pub(crate) fn counts() -> (u64, u64, u64, u64) {
    let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    (read(&RETRIEVED), read(&PARTLY_OVERWRITTEN), read(&NOT_FOUND), read(&AWAITED))
}

/// Asks the collector and waits for its answer (`None`: no collector, or
/// asked from the collector's own thread, or no answer in time).
pub(crate) fn ask(ask: Ask) -> Option<Answer> {
    if on_collector_thread() || !crate::transport::gate::reporter_is_set() {
        return None;
    }
    let (reply, answer) = mpsc::channel();
    if !enqueue(Request { ask, reply: Some(reply) }) {
        return None;
    }
    wake_collector();
    answer.recv_timeout(ANSWER_TIMEOUT).ok()
}

/// Asks the collector without waiting (reports, triggers); `false` if it
/// was refused.
pub(crate) fn ask_later(ask: Ask) -> bool {
    let queued = enqueue(Request { ask, reply: None });
    if queued {
        wake_collector();
    }
    queued
}

fn enqueue(request: Request) -> bool {
    let mut requests = lock(&REQUESTS);
    if requests.len() >= MAX_WAITING {
        if matches!(request.ask, Ask::Trace(_) | Ask::Report(_)) {
            NOT_FOUND.fetch_add(1, Ordering::Relaxed);
        }
        return false;
    }
    requests.push(request);
    true
}

/// Traces awaited, to look for again until their deadline (see
/// [`Ask::Recheck`]).
static RECHECK: Mutex<Vec<(TraceId, Instant)>> = Mutex::new(Vec::new());

/// How long an awaited trace is looked for in the histories, cycle after
/// cycle: longer than a thread is plausibly held off the CPU between
/// judging its root and keeping its parts (seen: over 200 µs under qemu).
/// Each cycle with a recheck pending reads every history once.
pub(crate) const RECHECK_FOR: Duration = Duration::from_secs(1);

/// The requests waiting, taken by the collector at the start of a cycle.
pub(crate) fn take_requests() -> Vec<Request> {
    let mut requests = std::mem::take(&mut *lock(&REQUESTS));
    let recheck = std::mem::take(&mut *lock(&RECHECK));
    requests.extend(
        recheck
            .into_iter()
            .map(|(trace_id, until)| Request { ask: Ask::Recheck(trace_id, until), reply: None }),
    );
    requests
}

/// What a cycle gathers for its requests, thread by thread, then answers.
#[derive(Default)]
pub(crate) struct Gathering {
    requests: Vec<Request>,
    /// Every trace, or only those asked for by id.
    everything: bool,
    /// By trace, then by root: a trace id a process started two roots of
    /// (a request retried) makes two traces here, as in reports.
    wanted: HashMap<TraceId, HashMap<u64, Parts, BuildIdHasher>, BuildIdHasher>,
    memories: Vec<ThreadMemory>,
    pub(crate) clear: bool,
}

/// One trace's parts, converted as they were found.
#[derive(Default)]
struct Parts {
    records: Vec<SpanRecord>,
    events: Vec<(SpanId, EventRecord)>,
    roots: Vec<(SpanRecord, u32, Role)>,
    /// The ids of its roots' collector buffers (to tell whether the trace
    /// was already reported).
    collect_ids: Vec<u64>,
}

impl Gathering {
    pub(crate) fn new(requests: Vec<Request>) -> Gathering {
        let mut gathering = Gathering::default();
        for request in &requests {
            match request.ask {
                Ask::Trace(trace_id) | Ask::Report(trace_id) | Ask::Recheck(trace_id, _) => {
                    gathering.wanted.entry(trace_id).or_default();
                }
                Ask::Window(..) | Ask::All => gathering.everything = true,
                Ask::Clear => gathering.clear = true,
                Ask::Retention => {}
            }
        }
        gathering.requests = requests;
        gathering
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.requests.is_empty()
    }

    pub(crate) fn wants_memory(&self) -> bool {
        self.requests.iter().any(|request| request.ask == Ask::Retention)
    }

    /// Notes what one thread's memory holds.
    pub(crate) fn note_memory(&mut self, memory: ThreadMemory) {
        self.memories.push(memory);
    }

    /// Converts what is wanted of one part (kept in a history, or filed in
    /// this cycle), found on thread `thread`.
    pub(crate) fn gather(&mut self, message: &Message, thread: u32, timeline: &Timeline) {
        if self.requests.is_empty() {
            return;
        }
        match message {
            Message::Ended(EndedSpan { state, end }) => self.gather_ended(state, *end, thread, timeline),
            Message::Parts(parts) => {
                for target in parts.targets.as_slice() {
                    if let Some(found) = self.parts_for(target) {
                        found.add_batch(&parts.batch, target, timeline);
                    }
                }
            }
        }
    }

    /// [`gather`](Self::gather), for a part a history holds. A trace the
    /// thread threw away is converted only if it is wanted, from clones of
    /// its spans.
    pub(crate) fn gather_held(&mut self, held: &Held<'_>, thread: u32, timeline: &Timeline) {
        match held {
            Held::Kept(kept) => self.gather(&kept.message, thread, timeline),
            Held::Thrown(thrown, (head, tail)) => {
                let trace_id = thrown.root.trace_id();
                if self.requests.is_empty() || !(self.everything || self.wanted.contains_key(&trace_id)) {
                    return;
                }
                if !head.is_empty() {
                    // Converted from a clone, as kept parts are.
                    let spans = [*head, *tail].concat();
                    let batch = Batch::Local { events: thrown.count < spans.len(), spans };
                    let target = thrown.line_target();
                    if let Some(found) = self.parts_for(&target) {
                        found.add_batch(&batch, &target, timeline);
                    }
                }
                self.gather_ended(&thrown.root, thrown.end, thread, timeline);
            }
        }
    }

    fn gather_ended(&mut self, state: &SpanState, end: minstant::Instant, thread: u32, timeline: &Timeline) {
        state.for_each_target(|target| {
            if let Some(found) = self.parts_for(target) {
                found.add_ended(state, end, target, thread, timeline);
            }
        });
    }

    /// Where what is found under `target` goes, if its trace is wanted.
    fn parts_for(&mut self, target: &Target) -> Option<&mut Parts> {
        let trace_id = target.trace_id();
        let roots = match self.everything {
            true => self.wanted.entry(trace_id).or_default(),
            false => self.wanted.get_mut(&trace_id)?,
        };
        Some(roots.entry(target.collect_id).or_default())
    }

    /// Answers every request; returns the traces to report, and the awaited
    /// ones among them (see [`Ask::Recheck`]). `reported` tells whether a
    /// root's trace was reported already (a retrieval does not report it
    /// twice).
    pub(crate) fn answer(mut self, reported: impl Fn(u64) -> bool) -> (Vec<Assembled>, Vec<TraceId>) {
        let mut assembled: HashMap<TraceId, Vec<(Assembled, bool)>, BuildIdHasher> = HashMap::default();
        for (trace_id, roots) in self.wanted.drain() {
            for (collect_id, parts) in roots {
                if !parts.is_empty() {
                    let trace = parts.assemble(trace_id);
                    assembled.entry(trace_id).or_default().push((trace, reported(collect_id)));
                }
            }
        }
        let every = |keep: &dyn Fn(&Assembled) -> bool| -> Vec<Assembled> {
            assembled
                .values()
                .flatten()
                .map(|(trace, _)| trace)
                .filter(|trace| keep(trace))
                .cloned()
                .collect()
        };
        let mut to_report = Vec::new();
        let mut found_at_last = Vec::new();
        for request in std::mem::take(&mut self.requests) {
            let answer = match request.ask {
                Ask::Recheck(trace_id, until) => {
                    let found = assembled.get(&trace_id).map(Vec::as_slice).unwrap_or_default();
                    if !found.iter().any(|(trace, _)| trace.rooted) {
                        if Instant::now() < until {
                            lock(&RECHECK).push((trace_id, until));
                        }
                    } else {
                        let unreported: Vec<_> = found
                            .iter()
                            .filter(|(_, reported)| !reported)
                            .map(|(trace, _)| trace.clone())
                            .collect();
                        if !unreported.is_empty() {
                            found_at_last.push(trace_id);
                            to_report.extend(unreported);
                        }
                    }
                    Answer::Done
                }
                Ask::Trace(trace_id) | Ask::Report(trace_id) => {
                    let mut found = assembled.get(&trace_id).map(Vec::as_slice).unwrap_or_default();
                    let awaited =
                        matches!(request.ask, Ask::Report(_)) && !found.iter().any(|(trace, _)| trace.rooted);
                    if awaited {
                        // Its root has not ended here yet (or is gone):
                        // kept when it ends, reported whole then.
                        gate::want(trace_id, WANT_FOR);
                        lock(&RECHECK).push((trace_id, Instant::now() + RECHECK_FOR));
                        found = &[];
                    }
                    let counter = match found {
                        [] if awaited => &AWAITED,
                        [] => &NOT_FOUND,
                        found if found.iter().all(|(trace, _)| trace.complete) => &RETRIEVED,
                        _ => &PARTLY_OVERWRITTEN,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    if matches!(request.ask, Ask::Report(_)) {
                        to_report.extend(
                            found.iter().filter(|(_, reported)| !reported).map(|(trace, _)| trace.clone()),
                        );
                    }
                    Answer::Traces(found.iter().map(|(trace, _)| trace.clone()).collect())
                }
                Ask::Window(begin, end) => Answer::Traces(every(&|trace| trace.overlaps(begin, end))),
                Ask::All => Answer::Traces(every(&|_| true)),
                Ask::Retention => Answer::Retention(self.memories.clone()),
                Ask::Clear => Answer::Done,
            };
            if let Some(reply) = request.reply {
                let _ = reply.send(answer);
            }
        }
        (to_report, found_at_last)
    }
}

impl Parts {
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.roots.is_empty()
    }

    fn add_ended(
        &mut self,
        state: &SpanState,
        end: minstant::Instant,
        target: &Target,
        thread: u32,
        timeline: &Timeline,
    ) {
        // Kept parts are converted from clones: nothing of theirs to recycle.
        let mut emptied = Emptied::default();
        let mut one = Vec::with_capacity(1);
        convert(Part::KeptEnded(state, end), target, timeline, &mut one, &mut self.events, &mut emptied);
        match state.role() {
            Role::Child => self.records.append(&mut one),
            role => {
                self.collect_ids.push(target.collect_id);
                self.roots.extend(one.into_iter().map(|root| (root, thread, role)));
            }
        }
    }

    fn add_batch(&mut self, batch: &Batch, target: &Target, timeline: &Timeline) {
        let mut emptied = Emptied::default();
        convert(Part::KeptBatch(batch), target, timeline, &mut self.records, &mut self.events, &mut emptied);
    }

    /// The trace as the collector would have reported it: the root last,
    /// events on their spans, children of missing spans under the root.
    fn assemble(mut self, trace_id: TraceId) -> Assembled {
        let (mut thread, mut rooted) = (0, false);
        // One root per collector buffer; a root also sent as a part (never,
        // but kept safe) would come as a span.
        if let Some((root, root_thread, _)) = self.roots.pop() {
            self.records.extend(self.roots.drain(..).map(|(root, ..)| root));
            (thread, rooted) = (root_thread, true);
            self.records.push(root);
        }
        let ids: HashSet<SpanId, BuildIdHasher> = self.records.iter().map(|record| record.span_id).collect();
        // Events whose span was not held went with it.
        let (here, lost): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.events).into_iter().partition(|(parent, _)| ids.contains(parent));
        attach_events(&mut self.records, here);
        let mut complete = rooted && lost.is_empty();
        if let Some((root, children)) = self.records.split_last_mut().filter(|_| rooted) {
            for child in children.iter_mut().filter(|child| !ids.contains(&child.parent_id)) {
                complete = false;
                child.parent_id = root.span_id;
                child.properties.push(("minitrace.reparented".into(), "parent span was dropped".into()));
            }
        }
        Assembled { trace_id, thread, spans: self.records, rooted, complete }
    }
}

impl Assembled {
    /// The root: the last record, if the trace's root was held.
    pub(crate) fn root(&self) -> Option<&SpanRecord> {
        self.spans.last().filter(|_| self.rooted)
    }

    fn overlaps(&self, begin: u64, end: u64) -> bool {
        self.root().is_some_and(|root| {
            root.begin_time_unix_ns <= end
                && root.begin_time_unix_ns.saturating_add(root.duration_ns) >= begin
        })
    }
}

/// What one thread's history holds, for [`Ask::Retention`].
pub(crate) fn memory_of<'a>(
    thread: u32,
    exited: bool,
    bytes: usize,
    parts: impl Iterator<Item = Held<'a>>,
    timeline: &Timeline,
) -> ThreadMemory {
    let mut memory = ThreadMemory { thread, bytes, exited, ..ThreadMemory::default() };
    for held in parts {
        if let Some(root) = held.root() {
            memory.roots += 1;
            let begin = timeline.unix_nanos(root.begin());
            memory.oldest_unix_ns = Some(memory.oldest_unix_ns.map_or(begin, |oldest| oldest.min(begin)));
        }
    }
    memory
}
