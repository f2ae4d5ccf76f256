//! minstant 0.1.7's API used as 0.1 code uses it: `Instant` (constructors, the `std`-like
//! methods, the arithmetic operators, `ZERO`, `as_unix_nanos`), `Anchor`, `is_tsc_available`
//! and, with the `atomic` feature, `Atomic`; their trait impls, and readings checked against
//! `std::time`.

use std::fmt::Debug;
use std::hash::Hash;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use minstant::{Anchor, Atomic, Instant};

fn instant_like<
    T: Copy
        + Clone
        + PartialEq
        + Eq
        + PartialOrd
        + Ord
        + Hash
        + Debug
        + Send
        + Sync
        + Unpin
        + Add<Duration, Output = T>
        + AddAssign<Duration>
        + Sub<Duration, Output = T>
        + SubAssign<Duration>
        + Sub<T, Output = Duration>
        + 'static,
>() {
}
fn anchor_like<T: Copy + Clone + Default + Send + Sync + Unpin + 'static>() {}
fn atomic_like<T: Debug + From<Instant> + Send + Sync + Unpin + 'static>() {}

#[test]
fn the_trait_impls_and_signatures_are_017s() {
    instant_like::<Instant>();
    anchor_like::<Anchor>();
    atomic_like::<Atomic>();
    let _: fn() -> Instant = Instant::now;
    let _: fn(&Instant, Instant) -> Duration = Instant::duration_since;
    let _: fn(&Instant, Instant) -> Option<Duration> = Instant::checked_duration_since;
    let _: fn(&Instant, Instant) -> Duration = Instant::saturating_duration_since;
    let _: fn(&Instant) -> Duration = Instant::elapsed;
    let _: fn(&Instant, Duration) -> Option<Instant> = Instant::checked_add;
    let _: fn(&Instant, Duration) -> Option<Instant> = Instant::checked_sub;
    let _: fn(&Instant, &Anchor) -> u64 = Instant::as_unix_nanos;
    let _: fn() -> Anchor = Anchor::new;
    let _: fn() -> bool = minstant::is_tsc_available;
    let _: fn(Instant) -> Atomic = Atomic::new;
    let _: fn(&Atomic, Ordering) -> Instant = Atomic::load;
    let _: fn(&Atomic, Instant, Ordering) = Atomic::store;
    let _: fn(&Atomic, Instant, Ordering) -> Instant = Atomic::swap;
    let _: fn(&Atomic, Instant, Ordering) -> Instant = Atomic::fetch_max;
    let _: fn(&Atomic, Instant, Ordering) -> Instant = Atomic::fetch_min;
    let _: fn(Atomic) -> Instant = Atomic::into_instant;
    // `ZERO` is an associated constant, usable in constant context.
    const START: Instant = Instant::ZERO;
    assert_eq!(START, Instant::ZERO);
}

#[test]
fn instants_follow_std_time() {
    // Each minstant reading is bracketed by std readings, so preemption cannot skew the check.
    let std_before_start = std::time::Instant::now();
    let start: Instant = Instant::now();
    let std_after_start = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(50));
    let std_before_end = std::time::Instant::now();
    let elapsed: Duration = start.elapsed();
    let std_after_end = std::time::Instant::now();
    let shortest = std_before_end - std_after_start;
    let longest = std_after_end - std_before_start;
    // Allow for the calibrated tick rate being off by 0.1 %, plus rounding.
    let slack = longest / 1_000 + Duration::from_micros(100);
    assert!(
        elapsed + slack >= shortest && elapsed <= longest + slack,
        "{elapsed:?} not in {shortest:?}..{longest:?}"
    );
    assert!(elapsed >= Duration::from_millis(45), "{elapsed:?}");

    // Readings never go backwards, on one thread or across threads.
    let mut previous = Instant::now();
    for _ in 0..10_000 {
        let now = Instant::now();
        assert!(now >= previous);
        previous = now;
    }
    let before = Instant::now();
    let on_thread: Instant = std::thread::spawn(Instant::now).join().unwrap();
    assert!(on_thread >= before);
    assert!(Instant::ZERO < before);
    assert!(!format!("{before:?}").is_empty());
    let _: bool = minstant::is_tsc_available();
}

#[test]
fn arithmetic_matches_std_semantics() {
    let earlier = Instant::now();
    let later = earlier + Duration::from_millis(250);
    let span: Duration = later - earlier;
    // A duration converted to ticks and back may lose a few nanoseconds.
    let close = |d: Duration, expected: Duration| d.as_nanos().abs_diff(expected.as_nanos()) < 1_000;
    assert!(close(span, Duration::from_millis(250)), "{span:?}");
    assert!(close(later.duration_since(earlier), Duration::from_millis(250)));
    assert!(close(later.saturating_duration_since(earlier), Duration::from_millis(250)));
    assert!(close(later.checked_duration_since(earlier).unwrap(), Duration::from_millis(250)));
    // Backwards differences saturate to zero instead of panicking.
    assert_eq!(earlier.checked_duration_since(later), None);
    assert_eq!(earlier.duration_since(later), Duration::ZERO);
    assert_eq!(earlier.saturating_duration_since(later), Duration::ZERO);
    assert_eq!(earlier - later, Duration::ZERO);

    let mut moved = earlier;
    moved += Duration::from_secs(1);
    assert!(moved > earlier);
    moved -= Duration::from_secs(1);
    assert!(
        close(moved.duration_since(earlier), Duration::ZERO)
            && close(earlier.duration_since(moved), Duration::ZERO)
    );
    assert!(close(later - Duration::from_millis(250) - earlier, Duration::ZERO));
    let back: Instant = later.checked_sub(Duration::from_millis(250)).unwrap();
    assert!(
        close(back.duration_since(earlier), Duration::ZERO)
            && close(earlier.duration_since(back), Duration::ZERO)
    );
    let forward: Option<Instant> = earlier.checked_add(Duration::from_millis(1));
    assert!(forward.unwrap() > earlier);

    // Out of range is `None` from the checked forms.
    assert_eq!(Instant::ZERO.checked_sub(Duration::from_secs(1)), None);
    assert_eq!(Instant::now().checked_add(Duration::from_nanos(u64::MAX)), None);
    assert_eq!(Instant::ZERO.checked_duration_since(Instant::now()), None);
}

// A deliberate difference from 0.1.7, where these two panic as `std` does:
// a clock read on traced threads never panics in them, so the operators
// saturate (documented on `Instant`; `checked_add`/`checked_sub` detect it).
#[test]
fn adding_past_the_end_saturates() {
    let now = Instant::now();
    let end = now + Duration::from_nanos(u64::MAX);
    assert!(end > now);
    assert_eq!(end, end + Duration::from_secs(1));
}

#[test]
fn subtracting_before_zero_saturates() {
    assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
}

#[test]
fn as_unix_nanos_is_the_wall_clock() {
    let anchor: Anchor = Anchor::new();
    let default: Anchor = Anchor::default();
    let copied: Anchor = anchor;
    let wall_before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let now = Instant::now();
    let wall_after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    // The anchors pair their own wall and tick readings: allow them 50 ms of skew.
    let slack = 50_000_000;
    for anchor in [anchor, default, copied] {
        let unix: u64 = now.as_unix_nanos(&anchor);
        assert!(
            unix + slack >= wall_before && unix <= wall_after + slack,
            "{unix} vs {wall_before}..{wall_after}"
        );
    }
    // Instants before and after the anchor both convert, in order.
    let before = now - Duration::from_millis(10);
    let after = now + Duration::from_millis(10);
    let (b, n, a) = (before.as_unix_nanos(&anchor), now.as_unix_nanos(&anchor), after.as_unix_nanos(&anchor));
    assert!(b < n && n < a);
    assert!((a - b).abs_diff(20_000_000) < 1_000, "{}", a - b);
}

#[test]
fn atomic_instants() {
    let first = Instant::now();
    let second = first + Duration::from_millis(1);
    let atomic: Atomic = Atomic::new(first);
    assert_eq!(atomic.load(Ordering::Relaxed), first);
    atomic.store(second, Ordering::Relaxed);
    assert_eq!(atomic.swap(first, Ordering::AcqRel), second);
    assert_eq!(atomic.fetch_max(second, Ordering::AcqRel), first);
    assert_eq!(atomic.load(Ordering::Acquire), second);
    assert_eq!(atomic.fetch_min(first, Ordering::AcqRel), second);
    assert_eq!(atomic.into_instant(), first);
    let from: Atomic = Atomic::from(second);
    assert_eq!(from.load(Ordering::SeqCst), second);
    let converted: Atomic = second.into();
    assert!(!format!("{converted:?}").is_empty());
    // Shared between threads by reference.
    let shared = Atomic::new(Instant::ZERO);
    std::thread::scope(|scope| {
        scope.spawn(|| shared.fetch_max(Instant::now(), Ordering::AcqRel));
    });
    assert!(shared.load(Ordering::Acquire) > Instant::ZERO);
}
