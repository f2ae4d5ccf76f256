//! Collect ids: which of the collector's trace buffers a trace's spans go
//! to. Each thread takes them from a block of its own, so that starting a
//! root touches no shared cache line.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::data::escape;
use crate::data::id::ID_BLOCK;

// Blocks start at multiples of `ID_BLOCK` (id 0 stays unused), so that each
// lines up with one bitmap of the collector's fates.
static NEXT_ID_BLOCK: AtomicU64 = AtomicU64::new(ID_BLOCK);
/// Collect ids stay below this, so that a `Span` keeps one in 4 bytes. They
/// wrap after 2³² traces or 2²⁰ blocks (as many threads starting traces),
/// far longer than the collector keeps an open trace or a trace's fate
/// (10 s).
const COLLECT_ID_LIMIT: u64 = 1 << 32;

thread_local! {
    static NEXT_COLLECT_ID: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// An id for a new trace's buffer in the collector, unique among the traces
/// it holds or remembers, taken from a per-thread block so that starting a
/// root touches no shared cache line.
pub(crate) fn next_collect_id() -> u64 {
    NEXT_COLLECT_ID.with(|cell| {
        let (mut next, end) = cell.get();
        if next == end {
            let (first, end) = block_ids(NEXT_ID_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed));
            escape::clear_block(first);
            next = first;
            cell.set((next + 1, end));
        } else {
            cell.set((next + 1, end));
        }
        next
    })
}

/// Whether `collect_id` comes from the block this thread takes ids from
/// now: then the root that holds it was started on this thread. Exact
/// until blocks wrap (see [`COLLECT_ID_LIMIT`]): a thread keeps its block
/// while it lives, so after 2²⁰ blocks a new thread may be handed the block
/// of one still alive, and a root of one ended on the other would take the
/// cheaper read, early by at most what that CPU had in flight.
#[inline]
pub(crate) fn is_from_this_thread(collect_id: u64) -> bool {
    NEXT_COLLECT_ID.with(|cell| {
        let (_, end) = cell.get();
        end != 0 && (end - ID_BLOCK..end).contains(&collect_id)
    })
}

/// The ids of the block whose unwrapped start is `start`: the first and
/// one past the last, below `COLLECT_ID_LIMIT`, with id 0 left out.
fn block_ids(start: u64) -> (u64, u64) {
    let block = start % COLLECT_ID_LIMIT;
    (block.max(1), block + ID_BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_ids_wrap_below_the_limit_and_never_are_0() {
        assert_eq!(block_ids(ID_BLOCK), (ID_BLOCK, 2 * ID_BLOCK));
        // The last block before the wrap ends at the limit; the next one is
        // the first block again, without id 0.
        assert_eq!(block_ids(COLLECT_ID_LIMIT - ID_BLOCK).1, COLLECT_ID_LIMIT);
        assert_eq!(block_ids(COLLECT_ID_LIMIT), (1, ID_BLOCK));
        assert_eq!(block_ids(3 * COLLECT_ID_LIMIT + 2 * ID_BLOCK), (2 * ID_BLOCK, 3 * ID_BLOCK));
    }

    #[test]
    fn a_collect_id_is_known_as_its_own_by_the_thread_that_took_it() {
        let here = next_collect_id();
        assert!(is_from_this_thread(here));
        let (there, here_seen_there) =
            std::thread::spawn(move || (next_collect_id(), is_from_this_thread(here))).join().unwrap();
        assert!(!here_seen_there);
        assert!(!is_from_this_thread(there));
        assert!(!is_from_this_thread(0));
        // Once the thread has moved on to its next block, the id is no
        // longer known as its own: its root ends on the ordered read.
        for _ in 0..ID_BLOCK {
            next_collect_id();
        }
        assert!(!is_from_this_thread(here));
    }
}
