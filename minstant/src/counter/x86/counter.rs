//! The CPU's time-stamp counter, read with `RDTSCP`.
//!
//! `RDTSCP` waits until every earlier instruction has executed and every
//! earlier load is globally visible before it samples the counter. That is
//! what makes readings causal across threads: a reading taken after an
//! acquire-load of another thread's published reading cannot be sampled
//! before that load completed. A plain `RDTSC` may execute early and is not.
//!
//! The same instruction returns `IA32_TSC_AUX`, where Linux stores
//! `(numa_node << 12) | cpu`, so we learn which core's counter we read
//! without a second instruction.

#[cfg(target_arch = "x86")]
use core::arch::x86::{__cpuid, __rdtscp, _rdtsc};
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::{__cpuid, __rdtscp, _rdtsc};

/// The core number Linux keeps in the low 12 bits of `IA32_TSC_AUX`.
const CPU_MASK: u32 = 0xfff;

/// Reads `(counter, cpu)` in one ordered instruction.
///
/// Only call after [`rdtscp_supported`] returned true.
#[inline(always)]
pub(crate) fn read() -> (u64, usize) {
    let mut aux = 0u32;
    // SAFETY: the clock only selects this source after `rdtscp_supported()`
    // confirmed the instruction exists (CPUID 0x8000_0001 EDX bit 27), and
    // `aux` is a valid place for the instruction to write to.
    let tsc = unsafe { __rdtscp(&mut aux) };
    (tsc, (aux & CPU_MASK) as usize)
}

/// Reads the counter with a plain `RDTSC`, which may execute before earlier
/// instructions complete: cheaper, but not ordered with other threads.
#[inline(always)]
pub(crate) fn read_unordered() -> u64 {
    // SAFETY: RDTSC exists on every x86 CPU with a TSC, which the clock
    // checked (`constant_tsc` implies one) before selecting this source.
    unsafe { _rdtsc() }
}

/// Whether the TSC is invariant: constant rate, also in deep sleep (CPUID
/// 0x8000_0007 EDX bit 8: Linux's `constant_tsc` and `nonstop_tsc`).
pub(crate) fn invariant_tsc() -> bool {
    #[allow(unused_unsafe)]
    // SAFETY: as in `rdtscp_supported`; leaf 0x8000_0000 reports the highest
    // extended leaf before we ask for 0x8000_0007.
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
    }
}

/// Whether the CPU implements `RDTSCP`.
pub(crate) fn rdtscp_supported() -> bool {
    // `__cpuid` became a safe function in newer compilers than our minimum.
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86_64 CPU and on every x86 CPU that Rust
    // targets (i586 and later); leaf 0x8000_0000 reports the highest
    // extended leaf before we ask for 0x8000_0001.
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).edx & (1 << 27) != 0
    }
}
