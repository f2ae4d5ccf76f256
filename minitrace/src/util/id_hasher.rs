//! A hasher for ids that are already well spread.

/// Collect ids are already well spread (sequential within per-thread
/// blocks), and span ids random or sequential from a random base, so hashing
/// them is one multiply instead of SipHash, as a lossy trace looks up every
/// record (PERFORMANCE.md, "The collector: filing").
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub(crate) type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;
