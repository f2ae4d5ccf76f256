//! Counts causality violations across threads: each thread reads another's
//! latest published reading (acquire), then reads the clock, which must not
//! be earlier; threads hop between cores as they go.
//!
//! `cargo run --release -p minstant --example causality -- 48000000`
//! (checks in all; the default is 48 million).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use minstant::{Atomic, Instant};

fn main() {
    let wanted: u64 = std::env::args().nth(1).map_or(48_000_000, |n| n.parse().expect("checks"));
    let threads = thread::available_parallelism().map_or(2, |n| n.get()).max(2);
    let slots: Arc<Vec<Atomic>> = Arc::new((0..threads).map(|_| Atomic::new(Instant::ZERO)).collect());
    let checks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    println!("{:?}", minstant::clock_info());
    let workers: Vec<_> = (0..threads)
        .map(|me| {
            let (slots, checks, stop) = (slots.clone(), checks.clone(), stop.clone());
            thread::spawn(move || {
                let mut violations = 0u64;
                let mut round = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let other = (me + 1 + round % (threads - 1)) % threads;
                    for _ in 0..1_000 {
                        let seen = slots[other].load(Ordering::Acquire);
                        let now = Instant::now();
                        violations += u64::from(now < seen);
                        slots[me].store(now, Ordering::Release);
                    }
                    if checks.fetch_add(1_000, Ordering::Relaxed) + 1_000 >= wanted {
                        stop.store(true, Ordering::Relaxed);
                    }
                    round += 1;
                    if round % 64 == 0 {
                        hop(round / 64 + me, threads);
                    }
                }
                violations
            })
        })
        .collect();
    let violations: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    println!(
        "{} checks across {threads} threads: {violations} causality violations ({:?})",
        checks.load(Ordering::Relaxed),
        minstant::health()
    );
    assert_eq!(violations, 0);
}

/// Pins the calling thread to the `step`-th core (cyclically).
fn hop(step: usize, cores: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: an all-zero cpu_set_t is a valid empty set; the cpu number is
    // below CPU_SETSIZE; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(step % cores, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (step, cores);
}
