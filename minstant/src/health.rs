//! The clock's health, while running: a background thread compares the
//! counter with `CLOCK_MONOTONIC` every [`CHECK_EVERY`], corrects the rate
//! used for conversions (drift), and switches to the OS clock for good if
//! the counter stepped or changed its rate beyond [`BOUND_PPM`].
//!
//! Why a thread rather than a check piggy-backed on readings: a reading
//! would have to compare itself with a deadline, a load and a branch on
//! the hot path of every reading; the thread costs the hot path nothing
//! (one wake-up every [`CHECK_EVERY`], a few microseconds of CPU).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::machine::{Machine, Platform, COUNTER};

/// How often the counter is checked.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(250);
/// A check interval whose counter and `CLOCK_MONOTONIC` disagree by more
/// than this, in parts per million of the interval (plus [`SLACK`]), means
/// that the counter stepped or changed its rate. NTP daemons slew
/// `CLOCK_MONOTONIC` by up to 500 ppm; a counter's own drift is tens of ppm.
pub(crate) const BOUND_PPM: f64 = 1_000.0;
/// Allowed on top of [`BOUND_PPM`] per check, beyond the two pairings'
/// own widths: a pairing preempted between its reads.
pub(crate) const SLACK: Duration = Duration::from_micros(20);
/// After a bad check, the counter's rate is measured again over this long
/// to tell a step (the rate is as before) from a rate change.
pub(crate) const RECHECK: Duration = Duration::from_millis(20);
/// The rate is estimated over the last this many checks (16 s): long enough
/// that the pairing error is negligible, short enough to follow NTP's
/// changes of `CLOCK_MONOTONIC`'s frequency.
const HISTORY: usize = 64;
/// A corrected rate is published when it differs by more than this.
const PUBLISH_PPM: f64 = 0.05;

/// What the clock's health checks found and did since the process started.
///
/// ```
/// let health = minstant::health();
/// println!(
///     "{} checks, {} rate corrections, {} switches to the OS clock",
///     health.checks, health.rate_corrections, health.switches_to_fallback
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Health {
    /// Checks of the counter against `CLOCK_MONOTONIC` (0 on the OS clock).
    pub checks: u64,
    /// Times the rate used for conversions was corrected for drift.
    pub rate_corrections: u64,
    /// The latest correction, in parts per million of the rate (positive:
    /// the counter turned out faster than the rate in use).
    pub last_correction_ppm: f64,
    /// The largest disagreement seen in a healthy check, in parts per
    /// million of its interval.
    pub worst_deviation_ppm: f64,
    /// Steps of the counter detected (a jump, the rate unchanged).
    pub steps: u64,
    /// Changes of the counter's rate detected.
    pub rate_changes: u64,
    /// Switches from the counter to the OS clock (0 or 1: the switch is
    /// for good).
    pub switches_to_fallback: u64,
}

/// The machine's health counters, updated by the checker.
#[derive(Debug)]
pub(crate) struct Counters {
    checks: AtomicU64,
    rate_corrections: AtomicU64,
    last_correction_ppm: AtomicU64,
    worst_deviation_ppm: AtomicU64,
    steps: AtomicU64,
    rate_changes: AtomicU64,
    switches_to_fallback: AtomicU64,
}

impl Counters {
    pub(crate) const fn new() -> Counters {
        Counters {
            checks: AtomicU64::new(0),
            rate_corrections: AtomicU64::new(0),
            last_correction_ppm: AtomicU64::new(0),
            worst_deviation_ppm: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            rate_changes: AtomicU64::new(0),
            switches_to_fallback: AtomicU64::new(0),
        }
    }

    pub(crate) fn snapshot(&self) -> Health {
        let f = |value: &AtomicU64| f64::from_bits(value.load(Ordering::Relaxed));
        let n = |value: &AtomicU64| value.load(Ordering::Relaxed);
        Health {
            checks: n(&self.checks),
            rate_corrections: n(&self.rate_corrections),
            last_correction_ppm: f(&self.last_correction_ppm),
            worst_deviation_ppm: f(&self.worst_deviation_ppm),
            steps: n(&self.steps),
            rate_changes: n(&self.rate_changes),
            switches_to_fallback: n(&self.switches_to_fallback),
        }
    }
}

/// A counter reading paired with the OS clock, and the pairing's width.
#[derive(Debug, Clone, Copy)]
struct Pair {
    ticks: u64,
    nanos: u64,
    width: u64,
}

/// What a check concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Healthy,
    /// No pairing this time (a core the counter does not trust).
    Skipped,
    Step,
    RateChange,
}

/// The checks' state: recent healthy pairs, oldest first.
pub(crate) struct Checker<P: Platform + 'static> {
    machine: &'static Machine<P>,
    history: std::collections::VecDeque<Pair>,
    published: f64,
}

impl<P: Platform> Checker<P> {
    /// `None` if the counter cannot be paired on this thread.
    pub(crate) fn new(machine: &'static Machine<P>) -> Option<Checker<P>> {
        let (ticks, nanos, width) = machine.paired_sample()?;
        let mut history = std::collections::VecDeque::with_capacity(HISTORY);
        history.push_back(Pair { ticks, nanos, width });
        Some(Checker { machine, history, published: machine.ticks_per_nano() })
    }

    /// One check: compares the counter's progress since the last check with
    /// the OS clock's. Healthy: the rate is corrected. Otherwise the clock
    /// switches to the OS clock, and the verdict says why.
    pub(crate) fn check(&mut self) -> Verdict {
        let machine = self.machine;
        let Some((ticks, nanos, width)) = machine.paired_sample() else {
            return Verdict::Skipped;
        };
        let now = Pair { ticks, nanos, width };
        machine.health.checks.fetch_add(1, Ordering::Relaxed);
        let last = *self.history.back().expect("a checker has a pair");
        let rate = machine.ticks_per_nano();
        let elapsed = now.nanos.saturating_sub(last.nanos) as f64;
        let deviation = (now.ticks as f64 - last.ticks as f64) / rate - elapsed;
        let allowed =
            elapsed * BOUND_PPM / 1e6 + SLACK.as_nanos() as f64 + (now.width + last.width) as f64 / rate;
        if deviation.abs() <= allowed {
            let ppm = deviation.abs() / elapsed.max(1.0) * 1e6;
            let worst = &machine.health.worst_deviation_ppm;
            if ppm > f64::from_bits(worst.load(Ordering::Relaxed)) {
                worst.store(ppm.to_bits(), Ordering::Relaxed);
            }
            if self.history.len() == HISTORY {
                self.history.pop_front();
            }
            self.history.push_back(now);
            self.correct_rate();
            return Verdict::Healthy;
        }
        // Bad: a step, or a rate change? Measure the rate again, briefly.
        machine.platform.sleep(RECHECK);
        let verdict = match machine.paired_sample() {
            Some((ticks, nanos, _)) if nanos > now.nanos => {
                let short_rate = ticks.wrapping_sub(now.ticks) as i64 as f64 / (nanos - now.nanos) as f64;
                let slack = (SLACK.as_nanos() as f64 * 2.0) / RECHECK.as_nanos() as f64;
                if (short_rate / rate - 1.0).abs() <= BOUND_PPM / 1e6 + slack {
                    Verdict::Step
                } else {
                    Verdict::RateChange
                }
            }
            _ => Verdict::RateChange,
        };
        let counted =
            if verdict == Verdict::Step { &machine.health.steps } else { &machine.health.rate_changes };
        counted.fetch_add(1, Ordering::Relaxed);
        // Past every reading the counter can have given since the last good
        // check, had it run at up to the bound's rate: covers a backwards step.
        let since = machine.platform.precise_nanos().saturating_sub(last.nanos) as f64;
        let at_least = last.ticks.saturating_add((since * rate * (1.0 + BOUND_PPM / 1e6)) as u64);
        let why = format!(
            "health check: the counter {} ({:+.0} ns against CLOCK_MONOTONIC over {:.0} ms); reading the OS clock since",
            if verdict == Verdict::Step { "stepped" } else { "changed its rate" },
            deviation,
            elapsed / 1e6,
        );
        machine.health.switches_to_fallback.fetch_add(1, Ordering::Relaxed);
        machine.switch_to_fallback(at_least, crate::clock::fallback_info(why, machine.ticks_per_nano()));
        verdict
    }

    /// The rate over the history's span, published if it moved enough.
    fn correct_rate(&mut self) {
        let (first, last) = (self.history.front().unwrap(), self.history.back().unwrap());
        let nanos = last.nanos.saturating_sub(first.nanos);
        if nanos < CHECK_EVERY.as_nanos() as u64 / 2 {
            return;
        }
        let rate = last.ticks.wrapping_sub(first.ticks) as f64 / nanos as f64;
        let ppm = (rate / self.published - 1.0) * 1e6;
        if ppm.abs() > PUBLISH_PPM {
            self.machine.set_ticks_per_nano(rate);
            self.published = rate;
            let health = &self.machine.health;
            health.rate_corrections.fetch_add(1, Ordering::Relaxed);
            health.last_correction_ppm.store(ppm.to_bits(), Ordering::Relaxed);
        }
    }
}

/// The background thread's loop, once the counter is in use: checks until
/// the clock switches away from it.
pub(crate) fn keep_checking<P: Platform>(machine: &'static Machine<P>) {
    let Some(mut checker) = Checker::new(machine) else { return };
    while machine.mode() == COUNTER {
        machine.platform.sleep(CHECK_EVERY);
        match checker.check() {
            Verdict::Healthy | Verdict::Skipped => {}
            Verdict::Step | Verdict::RateChange => return,
        }
    }
}
