//! Elapsed time by `minstant` against `CLOCK_MONOTONIC` (std's `Instant`
//! on Linux) over a long window, in parts per million: what the health
//! checks' rate corrections achieve.
//!
//! `cargo run --release -p minstant --example drift -- 60` (seconds).

use std::time::{Duration, Instant as StdInstant};

/// A (std, minstant) pair read within a few hundred ns of each other.
fn paired() -> (StdInstant, minstant::Instant) {
    let mut best: Option<(Duration, StdInstant, minstant::Instant)> = None;
    for _ in 0..10_000 {
        let before = StdInstant::now();
        let ours = minstant::Instant::now();
        let after = StdInstant::now();
        let width = after - before;
        if best.map_or(true, |(w, ..)| width < w) {
            best = Some((width, before + width / 2, ours));
        }
    }
    let (_, std, ours) = best.unwrap();
    (std, ours)
}

fn main() {
    let seconds: u64 = std::env::args().nth(1).map_or(60, |s| s.parse().expect("seconds"));
    println!("{:?}", minstant::clock_info());
    let (std_start, ours_start) = paired();
    for second in 1..=seconds {
        std::thread::sleep(Duration::from_secs(1));
        if second % 10 == 0 || second == seconds {
            let (std_now, ours_now) = paired();
            let reference = (std_now - std_start).as_nanos() as f64;
            let ours = (ours_now - ours_start).as_nanos() as f64;
            println!(
                "after {second:>4} s: {:+.3} ppm ({:+.0} ns)",
                (ours - reference) / reference * 1e6,
                ours - reference
            );
        }
    }
    println!("{:?}", minstant::health());
}
