//! The queue from traced threads to the collector: a per-thread `rtrb`
//! ring (what minitrace uses) against one shared crossbeam channel, with
//! both cores producing at once and a consumer draining.
//!
//! Charged as the contenders of `benches/spans.rs` are: the CPU time of the
//! whole process (producers and consumer), so that a side that waits by
//! spinning pays for it. Neither consumer busy-waits: crossbeam's receiver
//! parks when the channel is empty, and the rings' consumer parks when it
//! finds every ring empty, woken by a producer whose ring is full (as
//! minitrace's collector sleeps between its cycles).
//!
//! `cargo bench --bench channel`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use minitrace_suite::process_cpu_time;

const PRODUCERS: usize = 2;

/// A message: the size of a slot of minitrace's own ring, 88 bytes on
/// 64-bit targets (asserted in minitrace/src/transport/message.rs).
type Message = [u64; 11];

const _: () = assert!(std::mem::size_of::<Message>() == 88);

/// Process CPU time for each of `PRODUCERS` threads to push `iters`
/// messages and for one consumer thread to pop them all, from starting the
/// threads until the consumer has drained every message.
fn run(iters: u64, per_thread_rings: bool) -> std::time::Duration {
    let start = process_cpu_time();
    let consumed = if per_thread_rings {
        let (producers, mut consumers): (Vec<_>, Vec<_>) =
            (0..PRODUCERS).map(|_| rtrb::RingBuffer::<Message>::new(4096)).unzip();
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut consumed = 0u64;
                loop {
                    // Acquire: every push finished before `stop` was set, so
                    // the drain after seeing it takes every message left.
                    let stopped = stop.load(Ordering::Acquire);
                    let before = consumed;
                    for ring in &mut consumers {
                        while ring.pop().is_ok() {
                            consumed += 1;
                        }
                    }
                    if stopped {
                        break consumed;
                    }
                    if consumed == before {
                        // An unpark before this park makes it return at once.
                        std::thread::park();
                    }
                }
            })
        };
        let threads: Vec<_> = producers
            .into_iter()
            .map(|mut ring| {
                let consumer = consumer.thread().clone();
                std::thread::spawn(move || {
                    for i in 0..iters {
                        while ring.push([i; 11]).is_err() {
                            // Full: wake the consumer and give it the CPU.
                            consumer.unpark();
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        stop.store(true, Ordering::Release);
        consumer.thread().unpark();
        consumer.join().unwrap()
    } else {
        let (sender, receiver) = crossbeam_channel::bounded::<Message>(4096 * PRODUCERS);
        let consumer = std::thread::spawn(move || receiver.iter().map(|_| 1u64).sum::<u64>());
        let threads: Vec<_> = (0..PRODUCERS)
            .map(|_| {
                let sender = sender.clone();
                std::thread::spawn(move || {
                    for i in 0..iters {
                        sender.send([i; 11]).unwrap();
                    }
                })
            })
            .collect();
        drop(sender);
        threads.into_iter().for_each(|t| t.join().unwrap());
        consumer.join().unwrap()
    };
    let elapsed = process_cpu_time() - start;
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
