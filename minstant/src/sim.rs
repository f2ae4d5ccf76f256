//! The clock's state machine on a simulated counter and OS clock: steps,
//! rate changes, drift and the start-up hand-over, each checked for what
//! the clock did, what it counted, readings that never go backwards, and
//! an [`Anchor`](crate::Anchor) whose conversion stays the same function.
//! Deterministic (simulated time: no sleeps, no timing); the randomised
//! ones print their seed (`MINSTANT_SIM_SEED` replays one).

use std::sync::Mutex;
use std::time::Duration;

use crate::clock::ClockInfo;
use crate::health::{Checker, Verdict, CHECK_EVERY};
use crate::instant::tests::anchor_of;
use crate::machine::{Counter, Machine, Platform, Scale, COUNTER, FALLBACK, PROVISIONAL};
use crate::Instant;

/// The simulated world: the OS clock's nanoseconds, and the counter, which
/// runs at `rate` ticks per nanosecond of it and may be stepped.
struct World {
    nanos: u64,
    ticks: f64,
    rate: f64,
}

struct Sim {
    world: &'static Mutex<World>,
    /// How the clock starts: the counter at once at this claimed rate
    /// (aarch64), or provisionally on the OS clock (x86).
    claimed_rate: f64,
    provisional: bool,
}

struct SimCounter {
    world: &'static Mutex<World>,
    origin: u64,
}

impl Counter for SimCounter {
    fn read(&self) -> Option<u64> {
        Some((self.world.lock().unwrap().ticks as u64).wrapping_add(self.origin))
    }

    fn read_unordered(&self) -> Option<u64> {
        self.read()
    }

    fn shifted(self, delta: u64) -> Self {
        SimCounter { world: self.world, origin: self.origin.wrapping_add(delta) }
    }
}

impl Platform for Sim {
    type Counter = SimCounter;

    fn precise_nanos(&self) -> u64 {
        self.world.lock().unwrap().nanos
    }

    fn fallback_nanos(&self) -> u64 {
        self.precise_nanos()
    }

    fn sleep(&self, duration: Duration) {
        advance(self.world, duration);
    }

    fn start(&'static self, machine: &'static Machine<Sim>) {
        if self.provisional {
            let (ticks, nanos) = {
                let world = self.world.lock().unwrap();
                (world.ticks as u64, world.nanos)
            };
            machine.start_provisional(ticks, nanos, self.claimed_rate, info("provisional"));
        } else {
            let counter = SimCounter { world: self.world, origin: 0 };
            assert!(machine.switch_to_counter(counter, self.claimed_rate, |_| info("counter")));
        }
    }
}

fn info(why: &str) -> ClockInfo {
    crate::clock::fallback_info(why.into(), 1.0)
}

fn advance(world: &Mutex<World>, duration: Duration) {
    let mut world = world.lock().unwrap();
    let nanos = duration.as_nanos() as u64;
    world.nanos += nanos;
    world.ticks += nanos as f64 * world.rate;
}

/// A started machine on a world whose counter runs at `rate`, claimed as
/// `claimed_rate`; the OS clock starts at 1 000 s, the counter at 10^12.
fn machine(
    rate: f64,
    claimed_rate: f64,
    provisional: bool,
) -> (&'static Machine<Sim>, &'static Mutex<World>) {
    let world: &'static Mutex<World> =
        Box::leak(Box::new(Mutex::new(World { nanos: 1_000_000_000_000, ticks: 1e12, rate })));
    let machine: &'static Machine<Sim> =
        Box::leak(Box::new(Machine::new(Sim { world, claimed_rate, provisional })));
    machine.ensure_started();
    (machine, world)
}

/// xorshift64*, seeded.
struct Rng(u64);

impl Rng {
    fn seeded(test: &str) -> Rng {
        let seed =
            std::env::var("MINSTANT_SIM_SEED").ok().and_then(|seed| seed.parse().ok()).unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
            }) | 1;
        println!("{test}: MINSTANT_SIM_SEED={seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[low, high)`.
    fn between(&mut self, low: f64, high: f64) -> f64 {
        low + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (high - low)
    }
}

/// Readings, each checked not earlier than every one before it.
#[derive(Default)]
struct Readings(Vec<u64>);

impl Readings {
    fn take(&mut self, machine: &'static Machine<Sim>) -> u64 {
        let reading = machine.now();
        if let Some(&latest) = self.0.iter().max() {
            assert!(reading >= latest, "went backwards: {reading} after {latest}");
        }
        self.0.push(reading);
        reading
    }

    /// A few readings over `duration`.
    fn over(&mut self, machine: &'static Machine<Sim>, world: &Mutex<World>, duration: Duration) {
        for _ in 0..4 {
            advance(world, duration / 4);
            self.take(machine);
        }
    }
}

/// The fault the counter suffers, and what the clock must conclude.
enum Fault {
    /// A jump of this many ns of the counter's time (negative: backwards).
    Step(f64),
    /// Its rate times this.
    Rate(f64),
}

/// Runs healthy checks, injects the fault, and checks what the clock did:
/// the verdict, the counts, the switch, readings that never go backwards
/// and an anchor that converts every reading as before.
fn survives(rate: f64, fault: Fault, rng: &mut Rng) {
    let (machine, world) = machine(rate, rate, false);
    assert_eq!(machine.mode(), COUNTER);
    let anchor = anchor_of(1_700_000_000_000_000_000, machine.now(), machine.nanos_per_tick());
    let convert = |reading: u64| Instant(reading).as_unix_nanos(&anchor);
    let mut readings = Readings::default();
    let mut checker = Checker::new(machine).unwrap();
    for _ in 0..(2 + rng.next() % 6) {
        readings.over(machine, world, CHECK_EVERY);
        assert_eq!(checker.check(), Verdict::Healthy);
    }
    let (good, good_nanos) = (machine.now(), machine.platform.precise_nanos());
    // Part way into the next interval the fault strikes.
    let into = Duration::from_nanos((rng.between(0.05, 0.95) * CHECK_EVERY.as_nanos() as f64) as u64);
    readings.over(machine, world, into);
    let before_fault = readings.0.clone();
    let expected = match fault {
        Fault::Step(nanos) => {
            world.lock().unwrap().ticks += nanos * rate;
            Verdict::Step
        }
        Fault::Rate(factor) => {
            world.lock().unwrap().rate *= factor;
            Verdict::RateChange
        }
    };
    // Readings between the fault and the check that finds it: after a
    // backwards step they are earlier than those before it, which no check
    // off the hot path can prevent; they are kept apart.
    let mut between = Vec::new();
    for _ in 0..4 {
        advance(world, (CHECK_EVERY - into) / 4);
        between.push(machine.now());
    }
    let converted: Vec<u64> = before_fault.iter().chain(&between).map(|&r| convert(r)).collect();
    assert_eq!(checker.check(), expected);

    // What it did, and counted.
    assert_eq!(machine.mode(), FALLBACK);
    let health = machine.health.snapshot();
    assert_eq!(health.switches_to_fallback, 1, "{health:?}");
    let (steps, rate_changes) = if expected == Verdict::Step { (1, 0) } else { (0, 1) };
    assert_eq!((health.steps, health.rate_changes), (steps, rate_changes), "{health:?}");
    assert!(health.checks >= 3, "{health:?}");
    let info = machine.info();
    assert_eq!(info.source, crate::ClockSource::Monotonic);
    assert!(info.fallback_reason.as_deref().unwrap().starts_with("health check"), "{info:?}");

    // Never backwards: after the switch, past every reading before it.
    let latest = before_fault.iter().chain(&between).max().copied().unwrap();
    let first_after = machine.now();
    assert!(first_after >= latest, "{first_after} after {latest}");
    let mut readings = Readings(vec![first_after]);
    readings.over(machine, world, Duration::from_secs(3));
    // Where the switch starts the OS clock: at the counter's reading then,
    // or, if that is earlier (a backwards step, a slower rate), where the
    // counter would be from the last good check at the bound's rate; plus
    // the margin (a microsecond).
    let counter_then = world.lock().unwrap().ticks as u64;
    let since = (machine.platform.precise_nanos() - good_nanos) as f64;
    let extrapolated = good + (since * rate * 1.001) as u64;
    let margin = (2_000.0 * rate) as u64;
    assert!(
        first_after <= counter_then.max(extrapolated) + margin,
        "{first_after} past {counter_then} and {extrapolated}"
    );

    // The anchor converts every earlier reading as before, and later ones
    // to later times.
    let again: Vec<u64> = before_fault.iter().chain(&between).map(|&r| convert(r)).collect();
    assert_eq!(converted, again);
    let mut previous = convert(latest);
    for &reading in &readings.0 {
        let unix = convert(reading);
        assert!(unix >= previous, "{unix} converted before {previous}");
        previous = unix;
    }
    // On the OS clock, durations follow it exactly.
    let (start, start_nanos) = (machine.now(), machine.platform.precise_nanos());
    advance(world, Duration::from_secs(7));
    let elapsed = machine.nanos_per_tick().apply(machine.now() - start).unwrap();
    let truth = machine.platform.precise_nanos() - start_nanos;
    assert!(elapsed.abs_diff(truth) <= 2 + truth / 10_000_000, "{elapsed} vs {truth}");
}

/// A 3 GHz TSC and a 62.5 MHz aarch64 counter.
const RATES: [f64; 2] = [3.0, 0.0625];

#[test]
fn a_forward_step_switches_to_the_os_clock() {
    let mut rng = Rng::seeded("a_forward_step_switches_to_the_os_clock");
    for rate in RATES {
        let nanos = rng.between(2e6, 5e9);
        survives(rate, Fault::Step(nanos), &mut rng);
    }
}

#[test]
fn a_backwards_step_switches_without_going_backwards() {
    let mut rng = Rng::seeded("a_backwards_step_switches_without_going_backwards");
    for rate in RATES {
        let nanos = rng.between(2e6, 2e8);
        survives(rate, Fault::Step(-nanos), &mut rng);
    }
}

#[test]
fn a_rate_change_switches_to_the_os_clock() {
    let mut rng = Rng::seeded("a_rate_change_switches_to_the_os_clock");
    for rate in RATES {
        // 2 % to 50 % faster or slower: a migration to another host.
        let factor = rng.between(1.02, 1.5);
        let factor = if rng.next() % 2 == 0 { factor } else { 1.0 / factor };
        survives(rate, Fault::Rate(factor), &mut rng);
    }
}

/// A counter 30 ppm faster than its stated rate (a crystal's error): the
/// checks correct the rate, count the correction, and do not switch.
#[test]
fn drift_is_corrected_without_a_switch() {
    let rate = 0.0625;
    let (machine, world) = machine(rate * (1.0 + 30e-6), rate, false);
    let mut checker = Checker::new(machine).unwrap();
    for _ in 0..20 {
        advance(world, CHECK_EVERY);
        assert_eq!(checker.check(), Verdict::Healthy);
    }
    let health = machine.health.snapshot();
    assert_eq!(health.switches_to_fallback, 0, "{health:?}");
    assert!(health.rate_corrections >= 1, "{health:?}");
    assert!((machine.ticks_per_nano() / rate - 1.0 - 30e-6).abs() < 0.1e-6, "{}", machine.ticks_per_nano());
    // Durations now agree with the OS clock to well under a ppm.
    let (start, start_nanos) = (machine.now(), machine.platform.precise_nanos());
    advance(world, Duration::from_secs(60));
    let elapsed = machine.nanos_per_tick().apply(machine.now() - start).unwrap() as f64;
    let truth = (machine.platform.precise_nanos() - start_nanos) as f64;
    assert!((elapsed / truth - 1.0).abs() < 0.1e-6, "{elapsed} vs {truth}");
}

/// x86's start: the OS clock mapped at a provisional rate 0.1 % off, then
/// the calibrated counter. Readings never go backwards across the
/// hand-over, jump by at most the margin, and an anchor made before it
/// converts every reading as before.
#[test]
fn the_provisional_clock_hands_over_to_the_counter() {
    let mut rng = Rng::seeded("the_provisional_clock_hands_over_to_the_counter");
    for rate in RATES {
        let off = if rng.next() % 2 == 0 { 1.001 } else { 0.999 };
        let (machine, world) = machine(rate, rate * off, true);
        assert_eq!(machine.mode(), PROVISIONAL);
        let anchor = anchor_of(1, machine.now(), machine.nanos_per_tick());
        let mut readings = Readings::default();
        let calibration = Duration::from_micros(rng.between(1_000.0, 5_000.0) as u64);
        readings.over(machine, world, calibration);
        let converted: Vec<u64> = readings.0.iter().map(|&r| Instant(r).as_unix_nanos(&anchor)).collect();
        let latest = *readings.0.last().unwrap();
        let counter = SimCounter { world, origin: 0 };
        assert!(machine.switch_to_counter(counter, rate, |_| info("counter")));
        assert_eq!(machine.mode(), COUNTER);
        let first = readings.take(machine);
        // `GRACE` passed during the switch, plus the 1 µs margin.
        let jump = (first - latest) as f64 / rate;
        assert!(
            jump <= 100_000.0 + 1_000.0 + 10.0 + calibration.as_nanos() as f64 * 1e-3,
            "jumped {jump} ns"
        );
        readings.over(machine, world, Duration::from_secs(1));
        let again: Vec<u64> =
            converted.iter().zip(&readings.0).map(|(_, &r)| Instant(r).as_unix_nanos(&anchor)).collect();
        assert_eq!(converted, again);
        // Durations now at the calibrated rate.
        let (start, start_nanos) = (machine.now(), machine.platform.precise_nanos());
        advance(world, Duration::from_secs(1));
        let elapsed = machine.nanos_per_tick().apply(machine.now() - start).unwrap();
        assert!(elapsed.abs_diff(machine.platform.precise_nanos() - start_nanos) <= 20, "{elapsed}");
    }
}

#[test]
fn scales_apply_and_invert() {
    for value in [1.0 / 3.0, 0.0625, 1.0, 16.0, 1e-3, 1e3] {
        let scale = Scale::new(value);
        assert!((scale.value() / value - 1.0).abs() < 1e-15, "{value}");
        assert_eq!(scale.apply(0), Some(0));
        assert_eq!(scale.unapply(u64::MAX).is_some(), value >= 1.0);
    }
}
