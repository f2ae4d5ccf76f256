//! The TSC source: [`counter`] reads it, [`calibration`] decides whether it
//! is safe and measures its rate and per-core offsets, and [`TscClock`]
//! combines the two into corrected readings.

mod calibration;
mod counter;

use crate::monotonic;

/// Marks a core whose offset was not measured.
const UNKNOWN: i64 = i64::MIN;

pub(crate) struct TscClock {
    /// What to subtract from each core's counter, indexed by cpu number.
    offsets: Box<[i64]>,
    /// Every online core's counter was measured and none needs an offset.
    in_step: bool,
    ticks_per_nano: f64,
    /// A simultaneous (ticks, CLOCK_MONOTONIC) pair from calibration.
    base_ticks: u64,
    base_mono_nanos: u64,
}

impl TscClock {
    /// Checks and calibrates the TSC; `Err` says why it must not be used.
    pub(crate) fn calibrate() -> Result<TscClock, String> {
        let calibration = calibration::calibrate()?;
        let len = calibration.offsets.iter().map(|&(cpu, _)| cpu + 1).max().unwrap_or(0);
        let mut offsets = vec![UNKNOWN; len].into_boxed_slice();
        for &(cpu, offset) in &calibration.offsets {
            offsets[cpu] = offset;
        }
        // Every online cpu calibrated, all in step: a plain RDTSC on any core
        // is then on the common time line.
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let in_step = calibration.offsets.iter().all(|&(_, offset)| offset == 0)
            && usize::try_from(online).is_ok_and(|online| online == calibration.offsets.len());
        Ok(TscClock {
            offsets,
            in_step,
            ticks_per_nano: calibration.ticks_per_nano,
            base_ticks: calibration.base.ticks,
            base_mono_nanos: calibration.base.mono_nanos,
        })
    }

    pub(crate) fn ticks_per_nano(&self) -> f64 {
        self.ticks_per_nano
    }

    pub(crate) fn calibrated_cpus(&self) -> Vec<usize> {
        (0..self.offsets.len()).filter(|&cpu| self.offsets[cpu] != UNKNOWN).collect()
    }

    /// One ordered read, one table lookup, one subtraction.
    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        let (counter, cpu) = counter::read();
        match self.offsets.get(cpu) {
            Some(&offset) if offset != UNKNOWN => counter.wrapping_sub(offset as u64),
            _ => self.now_on_unknown_cpu(),
        }
    }

    /// A plain `RDTSC`: no wait for earlier loads, and no core number, so it
    /// is only used when every core's counter is in step.
    #[inline(always)]
    pub(crate) fn now_unordered(&self) -> u64 {
        if self.in_step {
            counter::read_unordered()
        } else {
            self.now()
        }
    }

    /// A core that came online after calibration, or that the calibrating
    /// thread was not allowed on: its offset is unknown, so the OS clock is
    /// read and mapped onto the tick time line instead of trusting the counter.
    #[cold]
    #[inline(never)]
    fn now_on_unknown_cpu(&self) -> u64 {
        let since_base = i128::from(monotonic::precise_nanos()) - i128::from(self.base_mono_nanos);
        let ticks = i128::from(self.base_ticks) + (since_base as f64 * self.ticks_per_nano) as i128;
        ticks.clamp(0, i128::from(u64::MAX)) as u64
    }
}
