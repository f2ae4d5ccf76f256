//! What became of recently finished traces, so that their late parts
//! follow them, and how long the collector waits for a root.

use std::collections::HashMap;
use std::time::{Duration, Instant as StdInstant};

use crate::data::id::ID_BLOCK;
use crate::util::id_hasher::BuildIdHasher;

/// Spans of a trace whose root has not finished are reported anyway after
/// this long (the root was leaked, or lives on a thread that exited), or
/// after the slow-trace threshold if that is longer.
pub(super) const OPEN_TRACE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a finished trace's fate is remembered: as long as an open trace
/// is kept, so that a late child follows its root's fate.
const FATE_MEMORY: Duration = OPEN_TRACE_TIMEOUT;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Fate {
    Reported,
    Discarded,
    /// The root was dropped on its way here: the rest is counted as dropped.
    RootDropped,
}

/// The fates of recently finished traces, so that children finishing after
/// their root follow it. Collect ids are handed out in per-thread blocks of
/// [`ID_BLOCK`] consecutive ids, so fates are kept as two bits per id in one
/// small bitmap per block (1 KiB), and a block untouched for
/// [`FATE_MEMORY`] is forgotten: exact for that long, whatever the rate,
/// in memory proportional to the blocks in use. A late span whose trace
/// was forgotten is kept as an open trace and reported after the open-trace
/// timeout.
pub(super) struct RecentFates {
    blocks: HashMap<u64, FateBlock, BuildIdHasher>,
    /// The block last written, kept out of `blocks`: consecutive traces of
    /// a thread fall in the same block, so most updates skip the map.
    current: Option<(u64, FateBlock)>,
}

struct FateBlock {
    /// Two bits per id: 0 unknown, then [`Fate`] as 1, 2, 3.
    bits: Box<[u64]>,
    touched: StdInstant,
}

impl RecentFates {
    pub(super) fn new() -> RecentFates {
        RecentFates { blocks: HashMap::default(), current: None }
    }

    fn locate(collect_id: u64) -> (u64, usize, u32) {
        let offset = (collect_id % ID_BLOCK) as usize;
        (collect_id / ID_BLOCK, offset / 32, (offset % 32) as u32 * 2)
    }

    pub(super) fn insert(&mut self, collect_id: u64, fate: Fate, now: StdInstant) {
        let (block, word, shift) = Self::locate(collect_id);
        let current = match &mut self.current {
            Some((id, current)) if *id == block => current,
            other => {
                if let Some((id, previous)) = other.take() {
                    self.blocks.insert(id, previous);
                }
                let taken = self.blocks.remove(&block).unwrap_or_else(|| FateBlock {
                    bits: vec![0; ID_BLOCK as usize / 32].into_boxed_slice(),
                    touched: now,
                });
                &mut other.insert((block, taken)).1
            }
        };
        let code = match fate {
            Fate::Reported => 1,
            Fate::Discarded => 2,
            Fate::RootDropped => 3,
        };
        current.bits[word] = (current.bits[word] & !(3 << shift)) | (code << shift);
        current.touched = now;
    }

    pub(super) fn get(&self, collect_id: u64) -> Option<Fate> {
        let (block, word, shift) = Self::locate(collect_id);
        let bits = match &self.current {
            Some((id, current)) if *id == block => &current.bits,
            _ => &self.blocks.get(&block)?.bits,
        };
        match (bits[word] >> shift) & 3 {
            1 => Some(Fate::Reported),
            2 => Some(Fate::Discarded),
            3 => Some(Fate::RootDropped),
            _ => None,
        }
    }

    pub(super) fn forget_older_than(&mut self, now: StdInstant) {
        let fresh = |block: &FateBlock| now.duration_since(block.touched) < FATE_MEMORY;
        self.blocks.retain(|_, block| fresh(block));
        self.current = self.current.take().filter(|(_, block)| fresh(block));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fates_are_kept_across_blocks_and_forgotten_when_stale() {
        let start = StdInstant::now();
        let mut fates = RecentFates::new();
        // Two threads' blocks written in turn: each switch parks the
        // current block in the map and takes the other out.
        let (a, b) = (ID_BLOCK + 5, 3 * ID_BLOCK + 7);
        fates.insert(a, Fate::Reported, start);
        fates.insert(b, Fate::Discarded, start);
        fates.insert(a + 1, Fate::RootDropped, start);
        assert_eq!(fates.get(a), Some(Fate::Reported));
        assert_eq!(fates.get(a + 1), Some(Fate::RootDropped));
        assert_eq!(fates.get(b), Some(Fate::Discarded));
        assert_eq!(fates.get(b + 1), None);
        assert_eq!(fates.get(2 * ID_BLOCK), None);
        // Block `b` refreshed later than `a`: only `a` is forgotten.
        let later = start + FATE_MEMORY / 2;
        fates.insert(b + 2, Fate::Reported, later);
        fates.forget_older_than(start + FATE_MEMORY);
        assert_eq!((fates.get(a), fates.get(b)), (None, Some(Fate::Discarded)));
        fates.forget_older_than(later + FATE_MEMORY);
        assert_eq!(fates.get(b), None);
    }
}
