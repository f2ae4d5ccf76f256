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

/// Wall time for each of `PRODUCERS` threads to push `iters` 96-byte
/// messages (a span's size) and for one consumer thread to pop them all:
/// both sides end once the consumer has drained every message.
fn run(iters: u64, per_thread_rings: bool) -> std::time::Duration {
    type Message = [u64; 12];
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let consumed = if per_thread_rings {
        let (producers, mut consumers): (Vec<_>, Vec<_>) =
            (0..PRODUCERS).map(|_| rtrb::RingBuffer::<Message>::new(4096)).unzip();
        let consumer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut consumed = 0u64;
                let mut drain = |consumers: &mut Vec<rtrb::Consumer<Message>>| {
                    for ring in consumers {
                        while ring.pop().is_ok() {
                            consumed += 1;
                        }
                    }
                };
                // Acquire: every push finished before `stop` was set, so the
                // last drain below sees every message still in the rings.
                while !stop.load(Ordering::Acquire) {
                    drain(&mut consumers);
                }
                drain(&mut consumers);
                consumed
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
        stop.store(true, Ordering::Release);
        consumer.join().unwrap()
    } else {
        let (sender, receiver) = crossbeam_channel::bounded::<Message>(4096 * PRODUCERS);
        let consumer = std::thread::spawn(move || receiver.iter().map(|_| 1u64).sum::<u64>());
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
        consumer.join().unwrap()
    };
    let elapsed = start.elapsed();
    assert_eq!(consumed, iters * PRODUCERS as u64, "the consumer missed messages");
    elapsed
}

fn channels(c: &mut Criterion) {
    let mut group = c.benchmark_group("queue to the collector, 2 producers");
    group.bench_function("rtrb ring per thread", |b| b.iter_custom(|iters| run(iters, true)));
    group.bench_function("one crossbeam channel", |b| b.iter_custom(|iters| run(iters, false)));
    group.finish();
}

criterion_group!(benches, channels);
criterion_main!(benches);
