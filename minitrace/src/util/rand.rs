//! A per-thread wyrand generator for span and trace ids: one add and one
//! multiply per id, no locks, no system calls after the seed.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

/// Each thread starts at a different point: std's per-process random keys
/// hashed with the thread's id and the time.
fn seed() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    std::thread::current().id().hash(&mut hasher);
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos());
    hasher.finish()
}

#[inline]
pub(crate) fn next_u64() -> u64 {
    STATE.with(|state| {
        let next = state.get().wrapping_add(0xa076_1d64_78bd_642f);
        state.set(next);
        let product = u128::from(next) * u128::from(next ^ 0xe703_7ed1_a0b4_28db);
        (product as u64) ^ ((product >> 64) as u64)
    })
}

#[inline]
pub(crate) fn next_nonzero_u64() -> u64 {
    loop {
        let value = next_u64();
        if value != 0 {
            return value;
        }
    }
}
