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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::collector::message::{Message, Role};
use crate::collector::{global, stats};

/// Messages (each a span or a batch of local spans) a thread can have queued.
const RING_CAPACITY: usize = 1 << 14;
/// What a thread can have queued, in units of one span, where each message
/// also costs [`MESSAGE_COST`]: at most ~12 MiB of spans, and never more
/// messages than the ring holds.
pub(crate) const MAX_SPANS_IN_FLIGHT: usize = 1 << 17;
const MESSAGE_COST: usize = MAX_SPANS_IN_FLIGHT / RING_CAPACITY;
const WAKE_AT: usize = MAX_SPANS_IN_FLIGHT / 4;
/// Dropped roots remembered between two collector cycles.
const MAX_DROPPED_ROOTS: usize = 1 << 20;

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
static DROPPED_ROOTS: Mutex<Vec<u64>> = Mutex::new(Vec::new());

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
    if message.role != Role::Child {
        let mut dropped_roots = lock(&DROPPED_ROOTS);
        if dropped_roots.len() < MAX_DROPPED_ROOTS {
            dropped_roots.push(message.targets.first().collect_id);
        }
    }
}

fn register_thread() -> ThreadQueue {
    let (producer, consumer) = RingBuffer::new(RING_CAPACITY);
    let drained = Arc::new(AtomicUsize::new(0));
    lock(&RINGS).push(Ring { consumer, drained: drained.clone() });
    ThreadQueue { producer, queued: 0, drained }
}

/// Moves every queued message into `out`. Rings of exited threads are
/// removed once empty.
pub(crate) fn drain_into(out: &mut Vec<Message>) {
    let mut rings = lock(&RINGS);
    rings.retain_mut(|ring| {
        let abandoned = ring.consumer.is_abandoned();
        let mut drained = 0;
        while let Ok(message) = ring.consumer.pop() {
            drained += message.span_count() + MESSAGE_COST;
            out.push(message);
        }
        if drained > 0 {
            ring.drained.fetch_add(drained, Ordering::Relaxed);
        }
        !abandoned
    });
    drop(rings);
    out.append(&mut lock(&LATE));
}

/// The collect ids of roots dropped since the last call.
pub(crate) fn take_dropped_roots() -> Vec<u64> {
    std::mem::take(&mut *lock(&DROPPED_ROOTS))
}

/// A panic elsewhere while holding one of these locks leaves the data
/// consistent (each operation is a single push or drain), so keep going.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
