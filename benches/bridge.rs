//! A `tracing` span, as an instrumented library opens it, recorded by each
//! bridge into its tracer, in one run: this workspace's
//! `minitrace-tracing`, fastrace's `fastrace-tracing` 0.1, and tokio
//! `tracing`'s own `Registry` with a layer that records each closed span
//! (the recording layer of `benches/contenders/with_tracing.rs`), beside
//! the `Registry` with that layer off (tracing's own bookkeeping). Three
//! floor rows make the same spans with minitrace's own API and no
//! `tracing` at all: with the `Registry` row, what a bridge cannot avoid.
//!
//! The workload is the same for every row: a root of the tracer's own
//! (a minitrace or fastrace root made the thread's local parent, a
//! `tracing` root span for the `Registry` rows) around 10 `info_span!`s
//! with one field each, entered and exited in turn, children of the root.
//! Each row's subscriber (a `Registry` with the row's layer) is made this
//! thread's default for the batch (`tracing::dispatcher::with_default`),
//! so every row pays the same scoped look-up.
//!
//! As in `benches/spans.rs`, a measurement is the CPU time of the whole
//! process over a batch of iterations that ends with the tracer's flush,
//! collector threads included; sinks count what they receive, and any
//! spans a sink did not receive are printed at the end.
//!
//! `cargo bench --bench bridge`

mod contenders;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Registry;

use contenders::with_minitrace::{fastrace as fastrace_contender, ours as minitrace_contender};
use contenders::with_tracing::{take_closed, RecordClosed, RECORDING};
use contenders::{measure_row, Delivered};

/// The `tracing` spans of each iteration, under one root.
const SPANS: usize = 10;

const GROUP: &str = "tracing spans through a bridge, 1 root + 10 spans";

/// Per row: spans made, spans its sink received.
static TALLY: Mutex<BTreeMap<&'static str, (u64, u64)>> = Mutex::new(BTreeMap::new());

/// The instrumented library's code: each row runs exactly this.
fn library_calls() {
    for attempt in 0..SPANS {
        let _span = tracing::info_span!("query", attempt).entered();
    }
}

/// The properties the layer gives each span of [`library_calls`]: its
/// target, its level and its field, all borrowed (the layer writes a
/// small number from a table, allocating nothing).
fn native_properties(attempt: usize) -> [(&'static str, &'static str); 3] {
    const ATTEMPTS: [&str; SPANS] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
    [
        (minitrace_tracing::TARGET_KEY, "bridge"),
        (minitrace_tracing::LEVEL_KEY, "INFO"),
        ("attempt", ATTEMPTS[attempt]),
    ]
}

/// Measures `iters` runs of `iteration` under `dispatch`, flushed; tallies
/// the sink's deliveries (`delivered`: received so far, `None` for no sink).
fn measure(
    name: &'static str,
    iters: u64,
    dispatch: &Dispatch,
    iteration: impl Fn(),
    delivered: impl Fn() -> Option<u64>,
    flush: impl FnOnce(),
) -> Duration {
    let made = iters * (SPANS as u64 + 1);
    let before = delivered();
    let batch = || {
        tracing::dispatcher::with_default(dispatch, || {
            for _ in 0..iters {
                iteration();
            }
        })
    };
    let elapsed = measure_row(GROUP, "", name, made, &delivered, flush, batch);
    if let (Some(before), Some(after)) = (before, delivered()) {
        let mut tally = TALLY.lock().unwrap();
        let row = tally.entry(name).or_default();
        row.0 += made;
        row.1 += after - before;
    }
    elapsed
}

fn bridges(c: &mut Criterion) {
    let mut group = c.benchmark_group(GROUP);
    group.throughput(Throughput::Elements(SPANS as u64 + 1));

    let minitrace = minitrace_contender();
    let dispatch = Dispatch::new(Registry::default().with(minitrace_tracing::MinitraceLayer::new()));
    let name = "minitrace-tracing (this workspace)";
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let iteration = || {
                let root = minitrace::Span::root("root", minitrace::collector::SpanContext::random());
                let _guard = root.set_local_parent();
                library_calls();
            };
            measure(name, iters, &dispatch, iteration, || minitrace.delivered(), || minitrace.flush())
        })
    });

    let fastrace_row = fastrace_contender();
    let dispatch = Dispatch::new(Registry::default().with(fastrace_tracing::FastraceCompatLayer::new()));
    let name = "fastrace-tracing 0.1 (fastrace 0.7)";
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let iteration = || {
                let root = fastrace::Span::root("root", fastrace::collector::SpanContext::random());
                let _guard = root.set_local_parent();
                library_calls();
            };
            measure(name, iters, &dispatch, iteration, || fastrace_row.delivered(), || fastrace_row.flush())
        })
    });

    // The floor's minitrace part: the same spans through minitrace's own
    // API, no `tracing` (and no subscriber): what recording them costs
    // minitrace itself, as a thread-safe span made the local parent while
    // it lives (what the layer records each span as) and as a local span,
    // with the layer's properties (target, level, the field formatted),
    // and as a bare local span.
    let none = Dispatch::none();
    // A native row: `$span` records the span of attempt `$attempt` under
    // the row's root, the only part that differs between the rows.
    macro_rules! native_row {
        ($name:expr, |$attempt:ident| $span:block) => {
            let name = $name;
            group.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    let iteration = || {
                        let root = minitrace::Span::root("root", minitrace::collector::SpanContext::random());
                        let _guard = root.set_local_parent();
                        for $attempt in 0..SPANS {
                            $span
                        }
                    };
                    measure(name, iters, &none, iteration, || minitrace.delivered(), || minitrace.flush())
                })
            });
        };
    }
    native_row!("minitrace native, Span + local parent (no tracing)", |attempt| {
        let span =
            minitrace::Span::enter_with_local_parent("query").with_properties(|| native_properties(attempt));
        let _entered = span.set_local_parent();
    });
    native_row!("minitrace native, LocalSpan (no tracing)", |attempt| {
        let _span = minitrace::local::LocalSpan::enter_with_local_parent("query")
            .with_properties(|| native_properties(attempt));
    });
    native_row!("minitrace native, LocalSpan, no properties (no tracing)", |_attempt| {
        let _span = minitrace::local::LocalSpan::enter_with_local_parent("query");
    });

    // One subscriber for both `Registry` rows; the flag switches its layer.
    let dispatch = Dispatch::new(Registry::default().with(RecordClosed));
    let iteration = || {
        let _root = tracing::info_span!(parent: None, "root").entered();
        library_calls();
    };
    static RECORDED: Delivered = Delivered::new();
    for (name, recording) in
        [("tracing 0.1 + Registry + recording layer", true), ("tracing 0.1 + Registry (layer off)", false)]
    {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                RECORDING.store(recording, Ordering::Relaxed);
                let delivered = || recording.then(|| RECORDED.get());
                measure(name, iters, &dispatch, iteration, delivered, || RECORDED.add(take_closed()))
            })
        });
    }
    group.finish();
}

/// Prints the spans any sink did not receive: a bridge that drops spans
/// does less work, and its row is flattered.
fn report_shortfalls() {
    eprintln!("\nSpans the sinks did not receive:");
    let tally = TALLY.lock().unwrap();
    let short: Vec<_> = tally.iter().filter(|(_, (made, received))| made != received).collect();
    for (name, (made, received)) in &short {
        eprintln!("  {name}: {} of {made}", made - received);
    }
    if short.is_empty() {
        eprintln!("  none: every sink received every span");
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bridges(&mut criterion);
    criterion.final_summary();
    report_shortfalls();
}
