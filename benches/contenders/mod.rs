//! The contenders of `benches/spans.rs` (and, without their sinks, of
//! `benches/no_reporter.rs`): one [`Contender`] per library, each running
//! the same workloads in that library's natural idiom, with a sink that
//! does the same job for all: collect every finished span and hand it to a
//! reporter/exporter that discards it. [`Contender::sink`] says where that
//! work runs; the bench prints it and writes it beside criterion's output
//! for `scripts/bench-report.py`.
//!
//! Every measurement ([`measure`]) is the CPU time of the whole process
//! over a batch of iterations that ends with the contender's flush, so
//! collection work is charged to the library that causes it, wherever it
//! runs. [`measure`] also checks that the sink received every span the
//! batch made (a library that drops spans does less work and would be
//! flattered); the bench reports the shortfall per contender.

// Each bench binary uses a part of this module.
#![allow(dead_code)]

#[path = "../report_dir/mod.rs"]
mod report_dir;
pub mod with_minitrace;
pub mod with_otel;
pub mod with_rustracing;
pub mod with_tracing;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::Duration;

use minitrace_suite::{process_cpu_time, Step, Worker};

/// This workspace's row name: the reference of every ratio.
pub const OURS: &str = "minitrace (this workspace)";

/// One library under test, with its sink installed.
///
/// The workloads are methods so that the bench can loop over every
/// contender; the per-iteration virtual call is the same for all and far
/// below the cost of a span.
pub trait Contender: Sync {
    /// The row name in every table.
    fn name(&self) -> &'static str;

    /// What the sink does with finished spans, and on which thread.
    fn sink(&self) -> &'static str;

    /// Runs `batch` (on this thread) with the contender's sink current.
    /// Only `tracing` needs it: its two contenders share one global
    /// subscriber, whose recording layer it switches on or off.
    fn scoped(&self, batch: &mut dyn FnMut()) {
        batch()
    }

    /// Returns once every span finished so far has been through the sink.
    fn flush(&self);

    /// Spans the sink has received and discarded so far, or `None` for a
    /// contender without a sink (`tracing`'s bare `Registry`).
    fn delivered(&self) -> Option<u64>;

    /// A root with `n` children, each the current ("local") parent while it
    /// lives, none nested: `n + 1` spans.
    fn wide(&self, n: usize);

    /// A root with `n` nested children: `n + 1` spans.
    fn deep(&self, n: usize);

    /// A root and `steps` children, each around one run of `step`:
    /// `steps + 1` spans. Returns the last step's result.
    fn request(&self, steps: usize, step: Step) -> u64;

    /// A root and `n` spans with the root as explicit parent, handed to
    /// `worker` to end there: `n + 1` spans.
    fn handoff(&self, n: usize, worker: &Worker);

    /// A root task whose body awaits `n` steps that each suspend once, each
    /// step traced as a child span: `n + 1` spans.
    fn async_steps(&self, n: usize);

    /// A root task whose body awaits `n` times, with a span around each of
    /// its `n + 1` polls (`in_span` + `enter_on_poll`): `n + 2` spans.
    /// `None` when the library has no such adapter.
    fn async_polls(&self) -> Option<fn(usize)> {
        None
    }
}

/// Every contender, reporters installed, in table order (this workspace
/// first). Built once per process: the minitrace-API libraries have one
/// global collector each.
pub fn all() -> &'static [&'static dyn Contender] {
    static ALL: OnceLock<Vec<&'static dyn Contender>> = OnceLock::new();
    ALL.get_or_init(|| {
        vec![
            with_minitrace::ours(),
            with_minitrace::minitrace_067(),
            with_minitrace::fastrace(),
            Box::leak(Box::new(with_tracing::TracingContender::registry())),
            Box::leak(Box::new(with_tracing::TracingContender::recording())),
            Box::leak(Box::new(with_rustracing::RustracingContender::new())),
            Box::leak(Box::new(with_otel::OtelContender::new())),
        ]
    })
}

/// Per benchmark (group, N or "", contender): spans the batches made, and
/// spans the sink received.
type Ledger = BTreeMap<(String, String, &'static str), (u64, u64)>;

static LEDGER: Mutex<Ledger> = Mutex::new(BTreeMap::new());

/// [`measure_row`] of a contender, through its sink.
pub fn measure(
    group: &str,
    n: &str,
    contender: &dyn Contender,
    spans: u64,
    batch: impl FnOnce(),
) -> Duration {
    measure_row(group, n, contender.name(), spans, || contender.delivered(), || contender.flush(), batch)
}

/// Process CPU time of `batch` (which runs the iterations) and `flush`
/// after it, for the row `name`. `spans` is what the batch makes, checked
/// against what the sink received (`delivered` counts it so far, `None`
/// for a row without a sink) and recorded under the benchmark's `group`
/// and `n` (its parameter, or `""`).
pub fn measure_row(
    group: &str,
    n: &str,
    name: &'static str,
    spans: u64,
    delivered: impl Fn() -> Option<u64>,
    flush: impl FnOnce(),
    batch: impl FnOnce(),
) -> Duration {
    let before = delivered();
    let start = process_cpu_time();
    batch();
    flush();
    let elapsed = process_cpu_time() - start;
    if let (Some(before), Some(after)) = (before, delivered()) {
        let mut ledger = LEDGER.lock().unwrap();
        let entry = ledger.entry((group.to_owned(), n.to_owned(), name)).or_default();
        entry.0 += spans;
        entry.1 += after - before;
    }
    elapsed
}

/// [`measure`] of `iters` runs of `run` on this thread, each making
/// `spans_per_iteration` spans.
pub fn repeat(
    group: &str,
    n: &str,
    contender: &dyn Contender,
    iters: u64,
    spans_per_iteration: u64,
    mut run: impl FnMut(&dyn Contender),
) -> Duration {
    measure(group, n, contender, iters * spans_per_iteration, || {
        contender.scoped(&mut || {
            for _ in 0..iters {
                run(contender)
            }
        })
    })
}

/// Process CPU time of `iters` runs of untraced `run`: the baselines.
pub fn untraced(iters: u64, mut run: impl FnMut()) -> Duration {
    let start = process_cpu_time();
    for _ in 0..iters {
        run();
    }
    process_cpu_time() - start
}

/// Prints where each contender's sink works and, per benchmark, any spans
/// its sink did not receive (dropped spans cost no collection work, which
/// flatters the library that drops them), and writes both for
/// `scripts/bench-report.py` to `target/criterion/spans-sinks.tsv` and
/// `target/criterion/spans-delivery.tsv` (replacing the rows of the groups
/// this run measured). Returns this workspace's worst share of dropped
/// spans in any benchmark.
pub fn report_sinks() -> f64 {
    let mut sinks = String::from("contender\tsink\n");
    eprintln!("\nWhere each contender's sink works:");
    for contender in all() {
        eprintln!("  {}: {}", contender.name(), contender.sink());
        sinks += &format!("{}\t{}\n", contender.name(), contender.sink());
    }
    let dir = report_dir::criterion_dir();
    let ledger = LEDGER.lock().unwrap();
    // Rows of groups this run did not measure (a filtered run) are kept.
    let mut delivery = String::from("group\tN\tcontender\tspans made\tspans received by the sink\n");
    let earlier = std::fs::read_to_string(dir.join("spans-delivery.tsv")).unwrap_or_default();
    for row in earlier.lines().skip(1) {
        let group = row.split('\t').next().unwrap_or_default();
        if !ledger.keys().any(|(measured, _, _)| measured == group) {
            delivery += &format!("{row}\n");
        }
    }
    let mut worst_ours = 0f64;
    eprintln!("Spans the sinks did not receive:");
    let mut all_received = true;
    for ((group, n, name), &(made, received)) in ledger.iter() {
        delivery += &format!("{group}\t{n}\t{name}\t{made}\t{received}\n");
        let lost = made.saturating_sub(received) as f64 / made.max(1) as f64;
        if made != received {
            all_received = false;
            let missing = made as i64 - received as i64;
            eprintln!("  {group}/{name}/{n}: {missing} of {made} ({:.3} %)", lost * 100.0);
        }
        if *name == OURS {
            worst_ours = worst_ours.max(lost);
        }
    }
    if all_received {
        eprintln!("  none: every sink received every span");
    }
    for (file, text) in [("spans-sinks.tsv", sinks), ("spans-delivery.tsv", delivery)] {
        if let Err(error) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join(file), text))
        {
            eprintln!("cannot write {}: {error}", dir.join(file).display());
        }
    }
    worst_ours
}

/// A future that is pending on its first poll and ready on its second: one
/// suspension point.
#[derive(Default)]
pub struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        // Opaque to the optimiser, so that the untraced baseline is not
        // folded away.
        if std::hint::black_box(self.0) {
            Poll::Ready(())
        } else {
            // No wake-up: `block_on` polls again at once.
            self.0 = true;
            Poll::Pending
        }
    }
}

/// The untraced async workload: `n` awaits.
pub async fn awaits(n: usize) {
    for _ in 0..n {
        YieldOnce::default().await;
    }
}

/// Polls `future` on this thread until it is ready, with a waker that does
/// nothing: the cheapest executor, so that the traced adapters are what is
/// measured.
pub fn block_on<F: Future>(future: F) -> F::Output {
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer and uphold
    // RawWaker's contract trivially.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

/// A producer's job: run a workload of a contender so many times.
type Job = (u64, &'static dyn Contender, fn(&dyn Contender));

/// Long-lived producer threads, one per core, that run the same workload
/// at once: the multi-threaded bench. Long-lived, as a server's workers
/// are, so that per-thread set-up is not what is measured.
pub struct Producers {
    jobs: Vec<crossbeam_channel::Sender<Job>>,
    done: crossbeam_channel::Receiver<()>,
}

impl Producers {
    /// Starts `threads` producers.
    pub fn new(threads: usize) -> Producers {
        let (finished, done) = crossbeam_channel::unbounded();
        let jobs = (0..threads)
            .map(|_| {
                let (job, inbox) = crossbeam_channel::bounded::<Job>(1);
                let finished = finished.clone();
                std::thread::spawn(move || {
                    for (iters, contender, run) in inbox {
                        contender.scoped(&mut || {
                            for _ in 0..iters {
                                run(contender)
                            }
                        });
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

    /// How many producer threads there are.
    pub fn threads(&self) -> usize {
        self.jobs.len()
    }

    /// Has every producer run `run` `iters` times, and waits for all.
    pub fn run(&self, iters: u64, contender: &'static dyn Contender, run: fn(&dyn Contender)) {
        for job in &self.jobs {
            job.send((iters, contender, run)).expect("producer thread alive");
        }
        for _ in &self.jobs {
            self.done.recv().expect("producer thread alive");
        }
    }
}

/// A counter for sinks to add to, readable by [`Contender::delivered`].
#[derive(Debug)]
pub struct Delivered(AtomicU64);

impl Delivered {
    /// Zero spans received.
    pub const fn new() -> Delivered {
        Delivered(AtomicU64::new(0))
    }

    /// Counts `spans` more spans received.
    pub fn add(&self, spans: usize) {
        self.0.fetch_add(spans as u64, Ordering::Relaxed);
    }

    /// Spans received so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
