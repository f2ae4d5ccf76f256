use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clock::clock;

/// A reading of a monotonic clock, like [`std::time::Instant`] but read from
/// the CPU's time-stamp counter where that is safe (see the [crate docs](crate)).
///
/// Internally an `Instant` is a tick count; it is turned into nanoseconds only
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
    /// synchronisation) is not earlier than it.
    ///
    /// ```
    /// let a = minstant::Instant::now();
    /// let b = minstant::Instant::now();
    /// assert!(b >= a);
    /// ```
    #[inline]
    pub fn now() -> Instant {
        Instant(clock().now_ticks())
    }

    /// A cheaper reading for timing an interval on one thread: both ends
    /// read with `now_unordered` on the same thread give its length.
    ///
    /// Where the TSC is used and every core's counter is in step, this is a
    /// plain `RDTSC`, cheaper than `RDTSCP` as it does not wait for earlier
    /// instructions (PERFORMANCE.md, "The clock"); otherwise it is
    /// [`Instant::now`]. The price: the CPU may take the reading a little
    /// before the instructions that precede it complete, so it is **not
    /// ordered with other threads**, nor with an [`Instant::now`]
    /// that precedes it on the same thread: it can be earlier than either by
    /// the length of the CPU's out-of-order window (tens of nanoseconds).
    /// Successive `now_unordered` readings on one thread do not go backwards.
    /// Use [`Instant::now`] whenever readings are compared across threads.
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
        Instant(clock().now_ticks_unordered())
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
        Some(Duration::from_nanos(clock().ticks_to_nanos(ticks)))
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
        self.0.checked_add(clock().duration_to_ticks(duration)?).map(Instant)
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
        self.0.checked_sub(clock().duration_to_ticks(duration)?).map(Instant)
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
    /// The clock's tick length in nanoseconds as a 0.64 fixed-point
    /// fraction, copied from the clock where a tick is shorter than a
    /// nanosecond (any TSC above 1 GHz), 0 otherwise: so that a conversion
    /// is one multiply, without asking the clock
    /// (PERFORMANCE.md, "The collector: making records").
    tick_fraction_q64: u64,
}

impl Default for Anchor {
    fn default() -> Anchor {
        Anchor::new()
    }
}

impl Anchor {
    /// Reads the wall clock and [`Instant::now`] together.
    ///
    /// ```
    /// let anchor = minstant::Anchor::new();
    /// # let _ = anchor;
    /// ```
    pub fn new() -> Anchor {
        let ticks = Instant::now().0;
        let unix_nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX));
        Anchor { unix_nanos, ticks, tick_fraction_q64: clock().tick_fraction_q64() }
    }

    #[inline]
    fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        match self.tick_fraction_q64 {
            0 => clock().ticks_to_nanos(ticks),
            fraction => crate::clock::fraction_of(ticks, fraction),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_trip_through_durations() {
        let now = Instant::now();
        for nanos in [0, 1, 999, 1_000_000, 3_600_000_000_000] {
            let later = now + Duration::from_nanos(nanos);
            let back = later.duration_since(now).as_nanos() as i128;
            assert_eq!(back, nanos as i128);
        }
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
        let anchor = Anchor { unix_nanos: 10, ticks: u64::MAX / 2, tick_fraction_q64: 0 };
        assert_eq!(Instant::ZERO.as_unix_nanos(&anchor), 0);
        let far = Anchor { unix_nanos: u64::MAX - 10, ticks: 0, tick_fraction_q64: 0 };
        assert_eq!(Instant(u64::MAX).as_unix_nanos(&far), u64::MAX);
    }

    #[test]
    fn an_anchor_converts_as_the_clock_does() {
        let anchor = Anchor::new();
        let asking_the_clock = Anchor { tick_fraction_q64: 0, ..anchor };
        let now = Instant::now();
        for instant in [now, now + Duration::from_secs(3600), now - Duration::from_millis(5), Instant::ZERO] {
            assert_eq!(instant.as_unix_nanos(&anchor), instant.as_unix_nanos(&asking_the_clock));
        }
    }

    /// The fraction path on any clock: with half a nanosecond per tick,
    /// 2 000 ticks after the anchor are 1 000 ns after it, and before it
    /// as much before.
    #[test]
    fn an_anchor_with_a_tick_fraction_converts_with_it() {
        let anchor = Anchor { unix_nanos: 1_000_000, ticks: 10_000, tick_fraction_q64: 1 << 63 };
        assert_eq!(Instant(12_000).as_unix_nanos(&anchor), 1_001_000);
        assert_eq!(Instant(8_000).as_unix_nanos(&anchor), 999_000);
        assert_eq!(Instant(10_001).as_unix_nanos(&anchor), 1_000_001);
    }

    #[test]
    fn unix_conversion_tracks_the_wall_clock() {
        let anchor = Anchor::new();
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
        let ours = Instant::now().as_unix_nanos(&anchor) as i128;
        assert!((wall - ours).abs() < 50_000_000, "wall {wall} vs ours {ours}");
    }
}
