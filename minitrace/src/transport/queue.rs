//! The path from traced threads to the collector thread: each thread's
//! outbox and history, handed over in harvests (`transport::handoff`), and
//! registered on the thread's first message. A write never contends with
//! other threads and never waits.
//!
//! Each thread may have at most [`MAX_SPANS_IN_FLIGHT`] spans queued; past
//! that (the collector or the reporter cannot keep up) a message is dropped
//! and its spans counted. A dropped root is remembered so that the rest of
//! its trace is counted as dropped too, rather than waiting for a root that
//! will never come.

use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use minstant::Instant;

use crate::data::batch::Role;
use crate::data::id::SpanId;
use crate::data::span_state::SpanState;
use crate::data::target::Targets;
use crate::transport::handoff::{Cells, Handoff, Hub};
use crate::transport::history::{History, Kept, Waiting};
use crate::transport::line_spans::{self, LineSpans};
use crate::transport::message::Message;
use crate::transport::wake::{on_collector_thread, wake_collector};
use crate::transport::{gate, stats};
use crate::util::lock;

/// Messages (each a span or a batch of local spans) a thread can have queued.
const MAX_MESSAGES: usize = 1 << 14;
/// What a thread can have queued, in units of one span, where each message
/// also costs [`MESSAGE_COST`]: at most ~12 MiB of spans, and never more
/// than [`MAX_MESSAGES`] messages.
pub(crate) const MAX_SPANS_IN_FLIGHT: usize = 1 << 17;
const MESSAGE_COST: usize = MAX_SPANS_IN_FLIGHT / MAX_MESSAGES;
const WAKE_AT: usize = MAX_SPANS_IN_FLIGHT / 4;
/// Dropped messages remembered between two collector cycles.
const MAX_DROPPED: usize = 1 << 20;

/// A traced thread, as the collector sees it.
pub(crate) struct Thread {
    pub(crate) handoff: Handoff<Message, Waiting, History>,
    /// What the collector has filed of the thread's queue, in the units of
    /// [`MAX_SPANS_IN_FLIGHT`]: the budget is kept without a shared
    /// read-modify-write per message, the thread counting what it queued in
    /// a plain field, the collector adding what it filed here.
    pub(crate) drained: AtomicUsize,
    /// A small number per thread, in the order threads first sent (0 is
    /// none: messages of exiting threads).
    pub(crate) number: u32,
}

/// This thread's end of the handover.
struct ThreadQueue {
    thread: Arc<Thread>,
    queued: usize,
    /// What made room in the thread's history, between its eviction and
    /// its recycling; kept for its capacity.
    evicted: crate::transport::history::Released,
}

/// Every live thread's handover, and the exited ones not yet harvested.
static THREADS: Mutex<Vec<Arc<Thread>>> = Mutex::new(Vec::new());
#[cfg(not(feature = "loom"))]
static HUB: Hub = Hub::new();

/// The hub every thread's handover reads.
#[cfg(not(feature = "loom"))]
fn hub() -> &'static Hub {
    &HUB
}

/// Under loom, whose primitives exist only inside a model, the production
/// path is not run: its tests build hubs of their own.
#[cfg(feature = "loom")]
fn hub() -> &'static Hub {
    static HUB: std::sync::OnceLock<&'static Hub> = std::sync::OnceLock::new();
    HUB.get_or_init(|| Box::leak(Box::new(Hub::new())))
}
/// Messages from threads whose handover is already closed (sent from
/// thread-local destructors while the thread exits).
static LATE: Mutex<Vec<Message>> = Mutex::new(Vec::new());
static DROPPED: Mutex<Vec<Dropped>> = Mutex::new(Vec::new());
static DROPS_PENDING: AtomicBool = AtomicBool::new(false);

/// A message dropped at a full queue, for the collector to act on.
pub(crate) struct Dropped {
    pub(crate) collect_id: u64,
    /// A root: the rest of its trace is counted as dropped. A child: its
    /// trace's spans under it are re-parented to the root.
    pub(crate) root: bool,
    /// The dropped children's ids, as their records would have had them:
    /// `first..=last` (a local batch's ids are consecutive).
    pub(crate) first: SpanId,
    pub(crate) last: SpanId,
}

/// This thread's end of its handover.
enum Slot {
    /// Registered with the thread's first message.
    Unregistered,
    Open(ThreadQueue),
    /// The thread is exiting: later messages go to [`LATE`].
    Closed,
}

thread_local! {
    // Not dropped with the thread-local (see [`AtExit`]): a destructor made
    // every access a call (PERFORMANCE.md, "The per-thread handover").
    static QUEUE: RefCell<ManuallyDrop<Slot>> = const { RefCell::new(ManuallyDrop::new(Slot::Unregistered)) };
}

/// What a thread leaves behind when it exits. Its span stack and its end of
/// the handover are thread-locals without destructors, so that the hot path
/// reaches them as plain thread-local accesses, with no check that the
/// thread is still alive. This one thread-local has the destructor for
/// both, and runs their closing in order: local spans still open are closed
/// and sent, so are those waiting for their root (what the local layer
/// registered, see `local::stack`), then the handover is closed.
struct AtExit {
    /// Closes the thread's local spans, set when it opens its first line.
    before_ring_closes: Cell<Option<fn()>>,
}

thread_local! {
    static AT_EXIT: AtExit = const { AtExit { before_ring_closes: Cell::new(None) } };
}

impl Drop for AtExit {
    fn drop(&mut self) {
        if let Some(close_local) = self.before_ring_closes.get() {
            close_local();
        }
        // No line holds it now: the local spans are closed.
        line_spans::drop_stretch();
        close_ring();
    }
}

/// Makes sure the thread's exit will close what it opened: the first call
/// on a thread registers that. `false` once the thread's exit has run it
/// (in a later thread-local destructor): what is opened then would never
/// be closed, so the caller must not open it.
#[inline]
pub(crate) fn thread_exit_armed() -> bool {
    AT_EXIT.try_with(|_| ()).is_ok()
}

/// [`thread_exit_armed`], for the thread's local spans: `close_local` runs
/// at the thread's exit, before the handover closes.
#[inline]
pub(crate) fn thread_exit_armed_for(close_local: fn()) -> bool {
    AT_EXIT.try_with(|at_exit| at_exit.before_ring_closes.set(Some(close_local))).is_ok()
}

#[inline]
pub(crate) fn submit(message: Message) {
    submit_with(message.span_count(), || message);
}

/// Queues the message `make` returns, which will yield `spans` records.
#[inline]
pub(crate) fn submit_with(spans: usize, make: impl FnOnce() -> Message) {
    let _ = QUEUE.try_with(|slot| match slot.try_borrow_mut() {
        Ok(mut slot) => match &mut **slot {
            Slot::Open(queue) => enqueue(queue, spans, make),
            slot => submit_unregistered(slot, make()),
        },
        // Re-entered (never from our code): queued for the next harvest.
        Err(_) => lock(&LATE).push(make()),
    });
}

/// Keeps what this thread recorded of a trace it threw away in its history
/// (the flight recorder's memory), never waiting. The parts are taken from
/// where the caller made them, by reference: moved once, into the history
/// (moving ~100-byte parts through the closures below by value cost a
/// `memcpy` call at each level).
pub(crate) fn keep(parts: &mut [Option<Kept>], limit: usize) {
    let _ = QUEUE.try_with(|slot| {
        let Ok(mut slot) = slot.try_borrow_mut() else { return };
        if matches!(&**slot, Slot::Unregistered) && thread_exit_armed() {
            **slot = Slot::Open(register_thread());
        }
        let Slot::Open(queue) = &mut **slot else { return };
        let evicted = &mut queue.evicted;
        queue.thread.handoff.write(hub(), |cells, history| match history {
            Some(history) => {
                history.absorb(&mut cells.kept, limit, evicted, true);
                history.keep(parts.iter_mut().filter_map(Option::take), limit, evicted);
            }
            None => cells.kept.extend(parts.iter_mut().filter_map(Option::take).map(Waiting::Kept)),
        });
        evicted.recycle_here();
    });
}

/// Keeps a trace this thread threw away in its history, never waiting:
/// its root, ended at `end`, and the local spans that waited for it
/// (`count` of them spans), moved into the history's ring (see
/// [`History::keep_thrown`]); their buffer goes back to this thread's next
/// line. While a harvest runs, they wait to join the history, buffer and
/// all.
pub(crate) fn keep_thrown(mut spans: LineSpans, count: usize, root: SpanState, end: Instant, limit: usize) {
    let _ = QUEUE.try_with(|slot| {
        let Ok(mut slot) = slot.try_borrow_mut() else { return };
        if matches!(&**slot, Slot::Unregistered) && thread_exit_armed() {
            **slot = Slot::Open(register_thread());
        }
        let Slot::Open(queue) = &mut **slot else { return };
        let (evicted, spans) = (&mut queue.evicted, &mut spans);
        queue.thread.handoff.write(hub(), |cells, history| match history {
            Some(history) => {
                history.keep_thrown_here(&mut cells.kept, spans, count, root, end, limit, evicted)
            }
            None => cells.kept.push(Waiting::Thrown { spans: spans.take_vec(), count, root, end }),
        });
        evicted.recycle_here();
    });
    if spans.capacity() > 0 {
        spans.give_back();
    }
}

/// The thread's first message registers its handover, unless the thread is
/// exiting: then its messages are queued for the collector's next harvest.
#[cold]
#[inline(never)]
fn submit_unregistered(slot: &mut Slot, message: Message) {
    if matches!(slot, Slot::Unregistered) && thread_exit_armed() {
        let mut queue = register_thread();
        enqueue(&mut queue, message.span_count(), || message);
        *slot = Slot::Open(queue);
    } else {
        *slot = Slot::Closed;
        lock(&LATE).push(message);
    }
}

/// Closes the thread's handover when the thread exits (see [`AtExit`]):
/// the collector takes the rest at its next harvest.
fn close_ring() {
    let _ = QUEUE.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            if let Slot::Open(queue) = std::mem::replace(&mut **slot, Slot::Closed) {
                queue.thread.handoff.close();
            }
        }
    });
}

#[inline]
fn enqueue(queue: &mut ThreadQueue, spans: usize, make: impl FnOnce() -> Message) {
    let cost = cost(spans);
    let mut waited = None;
    let in_flight = loop {
        let in_flight = queue.queued.wrapping_sub(queue.thread.drained.load(Ordering::Relaxed));
        if in_flight + cost <= MAX_SPANS_IN_FLIGHT {
            break in_flight;
        }
        if !wait_for_room(&mut waited) {
            return count_dropped(make());
        }
    };
    queue.thread.handoff.write(hub(), |cells, _| cells.outbox.push(make()));
    queue.queued = queue.queued.wrapping_add(cost);
    // A quarter full: wake the collector now rather than at its next
    // interval, so a fast producer is not dropped needlessly.
    if in_flight < WAKE_AT && in_flight + cost >= WAKE_AT {
        wake_collector();
    }
}

/// Under [`Config::wait_when_queue_full`](crate::collector::Config::wait_when_queue_full),
/// a full queue makes the thread wake the collector and wait for room, at
/// most [`MAX_WAIT`] per message (then the message is dropped and counted,
/// so that a stuck reporter cannot hang the process); never on the
/// collector's own thread, which is what would make the room. `false`: drop.
#[cold]
#[inline(never)]
fn wait_for_room(waited: &mut Option<std::time::Instant>) -> bool {
    if !gate::waits_when_queue_full() || on_collector_thread() {
        return false;
    }
    let started = *waited.get_or_insert_with(|| {
        stats::count_wait_for_room();
        std::time::Instant::now()
    });
    if started.elapsed() > MAX_WAIT {
        return false;
    }
    wake_collector();
    std::thread::sleep(std::time::Duration::from_micros(20));
    true
}

/// The longest a message waits for room in its thread's queue.
const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a thread whose harvested messages cost `harvested` had its queue
/// at least a quarter full: it writes faster than the collector's interval
/// drains it, and the collector should harvest again at once. (The thread
/// wakes the collector only when its queue *crosses* a quarter; a queue
/// that never drains below it would otherwise wait for the interval, and
/// fill.)
pub(crate) fn behind(harvested: usize) -> bool {
    harvested >= WAKE_AT
}

/// A message's share of its thread's budget, for a message of `spans` records.
pub(crate) fn cost(spans: usize) -> usize {
    spans + MESSAGE_COST
}

fn count_dropped(message: Message) {
    stats::count_queue_full(message.span_count());
    stats::count_dropped_events(message.event_count() * message.targets().as_slice().len());
    let root = message.role() != Role::Child;
    let mut dropped = lock(&DROPPED);
    for target in message.targets().as_slice() {
        let collect_id = target.collect_id;
        if root {
            note(&mut dropped, Dropped { collect_id, root, first: SpanId(0), last: SpanId(0) });
        } else if let Some((first, last)) = message.span_id_range() {
            note(&mut dropped, Dropped { collect_id, root, first, last });
        } else {
            message.for_each_span_id(target, |span| {
                note(&mut dropped, Dropped { collect_id, root, first: span, last: span })
            });
        }
    }
    published(dropped);
}

/// Tells the collector that the child span `span` of these targets will
/// never arrive (e.g. it was cancelled), so its children get re-parented.
pub(crate) fn note_dropped_child(targets: &Targets, span: SpanId) {
    let mut dropped = lock(&DROPPED);
    for target in targets.as_slice() {
        note(&mut dropped, Dropped { collect_id: target.collect_id, root: false, first: span, last: span });
    }
    published(dropped);
}

fn note(dropped: &mut Vec<Dropped>, one: Dropped) {
    if dropped.len() < MAX_DROPPED {
        dropped.push(one);
    }
}

fn published(dropped: std::sync::MutexGuard<'_, Vec<Dropped>>) {
    // Published before any later message of this thread is queued.
    DROPS_PENDING.store(true, Ordering::Release);
    drop(dropped);
}

/// Whether [`take_dropped`] has something: one load, checked before every root.
pub(crate) fn drops_pending() -> bool {
    DROPS_PENDING.load(Ordering::Acquire)
}

fn register_thread() -> ThreadQueue {
    static NEXT_NUMBER: AtomicUsize = AtomicUsize::new(1);
    let thread = Arc::new(Thread {
        handoff: Handoff::with_outbox(Vec::with_capacity(OUTBOX_CAPACITY)),
        drained: AtomicUsize::new(0),
        number: NEXT_NUMBER.fetch_add(1, Ordering::Relaxed) as u32,
    });
    lock(&THREADS).push(thread.clone());
    ThreadQueue { thread, queued: 0, evicted: Default::default() }
}

/// Outboxes kept empty for threads (see [`harvest`]): enough for a few.
pub(crate) const MAX_SPARES: usize = 16;
/// The messages a thread's outbox has room for from the start (~350 KiB): a
/// thread's messages between two harvests, usually, so that its writes
/// need no allocation; past that it grows, once.
const OUTBOX_CAPACITY: usize = 1 << 12;

/// Takes every thread's messages at once, a consistent cut (see
/// `transport::handoff`): hands them, thread by thread, to `take`, which
/// runs while the threads write elsewhere and may also read and change
/// each thread's history (`None`: messages sent by exiting threads). Then
/// lets threads that exited and have nothing more go.
pub(crate) fn harvest(
    spares: &mut Vec<Vec<Message>>,
    mut take: impl FnMut(Option<&Arc<Thread>>, Cells<Message, Waiting>, Option<&mut History>, bool),
) {
    let mut retired = Vec::new();
    let threads = || lock(&THREADS).clone();
    hub().harvest(
        threads,
        |thread| &thread.handoff,
        |thread, main, older, finished| {
            let spare = || spares.pop().unwrap_or_else(|| Vec::with_capacity(OUTBOX_CAPACITY));
            let cells = main.take_cells_with(older, spare);
            let sent = !cells.outbox.is_empty();
            take(Some(thread), cells, Some(&mut main.history), finished);
            // Exited, nothing of it left for later harvests, and nothing
            // sent now that the collector may give back to its history
            // (which the collector empties when it keeps it elsewhere).
            if finished && !sent && main.history.is_empty() {
                retired.push(thread.clone());
            }
        },
    );
    let late = std::mem::take(&mut *lock(&LATE));
    if !late.is_empty() {
        take(None, Cells { outbox: late, kept: Vec::new() }, None, false);
    }
    if !retired.is_empty() {
        lock(&THREADS).retain(|thread| !retired.iter().any(|gone| Arc::ptr_eq(gone, thread)));
    }
}

/// The collector gives back to a thread the budget of the messages it has
/// filed, every [`CREDIT_EVERY`] of it and when dropped: once per cut would
/// be the fewest writes to the thread's counter, but while a large cut is
/// filed the thread would find its budget spent by messages already filed.
pub(crate) struct Credit<'a> {
    thread: Option<&'a Thread>,
    filed: usize,
}

/// What the collector files before giving a thread its budget back.
const CREDIT_EVERY: usize = WAKE_AT / 4;

impl<'a> Credit<'a> {
    pub(crate) fn new(thread: Option<&'a Thread>) -> Credit<'a> {
        Credit { thread, filed: 0 }
    }

    /// `message` is about to be filed: counted now, as filing takes a span's
    /// further targets out of it. Returns its cost.
    pub(crate) fn add(&mut self, message: &Message) -> usize {
        let cost = cost(message.span_count());
        self.filed += cost;
        if self.filed >= CREDIT_EVERY {
            self.give();
        }
        cost
    }

    fn give(&mut self) {
        if let Some(thread) = self.thread {
            thread.drained.fetch_add(std::mem::take(&mut self.filed), Ordering::Relaxed);
        }
    }
}

impl Drop for Credit<'_> {
    fn drop(&mut self) {
        self.give();
    }
}

/// The messages dropped since the last call.
pub(crate) fn take_dropped() -> Vec<Dropped> {
    let mut dropped = lock(&DROPPED);
    DROPS_PENDING.store(false, Ordering::Relaxed);
    std::mem::take(&mut *dropped)
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
