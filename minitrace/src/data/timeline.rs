//! One time line for the whole process: every clock reading becomes the
//! same Unix time whoever converts it and whenever, so that the parts of a
//! trace converted in different collector cycles, a late child and its
//! root, or a request in a report, in a slow-trace window and in a
//! snapshot, all agree to the nanosecond.
//!
//! A reading is first converted with one [`Anchor`] taken once per process
//! (the *base* time, which runs at the clock's calibrated rate), then
//! corrected by a function of the base time alone: piecewise linear and
//! continuous, so the line never goes backwards. Each piece, a
//! [`Segment`], lasts about [`STEER_EVERY`] and is decided about that long
//! before readings in it are taken: its rate is set to bring the line back
//! to the wall clock (an NTP-like *slew* of at most [`MAX_SLEW_PPM`]); an
//! error beyond [`STEP_BEYOND`] (the wall clock was set) is corrected at
//! once, at the segment's start. A [`Timeline`] is a view of the decided
//! segments, taken once per collector cycle; converting a reading past
//! them decides the next ones first.
//!
//! What it costs: one multiply more per conversion than an [`Anchor`]'s,
//! and a lock taken twice a second by whoever converts.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use minstant::{Anchor, Instant};

use crate::util::lock;

/// How long a segment of the line lasts, and how far ahead of the present
/// it is decided.
const STEER_EVERY: Duration = Duration::from_secs(1);
/// The largest rate correction of a segment: half a millisecond per second,
/// as NTP's slew.
pub(crate) const MAX_SLEW_PPM: i64 = 500;
/// An error between the line and the wall clock beyond this is corrected
/// at once (the wall clock was set) rather than slewed.
const STEP_BEYOND: Duration = Duration::from_secs(1);
/// Segments kept: an hour and more. A reading older than the oldest is
/// converted by it, extended backwards.
const MAX_SEGMENTS: usize = 4096;

/// A piece of the line: from base time `from` on, the correction is
/// `offset` plus `slew` / 2³² per nanosecond since `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    from: u64,
    offset: i64,
    slew: i64,
}

impl Segment {
    #[inline]
    fn apply(&self, base: u64) -> u64 {
        let since = i128::from(base) - i128::from(self.from);
        let correction = i128::from(self.offset) + ((since * i128::from(self.slew)) >> 32);
        (i128::from(base) + correction).clamp(0, i128::from(u64::MAX)) as u64
    }

    /// The correction at base time `at`.
    fn correction_at(&self, at: u64) -> i64 {
        (i128::from(self.apply(at)) - i128::from(at)) as i64
    }
}

/// The process's line: the base anchor, the decided segments (oldest
/// first), and the base time up to which they are decided.
struct Line {
    base: Anchor,
    segments: Arc<[Segment]>,
    until: u64,
}

fn line() -> &'static Mutex<Line> {
    static LINE: OnceLock<Mutex<Line>> = OnceLock::new();
    LINE.get_or_init(|| {
        let base = Anchor::new();
        let now = Instant::now().as_unix_nanos(&base);
        let first = Segment { from: now, offset: 0, slew: 0 };
        Mutex::new(Line { base, segments: Arc::from([first]), until: now + nanos(STEER_EVERY) })
    })
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn wall_clock_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, nanos)
}

impl Line {
    /// Decides segments until the line covers `STEER_EVERY` past `now`
    /// (base time), each steered towards the wall clock as read now.
    fn extend(&mut self, now: u64) {
        let ahead = now.saturating_add(nanos(STEER_EVERY));
        if self.until >= ahead.saturating_sub(nanos(STEER_EVERY) / 2) {
            return;
        }
        let last = *self.segments.last().expect("a line has a segment");
        // How far the line is from the wall clock now, and where the next
        // segment starts: where the decided ones end.
        let error = i128::from(wall_clock_nanos()) - i128::from(last.apply(now));
        let from = self.until;
        let length = ahead - from;
        let offset = last.correction_at(from);
        let next = if error.unsigned_abs() > STEP_BEYOND.as_nanos() {
            Segment { from, offset: offset.saturating_add(error as i64), slew: 0 }
        } else {
            let max = (MAX_SLEW_PPM << 32) / 1_000_000;
            let slew = ((error << 32) / i128::from(length.max(1))).clamp(-i128::from(max), i128::from(max));
            Segment { from, offset, slew: slew as i64 }
        };
        let keep = self.segments.len().min(MAX_SEGMENTS - 1);
        let segments = self.segments[self.segments.len() - keep..].iter().copied().chain([next]).collect();
        self.segments = segments;
        self.until = ahead;
    }
}

/// A view of the process's time line: converts clock readings to Unix
/// nanoseconds, as every other view does.
#[derive(Clone, Debug)]
pub(crate) struct Timeline {
    base: Anchor,
    segments: Arc<[Segment]>,
    until: u64,
    /// The segment the view was taken in, and where it ends: what most
    /// readings a collector cycle converts fall in. (The last segment is
    /// decided ahead and starts in the future; without this every reading
    /// would search the segments, an hour of them.)
    now: Segment,
    /// How long `now` lasts, at most [`MAX_NEAR`].
    now_len: u64,
}

/// Readings at most this far into the view's segment are converted in
/// 64-bit arithmetic: with a slew of at most 2²² (500 ppm in 2⁻³²), the
/// product stays under 2⁶² (a segment lasts a second, 2³⁰ ns).
const MAX_NEAR: u64 = 1 << 40;

impl Timeline {
    /// The line as decided now, covering at least the next half second.
    pub(crate) fn current() -> Timeline {
        let mut line = lock(line());
        let now = Instant::now().as_unix_nanos(&line.base);
        line.extend(now);
        Timeline::of(&line, now)
    }

    /// A view of `line` taken at base time `now`.
    fn of(line: &Line, now: u64) -> Timeline {
        let segments = line.segments.clone();
        let at = segments.partition_point(|segment| segment.from <= now).saturating_sub(1);
        let now = segments[at];
        let now_until = segments.get(at + 1).map_or(line.until, |next| next.from);
        // A segment steeper than the 64-bit path allows (never made by
        // `Line::extend`) is left to the general one.
        let now_len =
            if now.slew.unsigned_abs() < 1 << 22 { (now_until - now.from).min(MAX_NEAR) } else { 0 };
        Timeline { base: line.base, now, now_len, segments, until: line.until }
    }

    /// [`unix_nanos`](Self::unix_nanos) of a base time.
    #[inline]
    fn base_to_unix(&self, base: u64) -> u64 {
        // In the view's segment: `Segment::apply` in 64 bits, which gives
        // the same result while nothing overflows, and nothing does there
        // (see `MAX_NEAR`) unless the offset is absurd, which the checked
        // additions send to the general path.
        let since = base.wrapping_sub(self.now.from);
        if since < self.now_len {
            let near = ((since as i64) * self.now.slew) >> 32;
            if let Some(unix) = self.now.offset.checked_add(near).and_then(|c| base.checked_add_signed(c)) {
                return unix;
            }
        }
        self.unix_nanos_slowly(base)
    }

    /// `instant` in Unix nanoseconds; [`Instant::ZERO`] (never read) is 0.
    #[inline]
    pub(crate) fn unix_nanos(&self, instant: Instant) -> u64 {
        if instant == Instant::ZERO {
            return 0;
        }
        self.base_to_unix(instant.as_unix_nanos(&self.base))
    }

    #[cold]
    #[inline(never)]
    fn unix_nanos_slowly(&self, base: u64) -> u64 {
        if base >= self.until {
            // Read after this view was taken: the line is decided further.
            return Timeline::current().segment_for(base).apply(base);
        }
        self.segment_for(base).apply(base)
    }

    /// The segment a base time falls in; the oldest for a time before it.
    fn segment_for(&self, base: u64) -> &Segment {
        let after = self.segments.partition_point(|segment| segment.from <= base);
        &self.segments[after.saturating_sub(1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_converts_the_same_in_every_view() {
        let early = Timeline::current();
        let readings: Vec<Instant> = (0..1000).map(|_| Instant::now()).collect();
        let late = Timeline::current();
        for reading in readings {
            assert_eq!(early.unix_nanos(reading), late.unix_nanos(reading));
        }
        let wall = wall_clock_nanos();
        let now = late.unix_nanos(Instant::now());
        assert!(now.abs_diff(wall) < 50_000_000, "{now} against the wall clock's {wall}");
    }

    #[test]
    fn the_line_is_continuous_and_slews_towards_the_wall_clock() {
        let max = (MAX_SLEW_PPM << 32) / 1_000_000;
        // A line whose base time runs 10 ms behind the wall clock.
        let wall = wall_clock_nanos();
        let (start, until, now) = (wall - 3_000_000_000, wall - 2_000_000_000, wall - 10_000_000);
        let mut line = Line {
            base: Anchor::new(),
            segments: Arc::from([Segment { from: start, offset: 0, slew: 0 }]),
            until,
        };
        line.extend(now);
        let [first, second] = line.segments[..] else { panic!("{:?}", line.segments) };
        assert_eq!(second.from, until);
        // Continuous where the segments meet, steered forwards, and never
        // steeper than the bound.
        assert_eq!(first.apply(until), second.apply(until));
        assert_eq!(second.slew, max, "10 ms behind: slewed as fast as allowed");
        assert_eq!(line.until, now + nanos(STEER_EVERY));
        // A segment is decided once: extending again keeps it as it was.
        line.extend(now + 1);
        assert_eq!(line.segments.len(), 2);
        assert_eq!(line.segments[1], second);
        // An error beyond the step bound is corrected at once.
        // (Here the base time jumps 10 s ahead of the wall clock.)
        let jumped = now + 10 * nanos(STEP_BEYOND);
        line.extend(jumped);
        let third = line.segments[2];
        assert_eq!(third.slew, 0);
        assert!(third.apply(jumped).abs_diff(wall_clock_nanos()) < 10_000_000);
    }

    #[test]
    fn a_view_converts_by_the_segment_each_reading_falls_in() {
        let max = (MAX_SLEW_PPM << 32) / 1_000_000;
        let second = 1_000_000_000;
        let segments: Vec<Segment> = (0..5)
            .scan(Segment { from: second, offset: 0, slew: max }, |segment, i| {
                let this = *segment;
                let from = this.from + second;
                *segment = Segment {
                    from,
                    offset: this.correction_at(from),
                    slew: if i % 2 == 0 { -max } else { max },
                };
                Some(this)
            })
            .collect();
        let line = Line { base: Anchor::new(), segments: Arc::from(segments.clone()), until: 6 * second };
        // Views taken in every segment, the last one (ahead) included.
        for now in [second + 5, 2 * second + 1, 3 * second, 5 * second + 7] {
            let view = Timeline::of(&line, now);
            for base in (0..7 * second).step_by(second as usize / 8).chain([2 * second - 1, 2 * second]) {
                let by_search = segments[segments.partition_point(|s| s.from <= base).saturating_sub(1)];
                if base < line.until {
                    assert_eq!(
                        view.base_to_unix(base),
                        by_search.apply(base),
                        "view at {now}, reading {base}"
                    );
                }
            }
        }
    }

    /// The view's 64-bit path gives what the segment's 128-bit `apply`
    /// gives, to the nanosecond, for any offset and slew the line can hold
    /// (and offsets far beyond, which the 64-bit path hands on).
    #[test]
    fn the_view_segment_converts_exactly_as_the_segment_does() {
        let max = (MAX_SLEW_PPM << 32) / 1_000_000;
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            state >> 11
        };
        let from = 1_700_000_000_000_000_000;
        let offsets =
            [0, 1, -1, 37_000_000_000, -37_000_000_000, i64::MAX / 2, i64::MIN / 2, i64::MAX, i64::MIN];
        for offset in offsets {
            for slew in [0, 1, -1, max, -max, max / 3, -(max / 7)] {
                let segment = Segment { from, offset, slew };
                let line =
                    Line { base: Anchor::new(), segments: Arc::from([segment]), until: from + 4_000_000_000 };
                let view = Timeline::of(&line, from + 1);
                for _ in 0..2_000 {
                    let base = from + next() % 4_000_000_000;
                    assert_eq!(
                        view.base_to_unix(base),
                        segment.apply(base),
                        "offset {offset}, slew {slew}, {base}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_line_never_goes_backwards_across_a_segment() {
        let max = (MAX_SLEW_PPM << 32) / 1_000_000;
        let first = Segment { from: 0, offset: 5_000, slew: max };
        let second = Segment { from: 1_000_000_000, offset: first.correction_at(1_000_000_000), slew: -max };
        let mut previous = 0;
        for base in (999_999_000..1_000_001_000).step_by(7) {
            let segment = if base < second.from { first } else { second };
            let unix = segment.apply(base);
            assert!(unix >= previous, "{base}: {unix} < {previous}");
            previous = unix;
        }
    }
}
