//! How long the first reading takes, in a fresh process: the clock starts
//! on first use (x86: a rate measured in 200 µs, the TSC calibrated in the
//! background after; aarch64: the counter's stated rate, at once).
//!
//! `cargo run --release -p minstant --example startup -- 20` starts itself
//! 20 times and prints each process's time and the median; without an
//! argument it measures its own first reading.

use std::process::Command;
use std::time::Instant as StdInstant;

fn main() {
    if let Some(runs) = std::env::args().nth(1) {
        let runs: usize = runs.parse().expect("the number of processes to start");
        let mut firsts: Vec<u128> = (0..runs)
            .map(|_| {
                let output = Command::new(std::env::current_exe().unwrap()).output().expect("run myself");
                let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
                print!("{stdout}");
                let first = stdout.lines().find_map(|line| line.strip_prefix("first reading: "));
                first.and_then(|nanos| nanos.trim_end_matches(" ns").parse().ok()).expect("a first reading")
            })
            .collect();
        firsts.sort_unstable();
        println!("median of {runs} processes: first reading after {} ns", firsts[runs / 2]);
        return;
    }
    let before = StdInstant::now();
    let first = minstant::Instant::now();
    let spent = before.elapsed();
    let second = minstant::Instant::now();
    assert!(second >= first);
    println!("first reading: {} ns", spent.as_nanos());
    let info = minstant::clock_info();
    println!("  source {:?} settled after {:?}", info.source, info.calibration_time);
}
