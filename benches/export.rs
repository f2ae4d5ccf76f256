//! Every span exported, end to end (issue 35): a service answering ~10 µs
//! requests of 1 root + 9 spans with 2 string attributes each, every span
//! exported over OTLP/HTTP protobuf (or Jaeger Thrift over HTTP) to a
//! receiver on 127.0.0.1 that answers at once, decodes every body and
//! counts the spans in it.
//!
//! ```text
//! cargo bench --bench export                     # every stack, 3 runs each, medians
//! EXPORT_REQUESTS=20000 EXPORT_RUNS=1 cargo bench --bench export   # a short run
//! EXPORT_STACKS=minitrace-otlp,otel-sdk cargo bench --bench export # some stacks only
//! EXPORT_OTLP_MAX_SPANS=512 EXPORT_OTLP_GZIP=1 ...   # minitrace-otlp's request size, gzip
//! ```
//!
//! Each stack runs in a process of its own (the bench binary started again
//! by itself), so that its global set-up, its CPU time and its peak RSS are
//! its alone; the receiver is one more process, whose CPU is not counted.
//! A run makes `EXPORT_REQUESTS` requests (default 100 000, ~1 s of work)
//! on each of 1 producer thread, then again on 2; then flushes, waits for
//! the exporter to finish, and reads the process's CPU time (user +
//! system, every thread) and peak RSS. The receiver tells how many spans
//! arrived.
//!
//! Stacks:
//! - `untraced`: the same work, nothing recorded: the baseline.
//! - `minitrace-otlp`: minitrace + minitrace-otlp (HTTP/protobuf), default
//!   policy; `minitrace-otlp-lossless`: with `wait_when_queue_full(true)`.
//! - `otel-sdk`: opentelemetry_sdk 0.33 + BatchSpanProcessor +
//!   opentelemetry-otlp (HTTP/protobuf, its blocking reqwest client), defaults.
//! - `fastrace-otel`: fastrace 0.7.19 + fastrace-opentelemetry (the same exporter).
//! - `tracing-otel`: tracing + tracing-opentelemetry (the same SDK pipeline).
//! - `minitrace-jaeger`: minitrace + minitrace-jaeger over HTTP (Thrift Binary).
//! - `minitrace-discard`: minitrace with a reporter that drops every
//!   report: what recording and collecting cost, before any export.
//! - `floor-otlp`, `floor-jaeger`: minitrace with a reporter that only
//!   encodes each report, as the real reporter would, into a reused buffer:
//!   recording, collecting and encoding, with no delivery.
//!
//! Besides, `encode-only` rows: the CPU time of encoding the workload's
//! spans (as `SpanRecord`s made once) into a reused buffer, nothing else.
//!
//! Output: one markdown table per producer count (paste as is), and one
//! `RESULT` line per run (tab-separated, for scripts). Costs are CPU time
//! beyond the untraced run's, per span; quote ratios between rows of one
//! run: absolute times depend on the machine and its load.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const STACKS: &[&str] = &[
    "untraced",
    "minitrace-otlp",
    "minitrace-otlp-lossless",
    "otel-sdk",
    "fastrace-otel",
    "tracing-otel",
    "minitrace-discard",
    "floor-otlp",
    "minitrace-jaeger",
    "floor-jaeger",
];

/// The spans of one request.
const SPANS_PER_REQUEST: u64 = 10;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    match std::env::var("EXPORT_ROLE").as_deref() {
        Ok("receiver") => receiver::run(),
        Ok(stack) if stack.starts_with("stack:") => {
            stack::run(&stack["stack:".len()..]);
        }
        _ => {
            // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to run.
            if std::env::args().any(|arg| arg == "--bench") {
                orchestrate();
            }
        }
    }
}

/// What one stack's run measured.
#[derive(Clone, Debug, Default)]
struct Run {
    made: u64,
    cpu_ns: u64,
    wall_ns: u64,
    max_rss_kb: u64,
    delivered: u64,
    /// What the exporter counted lost, where it tells (minitrace: queue full + reporter).
    counted_lost: Option<u64>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if values.is_empty() {
        return f64::NAN;
    }
    values[values.len() / 2]
}

fn orchestrate() {
    let requests = env_u64("EXPORT_REQUESTS", 100_000);
    let runs = env_u64("EXPORT_RUNS", 3);
    let stacks: Vec<String> = match std::env::var("EXPORT_STACKS") {
        Ok(list) => {
            let mut list: Vec<String> = list.split(',').map(str::to_owned).collect();
            if !list.iter().any(|s| s == "untraced") {
                list.insert(0, "untraced".into());
            }
            list
        }
        Err(_) => STACKS.iter().map(|s| s.to_string()).collect(),
    };
    let iterations = workload::calibrate();
    eprintln!("export: {requests} requests per producer, {runs} runs, {iterations} work iterations per span");

    let exe = std::env::current_exe().unwrap();
    let mut receiver = Command::new(&exe)
        .env("EXPORT_ROLE", "receiver")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the receiver");
    let mut line = String::new();
    BufReader::new(receiver.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().parse().expect("the receiver's port");

    let floor = encode_floor();
    for producers in [1u64, 2] {
        let mut results: Vec<(String, Vec<Run>)> = Vec::new();
        for stack in &stacks {
            let mut stack_runs = Vec::new();
            for _ in 0..runs {
                let before = receiver::count(port);
                let output = Command::new(&exe)
                    .env("EXPORT_ROLE", format!("stack:{stack}"))
                    .env("EXPORT_PORT", port.to_string())
                    .env("EXPORT_REQUESTS", requests.to_string())
                    .env("EXPORT_PRODUCERS", producers.to_string())
                    .env("EXPORT_ITERATIONS", iterations.to_string())
                    .stderr(Stdio::inherit())
                    .output()
                    .expect("run a stack");
                let text = String::from_utf8_lossy(&output.stdout);
                let Some(mut run) = parse_run(&text) else {
                    eprintln!("export: {stack} failed: {text}");
                    continue;
                };
                // The receiver may still be decoding the last bodies.
                run.delivered = receiver::settle(port, before);
                println!(
                    "RESULT\t{stack}\t{producers}\t{}\t{}\t{}\t{}\t{}\t{}",
                    run.made,
                    run.cpu_ns,
                    run.wall_ns,
                    run.max_rss_kb,
                    run.delivered,
                    run.counted_lost.map_or("-".to_string(), |n| n.to_string())
                );
                stack_runs.push(run);
            }
            results.push((stack.clone(), stack_runs));
        }
        print_table(producers, &results, &floor);
    }
    drop(receiver.stdin.take());
    let _ = receiver.kill();
    let _ = receiver.wait();
}

fn parse_run(text: &str) -> Option<Run> {
    let line = text.lines().find(|line| line.starts_with("RUN\t"))?;
    let fields: Vec<&str> = line.split('\t').collect();
    let number = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Run {
        made: number(1)?,
        cpu_ns: number(2)?,
        wall_ns: number(3)?,
        max_rss_kb: number(4)?,
        delivered: 0,
        counted_lost: number(5),
    })
}

/// Encode-only floors: CPU ns per span of encoding the workload's spans.
struct Floor {
    otlp_ns: f64,
    jaeger_ns: f64,
}

fn encode_floor() -> Floor {
    let records = workload::records(4096 / SPANS_PER_REQUEST as usize);
    let mut otlp = minitrace_otlp::OtlpReporter::builder()
        .env(|_| None)
        .service_name("export-bench")
        .endpoint("http://127.0.0.1:9")
        .build()
        .unwrap();
    let mut jaeger = minitrace_jaeger::JaegerReporter::http("127.0.0.1:9".parse().unwrap(), "export-bench");
    let measure = |encode: &mut dyn FnMut()| {
        let mut samples = Vec::new();
        for _ in 0..7 {
            let start = cpu::process_ns();
            let rounds = 200;
            for _ in 0..rounds {
                encode();
            }
            samples.push((cpu::process_ns() - start) as f64 / (rounds * records.len()) as f64);
        }
        median(samples)
    };
    let mut sink = 0usize;
    let otlp_ns = measure(&mut || otlp.encode_each(&records, |body, _| sink += body.len()));
    let jaeger_ns = measure(&mut || jaeger.encode_each(&records, |body, _| sink += body.len()));
    std::hint::black_box(sink);
    Floor { otlp_ns, jaeger_ns }
}

fn print_table(producers: u64, results: &[(String, Vec<Run>)], floor: &Floor) {
    let base = results.iter().find(|(stack, _)| stack == "untraced").map(|(_, runs)| runs.clone());
    let base_cpu = base.as_ref().map_or(0.0, |runs| median(runs.iter().map(|r| r.cpu_ns as f64).collect()));
    let base_wall = base.as_ref().map_or(1.0, |runs| median(runs.iter().map(|r| r.wall_ns as f64).collect()));
    let otel = results.iter().find(|(stack, _)| stack == "otel-sdk").map(|(_, runs)| {
        median(runs.iter().map(|r| (r.cpu_ns as f64 - base_cpu) / r.delivered.max(1) as f64).collect())
    });
    println!();
    println!("### {producers} producer(s): medians of {} runs", results[0].1.len());
    println!();
    println!("| stack | CPU per span made | CPU per span delivered | × OTel SDK | delivered | counted lost | wall × untraced | peak RSS |");
    println!("|---|---|---|---|---|---|---|---|");
    for (stack, runs) in results {
        if runs.is_empty() {
            continue;
        }
        let made = median(runs.iter().map(|r| (r.cpu_ns as f64 - base_cpu) / r.made.max(1) as f64).collect());
        let delivered_cost =
            median(runs.iter().map(|r| (r.cpu_ns as f64 - base_cpu) / r.delivered.max(1) as f64).collect());
        let share = median(runs.iter().map(|r| r.delivered as f64 / r.made.max(1) as f64).collect());
        let wall = median(runs.iter().map(|r| r.wall_ns as f64).collect()) / base_wall;
        let rss = median(runs.iter().map(|r| r.max_rss_kb as f64).collect()) / 1024.0;
        let lost = runs
            .iter()
            .filter_map(|r| r.counted_lost)
            .map(|n| n as f64 / runs[0].made.max(1) as f64)
            .collect::<Vec<_>>();
        let lost = if lost.is_empty() { "-".to_string() } else { format!("{:.1} %", 100.0 * median(lost)) };
        let floor_row = stack.starts_with("floor") || stack == "untraced" || stack == "minitrace-discard";
        let (delivered_cell, share_cell, ratio_cell) = if floor_row {
            ("-".to_string(), "-".to_string(), "-".to_string())
        } else {
            let ratio = otel.map_or("-".to_string(), |otel| format!("{:.2}", delivered_cost / otel));
            (format!("{:.0} ns", delivered_cost), format!("{:.1} %", 100.0 * share), ratio)
        };
        let made_cell = if stack == "untraced" { "-".to_string() } else { format!("{made:.0} ns") };
        println!(
            "| {stack} | {made_cell} | {delivered_cell} | {ratio_cell} | {share_cell} | {lost} | {wall:.2} | {rss:.0} MiB |"
        );
    }
    println!("| encode-only, OTLP protobuf | {:.0} ns | | | | | | |", floor.otlp_ns);
    println!("| encode-only, Jaeger Thrift | {:.0} ns | | | | | | |", floor.jaeger_ns);
    println!();
}

/// The process's CPU time and peak RSS.
mod cpu {
    fn usage() -> libc::rusage {
        // SAFETY: `getrusage` fills the struct it is given; zeroes are a valid `rusage`.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut usage);
            usage
        }
    }

    fn ns(time: libc::timeval) -> u64 {
        time.tv_sec as u64 * 1_000_000_000 + time.tv_usec as u64 * 1_000
    }

    /// User + system CPU time of every thread of the process, in ns.
    pub fn process_ns() -> u64 {
        let usage = usage();
        ns(usage.ru_utime) + ns(usage.ru_stime)
    }

    /// Peak RSS, in KiB.
    pub fn max_rss_kb() -> u64 {
        usage().ru_maxrss as u64
    }
}

/// The traced service's work.
mod workload {
    use super::*;

    pub const ROOT: &str = "request";
    pub const CHILD: &str = "step";
    /// The 2 string attributes of every span.
    pub const ATTRIBUTES: [(&str, &str); 2] = [("http.route", "/api/v1/checkout"), ("step.kind", "validate")];

    /// About 1 µs of work per call, the same in every process.
    #[inline(never)]
    pub fn work(iterations: u64) -> u64 {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..iterations {
            x = std::hint::black_box(x.rotate_left(5) ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d);
        }
        x
    }

    /// Iterations of [`work`] in 1 µs here.
    pub fn calibrate() -> u64 {
        if let Some(iterations) = std::env::var("EXPORT_ITERATIONS").ok().and_then(|v| v.parse().ok()) {
            return iterations;
        }
        let mut samples = Vec::new();
        for _ in 0..9 {
            let start = Instant::now();
            std::hint::black_box(work(100_000));
            samples.push(start.elapsed().as_nanos() as f64 / 100_000.0);
        }
        let ns_per_iteration = median(samples);
        (1_000.0 / ns_per_iteration).round().max(1.0) as u64
    }

    /// The spans of `requests` requests as minitrace records them, for the encode-only floor.
    pub fn records(requests: usize) -> Vec<minitrace::collector::SpanRecord> {
        use minitrace::collector::{SpanId, SpanRecord, TraceId};
        let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let mut records = Vec::new();
        for r in 0..requests as u64 {
            let trace = TraceId(u128::from(r + 1) << 64 | 0x5eed);
            for s in 0..SPANS_PER_REQUEST {
                records.push(SpanRecord {
                    trace_id: trace,
                    span_id: SpanId(r * 100 + s + 1),
                    parent_id: SpanId(if s == 0 { 0 } else { r * 100 + 1 }),
                    begin_time_unix_ns: start + r * 10_000 + s * 1_000,
                    duration_ns: if s == 0 { 10_000 } else { 1_000 },
                    name: Cow::Borrowed(if s == 0 { ROOT } else { CHILD }),
                    properties: ATTRIBUTES
                        .iter()
                        .map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v)))
                        .collect(),
                    events: Vec::new(),
                });
            }
        }
        records
    }
}

/// One stack's run, in a process of its own.
mod stack {
    use super::workload::{work, ATTRIBUTES, CHILD, ROOT};
    use super::*;

    /// How a stack records one request, and how it is flushed at the end.
    trait Stack: Sync {
        fn request(&self, iterations: u64);
        fn finish(&self) -> Option<u64>;
    }

    struct Untraced;

    impl Stack for Untraced {
        fn request(&self, iterations: u64) {
            std::hint::black_box(work(iterations));
            for _ in 1..SPANS_PER_REQUEST {
                std::hint::black_box(work(iterations));
            }
        }

        fn finish(&self) -> Option<u64> {
            None
        }
    }

    struct Minitrace;

    impl Stack for Minitrace {
        fn request(&self, iterations: u64) {
            use minitrace::prelude::*;
            let root = Span::root(ROOT, SpanContext::random()).with_properties(|| ATTRIBUTES);
            let _guard = root.set_local_parent();
            std::hint::black_box(work(iterations));
            for _ in 1..SPANS_PER_REQUEST {
                let _span = LocalSpan::enter_with_local_parent(CHILD).with_properties(|| ATTRIBUTES);
                std::hint::black_box(work(iterations));
            }
        }

        fn finish(&self) -> Option<u64> {
            minitrace::flush();
            // The reporter's sender thread may still be delivering.
            if let Some(wait) = WAIT_FOR_DELIVERY.get() {
                assert!(wait(), "delivery did not finish");
            }
            let stats = minitrace::collector::stats();
            Some(stats.dropped_queue_full + stats.dropped_by_reporter)
        }
    }

    /// Waits for a minitrace reporter's sender thread to finish.
    type Wait = Box<dyn Fn() -> bool + Send + Sync>;
    static WAIT_FOR_DELIVERY: std::sync::OnceLock<Wait> = std::sync::OnceLock::new();

    struct Otel {
        tracer: opentelemetry_sdk::trace::SdkTracer,
        provider: opentelemetry_sdk::trace::SdkTracerProvider,
    }

    impl Stack for Otel {
        fn request(&self, iterations: u64) {
            use opentelemetry::trace::{Span as _, TraceContextExt, Tracer};
            use opentelemetry::{Context, KeyValue};
            let attributes = || ATTRIBUTES.iter().map(|(k, v)| KeyValue::new(*k, *v));
            let mut root = self.tracer.start(ROOT);
            root.set_attributes(attributes());
            let cx = Context::current_with_span(root);
            std::hint::black_box(work(iterations));
            for _ in 1..SPANS_PER_REQUEST {
                let mut span = self.tracer.start_with_context(CHILD, &cx);
                span.set_attributes(attributes());
                std::hint::black_box(work(iterations));
                span.end();
            }
            cx.span().end();
        }

        fn finish(&self) -> Option<u64> {
            let _ = self.provider.force_flush();
            let _ = self.provider.shutdown();
            None
        }
    }

    struct Fastrace;

    impl Stack for Fastrace {
        fn request(&self, iterations: u64) {
            use fastrace::prelude::*;
            let root = Span::root(ROOT, SpanContext::random()).with_properties(|| ATTRIBUTES);
            let _guard = root.set_local_parent();
            std::hint::black_box(work(iterations));
            for _ in 1..SPANS_PER_REQUEST {
                let _span = LocalSpan::enter_with_local_parent(CHILD).with_properties(|| ATTRIBUTES);
                std::hint::black_box(work(iterations));
            }
        }

        fn finish(&self) -> Option<u64> {
            fastrace::flush();
            None
        }
    }

    struct Tracing {
        provider: opentelemetry_sdk::trace::SdkTracerProvider,
    }

    impl Stack for Tracing {
        fn request(&self, iterations: u64) {
            let root =
                tracing::info_span!("request", http.route = ATTRIBUTES[0].1, step.kind = ATTRIBUTES[1].1);
            let _root = root.enter();
            std::hint::black_box(work(iterations));
            for _ in 1..SPANS_PER_REQUEST {
                let span =
                    tracing::info_span!("step", http.route = ATTRIBUTES[0].1, step.kind = ATTRIBUTES[1].1);
                let _span = span.enter();
                std::hint::black_box(work(iterations));
            }
        }

        fn finish(&self) -> Option<u64> {
            let _ = self.provider.force_flush();
            let _ = self.provider.shutdown();
            None
        }
    }

    fn otlp_exporter(url: &str) -> opentelemetry_otlp::SpanExporter {
        use opentelemetry_otlp::{Protocol, WithExportConfig};
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .build()
            .expect("opentelemetry-otlp's exporter")
    }

    fn otel_provider(url: &str) -> opentelemetry_sdk::trace::SdkTracerProvider {
        let resource = opentelemetry_sdk::Resource::builder().with_service_name("export-bench").build();
        opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(otlp_exporter(url))
            .with_resource(resource)
            .build()
    }

    /// A minitrace reporter that encodes as the real one would, into a
    /// reused buffer, and sends nothing.
    struct EncodeOnly<F>(F);

    impl<F: FnMut(&[minitrace::collector::SpanRecord]) + Send + 'static> minitrace::collector::Reporter
        for EncodeOnly<F>
    {
        fn report(&mut self, spans: &[minitrace::collector::SpanRecord]) {
            (self.0)(spans);
        }
    }

    fn minitrace_config(lossless: bool) -> minitrace::collector::Config {
        minitrace::collector::Config::default().wait_when_queue_full(lossless)
    }

    pub fn run(name: &str) {
        let port = env_u64("EXPORT_PORT", 0);
        let requests = env_u64("EXPORT_REQUESTS", 100_000);
        let producers = env_u64("EXPORT_PRODUCERS", 1);
        let iterations = env_u64("EXPORT_ITERATIONS", 100);
        let otlp_url = format!("http://127.0.0.1:{port}/v1/traces");
        let stack: Box<dyn Stack> = match name {
            "untraced" => Box::new(Untraced),
            "minitrace-otlp" | "minitrace-otlp-lossless" => {
                // Knobs for choosing the defaults: request size and compression.
                let mut builder = minitrace_otlp::OtlpReporter::builder()
                    .env(|_| None)
                    .endpoint(format!("http://127.0.0.1:{port}"))
                    .service_name("export-bench");
                if let Some(spans) = std::env::var("EXPORT_OTLP_MAX_SPANS").ok().and_then(|v| v.parse().ok())
                {
                    builder = builder.max_spans_per_request(spans);
                }
                if std::env::var("EXPORT_OTLP_GZIP").is_ok_and(|v| v == "1") {
                    builder = builder.compression(minitrace_otlp::Compression::Gzip);
                }
                let reporter = builder.build().unwrap();
                let stats = reporter.stats();
                let _ =
                    WAIT_FOR_DELIVERY.set(Box::new(move || stats.wait_for_delivery(Duration::from_secs(60))));
                minitrace::set_reporter(reporter, minitrace_config(name.ends_with("lossless")));
                Box::new(Minitrace)
            }
            "minitrace-discard" => {
                minitrace::set_reporter(
                    EncodeOnly(|_: &[minitrace::collector::SpanRecord]| {}),
                    minitrace_config(false),
                );
                Box::new(Minitrace)
            }
            "floor-otlp" => {
                let mut reporter = minitrace_otlp::OtlpReporter::builder()
                    .env(|_| None)
                    .endpoint(format!("http://127.0.0.1:{port}"))
                    .service_name("export-bench")
                    .build()
                    .unwrap();
                let mut sink = 0usize;
                let encode = move |spans: &[minitrace::collector::SpanRecord]| {
                    reporter.encode_each(spans, |body, _| sink += body.len());
                    std::hint::black_box(sink);
                };
                minitrace::set_reporter(EncodeOnly(encode), minitrace_config(false));
                Box::new(Minitrace)
            }
            "minitrace-jaeger" => {
                let addr = format!("127.0.0.1:{port}").parse().unwrap();
                let reporter = minitrace_jaeger::JaegerReporter::http(addr, "export-bench");
                let stats = reporter.stats();
                let _ =
                    WAIT_FOR_DELIVERY.set(Box::new(move || stats.wait_for_delivery(Duration::from_secs(60))));
                minitrace::set_reporter(reporter, minitrace_config(false));
                Box::new(Minitrace)
            }
            "floor-jaeger" => {
                let addr = format!("127.0.0.1:{port}").parse().unwrap();
                let mut reporter = minitrace_jaeger::JaegerReporter::http(addr, "export-bench");
                let mut sink = 0usize;
                let encode = move |spans: &[minitrace::collector::SpanRecord]| {
                    reporter.encode_each(spans, |body, _| sink += body.len());
                    std::hint::black_box(sink);
                };
                minitrace::set_reporter(EncodeOnly(encode), minitrace_config(false));
                Box::new(Minitrace)
            }
            "otel-sdk" => {
                use opentelemetry::trace::TracerProvider as _;
                let provider = otel_provider(&otlp_url);
                Box::new(Otel { tracer: provider.tracer("export-bench"), provider })
            }
            "fastrace-otel" => {
                let resource =
                    opentelemetry_sdk::Resource::builder().with_service_name("export-bench").build();
                let scope = opentelemetry::InstrumentationScope::builder("export-bench").build();
                let reporter = fastrace_opentelemetry::OpenTelemetryReporter::new(
                    otlp_exporter(&otlp_url),
                    Cow::Owned(resource),
                    scope,
                );
                fastrace::set_reporter(reporter, fastrace::collector::Config::default());
                Box::new(Fastrace)
            }
            "tracing-otel" => {
                use opentelemetry::trace::TracerProvider as _;
                use tracing_subscriber::layer::SubscriberExt;
                let provider = otel_provider(&otlp_url);
                let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("export-bench"));
                tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
                Box::new(Tracing { provider })
            }
            other => panic!("unknown stack {other}"),
        };
        let cpu_start = cpu::process_ns();
        let start = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..producers {
                let stack = &*stack;
                scope.spawn(move || {
                    for _ in 0..requests {
                        stack.request(iterations);
                    }
                });
            }
        });
        let lost = stack.finish();
        let wall = start.elapsed().as_nanos() as u64;
        let cpu = cpu::process_ns() - cpu_start;
        let made = requests * producers * SPANS_PER_REQUEST;
        println!(
            "RUN\t{made}\t{cpu}\t{wall}\t{}\t{}",
            cpu::max_rss_kb(),
            lost.map_or("-".to_string(), |n| n.to_string())
        );
        std::io::stdout().flush().unwrap();
        // At once: an exporter's threads may not end by themselves.
        std::process::exit(0);
    }
}

/// The collector stand-in: HTTP/1.1 on 127.0.0.1, every body decoded
/// (OTLP protobuf or Jaeger Thrift Binary, by its content type) and its
/// spans counted; `GET /count` tells the count.
mod receiver {
    use super::*;

    static SPANS: AtomicU64 = AtomicU64::new(0);
    static MALFORMED: AtomicU64 = AtomicU64::new(0);

    pub fn run() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        std::io::stdout().flush().unwrap();
        // Ends with its parent: stdin closes.
        std::thread::spawn(|| {
            let mut rest = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut rest);
            std::process::exit(0);
        });
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    }

    fn serve(stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::with_capacity(1 << 16, stream);
        let mut body = Vec::new();
        loop {
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                return;
            }
            let mut length = 0usize;
            let mut content_type = String::new();
            let mut gzip = false;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 {
                    return;
                }
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                let (name, value) = header.split_once(':').unwrap_or((header, ""));
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "content-type" => content_type = value.trim().to_owned(),
                    "content-encoding" => gzip = value.trim() == "gzip",
                    _ => {}
                }
            }
            body.resize(length, 0);
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            if gzip {
                let mut plain = Vec::new();
                if flate2::read::GzDecoder::new(body.as_slice()).read_to_end(&mut plain).is_err() {
                    MALFORMED.fetch_add(1, Ordering::SeqCst);
                }
                body = plain;
            }
            let answer: Cow<str> = if request_line.starts_with("GET /count") {
                let text = format!("{} {}", SPANS.load(Ordering::SeqCst), MALFORMED.load(Ordering::SeqCst));
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{text}",
                    text.len()
                )
                .into()
            } else {
                let spans =
                    if content_type.contains("thrift") { thrift_spans(&body) } else { otlp_spans(&body) };
                match spans {
                    Some(spans) => SPANS.fetch_add(spans, Ordering::SeqCst),
                    None => MALFORMED.fetch_add(1, Ordering::SeqCst),
                };
                if content_type.contains("thrift") {
                    "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".into()
                } else {
                    "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
                        .into()
                }
            };
            if writer.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    }

    /// The receiver's span count, and the malformed bodies it saw.
    pub fn count(port: u16) -> u64 {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(b"GET /count HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n").unwrap();
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
        }
        let mut text = vec![0; length];
        reader.read_exact(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        let mut parts = text.split(' ');
        let spans = parts.next().unwrap().parse().unwrap();
        let malformed: u64 = parts.next().unwrap().parse().unwrap();
        assert_eq!(malformed, 0, "the receiver could not decode some bodies");
        spans
    }

    /// The spans that arrived since `before`, once the count stops moving.
    pub fn settle(port: u16, before: u64) -> u64 {
        let mut last = count(port);
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = count(port);
            if now == last {
                return now - before;
            }
            last = now;
        }
    }

    /// A protobuf reader: each field's number, wire type and value.
    struct Fields<'a>(&'a [u8]);

    enum Value<'a> {
        Number,
        Bytes(&'a [u8]),
    }

    fn varint(bytes: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = bytes.split_first()?;
            *bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(value);
            }
        }
        None
    }

    impl<'a> Iterator for Fields<'a> {
        type Item = Option<(u64, Value<'a>)>;

        fn next(&mut self) -> Option<Self::Item> {
            if self.0.is_empty() {
                return None;
            }
            let field = || -> Option<(u64, Value<'a>)> {
                let key = varint(&mut self.0)?;
                let value = match key & 7 {
                    0 => {
                        varint(&mut self.0)?;
                        Value::Number
                    }
                    1 | 5 => {
                        let n = if key & 7 == 1 { 8 } else { 4 };
                        self.0 = self.0.get(n..)?;
                        Value::Number
                    }
                    2 => {
                        let len = varint(&mut self.0)? as usize;
                        let bytes = self.0.get(..len)?;
                        self.0 = &self.0[len..];
                        Value::Bytes(bytes)
                    }
                    _ => return None,
                };
                Some((key >> 3, value))
            }();
            if field.is_none() {
                self.0 = &[];
            }
            Some(field)
        }
    }

    /// The spans of an `ExportTraceServiceRequest`, each walked field by
    /// field (its ids checked); `None` if malformed.
    pub fn otlp_spans(body: &[u8]) -> Option<u64> {
        let mut spans = 0;
        for field in Fields(body) {
            let (1, Value::Bytes(resource_spans)) = field? else { continue };
            for field in Fields(resource_spans) {
                let (2, Value::Bytes(scope_spans)) = field? else { continue };
                for field in Fields(scope_spans) {
                    let (2, Value::Bytes(span)) = field? else { continue };
                    let mut ids = 0;
                    for field in Fields(span) {
                        match field? {
                            (1, Value::Bytes(id)) if id.len() == 16 => ids += 1,
                            (2, Value::Bytes(id)) if id.len() == 8 => ids += 1,
                            _ => {}
                        }
                    }
                    if ids != 2 {
                        return None;
                    }
                    spans += 1;
                }
            }
        }
        Some(spans)
    }

    /// The spans of a Thrift Binary `Batch`, each walked whole; `None` if
    /// malformed.
    pub fn thrift_spans(body: &[u8]) -> Option<u64> {
        let mut bytes = body;
        let mut spans = None;
        loop {
            let (&ty, rest) = bytes.split_first()?;
            bytes = rest;
            if ty == 0 {
                break;
            }
            let id = i16::from_be_bytes(bytes.get(..2)?.try_into().ok()?);
            bytes = &bytes[2..];
            if id == 2 && ty == 15 {
                let (&elem, rest) = bytes.split_first()?;
                let count = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
                bytes = &rest[4..];
                for _ in 0..count {
                    skip(&mut bytes, elem)?;
                }
                spans = Some(count as u64);
            } else {
                skip(&mut bytes, ty)?;
            }
        }
        spans
    }

    fn skip(bytes: &mut &[u8], ty: u8) -> Option<()> {
        let take = |bytes: &mut &[u8], n: usize| -> Option<()> {
            *bytes = bytes.get(n..)?;
            Some(())
        };
        let int = |bytes: &mut &[u8]| -> Option<i32> {
            let value = i32::from_be_bytes(bytes.get(..4)?.try_into().ok()?);
            *bytes = &bytes[4..];
            Some(value)
        };
        match ty {
            2 | 3 => take(bytes, 1),
            4 | 10 => take(bytes, 8),
            6 => take(bytes, 2),
            8 => take(bytes, 4),
            11 => {
                let len = int(bytes)?;
                take(bytes, usize::try_from(len).ok()?)
            }
            12 => loop {
                let (&field, rest) = bytes.split_first()?;
                *bytes = rest;
                if field == 0 {
                    return Some(());
                }
                take(bytes, 2)?;
                skip(bytes, field)?;
            },
            13 => {
                let (&key, rest) = bytes.split_first()?;
                let (&value, rest) = rest.split_first()?;
                *bytes = rest;
                for _ in 0..int(bytes)? {
                    skip(bytes, key)?;
                    skip(bytes, value)?;
                }
                Some(())
            }
            14 | 15 => {
                let (&elem, rest) = bytes.split_first()?;
                *bytes = rest;
                for _ in 0..int(bytes)? {
                    skip(bytes, elem)?;
                }
                Some(())
            }
            _ => None,
        }
    }
}
