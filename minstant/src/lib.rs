//! A drop-in replacement for [`std::time::Instant`] that reads the CPU's
//! counter (x86's TSC, aarch64's `CNTVCT_EL0`) where that is safe, and the
//! OS clock elsewhere.
//!
//! ```
//! use minstant::Instant;
//!
//! let start = Instant::now();
//! let sum: u64 = (0..1_000).sum();
//! let spent: std::time::Duration = start.elapsed();
//! println!("summed to {sum} in {spent:?} using {:?}", minstant::clock_info().source);
//! ```
//!
//! # Concepts
//!
//! - An **[`Instant`]** is a reading of the clock, used as
//!   `std::time::Instant` is: [`elapsed`](Instant::elapsed),
//!   [`duration_since`](Instant::duration_since), `+`/`-` with a
//!   [`Duration`](std::time::Duration), comparisons. Its arithmetic never
//!   panics.
//! - **Ordered and unordered readings**: [`Instant::now`] is ordered with
//!   every other thread's readings; [`Instant::now_unordered`] is cheaper
//!   and only good for timing an interval on one thread.
//! - An **[`Anchor`]** pairs one reading with the wall clock, to turn
//!   readings into unix timestamps ([`Instant::as_unix_nanos`]) on one
//!   consistent time line: this is how a tracer records cheap readings and
//!   converts them to timestamps later, elsewhere.
//! - **[`clock_info`]** tells which [`ClockSource`] is in use, its rate and
//!   resolution, and why the counter is not used, if it is not;
//!   **[`health`]** what the running checks found and did.
//! - **[`Atomic`]** (feature `atomic`) holds an `Instant` that threads update
//!   in place.
//!
//! ```
//! use minstant::{Anchor, Instant};
//!
//! let anchor = Anchor::new(); // once, e.g. when a batch of readings is converted
//! let begin = Instant::now_unordered();
//! let work: u64 = (0..1_000).sum();
//! let end = Instant::now_unordered();
//! println!(
//!     "began at {} ns since the epoch, took {:?} (sum {work})",
//!     begin.as_unix_nanos(&anchor),
//!     end.duration_since(begin)
//! );
//! ```
//!
//! # Cost model
//!
//! | call | cost |
//! |---|---|
//! | [`Instant::now`] on x86's TSC | one `RDTSCP` and a lookup in a small per-core table |
//! | [`Instant::now_unordered`] on x86's TSC | one `RDTSC` (or as `now`, where cores' counters are not in step) |
//! | [`Instant::now`] on aarch64 | `ISB; MRS CNTVCT_EL0` |
//! | [`Instant::now_unordered`] on aarch64 | `MRS CNTVCT_EL0` |
//! | either, on the fallback | a `clock_gettime(CLOCK_MONOTONIC)` call, as `std::time::Instant::now` makes (`CLOCK_MONOTONIC_COARSE` with the feature `fallback-coarse`), and one multiply onto the tick line |
//! | [`elapsed`](Instant::elapsed), [`as_unix_nanos`](Instant::as_unix_nanos) | a reading (for `elapsed`) and one fixed-point multiplication from ticks to nanoseconds |
//! | the first reading in the process | x86: a rate measured over 200 µs and a thread started (about 0.4 ms in all), then the OS clock until the TSC is calibrated in the background (a few ms); aarch64: none beyond starting the thread |
//! | the health checks | a background thread waking every 250 ms for a few microseconds; nothing on the readings' path |
//!
//! `cargo run --release --example clock` in this crate's repository prints
//! the chosen source and what a reading costs on your machine, beside
//! `std::time::Instant`.
//!
//! # How it works
//!
//! On x86, [`Instant::now`] is one `RDTSCP` instruction, which reads the
//! counter *and* the number of the core it was read on, followed by the
//! subtraction of that core's offset from a small table. `RDTSCP` waits for
//! earlier loads to complete before it reads the counter, so readings are
//! ordered across threads: a thread that has seen another thread's reading
//! never reads an earlier time. Readings never go backwards within a thread,
//! even when it moves between cores.
//!
//! On aarch64, [`Instant::now`] reads the generic timer's virtual counter
//! `CNTVCT_EL0`, which every core shares (no offsets), after an `ISB`: the
//! architecture lets a counter read happen early, out of order; the `ISB`
//! makes it wait for every earlier instruction, so readings are causal
//! across threads as on x86. Its rate is the one the firmware states in
//! `CNTFRQ_EL0`, known at once (then checked, as below).
//! [`Instant::now_unordered`] is the bare `MRS`: it may be taken before the
//! instructions that precede it, earlier ones of its own kind included
//! (the architecture does not order two counter reads without an `ISB`
//! between them), by the length of the pipeline's window, a few
//! nanoseconds: less than one tick of a counter at 1 GHz or below, but not
//! promised.
//!
//! Nanoseconds are computed only when a [`Duration`](std::time::Duration) or
//! a unix timestamp is asked for.
//!
//! ## One time line, whatever the source
//!
//! An `Instant` is a tick count on one time line for the whole process,
//! whatever source produced it, so readings from before and after a change
//! of source compare and subtract as any others:
//!
//! - the counter's readings are shifted onto the line by an origin folded
//!   into the offset each reading subtracts anyway (free);
//! - the OS clock's readings are mapped onto it, `origin + (CLOCK_MONOTONIC
//!   − base) × rate`, with the rate in force when the mapping was made (one
//!   multiply on a path that already pays a system clock read);
//! - a change of source fences the old source off (a reading is only
//!   returned if the source is unchanged after it was taken), waits 100 µs
//!   for readings already under way, and starts the new source at or past
//!   the latest reading the old one can have given, plus a microsecond:
//!   no reading goes backwards, and the line jumps by at most that margin.
//!   Readers that arrive during those 100 µs wait for them, once or twice
//!   per process.
//!
//! Durations are converted with the rate in force at the conversion, which
//! the health checks correct (below). An [`Anchor`] freezes the rate it was
//! made with, so that for one anchor [`Instant::as_unix_nanos`] is a fixed,
//! monotonic function of the reading for the anchor's whole life, across
//! rate corrections and a switch of source alike; a tracer that keeps one
//! anchor steers its timestamps towards the wall clock itself.
//!
//! ## Start-up
//!
//! The clock starts on the first call. On aarch64 the counter is used at
//! once. On x86 the TSC's rate is unknown: the first call measures it
//! against `CLOCK_MONOTONIC` over 200 µs (within ±0.1 % at worst), and
//! readings come from `CLOCK_MONOTONIC` mapped at that rate while a
//! background thread calibrates the TSC (the checks below; a few
//! milliseconds), then from the TSC, handed over as above. A duration that
//! spans the hand-over is off by at most the provisional rate's error over
//! its provisional part (a few microseconds at worst). [`Anchor::new`],
//! [`clock_info`] and [`is_tsc_available`] wait until the calibration has
//! settled, so that no anchor freezes the provisional rate.
//!
//! ## When the counter is used
//!
//! x86's TSC, when all of these hold, and `CLOCK_MONOTONIC` (never the wall
//! clock) is read otherwise:
//!
//! - x86 or x86_64 Linux; CPUID reports an invariant TSC and `RDTSCP`, and
//!   `/proc/cpuinfo` lists `constant_tsc`, `nonstop_tsc` and `rdtscp`;
//! - the rate, measured against `CLOCK_MONOTONIC` over 2 ms, is plausible;
//! - every online core that the process's threads can run on was visited by
//!   a pinned helper thread, and its counter offset, measured twice, gave
//!   consistent bounds (only the helpers are pinned: no caller's affinity
//!   changes).
//!
//! Calibration lasts its rate window plus a short exchange per further core
//! (PERFORMANCE.md, "The clock"); on a machine so loaded that the helpers
//! cannot run for 2 s it gives up and the OS clock is used; on a
//! busy one it settles for fewer round trips (looser, still valid bounds).
//!
//! A core that comes online after calibration has no measured offset: a
//! reading taken there reads the OS clock and maps it onto the tick time
//! line with the calibrated rate. That keeps the reading sane, but the
//! mapping drifts with NTP's slewing of `CLOCK_MONOTONIC`, so ordering
//! against readings from other cores is only as good as that drift;
//! restart the process after adding cores.
//!
//! aarch64's `CNTVCT_EL0`, on aarch64 Linux, when `CNTFRQ_EL0` states a
//! plausible rate (100 kHz to 10 GHz) and the counter is not too coarse.
//! Before ARMv8.6 the rate is the vendor's choice, often 1 to 50 MHz: a
//! tick of 20 to 1 000 ns, coarser than the nanosecond `clock_getres`
//! reports for `CLOCK_MONOTONIC`. [`ClockInfo::resolution_nanos`] says so
//! beside [`ClockInfo::os_clock_resolution_nanos`], and the rule is:
//!
//! 1. a tick no coarser than the OS clock's stated resolution: the counter;
//! 2. the kernel's clocksource is this same counter (`arch_sys_counter`, as
//!    on nearly every aarch64 Linux): the counter, whatever its tick, as
//!    `CLOCK_MONOTONIC` is computed from it and cannot be finer in fact,
//!    only costlier;
//! 3. a tick up to 100 ns (10 MHz or more): the counter, which still
//!    resolves spans of a few hundred nanoseconds at a fraction of the OS
//!    clock's cost;
//! 4. otherwise the OS clock.
//!
//! Everywhere: the environment variable `MINSTANT_CLOCK=monotonic` rules
//! the counter out (an operator's switch).
//!
//! ## Health, while running
//!
//! A counter good at start-up can go bad: a VM migrated to a host whose
//! counter runs at another rate, a suspend, a hypervisor rescaling it. A
//! background thread (`minstant-clock`) pairs the counter with
//! `CLOCK_MONOTONIC` every 250 ms. A thread rather than a check
//! piggy-backed on readings, because the latter would put a comparison
//! with a deadline on every reading's path; the thread costs that path
//! nothing.
//!
//! - **Drift**: the rate used for conversions is re-estimated over the last
//!   16 s of checks and corrected when it moves by more than 0.05 ppm, so
//!   that durations follow `CLOCK_MONOTONIC` (and NTP's corrections of it)
//!   to well under a ppm, where a rate calibrated once is off by its error
//!   for good.
//! - **Steps and rate changes**: a check whose counter and `CLOCK_MONOTONIC`
//!   disagree by more than 1 000 ppm of its interval (NTP slews
//!   `CLOCK_MONOTONIC` by at most 500 ppm) plus 20 µs is bad. The rate is
//!   measured again over 20 ms to tell a step (the rate as before) from a
//!   rate change, and the clock switches to `CLOCK_MONOTONIC` for good,
//!   mapped at the rate in force, from past every reading the counter can
//!   have given since the last good check (a backwards step included).
//!   A smaller step (under about 270 µs per 250 ms check) is not told
//!   apart from drift: the rate estimate absorbs it over the next 16 s.
//!   Readings taken between the fault and the check that finds it are the
//!   faulty counter's: after a backwards step they can be earlier than
//!   those before it, which no check off the readings' path can prevent;
//!   from the switch on, none goes backwards.
//! - [`health`] counts the checks, the corrections, the steps, the rate
//!   changes and the switch; [`clock_info`] then names the OS clock and
//!   the reason.
//!
//! Where the thread cannot be started (no threads left), x86 stays on the
//! OS clock and aarch64 uses the counter unchecked (`health().checks` stays
//! 0). A child process after `fork` has no such thread: its clock keeps the
//! source it had, unchecked.
//!
//! # Features
//!
//! - `atomic`: [`Atomic`], an `Instant` that can be updated in place.
//! - `fallback-coarse`: the fallback reads `CLOCK_MONOTONIC_COARSE`, cheaper
//!   and at scheduler-tick resolution.
//! - `coarsetime`: does nothing; kept so that a build written for 0.1, where
//!   it was the name of an optional dependency, still resolves.

#![deny(missing_docs)]

mod clock;
mod counter;
mod health;
mod instant;
mod machine;
mod monotonic;
#[cfg(test)]
mod sim;

#[cfg(all(feature = "atomic", target_has_atomic = "64"))]
mod atomic;

#[cfg(all(feature = "atomic", target_has_atomic = "64"))]
pub use atomic::Atomic;
pub use clock::{ClockInfo, ClockSource};
pub use health::Health;
pub use instant::{Anchor, Instant};

/// Whether [`Instant`] reads the CPU's counter (true: x86's TSC or
/// aarch64's `CNTVCT_EL0`) or the OS clock (false), now. Waits for the
/// start-up calibration to settle, as [`clock_info`] does.
///
/// ```
/// if minstant::is_tsc_available() {
///     println!("reading the CPU's counter");
/// }
/// ```
pub fn is_tsc_available() -> bool {
    clock_info().source != ClockSource::Monotonic
}

/// The clock's decision as it stands: source, rate, resolution, calibrated
/// cores, and why the counter was ruled out if it was. Starts the clock if
/// nothing has yet, and waits for its start-up calibration to settle (a few
/// milliseconds on x86, once). A later switch to the OS clock (see
/// [`health`]) replaces it.
///
/// ```
/// let info = minstant::clock_info();
/// assert!(info.ticks_per_second > 0.0);
/// ```
pub fn clock_info() -> &'static ClockInfo {
    clock::CLOCK.info()
}

/// What the clock's health checks found and did since the process started:
/// checks against `CLOCK_MONOTONIC`, rate corrections, steps and rate
/// changes of the counter, and the switch to the OS clock they caused.
///
/// ```
/// let health = minstant::health();
/// assert!(health.switches_to_fallback <= 1);
/// ```
pub fn health() -> Health {
    clock::CLOCK.health.snapshot()
}
