//! This workspace's minitrace beside minitrace 0.6.7 and fastrace, on
//! identical workloads, each with a reporter that discards the spans.
//!
//! Every measurement is the **CPU time of the whole process** (all threads,
//! collector threads included) over a batch of iterations that ends with
//! the library's `flush()`: collection work is charged to the library that
//! causes it, wherever it runs.
//!
//! `cargo bench --bench spans`; compare medians as ratios within one run.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use minitrace_suite::{busy_work, process_cpu_time, traced_workloads, Worker};

traced_workloads!(ours, minitrace);
traced_workloads!(minitrace_0_6_7, minitrace_067);
traced_workloads!(fastrace_0_7, fastrace);

struct Discard;

impl minitrace::collector::Reporter for Discard {
    fn report(&mut self, spans: &[minitrace::collector::SpanRecord]) {
        criterion::black_box(spans);
    }
}

impl minitrace_067::collector::Reporter for Discard {
    fn report(&mut self, spans: &[minitrace_067::collector::SpanRecord]) {
        criterion::black_box(spans);
    }
}

impl fastrace::collector::Reporter for Discard {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        criterion::black_box(spans);
    }
}

fn install_reporters() {
    minitrace::set_reporter(Discard, minitrace::collector::Config::default());
    minitrace_067::set_reporter(Discard, minitrace_067::collector::Config::default());
    fastrace::set_reporter(Discard, fastrace::collector::Config::default());
}

type Library = (&'static str, fn(), fn(usize), fn(usize), fn(usize, u64) -> u64, fn(usize, &Worker));

const LIBRARIES: [Library; 3] = [
    ("minitrace (this workspace)", ours::flush, ours::wide, ours::deep, ours::request, ours::handoff),
    (
        "minitrace 0.6.7",
        minitrace_0_6_7::flush,
        minitrace_0_6_7::wide,
        minitrace_0_6_7::deep,
        minitrace_0_6_7::request,
        minitrace_0_6_7::handoff,
    ),
    (
        "fastrace 0.7",
        fastrace_0_7::flush,
        fastrace_0_7::wide,
        fastrace_0_7::deep,
        fastrace_0_7::request,
        fastrace_0_7::handoff,
    ),
];

/// Process CPU time per iteration, the library's flush included.
fn cpu_time(iters: u64, flush: fn(), mut run: impl FnMut()) -> std::time::Duration {
    let start = process_cpu_time();
    for _ in 0..iters {
        run();
    }
    flush();
    process_cpu_time() - start
}

fn local_spans(c: &mut Criterion) {
    install_reporters();
    for (shape, children_of) in [("wide", 2usize), ("deep", 3usize)] {
        let mut group = c.benchmark_group(format!("local spans, {shape}"));
        for n in [1usize, 10, 100, 1000] {
            group.throughput(Throughput::Elements(n as u64 + 1));
            for library in LIBRARIES {
                let (name, flush) = (library.0, library.1);
                let run: fn(usize) = if children_of == 2 { library.2 } else { library.3 };
                group.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                    b.iter_custom(|iters| cpu_time(iters, flush, || run(n)))
                });
            }
        }
        group.finish();
    }
}

/// A request of ten 100 ns steps (~1 µs): 1 root + 9 traced steps, next to
/// the same steps untraced. The cost of tracing is the difference.
fn one_microsecond_request(c: &mut Criterion) {
    install_reporters();
    let mut group = c.benchmark_group("1 µs request, 1 root + 9 children");
    let steps = 9;
    let work = 100; // ~110 ns of busy_work on this machine
    group.bench_function("untraced", |b| {
        b.iter_custom(|iters| {
            cpu_time(
                iters,
                || {},
                || {
                    criterion::black_box((0..steps).map(|_| busy_work(work)).sum::<u64>());
                },
            )
        })
    });
    for (name, flush, _, _, request, _) in LIBRARIES {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                cpu_time(iters, flush, || {
                    criterion::black_box(request(steps, work));
                })
            })
        });
    }
    group.finish();
}

fn spans_across_threads(c: &mut Criterion) {
    install_reporters();
    let worker = Worker::new();
    let mut group = c.benchmark_group("Span with explicit parent, finished on another thread");
    // Many spans per hand-off, so that the thread wake-up does not drown
    // the cost of the spans.
    let children = 1000;
    group.throughput(Throughput::Elements(children as u64 + 1));
    // The hand-off itself (a channel round trip and a thread wake-up), for
    // subtracting from the rows below.
    group.bench_function("hand-off only, untraced", |b| {
        b.iter_custom(|iters| {
            cpu_time(
                iters,
                || {},
                || {
                    let items: Vec<u64> = (0..children as u64).collect();
                    worker.finish(Box::new(items));
                },
            )
        })
    });
    for (name, flush, _, _, _, handoff) in LIBRARIES {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| cpu_time(iters, flush, || handoff(children, &worker)))
        });
    }
    group.finish();
}

/// Spans dropped at a full queue cost no collection work, which would
/// flatter us; say how many, and refuse a run where it matters.
fn report_losses(_: &mut Criterion) {
    let stats = minitrace::collector::stats();
    let dropped = stats.dropped() as f64 / (stats.spans_reported + stats.dropped()).max(1) as f64;
    eprintln!("this workspace's collector: {stats:?} ({:.4} % dropped)", dropped * 100.0);
    eprintln!("clock: {:?}", minstant::clock_info());
    assert!(dropped < 0.001, "over 0.1 % of spans were dropped: the comparison would flatter us");
}

criterion_group!(benches, local_spans, one_microsecond_request, spans_across_threads, report_losses);
criterion_main!(benches);
