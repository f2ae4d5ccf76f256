//! x86's TSC: [`counter`] reads it, [`calibration`] decides whether it is
//! safe and measures its rate and per-core offsets, and [`Hardware`]
//! combines the two into corrected readings.

mod calibration;
mod counter;

use std::time::{Duration, Instant as StdInstant};

use super::{Calibrated, Start};
use crate::clock::ClockSource;
use crate::machine::Counter;
use crate::monotonic;

pub(crate) const SOURCE: ClockSource = ClockSource::Tsc;

/// Marks a core whose offset was not measured.
const UNKNOWN: i64 = i64::MIN;

/// The provisional rate is measured over this long before the first
/// reading: ±0.1 % at worst (two pairings of under 100 ns each), refined by
/// the calibration in the background a few milliseconds later.
const PROVISIONAL_WINDOW: Duration = Duration::from_micros(200);

pub(crate) struct Hardware {
    /// What to subtract from each core's counter, indexed by cpu number.
    offsets: Box<[i64]>,
    /// Every online core's counter was measured and all need the same
    /// offset, `common`: a plain RDTSC on any core is then on the line.
    in_step: bool,
    common: i64,
}

impl Counter for Hardware {
    /// One ordered read, one table lookup, one subtraction.
    #[inline(always)]
    fn read(&self) -> Option<u64> {
        let (counter, cpu) = counter::read();
        match self.offsets.get(cpu) {
            Some(&offset) if offset != UNKNOWN => Some(counter.wrapping_sub(offset as u64)),
            _ => None,
        }
    }

    /// A plain `RDTSC`: no wait for earlier loads, and no core number, so it
    /// is only used when every core's counter is in step.
    #[inline(always)]
    fn read_unordered(&self) -> Option<u64> {
        if self.in_step {
            Some(counter::read_unordered().wrapping_sub(self.common as u64))
        } else {
            self.read()
        }
    }

    fn shifted(self, delta: u64) -> Self {
        let shift = |offset: i64| match offset {
            UNKNOWN => UNKNOWN,
            // A tick off rather than the marker, in the 2^-64 case.
            offset => match offset.wrapping_sub(delta as i64) {
                UNKNOWN => UNKNOWN + 1,
                shifted => shifted,
            },
        };
        Hardware {
            offsets: self.offsets.iter().map(|&offset| shift(offset)).collect(),
            in_step: self.in_step,
            common: shift(self.common),
        }
    }
}

/// What CPUID says, in microseconds: an invariant TSC and `RDTSCP`. The
/// rate is then measured provisionally; [`calibrate`] checks the rest.
pub(crate) fn detect() -> Result<Start, String> {
    if !counter::invariant_tsc() {
        return Err("cpuid reports no invariant TSC".into());
    }
    if !counter::rdtscp_supported() {
        return Err("cpuid reports no RDTSCP".into());
    }
    let (ticks, mono) = pair();
    let window_start = StdInstant::now();
    while window_start.elapsed() < PROVISIONAL_WINDOW {
        std::hint::spin_loop();
    }
    let (end_ticks, end_mono) = pair();
    let ticks_per_nano = end_ticks.wrapping_sub(ticks) as f64 / end_mono.saturating_sub(mono).max(1) as f64;
    if !(0.1..=100.0).contains(&ticks_per_nano) {
        return Err(format!("implausible TSC rate {ticks_per_nano} ticks/ns"));
    }
    Ok(Start::Calibrate { ticks, mono, ticks_per_nano })
}

/// The tightest of a few (TSC, CLOCK_MONOTONIC) pairings on one core.
fn pair() -> (u64, u64) {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..8 {
        let (before, cpu) = counter::read();
        let mono = monotonic::precise_nanos();
        let (after, cpu_after) = counter::read();
        if cpu != cpu_after || after < before {
            continue;
        }
        if best.map_or(true, |(width, ..)| after - before < width) {
            best = Some((after - before, before + (after - before) / 2, mono));
        }
    }
    best.map_or_else(|| (counter::read().0, monotonic::precise_nanos()), |(_, ticks, mono)| (ticks, mono))
}

/// Checks and calibrates the TSC; `Err` says why it must not be used.
pub(crate) fn calibrate() -> Result<Calibrated, String> {
    let calibration = calibration::calibrate()?;
    let len = calibration.offsets.iter().map(|&(cpu, _)| cpu + 1).max().unwrap_or(0);
    let mut offsets = vec![UNKNOWN; len].into_boxed_slice();
    for &(cpu, offset) in &calibration.offsets {
        offsets[cpu] = offset;
    }
    // Every online cpu calibrated, all in step.
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let in_step = calibration.offsets.iter().all(|&(_, offset)| offset == 0)
        && usize::try_from(online).is_ok_and(|online| online == calibration.offsets.len());
    let cpus = (0..offsets.len()).filter(|&cpu| offsets[cpu] != UNKNOWN).collect();
    Ok(Calibrated {
        counter: Hardware { offsets, in_step, common: 0 },
        ticks_per_nano: calibration.ticks_per_nano,
        cpus,
    })
}
