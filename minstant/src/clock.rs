//! The process-wide clock: the public description of its decision
//! ([`ClockInfo`]), and the real platform that the state machine
//! ([`crate::machine`]) runs on: the CPU's counter, the OS clock, and the
//! background thread that calibrates and checks the counter.

use std::time::{Duration, Instant as StdInstant};

use crate::counter::{self, Start};
use crate::health;
use crate::machine::{Machine, Platform};
use crate::monotonic;

/// The time source behind [`Instant::now`](crate::Instant::now).
///
/// ```
/// use minstant::ClockSource;
///
/// match minstant::clock_info().source {
///     ClockSource::Tsc => println!("reading x86's time-stamp counter"),
///     ClockSource::Cntvct => println!("reading aarch64's virtual counter"),
///     ClockSource::Monotonic => println!("reading CLOCK_MONOTONIC"),
///     _ => println!("another source"),
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClockSource {
    /// The x86 CPU's time-stamp counter, read with `RDTSCP` and corrected
    /// for per-core offsets.
    Tsc,
    /// The aarch64 generic timer's virtual counter, `CNTVCT_EL0`, at the
    /// frequency in `CNTFRQ_EL0`.
    Cntvct,
    /// The operating system's monotonic clock (`CLOCK_MONOTONIC` on unix).
    Monotonic,
}

/// What the clock decided, for logs and health checks: the source in use
/// now, its rate and resolution, and why the counter is not used if it is
/// not. See also [`health`](crate::health) for what it did since.
///
/// ```
/// let info = minstant::clock_info();
/// println!(
///     "{:?} at {:.0} ticks/s, a reading every {:.1} ns",
///     info.source, info.ticks_per_second, info.resolution_nanos
/// );
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClockInfo {
    /// The source in use.
    pub source: ClockSource,
    /// Ticks per second of [`Instant`](crate::Instant)'s internal counter,
    /// as calibrated when the source was chosen (the health checks correct
    /// it since: [`Health::rate_corrections`](crate::Health::rate_corrections)):
    /// the counter's rate, or 1e9 for the OS clock mapped as it is.
    pub ticks_per_second: f64,
    /// The source's resolution in nanoseconds: the length of one tick of
    /// the counter (16 ns for a 62.5 MHz aarch64 counter, under 1 ns for a
    /// TSC), or the OS clock's as `clock_getres` reports it.
    pub resolution_nanos: f64,
    /// `CLOCK_MONOTONIC`'s resolution as `clock_getres` reports it, for
    /// comparison: a `resolution_nanos` above it means the counter is
    /// coarser than the OS clock claims to be (see the crate docs for the
    /// rule that still prefers the counter).
    pub os_clock_resolution_nanos: f64,
    /// The cores whose counter offsets were measured (x86's TSC; empty
    /// otherwise).
    pub calibrated_cpus: Vec<usize>,
    /// Why the counter is not used, when it is not.
    pub fallback_reason: Option<String>,
    /// Wall time from the first reading until the source was settled (the
    /// first reading itself does not wait for it).
    pub calibration_time: Duration,
}

/// The process's clock.
pub(crate) static CLOCK: Machine<Real> = Machine::new(Real);

/// The real platform: the CPU's counter and the OS clock.
pub(crate) struct Real;

impl Platform for Real {
    type Counter = counter::Hardware;

    #[inline]
    fn precise_nanos(&self) -> u64 {
        monotonic::precise_nanos()
    }

    #[inline]
    fn fallback_nanos(&self) -> u64 {
        monotonic::now_nanos()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration)
    }

    fn start(&'static self, machine: &'static Machine<Real>) {
        let started = StdInstant::now();
        if std::env::var_os("MINSTANT_CLOCK").is_some_and(|v| v == "monotonic") {
            let why = "MINSTANT_CLOCK=monotonic forces the OS clock".to_string();
            machine.start_fallback(1.0, fallback_info(why, 1.0));
            return;
        }
        match counter::detect() {
            Err(why) => machine.start_fallback(1.0, fallback_info(why, 1.0)),
            // aarch64: the rate is known, the counter is used at once.
            Ok(Start::Ready { counter, ticks_per_nano }) => {
                let info = |ticks_per_nano| counter_info(ticks_per_nano, Vec::new(), started);
                if !machine.switch_to_counter(counter, ticks_per_nano, info) {
                    let why = "the counter could not be read".to_string();
                    machine.start_fallback(1.0, fallback_info(why, 1.0));
                    return;
                }
                let spawned = std::thread::Builder::new()
                    .name("minstant-clock".into())
                    .spawn(move || health::keep_checking(machine));
                // Without the thread the counter is used unchecked
                // (`health().checks` stays 0).
                drop(spawned);
            }
            // x86: the OS clock, mapped with a rate measured in a few hundred
            // microseconds, until the background thread has calibrated the
            // TSC (a few milliseconds).
            Ok(Start::Calibrate { ticks, mono, ticks_per_nano }) => {
                let info = fallback_info("calibrating".into(), ticks_per_nano);
                machine.start_provisional(ticks, mono, ticks_per_nano, info);
                let spawned = std::thread::Builder::new()
                    .name("minstant-clock".into())
                    .spawn(move || calibrate_then_check(machine, started, ticks_per_nano));
                if let Err(error) = spawned {
                    let why = format!("spawning the calibration thread: {error}");
                    machine.settle_on_provisional(fallback_info(why, ticks_per_nano));
                }
            }
        }
    }
}

fn calibrate_then_check(machine: &'static Machine<Real>, started: StdInstant, provisional_rate: f64) {
    match counter::calibrate() {
        Ok(calibrated) => {
            let cpus = calibrated.cpus;
            let info = |ticks_per_nano| counter_info(ticks_per_nano, cpus, started);
            if machine.switch_to_counter(calibrated.counter, calibrated.ticks_per_nano, info) {
                health::keep_checking(machine);
            } else {
                let why = "the calibrated counter could not be read".to_string();
                machine.settle_on_provisional(fallback_info(why, provisional_rate));
            }
        }
        Err(why) => machine.settle_on_provisional(fallback_info(why, provisional_rate)),
    }
}

fn counter_info(ticks_per_nano: f64, calibrated_cpus: Vec<usize>, started: StdInstant) -> ClockInfo {
    ClockInfo {
        source: counter::SOURCE,
        ticks_per_second: ticks_per_nano * 1e9,
        resolution_nanos: 1.0 / ticks_per_nano,
        os_clock_resolution_nanos: monotonic::precise_resolution_nanos(),
        calibrated_cpus,
        fallback_reason: None,
        calibration_time: started.elapsed(),
    }
}

/// The OS clock, its readings mapped at `ticks_per_nano`.
pub(crate) fn fallback_info(why: String, ticks_per_nano: f64) -> ClockInfo {
    ClockInfo {
        source: ClockSource::Monotonic,
        ticks_per_second: ticks_per_nano * 1e9,
        resolution_nanos: monotonic::fallback_resolution_nanos(),
        os_clock_resolution_nanos: monotonic::precise_resolution_nanos(),
        calibrated_cpus: Vec::new(),
        fallback_reason: Some(why),
        calibration_time: Duration::ZERO,
    }
}
