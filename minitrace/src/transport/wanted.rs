//! Traces asked for before their root ended here: a retrieval from another
//! process that came while this one still served its part. Each is kept
//! when its root ends (the traced thread's fate rule asks, see
//! [`gate::root_is_kept`](super::gate::root_is_kept)), until its deadline.
//!
//! The traced threads look only while some trace is wanted, and then with
//! one relaxed load of a 1 024-bit filter; the lock is taken only for a
//! root whose bit is set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::data::id::TraceId;
use crate::util::lock;

/// The most traces wanted at once; more are refused.
const MAX_WANTED: usize = 1 << 10;
const FILTER_WORDS: usize = 16;

static WANTED: Mutex<Vec<(TraceId, Instant)>> = Mutex::new(Vec::new());
/// A bit per wanted trace (by [`bit`]), rewritten under [`WANTED`]'s lock.
static FILTER: [AtomicU64; FILTER_WORDS] = [const { AtomicU64::new(0) }; FILTER_WORDS];

fn bit(trace_id: TraceId) -> (usize, u64) {
    // Both halves: a trace id's high half may be all zeros (64-bit ids).
    let mixed = ((trace_id.0 >> 64) as u64 ^ trace_id.0 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let index = (mixed >> 54) as usize; // 10 bits
    (index / 64, 1 << (index % 64))
}

/// Rewrites the filter from what is wanted (the lock held).
fn refilter(wanted: &[(TraceId, Instant)]) {
    let mut words = [0u64; FILTER_WORDS];
    for (trace_id, _) in wanted {
        let (word, mask) = bit(*trace_id);
        words[word] |= mask;
    }
    for (word, value) in FILTER.iter().zip(words) {
        word.store(value, Ordering::Relaxed);
    }
}

/// Wants `trace_id` for `within`; `false`: too many are wanted.
pub(crate) fn want(trace_id: TraceId, within: Duration) -> bool {
    let mut wanted = lock(&WANTED);
    let now = Instant::now();
    wanted.retain(|(_, deadline)| *deadline > now);
    let deadline = now + within;
    match wanted.iter().position(|(id, _)| *id == trace_id) {
        Some(at) => wanted[at].1 = wanted[at].1.max(deadline),
        None if wanted.len() >= MAX_WANTED => return false,
        None => wanted.push((trace_id, deadline)),
    }
    refilter(&wanted);
    true
}

/// Whether `trace_id` is wanted: a relaxed load, and the lock only when
/// its bit is set.
pub(crate) fn contains(trace_id: TraceId) -> bool {
    let (word, mask) = bit(trace_id);
    if FILTER[word].load(Ordering::Relaxed) & mask == 0 {
        return false;
    }
    let now = Instant::now();
    lock(&WANTED).iter().any(|(id, deadline)| *id == trace_id && *deadline > now)
}

/// Forgets `trace_id` (its trace was reported); whether any other trace is
/// still wanted.
pub(crate) fn remove(trace_id: TraceId) -> bool {
    let (word, mask) = bit(trace_id);
    let mut wanted = lock(&WANTED);
    if FILTER[word].load(Ordering::Relaxed) & mask != 0 || !wanted.is_empty() {
        let now = Instant::now();
        wanted.retain(|(id, deadline)| *id != trace_id && *deadline > now);
        refilter(&wanted);
    }
    !wanted.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wanted_trace_is_wanted_until_removed_and_others_are_not() {
        assert!(want(TraceId(0xabc), Duration::from_secs(60)));
        assert!(want(TraceId(0xabc << 64), Duration::from_secs(60)));
        assert!(!contains(TraceId(0xdef)));
        assert!(contains(TraceId(0xabc)) && contains(TraceId(0xabc)));
        assert!(remove(TraceId(0xabc)));
        assert!(!contains(TraceId(0xabc)));
        assert!(contains(TraceId(0xabc << 64)));
        assert!(!remove(TraceId(0xabc << 64)));
    }

    #[test]
    fn a_wanted_trace_is_forgotten_after_its_deadline() {
        assert!(want(TraceId(0x5eed), Duration::ZERO));
        assert!(!contains(TraceId(0x5eed)));
    }
}
