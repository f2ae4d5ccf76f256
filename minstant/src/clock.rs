//! The process-wide clock: which source is in use, and the conversion between
//! its ticks and nanoseconds. Decided once, on first use.

use std::sync::OnceLock;
use std::time::{Duration, Instant as StdInstant};

use crate::monotonic;
use crate::tsc::TscClock;

/// The time source behind [`Instant::now`](crate::Instant::now).
///
/// ```
/// use minstant::ClockSource;
///
/// match minstant::clock_info().source {
///     ClockSource::Tsc => println!("reading the CPU's time-stamp counter"),
///     ClockSource::Monotonic => println!("reading CLOCK_MONOTONIC"),
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSource {
    /// The CPU's time-stamp counter, read with `RDTSCP` and corrected for
    /// per-core offsets.
    Tsc,
    /// The operating system's monotonic clock (`CLOCK_MONOTONIC` on unix).
    Monotonic,
}

/// What the clock decided at start-up, for logs and health checks.
///
/// ```
/// let info = minstant::clock_info();
/// println!("{:?} at {:.0} ticks/s", info.source, info.ticks_per_second);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClockInfo {
    /// The source in use.
    pub source: ClockSource,
    /// Ticks per second of [`Instant`](crate::Instant)'s internal counter:
    /// the calibrated TSC rate, or 1e9 for the OS clock.
    pub ticks_per_second: f64,
    /// The cores whose counter offsets were measured (empty for the OS clock).
    pub calibrated_cpus: Vec<usize>,
    /// Why the TSC is not used, when it is not.
    pub fallback_reason: Option<String>,
    /// Wall time that detection and calibration took.
    pub calibration_time: Duration,
}

pub(crate) struct Clock {
    /// `None` when the TSC is unsafe or unsupported here.
    tsc: Option<TscClock>,
    /// Nanoseconds per tick and ticks per nanosecond, as 64.64 fixed point:
    /// exact to a tick over the whole `u64` range.
    nanos_per_tick_q64: u128,
    ticks_per_nano_q64: u128,
    pub(crate) info: ClockInfo,
}

static CLOCK: OnceLock<Clock> = OnceLock::new();

/// The clock, detected and calibrated by the first caller.
#[inline]
pub(crate) fn clock() -> &'static Clock {
    CLOCK.get_or_init(Clock::detect)
}

impl Clock {
    /// The current reading, in ticks. This is the hot path.
    #[inline]
    pub(crate) fn now_ticks(&self) -> u64 {
        match &self.tsc {
            Some(tsc) => tsc.now(),
            None => monotonic::now_nanos(),
        }
    }

    /// A cheaper reading, ordered only within the calling thread.
    #[inline]
    pub(crate) fn now_ticks_unordered(&self) -> u64 {
        match &self.tsc {
            Some(tsc) => tsc.now_unordered(),
            None => monotonic::now_nanos(),
        }
    }

    #[inline]
    pub(crate) fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        const ONE: u128 = 1 << 64;
        match self.nanos_per_tick_q64 {
            // The OS clock: ticks are nanoseconds.
            ONE => ticks,
            // A tick shorter than a nanosecond (any TSC above 1 GHz).
            fraction @ 0..ONE => fraction_of(ticks, fraction as u64),
            scale => u128::from(ticks).checked_mul(scale).and_then(round_q64).unwrap_or(u64::MAX),
        }
    }

    /// The tick length as a 0.64 fixed-point fraction of a nanosecond, or 0
    /// where a tick is a nanosecond or longer.
    pub(crate) fn tick_fraction_q64(&self) -> u64 {
        u64::try_from(self.nanos_per_tick_q64).unwrap_or(0)
    }

    /// `None` when the duration does not fit in the tick counter.
    #[inline]
    pub(crate) fn duration_to_ticks(&self, duration: Duration) -> Option<u64> {
        round_q64(duration.as_nanos().checked_mul(self.ticks_per_nano_q64)?)
    }

    fn detect() -> Clock {
        let started = StdInstant::now();
        let (tsc, fallback_reason) = match TscClock::calibrate() {
            Ok(tsc) => (Some(tsc), None),
            Err(why) => (None, Some(why)),
        };
        let (source, ticks_per_nano, calibrated_cpus) = match &tsc {
            Some(tsc) => (ClockSource::Tsc, tsc.ticks_per_nano(), tsc.calibrated_cpus()),
            None => (ClockSource::Monotonic, 1.0, Vec::new()),
        };
        Clock {
            tsc,
            nanos_per_tick_q64: to_q64(1.0 / ticks_per_nano),
            ticks_per_nano_q64: to_q64(ticks_per_nano),
            info: ClockInfo {
                source,
                ticks_per_second: ticks_per_nano * 1e9,
                calibrated_cpus,
                fallback_reason,
                calibration_time: started.elapsed(),
            },
        }
    }
}

/// `ticks` times a 0.64 fixed-point `fraction`, rounded: one 64×64-bit
/// multiply, which cannot overflow.
#[inline]
pub(crate) fn fraction_of(ticks: u64, fraction: u64) -> u64 {
    ((u128::from(ticks) * u128::from(fraction) + (1 << 63)) >> 64) as u64
}

/// Rounds a 64.64 fixed-point value to the nearest integer, if it fits.
/// Rounding (not truncating) both ways makes durations survive a round trip.
#[inline]
fn round_q64(value: u128) -> Option<u64> {
    u64::try_from(value.checked_add(1 << 63)? >> 64).ok()
}

fn to_q64(value: f64) -> u128 {
    // f64 carries 53 significant bits, so scaling by 2^64 is exact.
    (value * 2f64.powi(64)) as u128
}
