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
    let mut report = vec![format!(
        "{requests} requests per producer, {iterations} work iterations per span (~10 µs requests), {runs} runs of each stack: `EXPORT_STACKS={}`",
        stacks.join(",")
    )];
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
        let lines = table(producers, &results, &floor);
        println!("\n{}\n", lines.join("\n"));
        report.push(String::new());
        report.extend(lines);
    }
    // For `scripts/bench-report.py`, which puts it in BENCHMARKS.md.
    let path = report_dir::criterion_dir().join("export.md");
    let written = std::fs::create_dir_all(path.parent().unwrap())
        .and_then(|()| std::fs::write(&path, report.join("\n") + "\n"));
    if let Err(error) = written {
        eprintln!("export: could not write {}: {error}", path.display());
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

/// The table of one producer count, as markdown lines.
fn table(producers: u64, results: &[(String, Vec<Run>)], floor: &Floor) -> Vec<String> {
    let base = results.iter().find(|(stack, _)| stack == "untraced").map(|(_, runs)| runs.clone());
    let base_cpu = base.as_ref().map_or(0.0, |runs| median(runs.iter().map(|r| r.cpu_ns as f64).collect()));
    let base_wall = base.as_ref().map_or(1.0, |runs| median(runs.iter().map(|r| r.wall_ns as f64).collect()));
    let otel = results.iter().find(|(stack, _)| stack == "otel-sdk").map(|(_, runs)| {
        median(runs.iter().map(|r| (r.cpu_ns as f64 - base_cpu) / r.delivered.max(1) as f64).collect())
    });
    let mut lines = vec![
        format!("### {producers} producer(s): medians of {} runs", results[0].1.len()),
        String::new(),
        "| stack | CPU per span made | CPU per span delivered | × OTel SDK | delivered | counted lost | wall × untraced | peak RSS |".to_string(),
        "|---|---|---|---|---|---|---|---|".to_string(),
    ];
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
        lines.push(format!(
            "| {stack} | {made_cell} | {delivered_cell} | {ratio_cell} | {share_cell} | {lost} | {wall:.2} | {rss:.0} MiB |"
        ));
    }
    lines.push(format!("| encode-only, OTLP protobuf | {:.0} ns | | | | | | |", floor.otlp_ns));
    lines.push(format!("| encode-only, Jaeger Thrift | {:.0} ns | | | | | | |", floor.jaeger_ns));
    lines
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
#[path = "export_stacks/mod.rs"]
mod stack;

#[path = "export_receiver/mod.rs"]
mod receiver;
/// The collector stand-in: HTTP/1.1 on 127.0.0.1, every body decoded
/// (OTLP protobuf or Jaeger Thrift Binary, by its content type) and its
/// spans counted; `GET /count` tells the count.
#[path = "report_dir/mod.rs"]
mod report_dir;
