//! `now()` of every clock in one run: std, ours, the published minstant
//! 0.1.7, quanta, and the raw instructions ours is built from; then a
//! reading converted to Unix time, ours beside minstant 0.1.7's.
//!
//! `cargo bench --bench clock`; compare the medians as ratios to `std`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn clocks(c: &mut Criterion) {
    let mut group = c.benchmark_group("now");
    // Make every clock calibrate before it is timed.
    let _ = (minstant::Instant::now(), minstant_017::Instant::now(), quanta::Instant::now());

    group.bench_function("std", |b| b.iter(std::time::Instant::now));
    group.bench_function("minstant (this workspace)", |b| b.iter(minstant::Instant::now));
    group.bench_function("minstant (this workspace), now_unordered", |b| {
        b.iter(minstant::Instant::now_unordered)
    });
    group.bench_function("minstant 0.1.7", |b| b.iter(minstant_017::Instant::now));
    group.bench_function("quanta 0.12", |b| b.iter(quanta::Instant::now));
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__rdtscp, _mm_lfence, _rdtsc};
        if minstant::is_tsc_available() {
            group.bench_function("raw rdtscp", |b| {
                b.iter(|| {
                    let mut aux = 0;
                    // SAFETY: minstant only uses the TSC after checking that
                    // the CPU implements RDTSCP.
                    black_box(unsafe { __rdtscp(&mut aux) })
                })
            });
        }
        group.bench_function("raw lfence; rdtsc", |b| {
            // SAFETY: LFENCE and RDTSC exist on every x86_64 CPU.
            b.iter(|| {
                black_box(unsafe {
                    _mm_lfence();
                    _rdtsc()
                })
            })
        });
        // SAFETY: RDTSC exists on every x86_64 CPU.
        group.bench_function("raw rdtsc", |b| b.iter(|| black_box(unsafe { _rdtsc() })));
    }
    group.finish();
    eprintln!("minstant source: {:?}", minstant::clock_info());
}

/// A clock reading converted to Unix time with an anchor taken once: what
/// minitrace's collector does twice per span it reports.
fn to_unix_time(c: &mut Criterion) {
    const READINGS: usize = 1024;
    let mut group = c.benchmark_group("reading to Unix time");
    group.throughput(criterion::Throughput::Elements(READINGS as u64));
    let ours: Vec<minstant::Instant> = (0..READINGS).map(|_| minstant::Instant::now()).collect();
    let anchor = minstant::Anchor::new();
    group.bench_function("minstant (this workspace), as_unix_nanos", |b| {
        b.iter(|| ours.iter().fold(0u64, |sum, at| sum ^ black_box(at).as_unix_nanos(&anchor)))
    });
    let published: Vec<minstant_017::Instant> = (0..READINGS).map(|_| minstant_017::Instant::now()).collect();
    let anchor_017 = minstant_017::Anchor::new();
    group.bench_function("minstant 0.1.7, as_unix_nanos", |b| {
        b.iter(|| published.iter().fold(0u64, |sum, at| sum ^ black_box(at).as_unix_nanos(&anchor_017)))
    });
    group.finish();
}

criterion_group!(benches, clocks, to_unix_time);
criterion_main!(benches);
