//! The workspace's own package (never published). It owns the top-level
//! `benches/`, `examples/` and `tests/`, which exercise the workspace crates
//! beside their peers from crates.io. This library holds what they share.

#![deny(missing_docs)]

/// A small CPU-bound workload of roughly `iterations` nanoseconds, that the
/// optimiser cannot remove: the "request" that examples and benches trace.
///
/// ```
/// let checksum = minitrace_suite::busy_work(1_000);
/// # let _ = checksum;
/// ```
pub fn busy_work(iterations: u64) -> u64 {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..iterations {
        state = std::hint::black_box(state.rotate_left(5) ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    state
}
