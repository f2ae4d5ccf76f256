//! What the traced threads decide from the configuration, each with one
//! relaxed load. Which new traces are recorded: the runtime switch
//! ([`set_enabled`]), head sampling ([`Config::head_sampling`](crate::collector::Config::head_sampling))
//! and whether a reporter is set, folded into one bound that a root checks.
//! Spans inside a trace never look at it, so a trace that began while
//! recording was on finishes whole. And how an ended root's trace is judged
//! on its own thread: the latency threshold, and whether local spans may
//! wait there for it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use std::time::Duration;

use crate::data::config::{Config, FatePolicy, ALL};
use crate::data::id::TraceId;
use crate::data::otel::RootInfo;
use crate::data::record::Property;
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
    let policy = FatePolicy::of(config);
    // Kept as nanoseconds plus one, so that 0 can mean "no threshold" and a
    // zero threshold stays one (it keeps every root).
    let threshold = policy
        .threshold()
        .map_or(0, |threshold| u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX).saturating_add(1));
    THRESHOLD_NANOS_PLUS_ONE.store(threshold, Ordering::Relaxed);
    REPORT_BEFORE_ROOT_FINISH.store(config.report_before_root_finish, Ordering::Relaxed);
    WAIT_WHEN_QUEUE_FULL.store(config.wait_when_queue_full, Ordering::Relaxed);
    LIMITS_TRACE_SIZE.store(config.max_spans_per_trace.is_some(), Ordering::Relaxed);
}

static LIMITS_TRACE_SIZE: AtomicBool = AtomicBool::new(false);

/// Whether `max_spans_per_trace` is set: then the collector judges each
/// guard's batch on its own (see `local::parked`).
pub(crate) fn limits_trace_size() -> bool {
    LIMITS_TRACE_SIZE.load(Ordering::Relaxed)
}

static WAIT_WHEN_QUEUE_FULL: AtomicBool = AtomicBool::new(false);

/// Whether a thread whose queue is full waits for room (see
/// [`Config::wait_when_queue_full`]) rather than dropping.
pub(crate) fn waits_when_queue_full() -> bool {
    WAIT_WHEN_QUEUE_FULL.load(Ordering::Relaxed)
}

/// The fate policy's threshold, in nanoseconds plus one (0: none).
static THRESHOLD_NANOS_PLUS_ONE: AtomicU64 = AtomicU64::new(0);
static REPORT_BEFORE_ROOT_FINISH: AtomicBool = AtomicBool::new(false);

/// The configuration's [`FatePolicy`], as the traced threads see it.
#[inline]
pub(crate) fn policy() -> FatePolicy {
    let threshold = match THRESHOLD_NANOS_PLUS_ONE.load(Ordering::Relaxed) {
        0 => None,
        nanos => Some(Duration::from_nanos(nanos - 1)),
    };
    FatePolicy::new(threshold, REPORT_BEFORE_ROOT_FINISH.load(Ordering::Relaxed))
}

/// The rule a finished root's trace is kept by, in one place for the
/// thread where it ends and for the collector: the policy's (at least the
/// threshold's length), or a trigger of the flight recorder's (an error
/// status, the user's predicate). `info` is made only when a trigger is
/// set, and called for only when the policy would throw the trace away.
#[inline]
pub(crate) fn root_is_kept<'a>(
    policy: &FatePolicy,
    length: Duration,
    info: impl FnOnce() -> (&'a str, &'a [Property], TraceId),
) -> bool {
    policy.keeps(length) || (TRIGGERS_SET.load(Ordering::Relaxed) != 0 && triggered(length, info()))
}

#[cold]
fn triggered(duration: Duration, (name, properties, trace_id): (&str, &[Property], TraceId)) -> bool {
    let set = TRIGGERS_SET.load(Ordering::Relaxed);
    if set & WANTED_BIT != 0 && super::wanted::contains(trace_id) {
        return true;
    }
    let info = RootInfo { name, properties, duration };
    if set & ON_ERROR_BIT != 0 && info.is_error() {
        return true;
    }
    if set & PREDICATE_BIT == 0 {
        return false;
    }
    // Only a predicate takes the lock (shared: threads do not wait on
    // each other, but its counter's cache line moves between them).
    let triggers = match TRIGGERS.read() {
        Ok(triggers) => triggers,
        Err(poisoned) => poisoned.into_inner(),
    };
    // A panicking predicate keeps nothing.
    match triggers.as_ref().and_then(|triggers| triggers.predicate.as_ref()) {
        Some(predicate) => {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| predicate(&info))).unwrap_or(false)
        }
        None => false,
    }
}

/// A user's predicate on a finished root.
pub(crate) type Predicate = std::sync::Arc<dyn Fn(&RootInfo<'_>) -> bool + Send + Sync>;

/// The flight recorder's triggers: a trace thrown away by the policy is
/// reported anyway when its root has an error status (`on_error`) or
/// satisfies the predicate.
#[derive(Clone, Default)]
pub(crate) struct Triggers {
    pub(crate) on_error: bool,
    pub(crate) predicate: Option<Predicate>,
}

/// Whether anything but the threshold may keep a root, one relaxed load on
/// the traced threads: [`ON_ERROR_BIT`] | [`PREDICATE_BIT`] | [`WANTED_BIT`].
static TRIGGERS_SET: AtomicU8 = AtomicU8::new(0);
/// A root with an error status is kept.
const ON_ERROR_BIT: u8 = 1;
/// The user's predicate is set.
const PREDICATE_BIT: u8 = 4;
/// Some trace is wanted (see [`want`]).
const WANTED_BIT: u8 = 2;
static TRIGGERS: std::sync::RwLock<Option<Triggers>> = std::sync::RwLock::new(None);

/// Sets (or, with `None`, removes) the flight recorder's triggers.
pub(crate) fn set_triggers(triggers: Option<Triggers>) {
    let mut bits = 0;
    if let Some(triggers) = &triggers {
        bits |= if triggers.on_error { ON_ERROR_BIT } else { 0 };
        bits |= if triggers.predicate.is_some() { PREDICATE_BIT } else { 0 };
    }
    *TRIGGERS.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = triggers;
    TRIGGERS_SET.fetch_and(WANTED_BIT, Ordering::Relaxed);
    TRIGGERS_SET.fetch_or(bits, Ordering::Relaxed);
}

/// Keeps `trace_id`'s roots that end here within `within`, whatever their
/// length, until its trace is reported (see [`wanted`](super::wanted)).
/// `false`: too many are wanted.
pub(crate) fn want(trace_id: TraceId, within: Duration) -> bool {
    let wanted = super::wanted::want(trace_id, within);
    TRIGGERS_SET.fetch_or(WANTED_BIT, Ordering::Relaxed);
    wanted
}

/// `trace_id`'s trace was reported: no longer wanted.
pub(crate) fn reported(trace_id: TraceId) {
    if TRIGGERS_SET.load(Ordering::Relaxed) & WANTED_BIT != 0 && !super::wanted::remove(trace_id) {
        TRIGGERS_SET.fetch_and(!WANTED_BIT, Ordering::Relaxed);
    }
}

/// Whether local spans may wait on their thread for their root's end.
#[inline]
pub(crate) fn parking() -> bool {
    policy().parks()
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

    /// The thread's copy of the policy is the collector's, and one rule
    /// decides at the edges too: a zero threshold keeps a zero-length root
    /// (the thread once clamped it to 1 ns and threw that root away).
    #[test]
    fn the_thread_and_the_collector_apply_one_rule() {
        for threshold in [None, Some(0), Some(1), Some(1_000), Some(u64::MAX - 1)] {
            let mut config = Config::default();
            if let Some(nanos) = threshold {
                config = config.report_slow_traces_only(Duration::from_nanos(nanos));
            }
            reporter_set(&config);
            assert_eq!(policy(), FatePolicy::of(&config));
            for length in [0, 1, 999, 1_000, 1_001] {
                let length = Duration::from_nanos(length);
                let expected = threshold.map_or(true, |nanos| length >= Duration::from_nanos(nanos));
                assert_eq!(
                    root_is_kept(&policy(), length, || ("root", &[], TraceId(1))),
                    expected,
                    "{threshold:?}, {length:?}"
                );
            }
        }
        reporter_set(&Config::default());
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
