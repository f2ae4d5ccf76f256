//! The CPU's counter, per architecture: x86's TSC ([`x86`], calibrated in
//! the background), aarch64's `CNTVCT_EL0` ([`aarch64`], whose rate the
//! CPU states), and nothing elsewhere ([`none`]). Each module exports the
//! same items: `Hardware` (the counter, corrected onto the tick line),
//! `SOURCE`, `detect` and `calibrate`.

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
mod aarch64;
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
pub(crate) use aarch64::{calibrate, detect, Hardware, SOURCE};

#[cfg(all(target_os = "linux", any(target_arch = "x86", target_arch = "x86_64")))]
mod x86;
#[cfg(all(target_os = "linux", any(target_arch = "x86", target_arch = "x86_64")))]
pub(crate) use x86::{calibrate, detect, Hardware, SOURCE};

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")
)))]
mod none;
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")
)))]
pub(crate) use none::{calibrate, detect, Hardware, SOURCE};

/// How the counter starts.
pub(crate) enum Start {
    /// Its rate is known: use it at once.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Ready { counter: Hardware, ticks_per_nano: f64 },
    /// Its rate must be measured: read the OS clock, mapped onto the
    /// counter's ticks from `(ticks, mono)` at a provisional rate, until
    /// [`calibrate`] has measured it.
    #[cfg_attr(not(any(target_arch = "x86", target_arch = "x86_64")), allow(dead_code))]
    Calibrate { ticks: u64, mono: u64, ticks_per_nano: f64 },
}

/// A calibrated counter.
pub(crate) struct Calibrated {
    pub(crate) counter: Hardware,
    pub(crate) ticks_per_nano: f64,
    pub(crate) cpus: Vec<usize>,
}

/// The coarsest counter tick used when the OS clock may be finer: a tracer
/// still resolves spans of a few hundred nanoseconds, at a fraction of the
/// OS clock's cost.
pub(crate) const COARSEST_TICK_NANOS: f64 = 100.0;

/// The rule that decides whether a counter of tick `tick_nanos` is used
/// rather than the OS clock, whose resolution `clock_getres` states as
/// `os_resolution_nanos`, with the kernel's clocksource `clocksource`:
///
/// 1. a tick no coarser than the OS clock's resolution: the counter;
/// 2. the kernel's clocksource is this same counter (`arch_sys_counter`):
///    the counter, whatever its tick, as the OS clock is computed from it
///    and cannot be finer in fact, only costlier;
/// 3. a tick up to [`COARSEST_TICK_NANOS`]: the counter;
/// 4. otherwise the OS clock.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(crate) fn coarse_counter_rule(
    tick_nanos: f64,
    os_resolution_nanos: f64,
    clocksource: Option<&str>,
) -> Result<(), String> {
    if tick_nanos <= os_resolution_nanos
        || clocksource == Some("arch_sys_counter")
        || tick_nanos <= COARSEST_TICK_NANOS
    {
        return Ok(());
    }
    Err(format!(
        "the counter ticks every {tick_nanos:.0} ns, coarser than {COARSEST_TICK_NANOS:.0} ns and than the OS \
         clock's {os_resolution_nanos} ns, whose clocksource is {}",
        clocksource.unwrap_or("unknown")
    ))
}

/// The kernel's current clocksource, e.g. `tsc` or `arch_sys_counter`.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(crate) fn kernel_clocksource() -> Option<String> {
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    std::fs::read_to_string(path).ok().map(|name| name.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_counter_rule() {
        // ARMv8.6 and later: 1 GHz, as fine as the OS clock claims.
        assert!(coarse_counter_rule(1.0, 1.0, None).is_ok());
        // 62.5 MHz (qemu) or 24 MHz: coarser than 1 ns, within 100 ns.
        assert!(coarse_counter_rule(16.0, 1.0, Some("tsc")).is_ok());
        assert!(coarse_counter_rule(41.7, 1.0, None).is_ok());
        // 1 MHz: the OS clock, unless it is computed from this counter.
        assert!(coarse_counter_rule(1_000.0, 1.0, Some("hpet")).is_err());
        assert!(coarse_counter_rule(1_000.0, 1.0, Some("arch_sys_counter")).is_ok());
        // An OS clock that says it is as coarse.
        assert!(coarse_counter_rule(1_000.0, 4_000_000.0, None).is_ok());
    }
}
