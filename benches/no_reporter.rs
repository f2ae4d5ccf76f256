//! The cost of tracing compiled in while no reporter is set (a library
//! traced by default, in an application that does not collect): this
//! workspace, minitrace 0.6.7 and fastrace, none with a reporter.
//!
//! `cargo bench --bench no_reporter`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use minitrace_suite::traced_workloads;

traced_workloads!(ours, minitrace);
traced_workloads!(minitrace_0_6_7, minitrace_067);
traced_workloads!(fastrace_0_7, fastrace);

fn no_reporter(c: &mut Criterion) {
    let mut group = c.benchmark_group("no reporter, 1 root + 100 local spans");
    group.throughput(Throughput::Elements(101));
    group.bench_function("minitrace (this workspace)", |b| b.iter(|| ours::wide(100)));
    group.bench_function("minitrace 0.6.7", |b| b.iter(|| minitrace_0_6_7::wide(100)));
    group.bench_function("fastrace 0.7", |b| b.iter(|| fastrace_0_7::wide(100)));
    group.finish();
}

criterion_group!(benches, no_reporter);
criterion_main!(benches);
