//! Recycled span buffers. A line's `Vec<RawSpan>` is filled on a traced
//! thread and emptied on the collector thread, which returns it to a shared
//! pool, not to the allocator from the wrong thread; traced threads take
//! them back in batches (PERFORMANCE.md, "Recycled span buffers").

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::data::raw_span::RawSpan;
use crate::transport::property_lists;

/// Span slots (64 bytes each) the shared pool keeps in all: 4 MiB. Buffers
/// beyond that are freed.
const POOL_CAPACITY: usize = 1 << 16;
/// A fresh buffer's capacity: enough for a typical request without growing.
const FRESH_CAPACITY: usize = 16;
/// Buffers a thread takes from the pool at once, so the pool's lock is
/// taken once per this many lines.
const REFILL: usize = 32;
/// Buffers with more capacity than this are freed rather than kept.
const MAX_KEPT_CAPACITY: usize = 1024;

static POOLED: AtomicUsize = AtomicUsize::new(0);
static POOL: Mutex<Pool> = Mutex::new(Pool { buffers: Vec::new(), capacity: 0 });

struct Pool {
    buffers: Vec<Vec<RawSpan>>,
    /// The sum of the buffers' capacities.
    capacity: usize,
}

thread_local! {
    static CACHE: RefCell<Vec<Vec<RawSpan>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer, recycled when one is available.
///
/// Inlined, so that the buffer comes back in registers, not through memory
/// (PERFORMANCE.md, "Building values where they live").
#[inline]
pub(crate) fn take() -> Vec<RawSpan> {
    CACHE
        .try_with(|cache| {
            let mut cache = cache.try_borrow_mut().ok()?;
            if cache.is_empty() {
                refill(&mut cache);
            }
            cache.pop()
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(FRESH_CAPACITY))
}

/// Moves a batch of buffers from the shared pool to this thread's cache.
/// The pool's length is mirrored in an atomic, so that an empty pool costs
/// a load, not the shared lock.
#[cold]
#[inline(never)]
fn refill(cache: &mut Vec<Vec<RawSpan>>) {
    if POOLED.load(Ordering::Relaxed) > 0 {
        let mut pool = crate::util::lock(&POOL);
        let keep = pool.buffers.len().saturating_sub(REFILL);
        pool.capacity -= pool.buffers[keep..].iter().map(Vec::capacity).sum::<usize>();
        cache.extend(pool.buffers.drain(keep..));
        POOLED.store(pool.buffers.len(), Ordering::Relaxed);
    }
}

/// Keeps an emptied buffer on this thread for its next line, and the
/// property lists of its spans for their next properties.
pub(crate) fn give_back_locally(mut buffer: Vec<RawSpan>) {
    // One pass: each span dropped as its list is taken.
    for span in buffer.drain(..) {
        if let Some(list) = span.properties {
            property_lists::give_back_locally(list);
        }
    }
    if !usual_size(buffer.capacity()) {
        return;
    }
    let _ = CACHE.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            if cache.len() < REFILL {
                cache.push(buffer);
            }
        }
    });
}

/// Returns emptied buffers (from the collector thread) to the shared pool.
pub(crate) fn recycle(buffers: &mut Vec<Vec<RawSpan>>) {
    if buffers.is_empty() {
        return;
    }
    let mut pool = crate::util::lock(&POOL);
    // Sorted out where they lie, then added in one copy, not pushed one by
    // one into lines the traced threads last read
    // (PERFORMANCE.md, "Recycled span buffers").
    let mut pooled = pool.capacity;
    buffers.retain_mut(|buffer| {
        let capacity = buffer.capacity();
        let keep = worth_keeping(capacity, pooled);
        if keep {
            buffer.clear();
            pooled += capacity;
        }
        keep
    });
    pool.capacity = pooled;
    pool.buffers.append(buffers);
    POOLED.store(pool.buffers.len(), Ordering::Relaxed);
}

/// Whether a buffer of `capacity` goes to a pool holding `pooled` slots: one
/// of a usual size, within the pool's bound.
fn worth_keeping(capacity: usize, pooled: usize) -> bool {
    usual_size(capacity) && pooled + capacity <= POOL_CAPACITY
}

/// Whether a buffer is worth keeping at all: not an unallocated one (handing
/// it out would save nothing), nor one larger than a typical line needs.
fn usual_size(capacity: usize) -> bool {
    (1..=MAX_KEPT_CAPACITY).contains(&capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_only_allocated_buffers_of_a_usual_size_within_its_bound() {
        assert!(worth_keeping(FRESH_CAPACITY, 0));
        assert!(worth_keeping(MAX_KEPT_CAPACITY, POOL_CAPACITY - MAX_KEPT_CAPACITY));
        assert!(!worth_keeping(0, 0));
        assert!(!worth_keeping(MAX_KEPT_CAPACITY + 1, 0));
        assert!(!worth_keeping(FRESH_CAPACITY, POOL_CAPACITY - FRESH_CAPACITY + 1));
    }
}
