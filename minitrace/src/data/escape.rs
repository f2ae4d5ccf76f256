//! Which traces have parts that left their root's thread: a thread-safe
//! child, a batch sent to the collector, a local parent set on another
//! thread. A root ending on its own thread whose trace did not escape can be
//! thrown away there, without a message; one that escaped must tell the
//! collector its fate, which then holds or will hold those parts.
//!
//! One bit per collect id, in a table indexed by the id's low 20 bits: a
//! thread's block of ids maps to 64 words, cleared when it takes the block,
//! which also becomes their owner. A block 2²⁰ ids on may take the same
//! words while an older one is still in use (many threads, or a thread
//! slow to use up its block): the older block's roots then find another
//! owner and count as escaped. Sharing the table can only make a root look
//! escaped when it is not, never the reverse: it then sends the message it
//! could have saved.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::data::id::ID_BLOCK;
use crate::data::target::Targets;

const WORDS: usize = 1 << 14;
static ESCAPED: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
const _: () = assert!(ID_BLOCK % 64 == 0 && WORDS % (ID_BLOCK as usize / 64) == 0);
/// The words of one block.
const BLOCK_WORDS: usize = ID_BLOCK as usize / 64;
/// Per block's worth of words: the block that last cleared them.
static OWNER: [AtomicU64; WORDS / BLOCK_WORDS] = [const { AtomicU64::new(u64::MAX) }; WORDS / BLOCK_WORDS];

fn owner(collect_id: u64) -> &'static AtomicU64 {
    &OWNER[(collect_id >> 6) as usize % WORDS / BLOCK_WORDS]
}

fn block_of(collect_id: u64) -> u64 {
    collect_id - collect_id % ID_BLOCK
}

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
    let marked = word.load(Ordering::Relaxed) & bit != 0;
    // A word read as cleared by a newer block is read with that block's
    // ownership (see `clear_block`): then the root is not its words' owner.
    fence(Ordering::Acquire);
    marked || owner(collect_id).load(Ordering::Relaxed) != block_of(collect_id)
}

/// Clears the bits of the block starting at `first` (id 0's block starts
/// at 1), before any of its ids is handed out, and makes it their owner.
pub(crate) fn clear_block(first: u64) {
    let start = block_of(first);
    owner(start).store(start, Ordering::Relaxed);
    // The new owner is seen by whoever sees the words cleared.
    fence(Ordering::Release);
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
        let later = first + (WORDS as u64) * 64;
        assert!(is_marked(later + 5));
        clear_block(first);
        assert!(!is_marked(first + 5));
    }

    #[test]
    fn a_block_whose_words_were_taken_over_counts_as_escaped() {
        // A block still in use when one 2^20 ids on clears the same words:
        // its marks are gone, so its roots must count as escaped.
        let older = 2000 * ID_BLOCK;
        let newer = older + (WORDS as u64) * 64;
        clear_block(older);
        mark(older + 7);
        assert!(!is_marked(older + 8));
        clear_block(newer);
        assert!(!is_marked(newer + 7), "the newer block starts clean");
        assert!(is_marked(older + 7) && is_marked(older + 8), "the older block's roots count as escaped");
    }
}
