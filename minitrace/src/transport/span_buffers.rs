//! Recycled span buffers. A line's `Vec<RawSpan>` is filled on a traced
//! thread and emptied on the collector thread, which returns it to a shared
//! pool, not to the allocator from the wrong thread; traced threads take
//! them back in batches (PERFORMANCE.md, "Recycled span buffers").

use std::cell::RefCell;

use crate::data::raw_span::RawSpan;
use crate::transport::property_lists;
use crate::util::pool::{SharedPool, Weighed};

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

static POOL: SharedPool<Vec<RawSpan>> = SharedPool::new(POOL_CAPACITY);

/// A buffer counts for its span slots.
impl Weighed for Vec<RawSpan> {
    fn weight(&self) -> usize {
        self.capacity()
    }

    fn empty(&mut self) {
        self.clear();
    }
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
                POOL.refill(&mut cache, REFILL);
            }
            cache.pop()
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(FRESH_CAPACITY))
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

/// Returns emptied buffers (from the collector thread) to the shared pool;
/// those of an unusual size, or past its bound, are freed. `buffers` is
/// left empty, its capacity kept.
pub(crate) fn recycle(buffers: &mut Vec<Vec<RawSpan>>) {
    recycle_into(&POOL, buffers);
}

/// [`recycle`] into `pool`.
fn recycle_into(pool: &SharedPool<Vec<RawSpan>>, buffers: &mut Vec<Vec<RawSpan>>) {
    pool.put(buffers, usual_size);
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
    fn only_allocated_buffers_of_a_usual_size_are_kept() {
        assert!(usual_size(FRESH_CAPACITY));
        assert!(usual_size(MAX_KEPT_CAPACITY));
        assert!(!usual_size(0));
        assert!(!usual_size(MAX_KEPT_CAPACITY + 1));
    }

    #[test]
    fn recycling_pools_usual_buffers_emptied_and_frees_the_others() {
        let pool = SharedPool::new(POOL_CAPACITY);
        use crate::data::id::SpanId;
        let mut usual = Vec::with_capacity(FRESH_CAPACITY);
        usual.push(RawSpan::begin(SpanId(1), SpanId(0), "step".into(), minstant::Instant::now()));
        let mut buffers = vec![usual, Vec::new(), Vec::with_capacity(MAX_KEPT_CAPACITY + 1)];
        recycle_into(&pool, &mut buffers);
        assert!(buffers.is_empty());
        let mut taken = Vec::new();
        pool.refill(&mut taken, REFILL);
        assert_eq!(taken.len(), 1, "only the usual buffer is pooled");
        assert!(taken[0].is_empty());
        assert_eq!(taken[0].capacity(), FRESH_CAPACITY);
    }
}
