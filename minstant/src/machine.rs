//! The clock's state machine: which source a reading comes from, and how
//! every source's readings stay on one tick time line.
//!
//! ```text
//! UNINIT ─┬─> PROVISIONAL ─(calibrated)─> SWITCHING ─> COUNTER ─(unhealthy)─> SWITCHING ─> FALLBACK
//!         │        └──────────────(calibration failed)─────────────────────────────────────> FALLBACK
//!         ├─> COUNTER (aarch64: the rate is known at once)
//!         └─> FALLBACK (no usable counter)
//! ```
//!
//! A reading is a tick count on one line for the whole process, whatever
//! the source: the counter's readings are shifted onto it (an origin folded
//! into the offsets the counter subtracts anyway), the OS clock's are mapped
//! onto it with the rate known when the mapping was made. Each switch is
//! made continuous and never backwards: the source being left is fenced off
//! ([`SWITCHING`]; a reading is only returned if the mode is unchanged
//! after it was taken), then the new source's origin is set at or past
//! the old source's latest possible reading.
//!
//! The machine is generic over its [`Platform`] so that the tests drive it
//! with a simulated counter and OS clock (steps, rate changes) without
//! touching the process's clock.

use std::sync::atomic::{compiler_fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Duration;

use crate::clock::ClockInfo;
use crate::health::Counters;

pub(crate) const UNINIT: u8 = 0;
pub(crate) const PROVISIONAL: u8 = 1;
pub(crate) const COUNTER: u8 = 2;
pub(crate) const SWITCHING: u8 = 3;
pub(crate) const FALLBACK: u8 = 4;

/// How long a switch waits after fencing the old source off, before it
/// reads where that source's readings end: longer than the few hundred
/// instructions by which a CPU may run the mode check ahead of the read.
pub(crate) const GRACE: Duration = Duration::from_micros(100);

/// The longest [`Machine::wait_settled`] waits (counted in its sleeps).
const SETTLE_WAIT: Duration = Duration::from_secs(5);

/// What a switch puts between the old source's last possible reading and
/// the new source's first, on top of the pairing's own uncertainty.
const SWITCH_MARGIN: Duration = Duration::from_micros(1);

/// A hardware counter, corrected onto the tick time line.
pub(crate) trait Counter: Send + Sync + Sized + 'static {
    /// An ordered reading; `None` where this core's counter is not trusted
    /// (an x86 core whose offset was never measured).
    fn read(&self) -> Option<u64>;
    /// A cheaper reading, ordered only within the calling thread.
    fn read_unordered(&self) -> Option<u64>;
    /// The same counter with every reading `delta` ticks later (wrapping).
    fn shifted(self, delta: u64) -> Self;
}

/// Where readings come from: the counter type, the OS clock, and time
/// passing (real, or simulated in tests).
pub(crate) trait Platform: Sync + 'static {
    type Counter: Counter;
    /// `CLOCK_MONOTONIC`, in nanoseconds: what the counter is checked
    /// against.
    fn precise_nanos(&self) -> u64;
    /// What the fallback reads (`CLOCK_MONOTONIC`, or its coarse variant).
    fn fallback_nanos(&self) -> u64;
    /// Waits (the real platform sleeps; a simulation advances its time).
    fn sleep(&self, duration: Duration);
    /// Decides the source on first use: calls one of the machine's
    /// `start_*` methods, and may start the background thread.
    fn start(&'static self, machine: &'static Machine<Self>)
    where
        Self: Sized;
}

/// A positive rate as `mult / 2^shift`, applied to a `u64` in one
/// 64×64-bit multiply: about 61 significant bits at any magnitude.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scale {
    pub(crate) mult: u64,
    pub(crate) shift: u32,
}

impl Scale {
    /// The shift that puts `value`'s mult in `[2^61, 2^62)`: room for the
    /// rate to be corrected by half either way with the same shift.
    pub(crate) fn shift_for(value: f64) -> u32 {
        (61 - value.log2().floor() as i32).clamp(1, 120) as u32
    }

    pub(crate) fn with_shift(value: f64, shift: u32) -> Scale {
        let mult = (value * 2f64.powi(shift as i32)).round();
        Scale { mult: mult.clamp(1.0, u64::MAX as f64) as u64, shift }
    }

    pub(crate) fn new(value: f64) -> Scale {
        Scale::with_shift(value, Scale::shift_for(value))
    }

    pub(crate) fn value(self) -> f64 {
        self.mult as f64 / 2f64.powi(self.shift as i32)
    }

    /// `x × self`, rounded; `None` if it does not fit in a `u64`.
    #[inline]
    pub(crate) fn apply(self, x: u64) -> Option<u64> {
        let product = u128::from(x) * u128::from(self.mult);
        u64::try_from((product + (1u128 << (self.shift - 1))) >> self.shift).ok()
    }

    /// `y / self`, rounded: the inverse of [`Scale::apply`]; `None` if it
    /// does not fit in a `u64`.
    #[inline]
    pub(crate) fn unapply(self, y: u64) -> Option<u64> {
        // y < 2^(127 - shift) keeps the shifted value in a u128; a larger y
        // would give more than 2^64 anyway, as mult < 2^63.
        if self.shift < 127 && u128::from(y) >= 1u128 << (127 - self.shift) {
            return None;
        }
        let scaled = u128::from(y) << self.shift;
        let mult = u128::from(self.mult);
        u64::try_from((scaled + mult / 2) / mult).ok()
    }
}

/// The OS clock mapped onto the tick time line:
/// `ticks + (nanos - mono) × ticks_per_nano`, never before `ticks`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mapping {
    pub(crate) ticks: u64,
    pub(crate) mono: u64,
    pub(crate) ticks_per_nano: Scale,
}

impl Mapping {
    #[inline]
    pub(crate) fn map(&self, nanos: u64) -> u64 {
        let since = nanos.saturating_sub(self.mono);
        self.ticks.saturating_add(self.ticks_per_nano.apply(since).unwrap_or(u64::MAX))
    }
}

pub(crate) struct Machine<P: Platform> {
    pub(crate) platform: P,
    mode: AtomicU8,
    start: Once,
    counter: OnceLock<P::Counter>,
    /// The OS clock before the counter is calibrated (x86).
    provisional: OnceLock<Mapping>,
    /// The OS clock for cores the counter does not trust (x86).
    counter_mapping: OnceLock<Mapping>,
    /// The OS clock for good.
    fallback: OnceLock<Mapping>,
    /// Nanoseconds per tick, as [`Scale`]: the mult changes as the rate is
    /// corrected, the shift is fixed when the clock starts.
    nanos_per_tick_mult: AtomicU64,
    nanos_per_tick_shift: AtomicU32,
    pub(crate) health: Counters,
    info: Mutex<Option<&'static ClockInfo>>,
}

impl<P: Platform> Machine<P> {
    pub(crate) const fn new(platform: P) -> Machine<P> {
        Machine {
            platform,
            mode: AtomicU8::new(UNINIT),
            start: Once::new(),
            counter: OnceLock::new(),
            provisional: OnceLock::new(),
            counter_mapping: OnceLock::new(),
            fallback: OnceLock::new(),
            nanos_per_tick_mult: AtomicU64::new(0),
            nanos_per_tick_shift: AtomicU32::new(1),
            health: Counters::new(),
            info: Mutex::new(None),
        }
    }

    /// An ordered reading. This is the hot path.
    #[inline]
    pub(crate) fn now(&'static self) -> u64 {
        if self.mode.load(Ordering::Acquire) == COUNTER {
            if let Some(ticks) = self.counter.get().and_then(Counter::read) {
                // The mode is checked again after the read: a reading taken
                // once a switch has begun is never returned (see `GRACE`).
                compiler_fence(Ordering::SeqCst);
                if self.mode.load(Ordering::Relaxed) == COUNTER {
                    return ticks;
                }
            }
        }
        self.now_slowly(false)
    }

    /// A cheaper reading, ordered only within the calling thread.
    #[inline]
    pub(crate) fn now_unordered(&'static self) -> u64 {
        if self.mode.load(Ordering::Acquire) == COUNTER {
            if let Some(ticks) = self.counter.get().and_then(Counter::read_unordered) {
                compiler_fence(Ordering::SeqCst);
                if self.mode.load(Ordering::Relaxed) == COUNTER {
                    return ticks;
                }
            }
        }
        self.now_slowly(true)
    }

    #[cold]
    #[inline(never)]
    fn now_slowly(&'static self, unordered: bool) -> u64 {
        let mut spins = 0u32;
        loop {
            match self.mode.load(Ordering::Acquire) {
                UNINIT => self.ensure_started(),
                PROVISIONAL => {
                    let ticks = self.provisional.get().map(|m| m.map(self.platform.precise_nanos()));
                    compiler_fence(Ordering::SeqCst);
                    if let (PROVISIONAL, Some(ticks)) = (self.mode.load(Ordering::Acquire), ticks) {
                        return ticks;
                    }
                }
                COUNTER => {
                    let counter = self.counter.get().expect("published before the mode");
                    let read = if unordered { counter.read_unordered() } else { counter.read() };
                    let ticks = read.unwrap_or_else(|| {
                        // A core whose offset is unknown: the OS clock on
                        // the counter's line (see the crate docs).
                        self.counter_mapping
                            .get()
                            .expect("published with the counter")
                            .map(self.platform.precise_nanos())
                    });
                    compiler_fence(Ordering::SeqCst);
                    if self.mode.load(Ordering::Acquire) == COUNTER {
                        return ticks;
                    }
                }
                SWITCHING => {
                    // A switch lasts about `GRACE`, once or twice per process.
                    spins += 1;
                    if spins % 64 == 0 {
                        std::thread::yield_now();
                    }
                    std::hint::spin_loop();
                }
                _ => {
                    let fallback = self.fallback.get().expect("published before the mode");
                    return fallback.map(self.platform.fallback_nanos());
                }
            }
        }
    }

    pub(crate) fn ensure_started(&'static self) {
        if self.mode.load(Ordering::Acquire) == UNINIT {
            self.start.call_once(|| self.platform.start(self));
        }
    }

    pub(crate) fn mode(&self) -> u8 {
        self.mode.load(Ordering::Acquire)
    }

    /// Waits until the start-up calibration has settled on a source (a few
    /// milliseconds, once; the calibration gives up after 2 s). At most
    /// [`SETTLE_WAIT`]: a child forked during the calibration has no thread
    /// to finish it, and goes on with the provisional rate.
    pub(crate) fn wait_settled(&'static self) {
        self.ensure_started();
        let mut waited = Duration::ZERO;
        while matches!(self.mode(), PROVISIONAL | SWITCHING) && waited < SETTLE_WAIT {
            std::thread::sleep(Duration::from_micros(100));
            waited += Duration::from_micros(100);
        }
    }

    /// The conversion in force now from ticks to nanoseconds.
    #[inline]
    pub(crate) fn nanos_per_tick(&'static self) -> Scale {
        self.ensure_started();
        Scale {
            mult: self.nanos_per_tick_mult.load(Ordering::Acquire),
            shift: self.nanos_per_tick_shift.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn ticks_per_nano(&'static self) -> f64 {
        1.0 / self.nanos_per_tick().value()
    }

    /// Corrects the rate used for conversions (drift against the OS clock).
    pub(crate) fn set_ticks_per_nano(&self, ticks_per_nano: f64) {
        let shift = self.nanos_per_tick_shift.load(Ordering::Relaxed);
        let scale = Scale::with_shift(1.0 / ticks_per_nano, shift);
        self.nanos_per_tick_mult.store(scale.mult, Ordering::Release);
    }

    fn set_rate_at_start(&self, ticks_per_nano: f64) {
        let nanos_per_tick = 1.0 / ticks_per_nano;
        self.nanos_per_tick_shift.store(Scale::shift_for(nanos_per_tick), Ordering::Relaxed);
        self.set_ticks_per_nano(ticks_per_nano);
    }

    pub(crate) fn info(&'static self) -> &'static ClockInfo {
        self.wait_settled();
        self.info.lock().unwrap_or_else(|p| p.into_inner()).expect("set before the mode settles")
    }

    pub(crate) fn set_info(&self, info: ClockInfo) {
        // At most three per process (start, calibration, a switch).
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::leak(Box::new(info)));
    }

    /// The clock reads the OS clock from now on, `ticks_per_nano` ticks per
    /// nanosecond (1 maps it as it is).
    pub(crate) fn start_fallback(&self, ticks_per_nano: f64, info: ClockInfo) {
        let mono = self.platform.fallback_nanos();
        let ticks = if ticks_per_nano == 1.0 { mono } else { mono.max(1) };
        self.set_rate_at_start(ticks_per_nano);
        let _ = self.fallback.set(Mapping { ticks, mono, ticks_per_nano: Scale::new(ticks_per_nano) });
        self.set_info(info);
        self.mode.store(FALLBACK, Ordering::Release);
    }

    /// Readings come from the OS clock, mapped with a provisional rate, until
    /// [`Machine::switch_to_counter`] or [`Machine::settle_on_provisional`].
    pub(crate) fn start_provisional(&self, ticks: u64, mono: u64, ticks_per_nano: f64, info: ClockInfo) {
        self.set_rate_at_start(ticks_per_nano);
        let _ = self.provisional.set(Mapping { ticks, mono, ticks_per_nano: Scale::new(ticks_per_nano) });
        self.set_info(info);
        self.mode.store(PROVISIONAL, Ordering::Release);
    }

    /// Calibration failed: the provisional mapping becomes the fallback, so
    /// readings go on as they were.
    pub(crate) fn settle_on_provisional(&self, info: ClockInfo) {
        let provisional = *self.provisional.get().expect("started provisionally");
        let _ = self.fallback.set(provisional);
        self.set_info(info);
        self.mode.store(FALLBACK, Ordering::Release);
    }

    /// Readings come from `counter` from now on, at `ticks_per_nano`. From
    /// the start (the counter's own origin), or after the provisional OS
    /// clock, shifted so that its first reading is past the provisional
    /// clock's last. Returns false (and changes nothing) if the counter could
    /// not be read on this thread.
    pub(crate) fn switch_to_counter(
        &self,
        counter: P::Counter,
        ticks_per_nano: f64,
        info: impl FnOnce(f64) -> ClockInfo,
    ) -> bool {
        let provisional = self.provisional.get().copied();
        if provisional.is_some() {
            self.mode.store(SWITCHING, Ordering::SeqCst);
            self.platform.sleep(GRACE);
        } else {
            self.set_rate_at_start(ticks_per_nano);
        }
        let Some((ticks, mono, width)) = paired(&self.platform, || counter.read()) else {
            if provisional.is_some() {
                self.mode.store(PROVISIONAL, Ordering::SeqCst);
            }
            return false;
        };
        let (counter, start) = match provisional {
            Some(provisional) => {
                // Past every provisional reading: they were taken before the
                // switch began, so none maps past `mono`.
                let margin = width + nanos_to_ticks(SWITCH_MARGIN, ticks_per_nano);
                let start = provisional.map(mono).saturating_add(margin);
                (counter.shifted(start.wrapping_sub(ticks)), start)
            }
            None => (counter, ticks),
        };
        let _ = self.counter_mapping.set(Mapping {
            ticks: start,
            mono,
            ticks_per_nano: Scale::new(ticks_per_nano),
        });
        let _ = self.counter.set(counter);
        self.set_ticks_per_nano(ticks_per_nano);
        self.set_info(info(ticks_per_nano));
        self.mode.store(COUNTER, Ordering::SeqCst);
        true
    }

    /// The counter is unhealthy: readings come from the OS clock for good,
    /// mapped with the rate in force, from past every reading the counter
    /// can have given (`at_least`, and the counter's own latest).
    pub(crate) fn switch_to_fallback(&self, at_least: u64, info: ClockInfo) {
        self.mode.store(SWITCHING, Ordering::SeqCst);
        self.platform.sleep(GRACE);
        let nanos_per_tick = Scale {
            mult: self.nanos_per_tick_mult.load(Ordering::Acquire),
            shift: self.nanos_per_tick_shift.load(Ordering::Relaxed),
        };
        let ticks_per_nano = 1.0 / nanos_per_tick.value();
        let counter = self.counter.get().expect("switching away from the counter");
        let (ticks, mono, width) =
            paired(&self.platform, || counter.read()).unwrap_or((0, self.platform.precise_nanos(), 0));
        let margin = width + nanos_to_ticks(SWITCH_MARGIN, ticks_per_nano);
        let start = ticks.max(at_least).saturating_add(margin);
        // The fallback's own clock: with `fallback-coarse` it lags the
        // precise one by up to a jiffy, which the mapping absorbs (a
        // reading before `mono` maps to `start`).
        let _ = self.fallback.set(Mapping { ticks: start, mono, ticks_per_nano: Scale::new(ticks_per_nano) });
        self.set_info(info);
        self.mode.store(FALLBACK, Ordering::SeqCst);
    }

    /// An ordered counter reading and the OS clock, paired: for the checks.
    pub(crate) fn paired_sample(&self) -> Option<(u64, u64, u64)> {
        let counter = self.counter.get()?;
        paired(&self.platform, || counter.read())
    }
}

fn nanos_to_ticks(duration: Duration, ticks_per_nano: f64) -> u64 {
    (duration.as_nanos() as f64 * ticks_per_nano) as u64
}

/// `(ticks, nanos, width)`: an OS clock reading bracketed by two counter
/// readings `width` ticks apart, the tightest of a few tries, with the
/// later counter reading (so that `ticks` is not before the OS reading).
pub(crate) fn paired<P: Platform>(platform: &P, read: impl Fn() -> Option<u64>) -> Option<(u64, u64, u64)> {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..16 {
        let Some(before) = read() else { continue };
        let nanos = platform.precise_nanos();
        let Some(after) = read() else { continue };
        let Some(width) = after.checked_sub(before) else { continue };
        if best.map_or(true, |(_, _, best_width)| width < best_width) {
            best = Some((after, nanos, width));
        }
    }
    best
}
