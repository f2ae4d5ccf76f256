//! Decides whether the TSC is safe to use, and calibrates it.
//!
//! Three things must hold before a TSC reading is trusted:
//!
//! 1. **The counter ticks at a constant rate, also in deep sleep**:
//!    `constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`, and `RDTSCP` exists.
//! 2. **We know its rate**: ticks per nanosecond measured against
//!    `CLOCK_MONOTONIC` over [`RATE_WINDOW`], on one pinned core.
//! 3. **We know each core's offset**: the counters of different cores may not
//!    be in step. A helper thread pinned to a reference core exchanges
//!    readings with a second helper pinned to each other allowed core in
//!    turn. A message sent from A to B is always received after it was sent,
//!    so `min(b - a)` over many round trips bounds the offset from above, and
//!    the reverse direction bounds it from below. The bounds are measured
//!    twice, at both ends of the rate window; if they contradict each other
//!    the cores drift apart and the TSC is rejected.
//!
//! The caller's own affinity is never touched: only the two helper threads
//! are pinned, and they exit before calibration returns.

use std::mem;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use super::counter as tsc;
use crate::monotonic;

/// How long the rate is measured over. Readings are paired to within a few
/// tens of nanoseconds, so 2 ms gives a rate within ~±20 ppm, while keeping
/// the one-time start-up cost small.
const RATE_WINDOW: Duration = Duration::from_millis(2);
/// Round trips per core per pass. The minimum over them is what counts, so a
/// few hundred are plenty even when the helpers are briefly preempted.
const ROUND_TRIPS: u64 = 200;
/// On a busy machine a pass moves on after this long, once it has at least
/// [`MIN_ROUND_TRIPS`]: fewer round trips only give looser (still valid)
/// bounds, where waiting would delay the first reading or fail it.
const CORE_BUDGET: Duration = Duration::from_millis(10);
const MIN_ROUND_TRIPS: u64 = 4;
/// Sent instead of a reading to end a core's round trips (no counter reads
/// `u64::MAX`).
const END_OF_CORE: u64 = u64::MAX;
/// Calibration gives up (and the clock falls back) past this, e.g. when the
/// machine is so overloaded that the helpers cannot run side by side.
const DEADLINE: Duration = Duration::from_secs(2);

/// The outcome of a successful calibration.
#[derive(Debug)]
pub(crate) struct Calibration {
    /// TSC ticks per nanosecond of `CLOCK_MONOTONIC`.
    pub(crate) ticks_per_nano: f64,
    /// `(cpu, offset)`: what to subtract from that core's counter to put it
    /// on the reference core's time line.
    pub(crate) offsets: Vec<(usize, i64)>,
}

/// A TSC reading paired with a `CLOCK_MONOTONIC` reading taken between two
/// TSC readings a few nanoseconds apart.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) ticks: u64,
    pub(crate) mono_nanos: u64,
}

/// Runs every check and measurement; `Err` says why the TSC must not be used.
pub(crate) fn calibrate() -> Result<Calibration, String> {
    check_cpu_flags()?;
    // Every online core that threads of this process can run on, not only
    // the calling thread's: other threads may have other affinities.
    let allowed = affinity::allowed_cpus()?;
    let &reference = allowed.first().ok_or("no allowed cpu")?;
    let candidates: Vec<usize> = affinity::online_cpus()
        .unwrap_or_else(|| allowed.clone())
        .into_iter()
        .filter(|&c| c != reference)
        .collect();
    let others = &affinity::pinnable(&candidates)?;
    if let Some(missing) = allowed.iter().find(|&&cpu| cpu != reference && !others.contains(&cpu)) {
        return Err(format!("could not run a calibration thread on allowed cpu {missing}"));
    }

    let shared = Shared::default();
    let deadline = StdInstant::now() + DEADLINE;
    let (reference_side, forward) = thread::scope(|scope| -> Result<_, String> {
        let builder = || thread::Builder::new().name("minstant-calibration".into());
        let reference_thread = builder()
            .spawn_scoped(scope, || run_reference(&shared, reference, others, deadline))
            .map_err(spawn_error)?;
        let roamer = if others.is_empty() {
            None
        } else {
            match builder().spawn_scoped(scope, || run_roamer(&shared, others, deadline)).map_err(spawn_error)
            {
                Ok(roamer) => Some(roamer),
                Err(why) => {
                    shared.abort.store(true, Ordering::Relaxed);
                    return Err(why);
                }
            }
        };
        let reference_side = reference_thread.join().map_err(|_| "calibration thread panicked")??;
        let forward = match roamer {
            Some(roamer) => roamer.join().map_err(|_| "calibration thread panicked")??,
            None => Vec::new(),
        };
        Ok((reference_side, forward))
    })?;

    let (start, end) = (reference_side.start, reference_side.end);
    let elapsed_nanos = end.mono_nanos.saturating_sub(start.mono_nanos);
    let ticks_per_nano = end.ticks.wrapping_sub(start.ticks) as f64 / elapsed_nanos.max(1) as f64;
    if elapsed_nanos < RATE_WINDOW.as_nanos() as u64 / 2 {
        return Err(format!("the TSC rate window lasted only {elapsed_nanos} ns"));
    }
    if !(0.1..=100.0).contains(&ticks_per_nano) {
        return Err(format!("implausible TSC rate {ticks_per_nano} ticks/ns"));
    }

    let mut offsets = vec![(reference, 0)];
    for (index, &cpu) in others.iter().enumerate() {
        let bounds: Vec<Bounds> = (0..PASSES)
            .map(|pass| Bounds {
                forward_min: forward[pass * others.len() + index],
                backward_min: reference_side.backward[pass * others.len() + index],
            })
            .collect();
        let offset = estimate_offset(&bounds).map_err(|why| format!("cpu {cpu}: {why}"))?;
        offsets.push((cpu, offset));
    }
    Ok(Calibration { ticks_per_nano, offsets })
}

/// A process out of threads (a pids cgroup, `RLIMIT_NPROC`) gets the OS
/// clock, not a panic.
fn spawn_error(error: std::io::Error) -> String {
    format!("spawning a calibration thread: {error}")
}

fn check_cpu_flags() -> Result<(), String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").map_err(|e| format!("/proc/cpuinfo: {e}"))?;
    let flags = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("flags").and_then(|rest| rest.split_once(':')))
        .map(|(_, flags)| flags.split_whitespace().collect::<Vec<_>>())
        .ok_or("/proc/cpuinfo lists no cpu flags")?;
    for needed in ["constant_tsc", "nonstop_tsc", "rdtscp"] {
        if !flags.contains(&needed) {
            return Err(format!("cpu lacks {needed}"));
        }
    }
    if !tsc::rdtscp_supported() {
        return Err("cpuid reports no RDTSCP".into());
    }
    Ok(())
}

/// Offsets are measured at both ends of the rate window.
const PASSES: usize = 2;

/// One pass's bounds on `offset = counter(cpu) - counter(reference)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// min over round trips of (roamer reading - reference reading it had seen).
    pub(crate) forward_min: i64,
    /// min over round trips of (reference reading - roamer reading it had seen).
    pub(crate) backward_min: i64,
}

/// Turns the passes' bounds into one offset, or says why they are unusable.
///
/// Every pass says `-backward_min <= offset <= forward_min`. If the passes
/// disagree the counters drift apart. If zero is possible the counters are
/// taken as synchronised (what the kernel checks at boot), which avoids
/// adding measurement noise to a perfect clock; otherwise the middle of the
/// interval is the estimate with the smallest worst-case error.
pub(crate) fn estimate_offset(passes: &[Bounds]) -> Result<i64, String> {
    let (mut low, mut high) = (i64::MIN, i64::MAX);
    for pass in passes {
        low = low.max(pass.backward_min.saturating_neg());
        high = high.min(pass.forward_min);
    }
    if low > high {
        return Err(format!("inconsistent offsets (needs {low} <= offset <= {high})"));
    }
    Ok(if low <= 0 && 0 <= high { 0 } else { ((i128::from(low) + i128::from(high)) / 2) as i64 })
}

#[derive(Default)]
struct Shared {
    ping: Mailbox,
    pong: Mailbox,
    abort: AtomicBool,
}

/// A one-slot channel carrying a counter reading; `seq` tells rounds apart.
#[derive(Default)]
struct Mailbox {
    seq: AtomicU64,
    value: AtomicU64,
}

impl Mailbox {
    fn send(&self, seq: u64, value: u64) {
        self.value.store(value, Ordering::Relaxed);
        self.seq.store(seq, Ordering::Release);
    }

    fn receive(&self, seq: u64, abort: &AtomicBool, deadline: StdInstant) -> Result<u64, String> {
        let mut spins = 0u32;
        while self.seq.load(Ordering::Acquire) != seq {
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                if abort.load(Ordering::Relaxed) {
                    return Err("calibration aborted".into());
                }
                if StdInstant::now() > deadline {
                    abort.store(true, Ordering::Relaxed);
                    return Err("calibration timed out".into());
                }
                thread::yield_now();
            }
            std::hint::spin_loop();
        }
        Ok(self.value.load(Ordering::Relaxed))
    }
}

struct ReferenceSide {
    start: Sample,
    end: Sample,
    /// Indexed `pass * others.len() + core index`.
    backward: Vec<i64>,
}

fn run_reference(
    shared: &Shared,
    cpu: usize,
    others: &[usize],
    deadline: StdInstant,
) -> Result<ReferenceSide, String> {
    let fail = |why: String| {
        shared.abort.store(true, Ordering::Relaxed);
        why
    };
    affinity::pin_current_thread(cpu).map_err(fail)?;
    let start = paired_sample(cpu)
        .ok_or_else(|| fail(format!("could not read cpu {cpu}'s counter while pinned to it")))?;
    // The window is timed from this thread's own first sample, not from when
    // calibration began: on a busy machine the helpers can take a millisecond
    // or more to start, and a window shortened by that was once rejected as
    // an implausible rate, falling back to the OS clock for good.
    let window_start = StdInstant::now();
    let mut backward = Vec::with_capacity(PASSES * others.len());
    let mut seq = 0;
    for pass in 0..PASSES {
        if pass + 1 == PASSES {
            thread::sleep(RATE_WINDOW.saturating_sub(window_start.elapsed()));
        }
        for _ in others {
            let mut backward_min = i64::MAX;
            let budget_end = StdInstant::now() + CORE_BUDGET;
            for round_trip in 0..ROUND_TRIPS {
                if round_trip >= MIN_ROUND_TRIPS && StdInstant::now() > budget_end {
                    break;
                }
                seq += 1;
                let (sent, on) = tsc::read();
                shared.ping.send(seq, sent);
                let roamer_reading = shared.pong.receive(seq, &shared.abort, deadline)?;
                let (received, on_after) = tsc::read();
                if on != cpu || on_after != cpu {
                    return Err(fail(format!("reference helper left cpu {cpu}")));
                }
                backward_min = backward_min.min(received.wrapping_sub(roamer_reading) as i64);
            }
            seq += 1;
            shared.ping.send(seq, END_OF_CORE);
            backward.push(backward_min);
        }
    }
    let end = paired_sample(cpu)
        .ok_or_else(|| fail(format!("could not read cpu {cpu}'s counter while pinned to it")))?;
    Ok(ReferenceSide { start, end, backward })
}

/// Returns the forward minimum for each pass and core.
fn run_roamer(shared: &Shared, others: &[usize], deadline: StdInstant) -> Result<Vec<i64>, String> {
    let fail = |why: String| {
        shared.abort.store(true, Ordering::Relaxed);
        why
    };
    let mut forward = Vec::with_capacity(PASSES * others.len());
    let mut seq = 0;
    for _ in 0..PASSES {
        for &cpu in others {
            affinity::pin_current_thread(cpu).map_err(fail)?;
            let mut forward_min = i64::MAX;
            loop {
                seq += 1;
                let reference_reading = shared.ping.receive(seq, &shared.abort, deadline)?;
                if reference_reading == END_OF_CORE {
                    break;
                }
                let (received, on) = tsc::read();
                let (sent, on_after) = tsc::read();
                shared.pong.send(seq, sent);
                if on != cpu || on_after != cpu {
                    return Err(fail(format!("pinned helper did not run on cpu {cpu}")));
                }
                forward_min = forward_min.min(received.wrapping_sub(reference_reading) as i64);
            }
            forward.push(forward_min);
        }
    }
    Ok(forward)
}

/// Pairs a `CLOCK_MONOTONIC` reading with the midpoint of the two counter
/// readings that bracket it most tightly out of a few tries.
fn paired_sample(cpu: usize) -> Option<Sample> {
    let mut best: Option<(u64, Sample)> = None;
    for _ in 0..32 {
        let (before, on_before) = tsc::read();
        let mono_nanos = monotonic::precise_nanos();
        let (after, on_after) = tsc::read();
        if on_before != cpu || on_after != cpu || after < before {
            continue;
        }
        let width = after - before;
        if best.map_or(true, |(best_width, _)| width < best_width) {
            best = Some((width, Sample { ticks: before + width / 2, mono_nanos }));
        }
    }
    best.map(|(_, sample)| sample)
}

/// Thin, checked wrappers over the Linux affinity calls.
pub(crate) mod affinity {
    use super::mem;

    /// The cpus the calling thread may run on, in ascending order.
    pub(crate) fn allowed_cpus() -> Result<Vec<usize>, String> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
        // SAFETY: `set` is a valid cpu_set_t of the size we pass; pid 0 is the
        // calling thread.
        if unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
            return Err(format!("sched_getaffinity: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `set` was filled in by the kernel above.
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect())
    }

    /// The online cpus, from `/sys/devices/system/cpu/online` (e.g. `0-3,8`).
    pub(crate) fn online_cpus() -> Option<Vec<usize>> {
        let list = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
        let mut cpus = Vec::new();
        for range in list.trim().split(',').filter(|range| !range.is_empty()) {
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
            cpus.extend(first..=last.min(libc::CPU_SETSIZE as usize - 1));
        }
        Some(cpus)
    }

    /// Those of `cpus` that a thread of this process can be pinned to (a
    /// cgroup's cpuset may exclude some), found by a short-lived probe
    /// thread so that no caller's affinity changes.
    pub(crate) fn pinnable(cpus: &[usize]) -> Result<Vec<usize>, String> {
        if cpus.is_empty() {
            return Ok(Vec::new());
        }
        let probe = std::thread::Builder::new()
            .name("minstant-probe".into())
            .spawn({
                let cpus = cpus.to_vec();
                move || cpus.into_iter().filter(|&cpu| pin_current_thread(cpu).is_ok()).collect()
            })
            .map_err(super::spawn_error)?;
        probe.join().map_err(|_| "calibration probe panicked".to_string())
    }

    /// Pins the calling thread (only ever one of our helper threads) to `cpu`.
    pub(crate) fn pin_current_thread(cpu: usize) -> Result<(), String> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
        // SAFETY: `cpu` < CPU_SETSIZE because it came from `allowed_cpus`, and
        // the set is a valid cpu_set_t; pid 0 is the calling thread.
        let status = unsafe {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if status != 0 {
            return Err(format!("pinning to cpu {cpu}: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated pair of cores: counters `offset` apart, messages taking
    /// between `min_latency` and `min_latency + jitter` ticks.
    struct SimulatedCores {
        offset: i64,
        min_latency: i64,
        jitter: i64,
    }

    impl SimulatedCores {
        fn pass(&self, seed: i64) -> Bounds {
            let latency = |i: i64| self.min_latency + (i * 7919 + seed) % (self.jitter + 1);
            let forward_min = (0..50).map(|i| latency(i) + self.offset).min().unwrap();
            let backward_min = (0..50).map(|i| latency(i + 13) - self.offset).min().unwrap();
            Bounds { forward_min, backward_min }
        }
    }

    #[test]
    fn synchronised_counters_get_no_offset() {
        let cores = SimulatedCores { offset: 0, min_latency: 150, jitter: 400 };
        assert_eq!(estimate_offset(&[cores.pass(1), cores.pass(2)]), Ok(0));
    }

    #[test]
    fn small_offsets_hidden_by_latency_are_taken_as_zero() {
        // A 40-tick offset cannot be told apart from 0 with 150-tick messages;
        // either choice keeps every message's receive after its send.
        let cores = SimulatedCores { offset: 40, min_latency: 150, jitter: 400 };
        assert_eq!(estimate_offset(&[cores.pass(1), cores.pass(2)]), Ok(0));
    }

    #[test]
    fn large_offsets_are_estimated_within_the_latency() {
        for offset in [10_000, -10_000, 1 << 40, -(1 << 40)] {
            let cores = SimulatedCores { offset, min_latency: 150, jitter: 400 };
            let estimate = estimate_offset(&[cores.pass(1), cores.pass(2)]).unwrap();
            assert!((estimate - offset).abs() <= 150, "{estimate} vs {offset}");
        }
    }

    #[test]
    fn drifting_counters_are_rejected() {
        let before = SimulatedCores { offset: 0, min_latency: 100, jitter: 50 };
        let after = SimulatedCores { offset: 5_000, min_latency: 100, jitter: 50 };
        assert!(estimate_offset(&[before.pass(1), after.pass(2)]).is_err());
    }

    #[test]
    fn the_rate_window_is_whole_however_late_the_helper_starts() {
        if let Err(why) = check_cpu_flags() {
            eprintln!("no TSC to calibrate here ({why}); nothing to check");
            return;
        }
        let cpu = affinity::allowed_cpus().unwrap()[0];
        // As if calibration had begun 1.9 ms before this helper got to run.
        let deadline = StdInstant::now() + DEADLINE - Duration::from_micros(1_900);
        let side = thread::spawn(move || run_reference(&Shared::default(), cpu, &[], deadline))
            .join()
            .unwrap()
            .unwrap();
        let window = side.end.mono_nanos - side.start.mono_nanos;
        assert!(window >= RATE_WINDOW.as_nanos() as u64, "a rate window of only {window} ns");
    }

    #[test]
    fn extreme_bounds_do_not_overflow() {
        let bounds = Bounds { forward_min: i64::MAX, backward_min: i64::MIN };
        assert!(estimate_offset(&[bounds]).is_ok());
        let contradictory = Bounds { forward_min: i64::MIN, backward_min: i64::MIN };
        assert!(estimate_offset(&[contradictory]).is_err());
    }
}
