//! The path from traced threads to the collector thread: one bounded,
//! lock-free single-producer ring per thread, registered on first use and
//! drained by the collector. A push never contends with other threads.
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

use rtrb::{Consumer, Producer, RingBuffer};

use crate::data::batch::Role;
use crate::data::target::Targets;
use crate::transport::message::Message;
use crate::transport::wake::{on_collector_thread, wake_collector};
use crate::transport::{gate, stats};
use crate::util::lock;

/// Messages (each a span or a batch of local spans) a thread can have queued.
const RING_CAPACITY: usize = 1 << 14;
/// What a thread can have queued, in units of one span, where each message
/// also costs [`MESSAGE_COST`]: at most ~12 MiB of spans, and never more
/// messages than the ring holds.
pub(crate) const MAX_SPANS_IN_FLIGHT: usize = 1 << 17;
const MESSAGE_COST: usize = MAX_SPANS_IN_FLIGHT / RING_CAPACITY;
const WAKE_AT: usize = MAX_SPANS_IN_FLIGHT / 4;
/// The collector returns budget to a producer after filing this much of its
/// queue: once per sweep would be the fewest writes to the producer's
/// counter, but a sweep can last as long as the producer keeps pushing.
const CREDIT_EVERY: usize = WAKE_AT / 4;
/// Turns over the rings in one sweep: bounded, so that a cycle (and a
/// `flush` waiting for it) ends while producers keep pushing.
const MAX_ROUNDS: usize = 64;
/// Messages filed from a ring before their slots are freed: few enough
/// that a producer soon gets them back.
const CHUNK: usize = 64;
/// Dropped messages remembered between two collector cycles.
const MAX_DROPPED: usize = 1 << 20;

/// The budget is kept without a shared read-modify-write per message: the
/// producer counts what it queued in a plain field, the collector adds what
/// it drained to `drained` once per sweep, and the difference is in flight.
struct Ring {
    consumer: Consumer<Message>,
    drained: Arc<AtomicUsize>,
}

struct ThreadQueue {
    producer: Producer<Message>,
    queued: usize,
    drained: Arc<AtomicUsize>,
}

static RINGS: Mutex<Vec<Ring>> = Mutex::new(Vec::new());
/// Messages from threads whose ring is already gone (sent from thread-local
/// destructors while the thread exits).
static LATE: Mutex<Vec<Message>> = Mutex::new(Vec::new());
static DROPPED: Mutex<Vec<Dropped>> = Mutex::new(Vec::new());
static DROPS_PENDING: AtomicBool = AtomicBool::new(false);

/// A message dropped at a full queue, for the collector to act on.
pub(crate) struct Dropped {
    pub(crate) collect_id: u64,
    /// A root: the rest of its trace is counted as dropped. A child: its
    /// trace's spans under it are re-parented to the root.
    pub(crate) root: bool,
}

/// This thread's end of its ring.
enum Slot {
    /// Registered with the thread's first message.
    Unregistered,
    Open(ThreadQueue),
    /// The thread is exiting: its ring is abandoned, later messages go to [`LATE`].
    Closed,
}

thread_local! {
    // Not dropped with the thread-local (see [`AtExit`]): a destructor made
    // every access a call (PERFORMANCE.md, "The per-thread ring").
    static QUEUE: RefCell<ManuallyDrop<Slot>> = const { RefCell::new(ManuallyDrop::new(Slot::Unregistered)) };
}

/// What a thread leaves behind when it exits. Its span stack and its end of
/// the collector's ring are thread-locals without destructors, so that the
/// hot path reaches them as plain thread-local accesses, with no check that
/// the thread is still alive. This one thread-local has the destructor for
/// both, and runs their closing in order: local spans still open are closed
/// and sent into the ring, so are those waiting for their root (what the
/// local layer registered, see `local::stack`), then the ring is closed.
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
/// at the thread's exit, before the ring closes.
#[inline]
pub(crate) fn thread_exit_armed_for(close_local: fn()) -> bool {
    AT_EXIT.try_with(|at_exit| at_exit.before_ring_closes.set(Some(close_local))).is_ok()
}

#[inline]
pub(crate) fn submit(message: Message) {
    submit_with(message.span_count(), || message);
}

/// Queues the message `make` returns, which will yield `spans` records:
/// made in its ring slot, not copied there from the stack
/// (PERFORMANCE.md, "Building values where they live").
#[inline]
pub(crate) fn submit_with(spans: usize, make: impl FnOnce() -> Message) {
    let _ = QUEUE.try_with(|slot| match slot.try_borrow_mut() {
        Ok(mut slot) => match &mut **slot {
            Slot::Open(queue) => enqueue(queue, spans, make),
            slot => submit_unregistered(slot, make()),
        },
        // Re-entered (never from our code): queued for the next sweep.
        Err(_) => lock(&LATE).push(make()),
    });
}

/// The thread's first message registers its ring, unless the thread is
/// exiting: then its messages are queued for the collector's next sweep.
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

/// Closes the thread's ring when the thread exits (see [`AtExit`]):
/// dropping the producer abandons it, and the collector removes it once it has filed the rest.
fn close_ring() {
    let _ = QUEUE.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            drop(std::mem::replace(&mut **slot, Slot::Closed));
        }
    });
}

#[inline]
fn enqueue(queue: &mut ThreadQueue, spans: usize, make: impl FnOnce() -> Message) {
    let cost = cost(spans);
    let mut waited = None;
    let (in_flight, mut chunk) = loop {
        let in_flight = queue.queued.wrapping_sub(queue.drained.load(Ordering::Relaxed));
        if in_flight + cost <= MAX_SPANS_IN_FLIGHT {
            if let Ok(chunk) = queue.producer.write_chunk_uninit(1) {
                break (in_flight, chunk);
            }
        }
        if !wait_for_room(&mut waited) {
            return count_dropped(make());
        }
    };
    chunk.as_mut_slices().0[0].write(make());
    // SAFETY: the chunk's one slot was written just above.
    unsafe { chunk.commit_all() };
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

/// A message's share of its thread's budget, for a message of `spans` records.
fn cost(spans: usize) -> usize {
    spans + MESSAGE_COST
}

fn count_dropped(message: Message) {
    stats::count_queue_full(message.span_count());
    note_dropped(&message.targets(), message.role() != Role::Child);
}

/// Tells the collector that a child span of these targets will never
/// arrive (e.g. it was cancelled), so its children get re-parented.
pub(crate) fn note_dropped_child(targets: &Targets) {
    note_dropped(targets, false);
}

fn note_dropped(targets: &Targets, root: bool) {
    let mut dropped = lock(&DROPPED);
    for target in targets.as_slice() {
        if dropped.len() < MAX_DROPPED {
            dropped.push(Dropped { collect_id: target.collect_id, root });
        }
    }
    // Published before any later message of this thread is queued.
    DROPS_PENDING.store(true, Ordering::Release);
}

/// Whether [`take_dropped`] has something: one load, checked before every root.
pub(crate) fn drops_pending() -> bool {
    DROPS_PENDING.load(Ordering::Acquire)
}

fn register_thread() -> ThreadQueue {
    let (producer, consumer) = RingBuffer::new(RING_CAPACITY);
    let drained = Arc::new(AtomicUsize::new(0));
    lock(&RINGS).push(Ring { consumer, drained: drained.clone() });
    ThreadQueue { producer, queued: 0, drained }
}

/// Hands every queued message to `file`. Rings are taken in turns, each
/// turn filing what its ring held when the turn began, so that a thread
/// that keeps pushing cannot hold up the others: the roots on one thread
/// must not wait behind the stream of their children on another, or every
/// trace stays open, its parts pile up, and the collector falls behind.
/// Rings of exited threads are removed once empty.
pub(crate) fn drain(mut file: impl FnMut(&mut Message)) {
    // Filed without holding the lock, so that a new thread's first span
    // does not wait for a whole sweep.
    let mut rings = std::mem::take(&mut *lock(&RINGS));
    for _ in 0..MAX_ROUNDS {
        let mut filed_any = false;
        rings.retain_mut(|ring| {
            let abandoned = ring.consumer.is_abandoned();
            if abandoned {
                // rtrb: the producer's last writes are visible only after this.
                std::sync::atomic::fence(Ordering::Acquire);
            }
            let turn = ring.consumer.slots();
            let (mut left, mut drained) = (turn, 0);
            // Filed where they lie, a few at a time: a chunk's slots are
            // freed for the producer once its messages are filed.
            while left > 0 {
                let Ok(mut chunk) = ring.consumer.read_chunk(left.min(CHUNK)) else { break };
                left -= chunk.len();
                let (first, second) = chunk.as_mut_slices();
                for message in first.iter_mut().chain(second) {
                    // Counted before filing, which takes a span's extras
                    // (its further targets among them) out of it.
                    drained += cost(message.span_count());
                    file(message);
                }
                chunk.commit_all();
                // Credited as it goes: during a long turn the producer
                // would otherwise see its budget spent by messages already
                // filed, and drop spans while its ring is nearly empty.
                if drained >= CREDIT_EVERY {
                    ring.drained.fetch_add(std::mem::take(&mut drained), Ordering::Relaxed);
                }
            }
            if drained > 0 {
                ring.drained.fetch_add(drained, Ordering::Relaxed);
            }
            filed_any |= turn > 0;
            !abandoned
        });
        if !filed_any {
            break;
        }
    }
    let mut registered = lock(&RINGS);
    rings.append(&mut registered);
    *registered = rings;
    drop(registered);
    let late = std::mem::take(&mut *lock(&LATE));
    for mut message in late {
        file(&mut message);
    }
}

/// The messages dropped since the last call.
pub(crate) fn take_dropped() -> Vec<Dropped> {
    let mut dropped = lock(&DROPPED);
    DROPS_PENDING.store(false, Ordering::Relaxed);
    std::mem::take(&mut *dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::id::{SpanId, TraceId};
    use crate::data::span_state::SpanState;
    use crate::data::target::Target;
    use crate::transport::message::EndedSpan;

    /// A thread-safe span, ended.
    fn message(role: Role) -> Message {
        let (targets, now) = (Targets::One(Target::new(TraceId(1), SpanId(0), 1)), minstant::Instant::now());
        Message::Ended(EndedSpan { state: SpanState::new("span".into(), targets, role, now), end: now })
    }

    // Without a reporter no collector thread runs in this test process, so
    // `drain` in these tests is the only consumer; one test at a time, as
    // `drain` takes every thread's messages.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// Closed at the thread's exit, an exited thread's ring is filed to the
    /// end and then removed, not kept for ever.
    #[test]
    fn an_exited_threads_ring_is_filed_and_removed() {
        let _serial = lock(&ONE_AT_A_TIME);
        drain(|_| {});
        let rings = lock(&RINGS).len();
        std::thread::spawn(|| submit(message(Role::Child))).join().unwrap();
        assert_eq!(lock(&RINGS).len(), rings + 1);
        let mut filed = 0;
        drain(|_| filed += 1);
        assert_eq!(filed, 1);
        assert_eq!(lock(&RINGS).len(), rings);
    }

    /// Filing returns what a message was charged, even though it takes a
    /// span's further targets out of it.
    #[test]
    fn a_span_with_several_parents_gives_back_its_whole_charge() {
        let _serial = lock(&ONE_AT_A_TIME);
        let in_flight = std::thread::spawn(|| {
            let targets = Targets::Many(vec![
                Target::new(TraceId(1), SpanId(0), 1),
                Target::new(TraceId(2), SpanId(0), 2),
            ]);
            for _ in 0..10 {
                let now = minstant::Instant::now();
                let state = SpanState::new("span".into(), targets.clone(), Role::Child, now);
                submit(Message::Ended(EndedSpan { state, end: now }));
            }
            drain(|message| {
                if let Message::Ended(EndedSpan { state, .. }) = message {
                    drop(state.take_extra());
                }
            });
            QUEUE.with(|slot| match &**slot.borrow() {
                Slot::Open(queue) => queue.queued.wrapping_sub(queue.drained.load(Ordering::Relaxed)),
                _ => usize::MAX,
            })
        })
        .join()
        .unwrap();
        assert_eq!(in_flight, 0);
    }

    #[test]
    fn a_producer_kept_up_with_never_drops() {
        let _serial = lock(&ONE_AT_A_TIME);
        let budget = MAX_SPANS_IN_FLIGHT / (1 + MESSAGE_COST);
        let before = stats::stats().dropped_queue_full;
        // Three quarters of the budget queued; then, from the same thread,
        // one more message for each one filed, through four budgets' worth:
        // what is in flight never exceeds three quarters of the budget, but
        // a turn files that much and pushes as much again, so budget
        // returned only at the end of a turn would overflow it.
        let filed = std::thread::spawn(move || {
            for _ in 0..3 * budget / 4 {
                submit(message(Role::Child));
            }
            let (mut filed, mut pushed) = (0, 3 * budget / 4);
            loop {
                let before = filed;
                drain(|_| {
                    filed += 1;
                    if pushed < 4 * budget {
                        submit(message(Role::Child));
                        pushed += 1;
                    }
                });
                if filed == before {
                    return filed;
                }
            }
        })
        .join()
        .unwrap();
        assert_eq!(stats::stats().dropped_queue_full, before);
        assert_eq!(filed, 4 * budget);
    }

    #[test]
    fn a_thread_that_keeps_pushing_does_not_hold_up_another_threads_root() {
        let _serial = lock(&ONE_AT_A_TIME);
        // The pusher queues a quarter of its ring, then another thread the
        // root; the pusher then sweeps, queueing one more child for each
        // child filed, so its own ring never empties. Swept until empty, its
        // ring would hold the root back until the pusher stops at 8 rings'
        // worth; taken in turns, the root comes after at most one turn.
        let (root_seen, children_before_root) = std::thread::spawn(|| {
            for _ in 0..RING_CAPACITY / 4 {
                submit(message(Role::Child));
            }
            std::thread::spawn(|| submit(message(Role::Root))).join().unwrap();
            let (mut pushed, mut children_before_root, mut root_seen) = (RING_CAPACITY / 4, 0, false);
            drain(|filed| match filed.role() {
                Role::Root => root_seen = true,
                _ if !root_seen => {
                    children_before_root += 1;
                    if pushed < 8 * RING_CAPACITY {
                        submit(message(Role::Child));
                        pushed += 1;
                    }
                }
                _ => {}
            });
            (root_seen, children_before_root)
        })
        .join()
        .unwrap();
        assert!(root_seen);
        assert!(
            children_before_root <= RING_CAPACITY,
            "{children_before_root} children filed before the root (ring: {RING_CAPACITY})"
        );
    }
}
