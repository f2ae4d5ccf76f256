//! The queue from traced threads to the collector: a per-thread `rtrb`
//! ring (what minitrace uses) against one shared crossbeam channel, with
//! both cores producing at once and a consumer draining.
//!
//! `cargo bench --bench channel`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

const PRODUCERS: usize = 2;

/// Time for each of `PRODUCERS` threads to push `iters` 96-byte messages
/// (a span's size) while one consumer thread drains.
fn run(iters: u64, per_thread_rings: bool) -> std::time::Duration {
    type Message = [u64; 12];
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    if per_thread_rings {
        let (producers, mut consumers): (Vec<_>, Vec<_>) =
            (0..PRODUCERS).map(|_| rtrb::RingBuffer::<Message>::new(4096)).unzip();
        let consumer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for ring in &mut consumers {
                        while ring.pop().is_ok() {}
                    }
                }
            })
        };
        let threads: Vec<_> = producers
            .into_iter()
            .map(|mut ring| {
                std::thread::spawn(move || {
                    for i in 0..iters {
                        while ring.push([i; 12]).is_err() {
                            std::hint::spin_loop();
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        stop.store(true, Ordering::Relaxed);
        consumer.join().unwrap();
    } else {
        let (sender, receiver) = crossbeam_channel::bounded::<Message>(4096 * PRODUCERS);
        let consumer = std::thread::spawn(move || for _ in receiver {});
        let threads: Vec<_> = (0..PRODUCERS)
            .map(|_| {
                let sender = sender.clone();
                std::thread::spawn(move || {
                    for i in 0..iters {
                        sender.send([i; 12]).unwrap();
                    }
                })
            })
            .collect();
        drop(sender);
        threads.into_iter().for_each(|t| t.join().unwrap());
        consumer.join().unwrap();
    }
    start.elapsed()
}

fn channels(c: &mut Criterion) {
    let mut group = c.benchmark_group("queue to the collector, 2 producers");
    group.bench_function("rtrb ring per thread", |b| b.iter_custom(|iters| run(iters, true)));
    group.bench_function("one crossbeam channel", |b| b.iter_custom(|iters| run(iters, false)));
    group.finish();
}

criterion_group!(benches, channels);
criterion_main!(benches);
