//! Writing and reading a dump of synthetic requests (10 spans each): the
//! time per request, with the bytes per span printed once.
//!
//! `cargo bench -p minitrace-flight --bench write`; for 1 M requests in one
//! timed pass instead, `FLIGHT_BENCH_REQUESTS=1000000` prints seconds and
//! bytes per span before the criterion rows.
// criterion_group! makes a pub fn that cannot carry docs.
#![allow(missing_docs)]

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use minitrace_flight::{synthetic, Reader, Request, Writer};

fn write_all(requests: &[Request]) -> Vec<u8> {
    let mut writer = Writer::new(Vec::with_capacity(requests.len() * 64));
    for request in requests {
        writer.write(request).expect("writing to memory");
    }
    writer.finish().expect("writing to memory").into_inner()
}

/// One timed pass over `count` requests: the dump's size and speed.
fn timed_pass(count: usize) {
    let requests: Vec<Request> = synthetic::requests(count, 1).collect();
    let spans: usize = requests.iter().map(|request| request.spans.len() + 1).sum();
    let started = Instant::now();
    let dump = write_all(&requests);
    let write_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let read = Reader::new(&dump[..]).expect("a dump").filter(Result::is_ok).count();
    let read_s = started.elapsed().as_secs_f64();
    assert_eq!(read, count);
    println!(
        "{count} requests, {spans} spans (roots counted): {} bytes, {:.2} bytes/span; \
         write {write_s:.2} s, read {read_s:.2} s",
        dump.len(),
        dump.len() as f64 / spans as f64
    );
}

fn bench(c: &mut Criterion) {
    if let Some(count) = std::env::var("FLIGHT_BENCH_REQUESTS").ok().and_then(|count| count.parse().ok()) {
        timed_pass(count);
    }
    let requests: Vec<Request> =
        synthetic::requests(Writer::<Vec<u8>>::DEFAULT_BLOCK_REQUESTS * 4, 1).collect();
    let dump = write_all(&requests);
    let spans: usize = requests.iter().map(|request| request.spans.len() + 1).sum();
    println!("{:.2} bytes per span (roots counted)", dump.len() as f64 / spans as f64);

    let mut group = c.benchmark_group("dump");
    group.throughput(Throughput::Elements(requests.len() as u64));
    group.bench_function("write", |b| b.iter(|| write_all(&requests)));
    group.bench_function("read", |b| b.iter(|| Reader::new(&dump[..]).expect("a dump").count()));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
