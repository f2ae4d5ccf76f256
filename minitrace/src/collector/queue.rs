//! The path from traced threads to the collector thread: one bounded,
//! lock-free single-producer ring per thread, registered on first use and
//! drained by the collector. A push is a few stores and never contends with
//! other threads; a full ring drops the message and counts its spans.

use std::cell::RefCell;
use std::sync::Mutex;

use rtrb::{Consumer, Producer, RingBuffer};

use crate::collector::message::Message;
use crate::collector::stats;

/// Messages (each a span or a batch of local spans) a thread can have in
/// flight between two collector cycles.
const RING_CAPACITY: usize = 4096;

static RINGS: Mutex<Vec<Consumer<Message>>> = Mutex::new(Vec::new());
/// Messages from threads whose ring is already gone (sent from thread-local
/// destructors while the thread exits).
static LATE: Mutex<Vec<Message>> = Mutex::new(Vec::new());

thread_local! {
    static PRODUCER: RefCell<Option<Producer<Message>>> = const { RefCell::new(None) };
}

pub(crate) fn submit(message: Message) {
    let mut message = Some(message);
    let _ = PRODUCER.try_with(|producer| {
        let Ok(mut producer) = producer.try_borrow_mut() else {
            return;
        };
        let producer = producer.get_or_insert_with(register_ring);
        let Some(pending) = message.take() else { return };
        if let Err(rtrb::PushError::Full(rejected)) = producer.push(pending) {
            stats::count_queue_full(rejected.span_count());
        }
    });
    if let Some(message) = message {
        lock(&LATE).push(message);
    }
}

fn register_ring() -> Producer<Message> {
    let (producer, consumer) = RingBuffer::new(RING_CAPACITY);
    lock(&RINGS).push(consumer);
    producer
}

/// Moves every queued message into `out`. Rings of exited threads are
/// removed once empty.
pub(crate) fn drain_into(out: &mut Vec<Message>) {
    let mut rings = lock(&RINGS);
    rings.retain_mut(|ring| {
        let abandoned = ring.is_abandoned();
        while let Ok(message) = ring.pop() {
            out.push(message);
        }
        !abandoned
    });
    drop(rings);
    out.append(&mut lock(&LATE));
}

/// A panic elsewhere while holding one of these locks leaves the data
/// consistent (each operation is a single push or drain), so keep going.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
