//! Recycled span buffers. A line's `Vec<RawSpan>` is filled on a traced
//! thread and emptied on the collector thread; instead of freeing it there
//! (a cross-thread free, which contends on the allocator's locks with the
//! thread that allocates the next one), the collector returns emptied
//! buffers to a shared pool, and traced threads take them back in batches.

use std::cell::RefCell;
use std::sync::Mutex;

use crate::local::raw_span::RawSpan;

/// Buffers kept in the shared pool; more are freed. With
/// [`MAX_KEPT_CAPACITY`], the pool holds at most 16 MiB.
const POOL_SIZE: usize = 256;
/// Buffers a thread takes from the pool at once, so the pool's lock is
/// taken once per this many lines.
const REFILL: usize = 32;
/// Buffers with more capacity than this are freed rather than kept.
const MAX_KEPT_CAPACITY: usize = 1024;

static POOL: Mutex<Vec<Vec<RawSpan>>> = Mutex::new(Vec::new());

thread_local! {
    static CACHE: RefCell<Vec<Vec<RawSpan>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer, recycled when one is available.
pub(crate) fn take() -> Vec<RawSpan> {
    CACHE
        .try_with(|cache| {
            let mut cache = cache.try_borrow_mut().ok()?;
            if cache.is_empty() {
                let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
                let keep = pool.len().saturating_sub(REFILL);
                cache.extend(pool.drain(keep..));
            }
            cache.pop()
        })
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps an emptied buffer on this thread for its next line.
pub(crate) fn give_back_locally(mut buffer: Vec<RawSpan>) {
    buffer.clear();
    let _ = CACHE.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            if cache.len() < REFILL && buffer.capacity() <= MAX_KEPT_CAPACITY {
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
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    for mut buffer in buffers.drain(..) {
        if pool.len() >= POOL_SIZE {
            break;
        }
        if buffer.capacity() <= MAX_KEPT_CAPACITY {
            buffer.clear();
            pool.push(buffer);
        }
    }
}
