//! A drop-in replacement for [`std::time::Instant`] that reads the CPU's
//! time-stamp counter (TSC) where that is safe, and the OS clock elsewhere.
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
//! - **[`clock_info`]** tells which [`ClockSource`] was chosen at start-up,
//!   and why the TSC was not, if it was not.
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
//! | [`Instant::now`] on the TSC | one `RDTSCP` and a lookup in a small per-core table |
//! | [`Instant::now_unordered`] on the TSC | one `RDTSC` (or as `now`, where cores' counters are not in step) |
//! | either, on the fallback | a `clock_gettime(CLOCK_MONOTONIC)` call, as `std::time::Instant::now` makes (`CLOCK_MONOTONIC_COARSE` with the feature `fallback-coarse`) |
//! | [`elapsed`](Instant::elapsed), [`as_unix_nanos`](Instant::as_unix_nanos) | a reading (for `elapsed`) and one fixed-point multiplication from ticks to nanoseconds |
//! | the first reading in the process | detection and calibration, a few milliseconds, once |
//!
//! `cargo run --release --example clock` in this crate's repository prints
//! the chosen source and what a reading costs on your machine, beside
//! `std::time::Instant`.
//!
//! # How it works
//!
//! [`Instant::now`] is one `RDTSCP` instruction, which reads the counter *and*
//! the number of the core it was read on, followed by the subtraction of that
//! core's offset from a small table. Nanoseconds are computed only when a
//! [`Duration`](std::time::Duration) or a unix timestamp is asked for.
//!
//! `RDTSCP` waits for earlier loads to complete before it reads the counter,
//! so readings are ordered across threads: a thread that has seen another
//! thread's reading never reads an earlier time. Readings never go backwards
//! within a thread, even when it moves between cores.
//!
//! # When the TSC is used
//!
//! The first reading in a process detects and calibrates the clock (a few
//! milliseconds, once; see [`clock_info`]). The TSC is used only when all of these
//! hold, and `CLOCK_MONOTONIC` (never the wall clock) is read otherwise:
//!
//! - x86 or x86_64 Linux, with `constant_tsc`, `nonstop_tsc` and `rdtscp` in
//!   `/proc/cpuinfo`;
//! - the rate, measured against `CLOCK_MONOTONIC` over 2 ms, is plausible;
//! - every online core that the process's threads can run on was visited by
//!   a pinned helper thread, and its counter offset, measured twice, gave
//!   consistent bounds (only the helpers are pinned: no caller's affinity
//!   changes);
//! - the environment variable `MINSTANT_CLOCK` is not `monotonic` (an
//!   operator's switch to rule the TSC out).
//!
//! Calibration lasts its rate window plus a short exchange per further core
//! (PERFORMANCE.md, "The clock"); on a machine so loaded that the helpers
//! cannot run for 2 s it gives up and the OS clock is used; on a
//! busy one it settles for fewer round trips (looser, still valid bounds).
//!
//! A core that comes online after calibration has no measured offset: a
//! reading taken there reads the OS clock and maps it onto the tick time
//! line with the calibrated rate. That keeps the reading sane, but the
//! mapping drifts with the rate's error (about ±20 ppm) and with NTP's
//! slewing of `CLOCK_MONOTONIC`, so ordering against readings from other
//! cores is only as good as that drift; restart the process after adding
//! cores.
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
mod instant;
mod monotonic;
#[cfg(all(target_os = "linux", any(target_arch = "x86", target_arch = "x86_64")))]
mod tsc;
#[cfg(not(all(target_os = "linux", any(target_arch = "x86", target_arch = "x86_64"))))]
#[path = "tsc_unsupported.rs"]
mod tsc;

#[cfg(all(feature = "atomic", target_has_atomic = "64"))]
mod atomic;

#[cfg(all(feature = "atomic", target_has_atomic = "64"))]
pub use atomic::Atomic;
pub use clock::{ClockInfo, ClockSource};
pub use instant::{Anchor, Instant};

/// Whether [`Instant`] reads the TSC (true) or the OS clock (false).
///
/// ```
/// if minstant::is_tsc_available() {
///     println!("reading the TSC");
/// }
/// ```
pub fn is_tsc_available() -> bool {
    clock_info().source == ClockSource::Tsc
}

/// The clock's start-up decision: source, rate, calibrated cores, and why
/// the TSC was ruled out if it was. Calibrates the clock if nothing has yet.
///
/// ```
/// let info = minstant::clock_info();
/// assert!(info.ticks_per_second > 0.0);
/// ```
pub fn clock_info() -> &'static ClockInfo {
    &clock::clock().info
}
