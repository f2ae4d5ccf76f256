//! What the traced threads decide from the configuration, each with one
//! relaxed load. Which new traces are recorded: the runtime switch
//! ([`set_enabled`]), head sampling ([`Config::head_sampling`](crate::collector::Config::head_sampling))
//! and whether a reporter is set, folded into one bound that a root checks.
//! Spans inside a trace never look at it, so a trace that began while
//! recording was on finishes whole. And how an ended root's trace is judged
//! on its own thread: the latency threshold, and whether local spans may
//! wait there for it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use std::time::Duration;

use minstant::Instant;

use crate::data::config::{Config, ALL};
use crate::data::id::TraceId;
use crate::util::lock;

/// A root is recorded when its trace id's sampling key (see [`key`]) is
/// below this; 0 records none.
static ROOT_BOUND: AtomicU64 = AtomicU64::new(0);
/// What [`ROOT_BOUND`] is made from, changed only under this lock.
static SETTINGS: Mutex<Settings> = Mutex::new(Settings { enabled: true, reporter_set: false, sampling: ALL });
/// Mirrors `SETTINGS.enabled`, for [`is_enabled`] without the lock.
static ENABLED: AtomicBool = AtomicBool::new(true);

struct Settings {
    enabled: bool,
    reporter_set: bool,
    sampling: u64,
}

impl Settings {
    fn publish(&self) {
        let bound = if self.enabled && self.reporter_set { self.sampling } else { 0 };
        ENABLED.store(self.enabled, Ordering::Relaxed);
        ROOT_BOUND.store(bound, Ordering::Relaxed);
    }
}

/// The part of a trace id that head sampling compares with the ratio: its
/// low 64 bits (the last 16 hex digits of a `traceparent`), halved, as the
/// OpenTelemetry SDKs' trace-id-ratio sampler does, so that services that
/// sample the same trace id at the same ratio agree.
#[inline]
fn key(trace_id: TraceId) -> u64 {
    (trace_id.0 as u64) >> 1
}

/// Whether a new root of `trace_id` is recorded.
#[inline(always)]
pub(crate) fn admits(trace_id: TraceId) -> bool {
    key(trace_id) < ROOT_BOUND.load(Ordering::Relaxed)
}

/// Why a root was not admitted: `true` when only because no reporter is
/// set (head sampling needs one set to leave a trace out).
#[inline]
pub(crate) fn refused_for_want_of_a_reporter() -> bool {
    !reporter_is_set() && is_enabled()
}

static REPORTER_SET: AtomicBool = AtomicBool::new(false);

/// Whether spans have somewhere to go; roots started before that are no-ops.
#[inline]
pub(crate) fn reporter_is_set() -> bool {
    REPORTER_SET.load(Ordering::Relaxed)
}

/// Spans have somewhere to go from now on: set by
/// [`set_reporter`](crate::set_reporter) once the collector thread runs.
pub(crate) fn mark_reporter_set() {
    REPORTER_SET.store(true, Ordering::Release);
}

/// A reporter is set, with this configuration.
pub(crate) fn reporter_set(config: &Config) {
    let mut settings = lock(&SETTINGS);
    settings.reporter_set = true;
    settings.sampling = config.head_sampling;
    settings.publish();
    let threshold = config
        .slow_trace_threshold
        .map_or(0, |threshold| threshold.as_nanos().clamp(1, u64::MAX.into()) as u64);
    SLOW_THRESHOLD_NANOS.store(threshold, Ordering::Relaxed);
    // Spans reported before their root ends cannot wait for it.
    PARKING.store(!config.report_before_root_finish, Ordering::Relaxed);
    WAIT_WHEN_QUEUE_FULL.store(config.wait_when_queue_full, Ordering::Relaxed);
}

static WAIT_WHEN_QUEUE_FULL: AtomicBool = AtomicBool::new(false);

/// Whether a thread whose queue is full waits for room (see
/// [`Config::wait_when_queue_full`]) rather than dropping.
pub(crate) fn waits_when_queue_full() -> bool {
    WAIT_WHEN_QUEUE_FULL.load(Ordering::Relaxed)
}

/// A root shorter than this is thrown away (0: none is).
static SLOW_THRESHOLD_NANOS: AtomicU64 = AtomicU64::new(0);
static PARKING: AtomicBool = AtomicBool::new(true);

/// Whether a root from `begin` to `end` is reported. Its length is worked
/// out only when a threshold is set: kept roots do not pay the conversion.
#[inline]
pub(crate) fn slow_enough(begin: Instant, end: Instant) -> bool {
    let threshold = SLOW_THRESHOLD_NANOS.load(Ordering::Relaxed);
    threshold == 0 || end.saturating_duration_since(begin) >= Duration::from_nanos(threshold)
}

/// Whether `report_slow_traces_only` set a threshold.
pub(crate) fn slow_threshold_set() -> bool {
    SLOW_THRESHOLD_NANOS.load(Ordering::Relaxed) != 0
}

/// Whether local spans may wait on their thread for their root's end.
#[inline]
pub(crate) fn parking() -> bool {
    PARKING.load(Ordering::Relaxed)
}

/// Switches recording of new traces on or off, at any time, from any
/// thread. Off, [`Span::root`](crate::Span::root) and
/// [`LocalCollector::start`](crate::local::LocalCollector::start) are
/// no-ops (a relaxed load each), and so is everything under them; a trace
/// begun while on finishes whole and is reported as usual. On by default.
/// Without the `enable` feature it does nothing.
///
/// ```
/// minitrace::set_enabled(false);
/// assert!(!minitrace::is_enabled());
/// minitrace::set_enabled(true);
/// ```
pub fn set_enabled(enabled: bool) {
    let mut settings = lock(&SETTINGS);
    settings.enabled = enabled;
    settings.publish();
}

/// Whether new traces are recorded (see [`set_enabled`]); `false` without
/// the `enable` feature.
///
/// ```
/// # #[cfg(feature = "enable")]
/// assert!(minitrace::is_enabled());
/// ```
#[inline]
pub fn is_enabled() -> bool {
    crate::util::recording::ENABLED && ENABLED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::config::bound_of_ratio;

    #[test]
    fn ratios_bound_the_low_half_of_the_trace_id() {
        assert_eq!(bound_of_ratio(1.0), ALL);
        assert_eq!(bound_of_ratio(2.0), ALL);
        assert_eq!(bound_of_ratio(0.0), 0);
        assert_eq!(bound_of_ratio(-1.0), 0);
        assert_eq!(bound_of_ratio(f64::NAN), 0);
        assert_eq!(bound_of_ratio(0.5), 1 << 62);
        // Every id is under the bound of 1, none under 0; the high half of
        // the id is not looked at.
        for id in [0, 1, u64::MAX as u128, u128::MAX, (u64::MAX as u128) << 64] {
            assert!(key(TraceId(id)) < ALL);
        }
        assert_eq!(key(TraceId(0xffff_0000_0000_0000_0000_0000_0000_0002)), 1);
    }

    #[test]
    fn half_the_ids_are_kept_at_a_half() {
        let bound = bound_of_ratio(0.5);
        let kept = (0..10_000u64)
            .filter(|&n| key(TraceId((n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) as u128)) < bound)
            .count();
        assert!((4_500..5_500).contains(&kept), "{kept}");
    }
}
