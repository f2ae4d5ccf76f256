//! What a request costs by its trace's fate: 1 root + 9 local spans, kept
//! (reported; also with the lossless policy, `wait_when_queue_full`),
//! thrown away by the latency threshold (also with the flight recorder
//! keeping it, in 8 MiB per thread and in 256 KiB) or by `cancel()`, left
//! out by head sampling, or begun with recording switched off at run time;
//! beside the same request untraced, the clock floor (the 20 clock reads
//! alone), the recorder floor (those reads, and each span's 64 bytes
//! written into an 8 MiB ring per thread), fastrace 0.7 reporting it and
//! cancelling its root (its way to throw a trace away), and tokio
//! `tracing` with a bare `Registry`.
//!
//! Each row runs with 1 and with 2 producer threads at once (long-lived,
//! as a server's workers are), with steps of ~33 ns between the spans and
//! flat out. Every measurement is the CPU time of the whole process over a
//! batch that ends with the library's flush, divided by the producers, so
//! that rows of 1 and 2 producers compare per request. Our spans dropped at
//! a full queue are printed per row at the end (the fates are counted
//! apart: a trace thrown away is no loss).
//!
//! `cargo bench --bench fates`; its own process, as each of our rows sets
//! its own configuration.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use minitrace_suite::{process_cpu_time, Step};

const CHILDREN: usize = 9;

/// The ~33 ns step (`None`: flat out, no work between spans).
fn step_of(paced: bool) -> Option<Step> {
    paced.then_some(Step { iterations: 30, chained: true })
}

#[inline(always)]
fn work(step: Option<Step>, previous: u64) -> u64 {
    step.map_or(previous, |step| step.run(previous))
}

/// Spans our reporter received.
static DELIVERED: AtomicU64 = AtomicU64::new(0);

struct Discard;

impl minitrace::collector::Reporter for Discard {
    fn report(&mut self, spans: &[minitrace::collector::SpanRecord]) {
        DELIVERED.fetch_add(spans.len() as u64, Ordering::Relaxed);
        criterion::black_box(spans);
    }
}

impl fastrace::collector::Reporter for Discard {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        criterion::black_box(spans);
    }
}

/// A row: how to set the library up, and one request.
#[derive(Clone, Copy)]
struct Row {
    name: &'static str,
    setup: fn(),
    request: fn(Option<Step>) -> u64,
    flush: fn(),
}

fn nothing() {}

fn untraced(step: Option<Step>) -> u64 {
    let last = (0..CHILDREN).fold(0, |previous, _| work(step, previous));
    criterion::black_box(last)
}

fn clock_floor(step: Option<Step>) -> u64 {
    let root = minstant::Instant::now_unordered();
    let last = (0..CHILDREN).fold(0, |previous, _| {
        let start = minstant::Instant::now_unordered();
        let result = work(step, previous);
        criterion::black_box((start, minstant::Instant::now_unordered()));
        result
    });
    criterion::black_box((root, minstant::Instant::now_unordered()));
    last
}

/// The request in a library of the minitrace 0.6 API: a root, its local
/// parent guard, 9 local spans; the root cancelled at the end if asked.
macro_rules! request_in {
    ($name:ident, $krate:ident) => {
        #[inline(always)]
        fn $name(step: Option<Step>, cancel: bool) -> u64 {
            use $krate::prelude::*;
            #[allow(unused_mut)] // fastrace's `cancel` takes `&self`
            let mut root = Span::root("request", SpanContext::random());
            let last = {
                let _guard = root.set_local_parent();
                (0..CHILDREN).fold(0, |previous, _| {
                    let _span = LocalSpan::enter_with_local_parent("step");
                    work(step, previous)
                })
            };
            if cancel {
                root.cancel();
            }
            criterion::black_box(last)
        }
    };
}

request_in!(ours_with, minitrace);
request_in!(fastrace_with, fastrace);

fn ours(step: Option<Step>) -> u64 {
    ours_with(step, false)
}

fn ours_cancelled(step: Option<Step>) -> u64 {
    ours_with(step, true)
}

fn configure_ours(config: minitrace::collector::Config) {
    minitrace::recorder::FlightRecorder::disable();
    minitrace::set_enabled(true);
    minitrace::set_reporter(Discard, config);
}

fn tracing_registry(step: Option<Step>) -> u64 {
    let root = tracing::info_span!("request").entered();
    let last = (0..CHILDREN).fold(0, |previous, _| {
        let _span = tracing::info_span!("step").entered();
        work(step, previous)
    });
    drop(root);
    criterion::black_box(last)
}

/// The least a recorder that keeps every span of a 64-byte layout in 8 MiB
/// per thread does: the clock floor's reads, each span's 64 bytes written
/// where it is kept, in a ring that cycles through the 8 MiB (so every write
/// lands on memory last touched 8 MiB of spans earlier). No ids, no
/// bookkeeping, nothing retrievable: a floor, not a recorder.
mod ring_floor {
    use std::cell::Cell;

    /// One kept span, the size of one of ours.
    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    pub struct Slot {
        pub start: minstant::Instant,
        pub end: minstant::Instant,
        pub id: u64,
        pub parent: u64,
        pub name: &'static str,
        pub trace: u64,
        pub index: u64,
    }

    const BYTES: usize = 8 << 20;
    const SLOTS: usize = BYTES / std::mem::size_of::<Slot>();

    thread_local! {
        static RING: Cell<(*mut Slot, usize)> = const { Cell::new((std::ptr::null_mut(), 0)) };
    }

    /// Writes `slot` at the thread's next place in its ring.
    #[inline(always)]
    pub fn keep(slot: Slot) {
        RING.with(|ring| {
            let (mut base, next) = ring.get();
            if base.is_null() {
                // Leaked on purpose: the producers live as long as the bench.
                base = Box::leak(vec![slot; SLOTS].into_boxed_slice()).as_mut_ptr();
            }
            // SAFETY: `base` points at this thread's `SLOTS` slots and
            // `next < SLOTS`; no other thread sees them.
            unsafe { base.add(next).write(slot) };
            ring.set((base, (next + 1) % SLOTS));
        });
    }
}

fn ring_floor(step: Option<Step>) -> u64 {
    use ring_floor::{keep, Slot};
    let trace = criterion::black_box(7);
    let root = minstant::Instant::now_unordered();
    let last = (0..CHILDREN).fold(0, |previous, index| {
        let start = minstant::Instant::now_unordered();
        let result = work(step, previous);
        let end = minstant::Instant::now_unordered();
        keep(Slot { start, end, id: index as u64 + 1, parent: 0, name: "step", trace, index: index as u64 });
        result
    });
    let end = minstant::Instant::now_unordered();
    keep(Slot { start: root, end, id: 0, parent: 0, name: "request", trace, index: 0 });
    criterion::black_box(last)
}

fn rows() -> [Row; 14] {
    [
        Row { name: "untraced", setup: nothing, request: untraced, flush: nothing },
        Row { name: "clock floor (20 clock reads)", setup: nothing, request: clock_floor, flush: nothing },
        Row {
            name: "minitrace (this workspace), reporting all",
            setup: || configure_ours(minitrace::collector::Config::default()),
            request: ours,
            flush: minitrace::flush,
        },
        Row {
            name: "minitrace (this workspace), reporting all, waiting when the queue is full",
            setup: || configure_ours(minitrace::collector::Config::default().wait_when_queue_full(true)),
            request: ours,
            flush: minitrace::flush,
        },
        Row {
            name: "minitrace (this workspace), thrown away by threshold",
            setup: || {
                configure_ours(
                    minitrace::collector::Config::default().report_slow_traces_only(Duration::from_secs(1)),
                )
            },
            request: ours,
            flush: minitrace::flush,
        },
        Row {
            name: "minitrace (this workspace), thrown away by threshold, flight recorder on",
            setup: || {
                configure_ours(
                    minitrace::collector::Config::default().report_slow_traces_only(Duration::from_secs(1)),
                );
                minitrace::recorder::FlightRecorder::new().enable();
            },
            request: ours,
            flush: minitrace::flush,
        },
        Row {
            name:
                "minitrace (this workspace), thrown away by threshold, flight recorder on, 256 KiB per thread",
            setup: || {
                configure_ours(
                    minitrace::collector::Config::default().report_slow_traces_only(Duration::from_secs(1)),
                );
                minitrace::recorder::FlightRecorder::new().bytes_per_thread(256 << 10).enable();
            },
            request: ours,
            flush: minitrace::flush,
        },
        Row {
            name: "recorder floor (clock reads, 64 bytes a span into an 8 MiB ring)",
            setup: nothing,
            request: ring_floor,
            flush: nothing,
        },
        Row {
            name: "minitrace (this workspace), thrown away by cancel()",
            setup: || configure_ours(minitrace::collector::Config::default()),
            request: ours_cancelled,
            flush: minitrace::flush,
        },
        Row {
            name: "minitrace (this workspace), unsampled",
            setup: || configure_ours(minitrace::collector::Config::default().head_sampling(0.0)),
            request: ours,
            flush: minitrace::flush,
        },
        Row {
            name: "minitrace (this workspace), switched off at run time",
            setup: || {
                configure_ours(minitrace::collector::Config::default());
                minitrace::set_enabled(false);
            },
            request: ours,
            flush: minitrace::flush,
        },
        Row {
            name: "fastrace 0.7, reporting all",
            setup: nothing,
            request: |step| fastrace_with(step, false),
            flush: fastrace::flush,
        },
        Row {
            name: "fastrace 0.7, root cancelled",
            setup: nothing,
            request: |step| fastrace_with(step, true),
            flush: fastrace::flush,
        },
        Row {
            name: "tokio tracing 0.1, Registry",
            setup: nothing,
            request: tracing_registry,
            flush: nothing,
        },
    ]
}

type Job = (u64, fn(Option<Step>) -> u64, Option<Step>);

/// Long-lived producer threads: per-thread set-up is not what is measured.
struct Producers {
    jobs: Vec<crossbeam_channel::Sender<Job>>,
    done: crossbeam_channel::Receiver<()>,
}

impl Producers {
    fn new(threads: usize) -> Producers {
        let (finished, done) = crossbeam_channel::unbounded();
        let jobs = (0..threads)
            .map(|_| {
                let (job, inbox) = crossbeam_channel::bounded::<Job>(1);
                let finished = finished.clone();
                std::thread::spawn(move || {
                    for (iters, request, step) in inbox {
                        for _ in 0..iters {
                            request(step);
                        }
                        if finished.send(()).is_err() {
                            break;
                        }
                    }
                });
                job
            })
            .collect();
        Producers { jobs, done }
    }

    fn run(&self, iters: u64, request: fn(Option<Step>) -> u64, step: Option<Step>) {
        for job in &self.jobs {
            job.send((iters, request, step)).expect("producer alive");
        }
        for _ in &self.jobs {
            self.done.recv().expect("producer alive");
        }
    }
}

/// Per (group, row): our spans dropped at a full queue, and made.
static DROPS: Mutex<Vec<(String, &'static str, u64, u64)>> = Mutex::new(Vec::new());

fn fates(c: &mut Criterion) {
    static PRODUCERS: OnceLock<[Producers; 2]> = OnceLock::new();
    let producers = PRODUCERS.get_or_init(|| [Producers::new(1), Producers::new(2)]);
    fastrace::set_reporter(Discard, fastrace::collector::Config::default());
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
    for (threads, producers) in [(1, &producers[0]), (2, &producers[1])] {
        for paced in [true, false] {
            let pace = if paced { "~33 ns steps" } else { "flat out" };
            let group_name = format!("fates, 1 root + 9 local spans, {threads} producer(s), {pace}");
            let mut group = c.benchmark_group(&group_name);
            for row in rows() {
                (row.setup)();
                let step = step_of(paced);
                group.bench_function(row.name, |b| {
                    b.iter_custom(|iters| {
                        let dropped_before = minitrace::collector::stats().dropped();
                        let start = process_cpu_time();
                        producers.run(iters, row.request, step);
                        (row.flush)();
                        let elapsed = process_cpu_time() - start;
                        let dropped = minitrace::collector::stats().dropped() - dropped_before;
                        let made = iters * threads as u64 * (CHILDREN as u64 + 1);
                        let mut drops = DROPS.lock().unwrap();
                        match drops
                            .iter_mut()
                            .find(|(group, name, ..)| *group == group_name && *name == row.name)
                        {
                            Some(entry) => {
                                entry.2 += dropped;
                                entry.3 += made;
                            }
                            None => drops.push((group_name.clone(), row.name, dropped, made)),
                        }
                        // Per request: the producers ran `iters` each, at once.
                        elapsed / threads as u32
                    })
                });
            }
            minitrace::set_enabled(true);
            group.finish();
        }
    }
    write_delivery();
}

/// Prints our drops per row and writes them to the delivery ledger that
/// `scripts/bench-report.py` flags rows from (`target/criterion/spans-delivery.tsv`,
/// shared with `benches/spans.rs`: its rows of other groups are kept). A
/// trace thrown away on purpose counts as delivered: only drops are losses.
fn write_delivery() {
    let path = criterion_dir().join("spans-delivery.tsv");
    let mut ledger = String::from("group\tN\tcontender\tspans made\tspans received by the sink\n");
    let earlier = std::fs::read_to_string(&path).unwrap_or_default();
    ledger.extend(
        earlier.lines().skip(1).filter(|row| !row.starts_with("fates,")).map(|row| format!("{row}\n")),
    );
    eprintln!("\nOur spans dropped at a full queue, per row:");
    for (group, name, dropped, made) in
        DROPS.lock().unwrap().iter().filter(|row| row.1.starts_with("minitrace"))
    {
        eprintln!("  {group} / {name}: {dropped} of {made}");
        ledger += &format!("{group}\t\t{name}\t{made}\t{}\n", made - dropped);
    }
    let written =
        std::fs::create_dir_all(path.parent().unwrap()).and_then(|()| std::fs::write(&path, ledger));
    if let Err(error) = written {
        eprintln!("cannot write {}: {error}", path.display());
    }
}

#[path = "report_dir/mod.rs"]
mod report_dir;
use report_dir::criterion_dir;

/// Retrieval after the fact: 2 threads fill 8 MiB of flight memory each
/// with thrown-away requests (1 root + 9 local spans, flat out) until it
/// wraps, then stay alive; one trace is asked for by id, a different one
/// each time, and returned whole. Printed beside it: how many seconds of
/// history 8 MiB holds at the producers' rate, and how many requests.
fn retrieval(c: &mut Criterion) {
    use minitrace::collector::{Config, TraceId};
    use minitrace::recorder::{self, FlightRecorder};

    const BYTES: usize = 8 << 20;
    configure_ours(Config::default().report_slow_traces_only(Duration::from_secs(3600)));
    FlightRecorder::new().bytes_per_thread(BYTES).enable();
    // Each producer reports its rate, then stays alive (its memory held
    // as a live thread's) until the bench ends and `done` is dropped.
    let (done, stay) = std::sync::mpsc::channel::<()>();
    let stay = std::sync::Arc::new(Mutex::new(stay));
    let (rate_of, rates) = std::sync::mpsc::channel::<f64>();
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let (stay, rate_of) = (stay.clone(), rate_of.clone());
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                let mut requests = 0u64;
                // Long enough to wrap: the oldest requests overwritten.
                while start.elapsed() < Duration::from_secs(2) {
                    for _ in 0..1000 {
                        ours(None);
                    }
                    requests += 1000;
                }
                let _ = rate_of.send(requests as f64 / start.elapsed().as_secs_f64());
                let _ = stay.lock().unwrap().recv();
            })
        })
        .collect();
    let rate = (rates.recv().unwrap() + rates.recv().unwrap()) / 2.0;
    minitrace::flush();
    let ids: Vec<TraceId> = recorder::snapshot()
        .traces
        .iter()
        .filter(|trace| trace.complete)
        .map(|trace| trace.trace_id)
        .collect();
    assert!(ids.len() > 1000, "the recorder holds the producers' requests");
    // How far back each thread's memory reaches at this rate, for
    // BENCHMARKS.md (`scripts/bench-report.py` reads the file).
    let mut retention = String::from("thread\trequests held\tbytes\trequests per second\n");
    for thread in recorder::retention().threads.iter().filter(|thread| thread.roots > 0) {
        eprintln!(
            "retrieval: thread {} holds {} requests in {} bytes: {:.3} s of history at {rate:.0} requests/s",
            thread.thread,
            thread.roots,
            thread.bytes,
            thread.roots as f64 / rate,
        );
        retention += &format!("{}\t{}\t{}\t{rate:.0}\n", thread.thread, thread.roots, thread.bytes);
    }
    let path = criterion_dir().join("recorder-retention.tsv");
    let written = std::fs::create_dir_all(criterion_dir()).and_then(|()| std::fs::write(&path, retention));
    if let Err(error) = written {
        eprintln!("cannot write {}: {error}", path.display());
    }
    let mut group = c.benchmark_group("retrieval of one trace from 2 threads x 8 MiB");
    let mut next = 0usize;
    group.bench_function("minitrace (this workspace), recorder::trace(id)", |b| {
        b.iter(|| {
            next = (next + 7919) % ids.len();
            let trace = recorder::trace(ids[next]).expect("held");
            assert_eq!(trace.spans.len(), CHILDREN + 1);
            trace
        })
    });
    group.finish();
    drop(done);
    for producer in producers {
        producer.join().unwrap();
    }
    FlightRecorder::disable();
}

criterion_group!(benches, fates, retrieval);
criterion_main!(benches);
