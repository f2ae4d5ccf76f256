//! The cost of tracing compiled in while nothing collects (a library traced
//! by default, in an application that does not collect): this workspace,
//! minitrace 0.6.7 and fastrace with no reporter set, tokio `tracing` with
//! no subscriber, and OpenTelemetry's global tracer with no provider set
//! (the no-op tracer). rustracing has no global tracer (a library must be
//! handed one), so it has no such state and no row here.
//!
//! The other disabled state, minitrace built without its `enable` feature,
//! cannot run here (one bench build has one set of features per crate, and
//! this one has `enable`). The "untraced" row is the workload with its spans
//! removed; `minitrace/tests/disabled.rs` builds the same two fns without
//! `enable` and checks that they compile to the same machine code, so that
//! row is also what this workload costs with minitrace switched off.
//!
//! Nothing runs off the calling thread here, so plain wall time per
//! iteration is measured.
//!
//! `cargo bench --bench no_reporter`

mod contenders;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

// The contenders' workload modules only: their `install()` (which sets a
// reporter) is never called in this bench, so no reporter is ever set.
use contenders::with_minitrace::{fastrace_07, ours, v067};
use contenders::{with_otel, with_tracing};

/// `wide` (from `minitrace_suite::traced_workloads!`) without its spans.
fn untraced_wide(children: usize) {
    for _ in 0..children {}
}

fn no_reporter(c: &mut Criterion) {
    let mut group = c.benchmark_group("no reporter, 1 root + 100 local spans");
    group.throughput(Throughput::Elements(101));
    group.bench_function(contenders::OURS, |b| b.iter(|| ours::workloads::wide(100)));
    group.bench_function("minitrace 0.6.7", |b| b.iter(|| v067::workloads::wide(100)));
    group.bench_function("fastrace 0.7", |b| b.iter(|| fastrace_07::workloads::wide(100)));
    // No subscriber was ever set in this process: tracing's `NoSubscriber`.
    group.bench_function("tracing 0.1, no subscriber", |b| b.iter(|| with_tracing::wide(100)));
    let tracer = opentelemetry::global::tracer("bench");
    group.bench_function("opentelemetry 0.33, no provider (no-op tracer)", |b| {
        b.iter(|| with_otel::wide(&tracer, 100))
    });
    group.bench_function("untraced", |b| b.iter(|| untraced_wide(criterion::black_box(100))));
    group.finish();
}

criterion_group!(benches, no_reporter);
criterion_main!(benches);
