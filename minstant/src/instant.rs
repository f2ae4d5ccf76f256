use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clock::CLOCK;
use crate::machine::Scale;

/// A reading of a monotonic clock, like [`std::time::Instant`] but read from
/// the CPU's counter where that is safe (see the [crate docs](crate)).
///
/// Internally an `Instant` is a tick count on one time line for the whole
/// process, whichever source produced it; it is turned into nanoseconds only
/// when a [`Duration`] or a unix timestamp is asked for.
///
/// Unlike `std`, the operators never panic: `+` and `-` with a [`Duration`]
/// saturate at the ends of the representable range (use
/// [`checked_add`](Instant::checked_add) to detect that), and
/// `later - earlier` with the two swapped is zero.
///
/// ```
/// use std::time::Duration;
/// use minstant::Instant;
///
/// let start = Instant::now();
/// let deadline = start + Duration::from_millis(10);
/// assert!(deadline > start);
/// assert!(start.elapsed() < Duration::from_secs(60));
/// ```
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Instant(pub(crate) u64);

impl Instant {
    /// The earliest `Instant`: a fixed moment before every reading.
    ///
    /// ```
    /// assert!(minstant::Instant::ZERO < minstant::Instant::now());
    /// ```
    pub const ZERO: Instant = Instant(0);

    /// Reads the clock.
    ///
    /// Readings never go backwards, within a thread or across threads: a
    /// reading taken after observing another thread's reading (through any
    /// synchronisation) is not earlier than it. This holds across the
    /// clock's changes of source too; the one exception is a counter that
    /// steps backwards, whose readings until the next health check are its
    /// own (see the crate docs, "Health, while running").
    ///
    /// ```
    /// let a = minstant::Instant::now();
    /// let b = minstant::Instant::now();
    /// assert!(b >= a);
    /// ```
    #[inline]
    pub fn now() -> Instant {
        Instant(CLOCK.now())
    }

    /// A cheaper reading for timing an interval on one thread: both ends
    /// read with `now_unordered` on the same thread give its length.
    ///
    /// Where x86's TSC is used and every core's counter is in step, this is
    /// a plain `RDTSC`, cheaper than `RDTSCP` as it does not wait for earlier
    /// instructions (PERFORMANCE.md, "The clock"); otherwise there it is
    /// [`Instant::now`]. On aarch64 it is `MRS CNTVCT_EL0` without the `ISB`
    /// that [`Instant::now`] puts before it. The price: the CPU may take the
    /// reading a little before the instructions that precede it complete,
    /// so it is **not ordered with other threads**, nor with an
    /// [`Instant::now`] that precedes it on the same thread: it can be
    /// earlier than either by the length of the CPU's out-of-order window
    /// (tens of nanoseconds). Successive `now_unordered` readings on one
    /// thread do not go backwards on x86; on aarch64 the architecture does
    /// not promise it (two counter reads without an `ISB` between them may
    /// be taken out of order, by less than a tick of a counter at 1 GHz or
    /// below). Use [`Instant::now`] whenever readings are compared across
    /// threads.
    ///
    /// ```
    /// use minstant::Instant;
    ///
    /// let start = Instant::now_unordered();
    /// let sum: u64 = (0..1_000).sum();
    /// let spent = Instant::now_unordered().duration_since(start);
    /// # let _ = (sum, spent);
    /// ```
    #[inline]
    pub fn now_unordered() -> Instant {
        Instant(CLOCK.now_unordered())
    }

    /// Time from `earlier` to `self`, or zero if `earlier` is later.
    ///
    /// ```
    /// use std::time::Duration;
    /// use minstant::Instant;
    ///
    /// let earlier = Instant::now();
    /// let later = earlier + Duration::from_micros(5);
    /// assert_eq!(later.duration_since(earlier).as_micros(), 5);
    /// assert_eq!(earlier.duration_since(later), Duration::ZERO);
    /// ```
    #[inline]
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }

    /// Time from `earlier` to `self`, or `None` if `earlier` is later.
    ///
    /// ```
    /// let earlier = minstant::Instant::now();
    /// let later = minstant::Instant::now();
    /// assert!(later.checked_duration_since(earlier).is_some());
    /// assert!(earlier.checked_duration_since(later).is_some() == (earlier == later));
    /// ```
    #[inline]
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        let ticks = self.0.checked_sub(earlier.0)?;
        Some(Duration::from_nanos(CLOCK.nanos_per_tick().apply(ticks).unwrap_or(u64::MAX)))
    }

    /// Time from `earlier` to `self`, or zero if `earlier` is later.
    ///
    /// ```
    /// use std::time::Duration;
    /// let now = minstant::Instant::now();
    /// assert_eq!(now.saturating_duration_since(now + Duration::from_secs(1)), Duration::ZERO);
    /// ```
    #[inline]
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.checked_duration_since(earlier).unwrap_or_default()
    }

    /// Time since `self` was read.
    ///
    /// ```
    /// let start = minstant::Instant::now();
    /// let spent = start.elapsed();
    /// assert!(spent < std::time::Duration::from_secs(60));
    /// ```
    #[inline]
    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    /// `self + duration`, or `None` past the latest representable instant.
    ///
    /// ```
    /// use std::time::Duration;
    /// let now = minstant::Instant::now();
    /// assert!(now.checked_add(Duration::from_secs(1)).is_some());
    /// assert!(now.checked_add(Duration::MAX).is_none());
    /// ```
    #[inline]
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        self.0.checked_add(duration_to_ticks(duration)?).map(Instant)
    }

    /// `self - duration`, or `None` before [`Instant::ZERO`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let zero = minstant::Instant::ZERO;
    /// assert!(zero.checked_sub(Duration::from_nanos(1_000)).is_none());
    /// ```
    #[inline]
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        self.0.checked_sub(duration_to_ticks(duration)?).map(Instant)
    }

    /// Nanoseconds since the unix epoch, on the wall clock as `anchor` saw it.
    ///
    /// Keep one [`Anchor`] for many conversions: every timestamp converted
    /// with it is then on one consistent time line, unaffected by later steps
    /// of the wall clock.
    ///
    /// ```
    /// let anchor = minstant::Anchor::new();
    /// let nanos = minstant::Instant::now().as_unix_nanos(&anchor);
    /// assert!(nanos > 1_600_000_000 * 1_000_000_000);
    /// ```
    #[inline]
    pub fn as_unix_nanos(&self, anchor: &Anchor) -> u64 {
        if self.0 >= anchor.ticks {
            anchor.unix_nanos.saturating_add(anchor.ticks_to_nanos(self.0 - anchor.ticks))
        } else {
            anchor.unix_nanos.saturating_sub(anchor.ticks_to_nanos(anchor.ticks - self.0))
        }
    }
}

/// `None` when the duration does not fit in the tick counter.
#[inline]
fn duration_to_ticks(duration: Duration) -> Option<u64> {
    CLOCK.nanos_per_tick().unapply(u64::try_from(duration.as_nanos()).ok()?)
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturates at the latest representable instant instead of panicking.
    fn add(self, duration: Duration) -> Instant {
        self.checked_add(duration).unwrap_or(Instant(u64::MAX))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, duration: Duration) {
        *self = *self + duration;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    /// Saturates at [`Instant::ZERO`] instead of panicking.
    fn sub(self, duration: Duration) -> Instant {
        self.checked_sub(duration).unwrap_or(Instant::ZERO)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, duration: Duration) {
        *self = *self - duration;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    /// Same as [`Instant::duration_since`]: zero if `earlier` is later.
    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instant({} ticks)", self.0)
    }
}

/// A pairing of the wall clock with [`Instant`], for turning instants into
/// unix timestamps with [`Instant::as_unix_nanos`].
///
/// An anchor freezes the conversion it was made with: the reading and wall
/// time it pairs, and the clock's rate at that moment. So for one anchor,
/// `as_unix_nanos` is a fixed, monotonic function of the reading for the
/// anchor's whole life, whatever the clock does later (rate corrections by
/// its health checks, a switch to the OS clock): readings of every source
/// are on one tick time line (see the crate docs).
///
/// ```
/// let anchor = minstant::Anchor::new();
/// let start = minstant::Instant::now();
/// let end = minstant::Instant::now();
/// assert!(end.as_unix_nanos(&anchor) >= start.as_unix_nanos(&anchor));
/// ```
#[derive(Copy, Clone, Debug)]
pub struct Anchor {
    unix_nanos: u64,
    ticks: u64,
    /// Nanoseconds per tick as the clock had it when the anchor was made:
    /// a conversion is one multiply, without asking the clock
    /// (PERFORMANCE.md, "The collector: making records").
    nanos_per_tick: Scale,
}

impl Default for Anchor {
    fn default() -> Anchor {
        Anchor::new()
    }
}

impl Anchor {
    /// Reads the wall clock and [`Instant::now`] together.
    ///
    /// An anchor made in the first few milliseconds of the process waits
    /// until the clock's start-up calibration has settled (x86's TSC: a few
    /// milliseconds, once), so that it does not freeze a provisional rate.
    ///
    /// ```
    /// let anchor = minstant::Anchor::new();
    /// # let _ = anchor;
    /// ```
    pub fn new() -> Anchor {
        CLOCK.wait_settled();
        let ticks = Instant::now().0;
        let unix_nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX));
        Anchor { unix_nanos, ticks, nanos_per_tick: CLOCK.nanos_per_tick() }
    }

    #[inline]
    fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        self.nanos_per_tick.apply(ticks).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Round trips are exact to half a tick: to the nanosecond where a tick
    /// is shorter than one (a TSC), to 8 ns with a 62.5 MHz counter. One
    /// rate for both ways, as the health checks may correct the clock's.
    #[test]
    fn ticks_round_trip_through_durations() {
        for nanos_per_tick in [1.0 / 3.0, 1.0 / 2.4, 1.0, 16.0, 1_000.0 / 24.0, 1_000.0] {
            let scale = Scale::new(nanos_per_tick);
            for nanos in [0, 1, 999, 1_000_000, 3_600_000_000_000] {
                let back = scale.apply(scale.unapply(nanos).unwrap()).unwrap();
                let allowed = (nanos_per_tick / 2.0).floor() as u64;
                assert!(
                    back.abs_diff(nanos) <= allowed,
                    "{nanos} ns came back as {back} at {nanos_per_tick} ns/tick"
                );
            }
        }
        let now = Instant::now();
        let later = now + Duration::from_millis(5);
        let tick = CLOCK.nanos_per_tick().value();
        let error = later.duration_since(now).as_nanos().abs_diff(5_000_000);
        // Within a tick, and 1 ppm for a rate corrected in between.
        assert!(error as f64 <= tick + 5.0, "5 ms came back {error} ns off");
    }

    #[test]
    fn operators_saturate_instead_of_panicking() {
        let max = Instant(u64::MAX);
        assert_eq!(max + Duration::from_nanos(1), max);
        assert_eq!(max + Duration::MAX, max);
        assert_eq!(Instant::ZERO - Duration::MAX, Instant::ZERO);
        assert_eq!(Instant::ZERO - max, Duration::ZERO);
        assert_eq!(max.checked_add(Duration::from_secs(1)), None);
        assert_eq!(Instant::ZERO.checked_sub(Duration::from_secs(1)), None);
        assert!(max.duration_since(Instant::ZERO) > Duration::from_secs(60 * 60 * 24 * 365));
        let mut instant = Instant::ZERO;
        instant -= Duration::from_secs(1);
        instant += Duration::MAX;
        assert_eq!(instant, max);
    }

    #[test]
    fn unix_conversion_saturates_at_both_ends() {
        let anchor = Anchor { unix_nanos: 10, ticks: u64::MAX / 2, nanos_per_tick: Scale::new(1.0 / 3.0) };
        assert_eq!(Instant::ZERO.as_unix_nanos(&anchor), 0);
        let far = Anchor { unix_nanos: u64::MAX - 10, ticks: 0, nanos_per_tick: Scale::new(16.0) };
        assert_eq!(Instant(u64::MAX).as_unix_nanos(&far), u64::MAX);
    }

    #[test]
    fn an_anchor_converts_as_the_clock_does() {
        let anchor = Anchor::new();
        let now = Instant::now();
        let tick = CLOCK.nanos_per_tick().value();
        for later in [now, now + Duration::from_millis(5)] {
            let by_anchor = later.as_unix_nanos(&anchor) - anchor.unix_nanos;
            let by_clock = later.duration_since(Instant(anchor.ticks)).as_nanos() as u64;
            // The same rate, unless a health check corrected it in between.
            assert!(by_anchor.abs_diff(by_clock) as f64 <= 2.0 * tick + 1e-6 * by_clock as f64 + 1.0);
        }
    }

    /// With 16 ns per tick (a 62.5 MHz counter), 2 000 ticks after the
    /// anchor are 32 µs after it, and before it as much before; with a
    /// third of a nanosecond (a 3 GHz TSC), 3 000 ticks are 1 µs.
    #[test]
    fn an_anchor_converts_with_its_own_rate() {
        let coarse = Anchor { unix_nanos: 1_000_000, ticks: 10_000, nanos_per_tick: Scale::new(16.0) };
        assert_eq!(Instant(12_000).as_unix_nanos(&coarse), 1_032_000);
        assert_eq!(Instant(8_000).as_unix_nanos(&coarse), 968_000);
        assert_eq!(Instant(10_001).as_unix_nanos(&coarse), 1_000_016);
        let fine = Anchor { unix_nanos: 1_000_000, ticks: 10_000, nanos_per_tick: Scale::new(1.0 / 3.0) };
        assert_eq!(Instant(13_000).as_unix_nanos(&fine), 1_001_000);
        assert_eq!(Instant(7_000).as_unix_nanos(&fine), 999_000);
    }

    #[test]
    fn unix_conversion_tracks_the_wall_clock() {
        let anchor = Anchor::new();
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
        let ours = Instant::now().as_unix_nanos(&anchor) as i128;
        assert!((wall - ours).abs() < 50_000_000, "wall {wall} vs ours {ours}");
    }

    /// For the simulated clock's tests: an anchor of any machine.
    pub(crate) fn anchor_of(unix_nanos: u64, ticks: u64, nanos_per_tick: Scale) -> Anchor {
        Anchor { unix_nanos, ticks, nanos_per_tick }
    }
}
