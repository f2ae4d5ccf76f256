//! The operating system's monotonic clock: the fallback wherever the TSC is
//! not known to be safe. Never the wall clock, which can step backwards.

/// Nanoseconds on the fallback clock: `CLOCK_MONOTONIC`, or
/// `CLOCK_MONOTONIC_COARSE` with the `fallback-coarse` feature, from an
/// arbitrary origin fixed at boot.
#[cfg(unix)]
#[inline]
pub(crate) fn now_nanos() -> u64 {
    #[cfg(all(feature = "fallback-coarse", any(target_os = "linux", target_os = "android")))]
    return read(libc::CLOCK_MONOTONIC_COARSE);
    #[allow(unreachable_code)]
    read(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds on `CLOCK_MONOTONIC`, whatever the features: what the TSC is
/// calibrated and mapped against, which a jiffy-resolution clock would
/// make meaningless.
#[cfg(unix)]
#[inline]
pub(crate) fn precise_nanos() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

#[cfg(unix)]
#[inline]
fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is one that
    // every supported unix provides, so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// Elsewhere the one clock is the precise one.
#[cfg(not(unix))]
pub(crate) fn precise_nanos() -> u64 {
    now_nanos()
}

/// Elsewhere std's monotonic clock is the portable equivalent; its origin is
/// fixed the first time it is read.
#[cfg(not(unix))]
pub(crate) fn now_nanos() -> u64 {
    use std::sync::OnceLock;
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    // One second past zero so that `Instant::ZERO` stays strictly earlier
    // than any reading.
    1_000_000_000 + origin.elapsed().as_nanos() as u64
}

/// `CLOCK_MONOTONIC`'s resolution as `clock_getres` states it, in ns.
pub(crate) fn precise_resolution_nanos() -> f64 {
    #[cfg(unix)]
    return resolution(libc::CLOCK_MONOTONIC);
    #[allow(unreachable_code)]
    1.0
}

/// The fallback clock's resolution as `clock_getres` states it, in ns.
pub(crate) fn fallback_resolution_nanos() -> f64 {
    #[cfg(all(feature = "fallback-coarse", any(target_os = "linux", target_os = "android")))]
    return resolution(libc::CLOCK_MONOTONIC_COARSE);
    #[allow(unreachable_code)]
    precise_resolution_nanos()
}

#[cfg(unix)]
fn resolution(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_getres(clock, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}
