//! aarch64's generic timer: the virtual counter `CNTVCT_EL0`, one for the
//! whole system (every core reads the same count: no per-core offsets), at
//! the frequency the firmware states in `CNTFRQ_EL0` (1 GHz from ARMv8.6;
//! before that the vendor's choice, often 1 to 50 MHz, i.e. a tick of tens
//! of nanoseconds: see [`super::coarse_counter_rule`]).
//!
//! **Ordering.** The architecture lets a read of the counter happen out of
//! order and speculatively, before instructions that precede it. The
//! ordered read puts an `ISB` before the `MRS`: the read is then taken after
//! every earlier instruction, the load that observed another thread's
//! reading included, so readings are causal across threads. The unordered
//! read is the `MRS` alone: cheaper, but it may be taken before preceding
//! instructions complete, so it is only for intervals on one thread.

use std::arch::asm;

use super::{Calibrated, Start};
use crate::clock::ClockSource;
use crate::machine::Counter;
use crate::monotonic;

pub(crate) const SOURCE: ClockSource = ClockSource::Cntvct;

/// The counter, shifted onto the tick line by `origin` (wrapping).
pub(crate) struct Hardware {
    origin: u64,
}

impl Counter for Hardware {
    #[inline(always)]
    fn read(&self) -> Option<u64> {
        Some(read_ordered().wrapping_add(self.origin))
    }

    #[inline(always)]
    fn read_unordered(&self) -> Option<u64> {
        Some(read_unordered().wrapping_add(self.origin))
    }

    fn shifted(self, delta: u64) -> Self {
        Hardware { origin: self.origin.wrapping_add(delta) }
    }
}

/// `ISB; MRS CNTVCT_EL0`.
#[inline(always)]
fn read_ordered() -> u64 {
    let ticks: u64;
    // SAFETY: Linux lets EL0 read CNTVCT_EL0 (CNTKCTL_EL1.EL0VCTEN, which its
    // vDSO relies on; where an erratum makes the kernel trap the read, it
    // emulates it). ISB and MRS touch no memory and no stack.
    // Not `nomem`: the compiler must not move the read before earlier
    // memory accesses either.
    unsafe { asm!("isb", "mrs {}, cntvct_el0", out(reg) ticks, options(nostack, preserves_flags)) };
    ticks
}

/// `MRS CNTVCT_EL0`, unordered.
#[inline(always)]
fn read_unordered() -> u64 {
    let ticks: u64;
    // SAFETY: as in `read_ordered`.
    unsafe { asm!("mrs {}, cntvct_el0", out(reg) ticks, options(nomem, nostack, preserves_flags)) };
    ticks
}

/// `CNTFRQ_EL0`: the counter's frequency in Hz.
fn frequency() -> u64 {
    let hz: u64;
    // SAFETY: CNTFRQ_EL0 is readable at EL0 whenever CNTVCT_EL0 is.
    unsafe { asm!("mrs {}, cntfrq_el0", out(reg) hz, options(nomem, nostack, preserves_flags)) };
    hz
}

pub(crate) fn detect() -> Result<Start, String> {
    let hz = frequency();
    if !(100_000..=10_000_000_000).contains(&hz) {
        return Err(format!("CNTFRQ_EL0 states an implausible {hz} Hz"));
    }
    let tick_nanos = 1e9 / hz as f64;
    let clocksource = super::kernel_clocksource();
    super::coarse_counter_rule(tick_nanos, monotonic::precise_resolution_nanos(), clocksource.as_deref())?;
    Ok(Start::Ready { counter: Hardware { origin: 0 }, ticks_per_nano: hz as f64 / 1e9 })
}

/// Never called: the rate is known at once.
pub(crate) fn calibrate() -> Result<Calibrated, String> {
    Err("the aarch64 counter needs no calibration".into())
}
