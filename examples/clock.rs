//! Prints which clock `minstant` chose, its rate, what calibration cost, and
//! what one reading costs next to `std::time::Instant`.
//!
//! `cargo run --release --example clock`

use std::time::Instant as StdInstant;

fn main() {
    let first_reading = StdInstant::now();
    minstant::Instant::now();
    let start_up = first_reading.elapsed();

    let info = minstant::clock_info();
    println!("source:            {:?}", info.source);
    if let Some(why) = &info.fallback_reason {
        println!("why not a counter: {why}");
    }
    println!("rate:              {:.6} GHz", info.ticks_per_second / 1e9);
    println!(
        "resolution:        {:.2} ns (CLOCK_MONOTONIC states {} ns)",
        info.resolution_nanos, info.os_clock_resolution_nanos
    );
    println!("calibrated cpus:   {:?}", info.calibrated_cpus);
    println!("calibration took:  {:?} (first reading in all: {start_up:?})", info.calibration_time);

    const READS: u32 = 5_000_000;
    let cost = |read: &dyn Fn()| {
        // The best of a few rounds, so a busy neighbour does not skew the ratio.
        (0..5)
            .map(|_| {
                let start = StdInstant::now();
                for _ in 0..READS {
                    read();
                }
                start.elapsed().as_secs_f64() * 1e9 / f64::from(READS)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let ours = cost(&|| {
        std::hint::black_box(minstant::Instant::now());
    });
    let std = cost(&|| {
        std::hint::black_box(StdInstant::now());
    });
    println!("one reading:       {ours:.1} ns (std::time::Instant: {std:.1} ns, ratio {:.2})", ours / std);

    println!("health:            {:?}", minstant::health());

    let anchor = minstant::Anchor::new();
    println!("unix time now:     {} ns", minstant::Instant::now().as_unix_nanos(&anchor));
}
