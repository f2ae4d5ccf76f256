//! The clock's promises, checked on whatever source this machine selects,
//! and again in child processes with the OS-clock fallback forced and with a
//! single allowed core.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use minstant::{Atomic, ClockSource, Instant};

/// Tests that keep cores busy, or calibrate in a child process, take turns:
/// a child's calibration must not compete with this process's spinning.
static BUSY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn take_turn() -> std::sync::MutexGuard<'static, ()> {
    BUSY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The cpus the calling thread may run on (the process's, for a test thread).
fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    // SAFETY: an all-zero cpu_set_t is a valid empty set, filled in by the
    // kernel for the calling thread; CPU_ISSET reads within CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            return (0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect();
        }
    }
    vec![0]
}

/// Confines the calling (test) thread to `cpus`; false if the kernel refused.
fn pin(cpus: &[usize]) -> bool {
    #[cfg(target_os = "linux")]
    // SAFETY: as above; every cpu comes from `allowed_cpus`, within CPU_SETSIZE.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    // Elsewhere there is no affinity to set: `allowed_cpus` gives one cpu.
    #[cfg(not(target_os = "linux"))]
    let pinned = {
        let _ = cpus;
        true
    };
    pinned
}

/// Moves the calling thread to the `step`-th of `cpus` (cyclically), so that
/// readings come from different cores' counters.
fn hop_cpu(cpus: &[usize], step: usize) -> bool {
    pin(&[cpus[step % cpus.len()]])
}

/// Loops sized for emulation: a tenth under qemu (scripts/aarch64-test.sh
/// sets `MINSTANT_TEST_EMULATED`), where every instruction is emulated.
fn scaled(count: usize) -> usize {
    if std::env::var_os("MINSTANT_TEST_EMULATED").is_some() {
        count / 10
    } else {
        count
    }
}

fn check_monotonic_within_a_thread(reads: usize, read: fn() -> Instant) {
    let reads = scaled(reads);
    let cpus = allowed_cpus();
    let mut hops = 0;
    let mut previous = read();
    for i in 0..reads {
        if i % 10_000 == 0 {
            hops += usize::from(hop_cpu(&cpus, i / 10_000));
        }
        let now = read();
        assert!(now >= previous, "went backwards at read {i}: {previous:?} -> {now:?}");
        previous = now;
    }
    assert!(pin(&cpus), "could not restore the test thread's affinity");
    // Hops go round `cpus` in order, so two of them reached two cores.
    assert!(cpus.len() == 1 || hops >= 2, "the test thread never moved between cores ({hops} hops)");
}

/// Each thread reads the other's last published reading (acquire), then
/// reads the clock: the second reading must not be earlier. Both threads
/// keep hopping between cores. Returns the number of violations; fails if
/// a thread could not move between cores.
fn count_causality_violations(run_for: Duration) -> u64 {
    let slots = Arc::new([Atomic::new(Instant::ZERO), Atomic::new(Instant::ZERO)]);
    let stop = Arc::new(AtomicBool::new(false));
    let cpus = allowed_cpus();
    let workers: Vec<_> = (0..2)
        .map(|me| {
            let (slots, stop, cpus) = (slots.clone(), stop.clone(), cpus.clone());
            thread::spawn(move || {
                let (mut violations, mut hops) = (0u64, 0usize);
                let mut round = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1_000 {
                        let seen = slots[1 - me].load(Ordering::Acquire);
                        let now = Instant::now();
                        violations += u64::from(now < seen);
                        slots[me].store(now, Ordering::Release);
                    }
                    round += 1;
                    if round % 64 == 0 {
                        hops += usize::from(hop_cpu(&cpus, round / 64 + me));
                    }
                }
                assert!(cpus.len() == 1 || hops >= 2, "thread {me} never moved between cores ({hops} hops)");
                violations
            })
        })
        .collect();
    thread::sleep(run_for);
    stop.store(true, Ordering::Relaxed);
    workers.into_iter().map(|w| w.join().unwrap()).sum()
}

/// A (std, minstant) pair read within 2 µs of each other, for comparing
/// elapsed times without the pairing error swamping the result.
fn paired_reading() -> (StdInstant, Instant) {
    let mut best: Option<(Duration, StdInstant, Instant)> = None;
    for _ in 0..1_000 {
        let before = StdInstant::now();
        let ours = Instant::now();
        let after = StdInstant::now();
        let width = after - before;
        if best.map_or(true, |(w, ..)| width < w) {
            best = Some((width, before + width / 2, ours));
        }
        if width < Duration::from_micros(2) {
            break;
        }
    }
    let (_, std, ours) = best.unwrap();
    (std, ours)
}

/// Parts per million by which our elapsed time differs from
/// `CLOCK_MONOTONIC`'s (std's `Instant` on Linux) over `window`.
fn drift_ppm(window: Duration) -> f64 {
    let (std_start, ours_start) = paired_reading();
    thread::sleep(window);
    let (std_end, ours_end) = paired_reading();
    let reference = (std_end - std_start).as_nanos() as f64;
    let ours = (ours_end - ours_start).as_nanos() as f64;
    (ours - reference) / reference * 1e6
}

#[test]
fn never_goes_backwards_within_a_thread() {
    let _turn = take_turn();
    check_monotonic_within_a_thread(2_000_000, Instant::now);
}

#[test]
fn unordered_readings_never_go_backwards_within_a_thread() {
    let _turn = take_turn();
    check_monotonic_within_a_thread(2_000_000, Instant::now_unordered);
}

#[test]
fn causal_across_threads_that_move_between_cores() {
    let _turn = take_turn();
    assert_eq!(count_causality_violations(Duration::from_millis(1_500)), 0);
}

#[test]
fn elapsed_time_agrees_with_clock_monotonic_within_50_ppm() {
    let _turn = take_turn();
    // A preempted pairing can only make one try look bad; two of three must pass.
    let drifts: Vec<f64> = (0..3).map(|_| drift_ppm(Duration::from_millis(400))).collect();
    let good = drifts.iter().filter(|ppm| ppm.abs() <= 50.0).count();
    assert!(good >= 2, "drift over 400 ms, ppm: {drifts:?} ({:?})", minstant::clock_info());
}

#[test]
fn reports_its_source_consistently() {
    let info = minstant::clock_info();
    assert_eq!(minstant::is_tsc_available(), info.source != ClockSource::Monotonic);
    assert!(info.resolution_nanos > 0.0 && info.os_clock_resolution_nanos > 0.0, "{info:?}");
    match info.source {
        ClockSource::Tsc => {
            assert!(info.fallback_reason.is_none());
            assert!(!info.calibrated_cpus.is_empty());
            assert!(info.ticks_per_second > 1e8, "{info:?}");
            assert!(info.resolution_nanos < 10.0, "{info:?}");
        }
        ClockSource::Cntvct => {
            assert!(info.fallback_reason.is_none());
            // A tick is the counter's period: CNTFRQ_EL0 is exact.
            assert!((info.resolution_nanos * info.ticks_per_second / 1e9 - 1.0).abs() < 1e-9, "{info:?}");
        }
        ClockSource::Monotonic => {
            assert!(info.fallback_reason.is_some());
            assert!(info.ticks_per_second > 0.0, "{info:?}");
        }
        other => panic!("a source this test does not know: {other:?}"),
    }
}

/// On aarch64 Linux (under qemu in scripts/aarch64-test.sh) the counter
/// path is the one chosen: `CNTVCT_EL0`, at `CNTFRQ_EL0`'s rate, and its
/// health checks run. Unless forced off.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
#[test]
fn aarch64_reads_the_counter() {
    if std::env::var_os("MINSTANT_CLOCK").is_some() {
        return;
    }
    let info = minstant::clock_info();
    assert_eq!(info.source, ClockSource::Cntvct, "{info:?}");
    assert!(minstant::is_tsc_available());
    assert!(info.calibrated_cpus.is_empty());
    println!("aarch64: {info:?}");
    // The health thread checks every 250 ms; wait for its first check.
    let deadline = StdInstant::now() + Duration::from_secs(20);
    while minstant::health().checks == 0 && StdInstant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let health = minstant::health();
    assert!(health.checks > 0, "{health:?}");
    assert_eq!(health.switches_to_fallback, 0, "{health:?}");
}

/// The health checks' account is consistent with the source in use.
#[test]
fn health_is_consistent_with_the_source() {
    let info = minstant::clock_info();
    let health = minstant::health();
    assert!(health.switches_to_fallback <= 1, "{health:?}");
    assert_eq!(health.switches_to_fallback, health.steps + health.rate_changes, "{health:?}");
    if info.source == ClockSource::Monotonic
        && info.fallback_reason.as_deref().unwrap_or("").starts_with("health")
    {
        assert_eq!(health.switches_to_fallback, 1, "{health:?} {info:?}");
    }
}

/// Run only by the tests below, in a child process started with
/// `--ignored --exact child_checks` (ignored, so that a plain run of this
/// binary skips it). `EXPECT_SOURCE` and `EXPECT_ALL_ONLINE_CPUS` say what
/// the child must have ended up with.
#[test]
#[ignore = "run in a child process by the tests below"]
fn child_checks() {
    let _turn = take_turn();
    let info = minstant::clock_info();
    if let Ok(expected) = std::env::var("EXPECT_SOURCE") {
        assert_eq!(format!("{:?}", info.source), expected, "{info:?}");
    }
    if std::env::var_os("EXPECT_ALL_ONLINE_CPUS").is_some() {
        // Even a caller confined to one core gets every online core
        // calibrated, for its other threads, and keeps its own affinity.
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as usize;
        assert_eq!(info.calibrated_cpus.len(), online, "{info:?}");
        assert_eq!(
            thread::available_parallelism().map_or(1, |n| n.get()),
            1,
            "the caller's affinity changed"
        );
    }
    check_monotonic_within_a_thread(200_000, Instant::now);
    assert_eq!(count_causality_violations(Duration::from_millis(300)), 0);
    let window = Duration::from_millis(100);
    let drifts: Vec<f64> = (0..3).map(|_| drift_ppm(window)).collect();
    let allowed = 100.0 + fallback_resolution_ppm(info, window);
    assert!(drifts.iter().filter(|ppm| ppm.abs() <= allowed).count() >= 2, "{drifts:?}, allowed {allowed}");
}

/// What the fallback's resolution alone can make an elapsed time over
/// `window` differ by, in ppm: two readings each off by up to one tick of
/// `CLOCK_MONOTONIC_COARSE` with `fallback-coarse`, nothing otherwise.
fn fallback_resolution_ppm(info: &minstant::ClockInfo, window: Duration) -> f64 {
    if !cfg!(all(feature = "fallback-coarse", target_os = "linux")) || info.source != ClockSource::Monotonic {
        return 0.0;
    }
    let mut resolution = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `resolution` is a valid, writable timespec.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut resolution) };
    let resolution = resolution.tv_sec as f64 * 1e9 + resolution.tv_nsec as f64;
    2.0 * resolution / window.as_nanos() as f64 * 1e6
}

fn run_child_checks(mut command: Command) {
    let output = command
        .args(["--ignored", "--exact", "child_checks", "--nocapture", "--test-threads", "1"])
        .output()
        .expect("run the test binary again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn forced_fallback_keeps_every_promise() {
    let _turn = take_turn();
    let mut child = Command::new(std::env::current_exe().unwrap());
    child.env("MINSTANT_CLOCK", "monotonic").env("EXPECT_SOURCE", "Monotonic");
    run_child_checks(child);
}

#[cfg(target_os = "linux")]
#[test]
fn calibrates_with_a_single_allowed_core() {
    let _turn = take_turn();
    let mut child = Command::new("taskset");
    child.args(["-c", "0"]).arg(std::env::current_exe().unwrap());
    let info = minstant::clock_info();
    child.env("EXPECT_SOURCE", format!("{:?}", info.source));
    if info.source == ClockSource::Tsc {
        child.env("EXPECT_ALL_ONLINE_CPUS", "1");
    }
    run_child_checks(child);
}
