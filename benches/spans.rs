//! This workspace's minitrace beside its peers, on the same workloads in
//! one run: minitrace 0.6.7, fastrace 0.7, tokio `tracing` (a `Registry`
//! alone, and a `Registry` with a layer that records closed spans),
//! `rustracing` with the `rustracing_jaeger` tracer, and the OpenTelemetry
//! SDK. Each library's sink does the same job: collect every finished span
//! and hand it to a reporter/exporter that discards it (see
//! `benches/contenders/`, whose `Contender::sink` says where that work
//! runs; the bench prints it at the end and writes it to
//! `target/criterion/spans-sinks.tsv` for `scripts/bench-report.py`).
//!
//! Every measurement is the **CPU time of the whole process** (all threads,
//! collector and export threads included) over a batch of iterations that
//! ends with the library's flush: collection work is charged to the
//! library that causes it, wherever it runs. The sink should receive every
//! span the batch made: the bench prints any shortfall per benchmark
//! (a library that drops spans skips their collection work, so it
//! is flattered there), and `scripts/bench-report.py` flags it beside the
//! numbers.
//!
//! Where a library lacks a concept, its closest natural equivalent is used
//! (each contender's module says which): OpenTelemetry's local span is
//! `tracer.in_span`, rustracing's is a child of the explicitly handed-down
//! parent, and only the minitrace-API libraries have `enter_on_poll`.
//!
//! `cargo bench --bench spans`, or `bash scripts/bench.sh` for the whole
//! suite and `BENCHMARKS.md`; compare medians as ratios within one run.

mod contenders;
mod design_floor;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use minitrace_suite::{Pinned, Step, Worker};

use contenders::{all, awaits, block_on, measure, measure_row, repeat, untraced, Producers};

fn local_spans(c: &mut Criterion) {
    for wide in [true, false] {
        let name = if wide { "local spans, wide" } else { "local spans, deep" };
        let mut group = c.benchmark_group(name);
        for n in [1usize, 10, 100, 1000] {
            group.throughput(Throughput::Elements(n as u64 + 1));
            for &contender in all() {
                group.bench_with_input(BenchmarkId::new(contender.name(), n), &n, |b, &n| {
                    b.iter_custom(|iters| {
                        repeat(name, &n.to_string(), contender, iters, n as u64 + 1, |c| {
                            if wide {
                                c.wide(n)
                            } else {
                                c.deep(n)
                            }
                        })
                    })
                });
            }
        }
        group.finish();
    }
}

/// A request of nine ~100 ns steps (~1 µs): 1 root + 9 traced steps, next
/// to the same steps untraced. The cost of tracing is the difference. Two
/// groups: steps independent of each other, which the CPU overlaps until a
/// clock read between them stops it, and steps chained through their
/// results, as in a real request (see [`Step`]).
fn one_microsecond_request(c: &mut Criterion) {
    for chained in [false, true] {
        let name = if chained {
            "1 µs request, chained steps, 1 root + 9 children"
        } else {
            "1 µs request, 1 root + 9 children"
        };
        let mut group = c.benchmark_group(name);
        let steps = 9;
        let step = Step { iterations: 100, chained }; // ~110 ns on this machine
        group.bench_function("untraced", |b| {
            b.iter_custom(|iters| {
                untraced(iters, || {
                    criterion::black_box((0..steps).fold(0, |previous, _| step.run(previous)));
                })
            })
        });
        // This workspace's floor: only the clock reads it makes for the
        // request (two per span), nothing recorded.
        group.bench_function("clock reads only (untraced + 2 per span)", |b| {
            b.iter_custom(|iters| {
                untraced(iters, || {
                    let root = minstant::Instant::now_unordered();
                    let last = (0..steps).fold(0, |previous, _| {
                        let start = minstant::Instant::now_unordered();
                        let result = step.run(previous);
                        criterion::black_box((start, minstant::Instant::now_unordered()));
                        result
                    });
                    criterion::black_box((last, root, minstant::Instant::now_unordered()));
                })
            })
        });
        // What makes the floor: a fence between steps and no clock read.
        // Where it costs as much as the clock reads, each read costs its
        // wait for the work before it, not its own latency.
        #[cfg(target_arch = "x86_64")]
        group.bench_function("fence only (untraced + lfence per step)", |b| {
            b.iter_custom(|iters| {
                untraced(iters, || {
                    let last = (0..steps).fold(0, |previous, _| {
                        // SAFETY: LFENCE has no operands and no effect
                        // beyond ordering; SSE2 is part of x86_64.
                        unsafe { std::arch::x86_64::_mm_lfence() };
                        step.run(previous)
                    });
                    criterion::black_box(last);
                })
            })
        });
        // This design's floor: the least a tracer built like this
        // workspace's does for the request (see `design_floor`), with its
        // records made on the collector thread, as ours, or on the traced one.
        let floors = [
            (design_floor::ROW, design_floor::request as fn(usize, Step) -> u64),
            (design_floor::RECORDING_HERE_ROW, design_floor::request_recording_here),
        ];
        for (row, request) in floors {
            group.bench_function(row, |b| {
                b.iter_custom(|iters| {
                    let spans = iters * (steps as u64 + 1);
                    let delivered = || Some(design_floor::delivered());
                    measure_row(name, "", row, spans, delivered, design_floor::flush, || {
                        for _ in 0..iters {
                            criterion::black_box(request(steps, step));
                        }
                    })
                })
            });
        }
        for &contender in all() {
            group.bench_function(contender.name(), |b| {
                b.iter_custom(|iters| {
                    repeat(name, "", contender, iters, steps as u64 + 1, |c| {
                        criterion::black_box(c.request(steps, step));
                    })
                })
            });
        }
        group.finish();
    }
}

fn spans_across_threads(c: &mut Criterion) {
    // This thread and the worker are kept on two different CPUs, the
    // hand-off this group is about. Left to the scheduler, each row got
    // whatever placement it was given: a span read on the core that wrote
    // it cost this workspace ~100 ns in all, read on the other core ~165 ns
    // (`Span`s and their messages cross between the cores' caches), and so
    // did every library's, so ratios between rows moved from ×0.3 to ×0.7
    // from one run to the next.
    let cpus = minitrace_suite::allowed_cpus();
    let (_pinned, worker) = match (cpus.first(), cpus.last()) {
        (Some(&here), Some(&there)) if here != there => {
            (Pinned::current_thread(here), Worker::on_cpu(Some(there)))
        }
        _ => (None, Worker::new()),
    };
    let name = "Span with explicit parent, finished on another thread";
    let mut group = c.benchmark_group(name);
    // Many spans per hand-off, so that the thread wake-ups are few.
    let children = 1000;
    group.throughput(Throughput::Elements(children as u64 + 1));
    // Every row is charged the process's CPU time minus what the hand-off
    // itself cost both threads (`Worker::hand_off_cpu`): sending, waiting
    // and waking up are the bench's, not the library's, and cost more the
    // longer the other side is busy (a parked thread's wake-up is an
    // interrupt between cores, microseconds on this virtual machine), which
    // a baseline row cannot capture.
    let without_hand_off = |measure: &mut dyn FnMut() -> std::time::Duration| {
        let before = worker.hand_off_cpu();
        let total = measure();
        total.saturating_sub(worker.hand_off_cpu() - before)
    };
    // What is left of an untraced hand-off: dropping the item on the worker.
    group.bench_function("hand-off only, untraced", |b| {
        b.iter_custom(|iters| {
            without_hand_off(&mut || {
                untraced(iters, || {
                    let items: Vec<u64> = (0..children as u64).collect();
                    worker.finish(Box::new(items));
                })
            })
        })
    });
    // The physical floor: each span's two clock reads (ordered, as a span
    // begun on one thread and ended on another needs), made where the
    // library makes them, and nothing else.
    group.bench_function("clock reads only (2 per span, the end on the other thread)", |b| {
        b.iter_custom(|iters| {
            without_hand_off(&mut || {
                untraced(iters, || {
                    let root = ReadAgainOnDrop(minstant::Instant::now());
                    let children: Vec<_> =
                        (0..children).map(|_| ReadAgainOnDrop(minstant::Instant::now())).collect();
                    worker.finish(Box::new((root, children)));
                })
            })
        })
    });
    // The design's floor (see `design_floor::SharedSpan`): the state, the
    // ordered end, one push into the ending thread's ring, the record.
    group.bench_function(design_floor::ROW, |b| {
        b.iter_custom(|iters| {
            without_hand_off(&mut || {
                let spans = iters * (children as u64 + 1);
                let delivered = || Some(design_floor::delivered());
                measure_row(name, "", design_floor::ROW, spans, delivered, design_floor::flush, || {
                    for _ in 0..iters {
                        let root = design_floor::SharedSpan::root("root");
                        let spans: Vec<_> = (0..children).map(|_| root.child("child")).collect();
                        worker.finish(Box::new(spans));
                        drop(root);
                    }
                })
            })
        })
    });
    for &contender in all() {
        group.bench_function(contender.name(), |b| {
            b.iter_custom(|iters| {
                without_hand_off(&mut || {
                    repeat(name, "", contender, iters, children as u64 + 1, |c| c.handoff(children, &worker))
                })
            })
        });
    }
    group.finish();
}

/// A clock reading that reads the clock again where it is dropped: a
/// thread-safe span's two clock reads, alone.
struct ReadAgainOnDrop(minstant::Instant);

impl Drop for ReadAgainOnDrop {
    fn drop(&mut self) {
        criterion::black_box((self.0, minstant::Instant::now()));
    }
}

/// A root task awaiting `n` steps that each suspend once, polled by a
/// no-op executor: each step traced as a child span (minitrace: `in_span`
/// with `Span::enter_with_local_parent`, what `#[trace]` expands to;
/// tracing: `Instrument`; OpenTelemetry: `with_context`; rustracing: a
/// child span held across the await), and, for the libraries that have
/// it, a local span per poll with `enter_on_poll`.
fn async_tasks(c: &mut Criterion) {
    let name = "async, N awaits, each step a child span";
    let mut group = c.benchmark_group(name);
    for n in [10usize, 100] {
        group.throughput(Throughput::Elements(n as u64 + 1));
        group.bench_with_input(BenchmarkId::new("untraced", n), &n, |b, &n| {
            b.iter_custom(|iters| untraced(iters, || block_on(awaits(n))))
        });
        for &contender in all() {
            group.bench_with_input(BenchmarkId::new(contender.name(), n), &n, |b, &n| {
                b.iter_custom(|iters| {
                    repeat(name, &n.to_string(), contender, iters, n as u64 + 1, |c| c.async_steps(n))
                })
            });
        }
    }
    group.finish();

    let name = "async, N awaits, in_span + enter_on_poll";
    let mut group = c.benchmark_group(name);
    for n in [10usize, 100] {
        group.throughput(Throughput::Elements(n as u64 + 2));
        group.bench_with_input(BenchmarkId::new("untraced", n), &n, |b, &n| {
            b.iter_custom(|iters| untraced(iters, || block_on(awaits(n))))
        });
        for &contender in all() {
            let Some(run) = contender.async_polls() else { continue };
            group.bench_with_input(BenchmarkId::new(contender.name(), n), &n, |b, &n| {
                b.iter_custom(|iters| {
                    repeat(name, &n.to_string(), contender, iters, n as u64 + 2, |_| run(n))
                })
            });
        }
    }
    group.finish();
}

/// Both cores producing at once: each of two long-lived threads makes one
/// trace of 1 root + 100 local spans per iteration, while the library's
/// collector or export thread (if any) competes with them for the cores.
fn multi_threaded(c: &mut Criterion) {
    let producers = Producers::new(2);
    let spans = producers.threads() as u64 * 101;
    let name = "2 threads at once, 1 root + 100 local spans each";
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(spans));
    for &contender in all() {
        group.bench_function(contender.name(), |b| {
            b.iter_custom(|iters| {
                measure(name, "", contender, iters * spans, || {
                    producers.run(iters, contender, |c| c.wide(100))
                })
            })
        });
    }
    group.finish();
}

/// Where each sink works, and which sinks did not receive every span: a
/// library that drops spans skips their collection work, so its numbers
/// in that group are flattered (`scripts/bench-report.py` flags them).
fn report_losses(_: &mut Criterion) {
    let worst_ours = contenders::report_sinks();
    let stats = minitrace::collector::stats();
    eprintln!("this workspace's collector: {stats:?}");
    eprintln!("clock: {:?}", minstant::clock_info());
    if worst_ours >= 0.001 {
        eprintln!(
            "WARNING: this workspace's collector dropped up to {:.2} % of a benchmark's spans (see \
             above): its numbers there are flattered",
            worst_ours * 100.0
        );
    }
}

criterion_group!(
    benches,
    local_spans,
    one_microsecond_request,
    spans_across_threads,
    async_tasks,
    multi_threaded,
    report_losses
);
criterion_main!(benches);
