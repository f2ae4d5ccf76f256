//! Writing and reading a dump of synthetic traces (a root and 10 spans
//! each): the time per trace, with the bytes per span printed once.
//!
//! `cargo bench -p minitrace-flight --bench write`; for 1 M traces in one
//! timed pass instead, `FLIGHT_BENCH_REQUESTS=1000000` prints seconds and
//! bytes per span before the criterion rows (add `-- nothing` to skip
//! them), and what the span ids cost: the same traces with their ids
//! renumbered 1, 2, 3… in each trace, which compress to almost nothing.
// criterion_group! makes a pub fn that cannot carry docs.
#![allow(missing_docs)]

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use minitrace_flight::{synthetic, Reader, RecordedTrace, SpanId, Writer};

fn write_all(traces: &[RecordedTrace]) -> Vec<u8> {
    let mut writer = Writer::new(Vec::with_capacity(traces.len() * 64));
    for trace in traces {
        writer.write(trace).expect("writing to memory");
    }
    writer.finish().expect("writing to memory").into_inner()
}

/// The traces with their span ids renumbered from 1 in each (parents
/// following): the dump without the entropy of random ids.
fn renumbered(traces: &[RecordedTrace]) -> Vec<RecordedTrace> {
    traces
        .iter()
        .map(|trace| {
            let mut trace = trace.clone();
            let ids: Vec<SpanId> = trace.spans.iter().map(|span| span.span_id).collect();
            let new = |id: SpanId| {
                ids.iter().position(|&old| old == id).map_or(SpanId(0), |at| SpanId(at as u64 + 1))
            };
            for span in &mut trace.spans {
                (span.span_id, span.parent_id) = (new(span.span_id), new(span.parent_id));
            }
            trace
        })
        .collect()
}

/// One timed pass over `count` traces: the dump's size and speed.
fn timed_pass(count: usize) {
    let traces: Vec<RecordedTrace> = synthetic::traces(count, 1).collect();
    let spans: usize = traces.iter().map(|trace| trace.spans.len()).sum();
    let started = Instant::now();
    let dump = write_all(&traces);
    let write_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let read = Reader::new(&dump[..]).expect("a dump").filter(Result::is_ok).count();
    let read_s = started.elapsed().as_secs_f64();
    assert_eq!(read, count);
    println!(
        "{count} traces, {spans} spans (roots counted): {} bytes, {:.2} bytes/span; \
         write {write_s:.2} s, read {read_s:.2} s",
        dump.len(),
        dump.len() as f64 / spans as f64
    );
    let without_ids = write_all(&renumbered(&traces)).len();
    println!(
        "the same traces with span ids renumbered 1, 2, 3… in each: {without_ids} bytes, {:.2} bytes/span",
        without_ids as f64 / spans as f64
    );
}

fn bench(c: &mut Criterion) {
    if let Some(count) = std::env::var("FLIGHT_BENCH_REQUESTS").ok().and_then(|count| count.parse().ok()) {
        timed_pass(count);
    }
    let traces: Vec<RecordedTrace> =
        synthetic::traces(Writer::<Vec<u8>>::DEFAULT_BLOCK_TRACES * 4, 1).collect();
    let dump = write_all(&traces);
    let spans: usize = traces.iter().map(|trace| trace.spans.len()).sum();
    println!("{:.2} bytes per span (roots counted)", dump.len() as f64 / spans as f64);

    let mut group = c.benchmark_group("dump");
    group.throughput(Throughput::Elements(traces.len() as u64));
    group.bench_function("write", |b| b.iter(|| write_all(&traces)));
    group.bench_function("read", |b| b.iter(|| Reader::new(&dump[..]).expect("a dump").count()));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
