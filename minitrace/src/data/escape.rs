//! Which traces have parts that left their root's thread: a thread-safe
//! child, a batch sent to the collector, a local parent set on another
//! thread. A root ending on its own thread whose trace did not escape can be
//! thrown away there, without a message; one that escaped must tell the
//! collector its fate, which then holds or will hold those parts.
//!
//! One bit per collect id, in a table indexed by the id's low 20 bits: a
//! thread's block of ids maps to 64 words of its own, cleared when it takes
//! the block. Two live roots 2²⁰ ids apart share a bit, which can only make
//! one look escaped when it is not, never the reverse: it then sends the
//! message it could have saved.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::data::id::ID_BLOCK;
use crate::data::target::Targets;

const WORDS: usize = 1 << 14;
static ESCAPED: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
const _: () = assert!(ID_BLOCK % 64 == 0 && WORDS % (ID_BLOCK as usize / 64) == 0);

#[inline]
fn place(collect_id: u64) -> (&'static AtomicU64, u64) {
    (&ESCAPED[(collect_id >> 6) as usize % WORDS], 1 << (collect_id & 63))
}

/// Notes that a part of `collect_id`'s trace may reach the collector. The
/// read first spares the read-modify-write when the bit is already set.
#[inline]
pub(crate) fn mark(collect_id: u64) {
    let (word, bit) = place(collect_id);
    if word.load(Ordering::Relaxed) & bit == 0 {
        word.fetch_or(bit, Ordering::Relaxed);
    }
}

/// [`mark`] for every target.
#[inline]
pub(crate) fn mark_targets(targets: &Targets) {
    for target in targets.as_slice() {
        mark(target.collect_id);
    }
}

/// Whether a part of `collect_id`'s trace may have reached the collector.
/// Whatever marked it happened before its root's end, as the root was
/// borrowed to make that part.
#[inline]
pub(crate) fn is_marked(collect_id: u64) -> bool {
    let (word, bit) = place(collect_id);
    word.load(Ordering::Relaxed) & bit != 0
}

/// Clears the bits of the block starting at `first` (id 0's block starts
/// at 1), before any of its ids is handed out.
pub(crate) fn clear_block(first: u64) {
    let start = first - first % ID_BLOCK;
    for id in (start..start + ID_BLOCK).step_by(64) {
        place(id).0.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_stays_until_its_block_is_taken_again() {
        // A block far from the ones tests' threads take.
        let first = 1000 * ID_BLOCK;
        clear_block(first);
        assert!(!is_marked(first + 5));
        mark(first + 5);
        assert!(is_marked(first + 5));
        assert!(!is_marked(first + 4) && !is_marked(first + 6));
        // The same bit, 2^20 ids on: a shared bit only ever errs towards "marked".
        assert!(is_marked(first + 5 + (WORDS as u64) * 64));
        clear_block(first);
        assert!(!is_marked(first + 5));
    }
}
