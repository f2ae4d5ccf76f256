//! The path from traced threads to the collector thread: one bounded,
//! lock-free single-producer ring per thread, registered on first use and
//! drained by the collector. A push never contends with other threads.
//!
//! Each thread may have at most [`MAX_SPANS_IN_FLIGHT`] spans queued; past
//! that (the collector or the reporter cannot keep up) a message is dropped
//! and its spans counted. A dropped root is remembered so that the rest of
//! its trace is counted as dropped too, rather than waiting for a root that
//! will never come.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::collector::message::{Message, Role};
use crate::collector::target::Targets;
use crate::collector::{global, stats};

/// Messages (each a span or a batch of local spans) a thread can have queued.
const RING_CAPACITY: usize = 1 << 14;
/// What a thread can have queued, in units of one span, where each message
/// also costs [`MESSAGE_COST`]: at most ~12 MiB of spans, and never more
/// messages than the ring holds.
pub(crate) const MAX_SPANS_IN_FLIGHT: usize = 1 << 17;
const MESSAGE_COST: usize = MAX_SPANS_IN_FLIGHT / RING_CAPACITY;
const WAKE_AT: usize = MAX_SPANS_IN_FLIGHT / 4;
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

thread_local! {
    static QUEUE: RefCell<Option<ThreadQueue>> = const { RefCell::new(None) };
}

pub(crate) fn submit(message: Message) {
    let mut message = Some(message);
    let _ = QUEUE.try_with(|queue| {
        let Ok(mut queue) = queue.try_borrow_mut() else {
            return;
        };
        let queue = queue.get_or_insert_with(register_thread);
        let Some(message) = message.take() else { return };
        let cost = message.span_count() + MESSAGE_COST;
        let in_flight = queue.queued.wrapping_sub(queue.drained.load(Ordering::Relaxed));
        if in_flight + cost > MAX_SPANS_IN_FLIGHT {
            return count_dropped(message);
        }
        match queue.producer.push(message) {
            Ok(()) => {
                queue.queued = queue.queued.wrapping_add(cost);
                // A quarter full: wake the collector now rather than at its
                // next interval, so a fast producer is not dropped needlessly.
                if in_flight < WAKE_AT && in_flight + cost >= WAKE_AT {
                    global::wake_collector();
                }
            }
            Err(rtrb::PushError::Full(message)) => count_dropped(message),
        }
    });
    if let Some(message) = message {
        lock(&LATE).push(message);
    }
}

fn count_dropped(message: Message) {
    stats::count_queue_full(message.span_count());
    note_dropped(&message.targets, message.role != Role::Child);
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

/// Hands every queued message to `file`, ring by ring. Rings of exited
/// threads are removed once empty.
pub(crate) fn drain(mut file: impl FnMut(Message)) {
    // Filed without holding the lock, so that a new thread's first span
    // does not wait for a whole sweep.
    let mut rings = std::mem::take(&mut *lock(&RINGS));
    rings.retain_mut(|ring| {
        let abandoned = ring.consumer.is_abandoned();
        if abandoned {
            // rtrb: the producer's last writes are visible only after this.
            std::sync::atomic::fence(Ordering::Acquire);
        }
        let mut drained = 0;
        while let Ok(message) = ring.consumer.pop() {
            drained += message.span_count() + MESSAGE_COST;
            file(message);
        }
        if drained > 0 {
            ring.drained.fetch_add(drained, Ordering::Relaxed);
        }
        !abandoned
    });
    let mut registered = lock(&RINGS);
    rings.append(&mut registered);
    *registered = rings;
    drop(registered);
    let late = std::mem::take(&mut *lock(&LATE));
    late.into_iter().for_each(file);
}

/// The messages dropped since the last call.
pub(crate) fn take_dropped() -> Vec<Dropped> {
    let mut dropped = lock(&DROPPED);
    DROPS_PENDING.store(false, Ordering::Relaxed);
    std::mem::take(&mut *dropped)
}

/// A panic elsewhere while holding one of these locks leaves the data
/// consistent (each operation is a single push or drain), so keep going.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
