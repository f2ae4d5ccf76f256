//! Asking for memory before it is read: where this crate reads lines that
//! another core wrote, or that it last touched long ago (a batch's spans on
//! the collector, a recycled list, the flight recorder's oldest parts), it
//! asks for them ahead so that the misses overlap each other and the work.

/// Asks for the cache line `at` is in. A hint only: it never faults and
/// changes nothing, whatever the address (a dangling one included).
#[inline(always)]
pub(crate) fn line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)] // a safe function in newer compilers
    // SAFETY: `_mm_prefetch` is a hint: it never faults, reads nothing the
    // program sees and changes no program state, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Asks for the lines of the first `max` items of `items`.
#[inline]
pub(crate) fn items<T>(items: &[T], max: usize) {
    for item in items.iter().take(max) {
        line(item);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_hint_on_any_address_changes_nothing() {
        let values = vec![1u64, 2, 3];
        super::items(&values, 8);
        super::line(std::ptr::null::<u64>());
        super::line(std::ptr::dangling::<u64>());
        assert_eq!(values, [1, 2, 3]);
    }
}
