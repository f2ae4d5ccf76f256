//! Retroactive tracing across four processes: every request traced, only
//! the ones that turn out to matter sent to Jaeger, whole, from every
//! service they touched.
//!
//! ```sh
//! bash scripts/jaeger.sh start
//! cargo run --release --example retroactive
//! ```
//!
//! This process starts three others and is the fourth: a `frontend` (axum)
//! calls `inventory` over HTTP (reqwest) and `pricing` over gRPC (tonic);
//! `pricing` calls `stock` over HTTP. Each traces every request through
//! minitrace-tower's layers and minitrace-reqwest, keeps every span in its
//! flight recorder, reports over OTLP to Jaeger only traces slower than
//! 500 ms (or failed), and runs a `minitrace-remote` listener on 127.0.0.1.
//! Then `RETRO_REQUESTS` requests (default 100 000), of which three kinds
//! matter, and nothing in the services below knows it at the time:
//!
//! - *slow*: 1 in 10 000 made slow in the frontend after its calls
//!   returned (no backend's part is slow);
//! - *failed*: 1 in 10 000 fail deep down, in `stock` (its caller falls
//!   back and answers; only the leaf sees an error);
//! - *flagged*: 1 in 1 000 the frontend's code asks for while still
//!   answering (`Listener::fetch`: "this one matters").
//!
//! The trigger, wherever it fires, fetches the trace's parts from every
//! process its breadcrumbs name. Meanwhile a probe polls Jaeger's query API
//! until each such trace is whole: the time from its trigger to its last
//! part in Jaeger is the latency printed. Then: the oldest request, long
//! overwritten, is asked for (not found, counted); `inventory` is killed
//! and a recent fast request is asked for (the others still deliver); an
//! unauthenticated and a forged request are refused. Finally every count
//! is checked against what happened, and every trace in Jaeger against
//! what should be there: each triggered trace whole, with its four
//! services' spans under the right parents, and no fast trace.
//!
//! It prints a summary and, last, one `RESULT {json}` line (read by
//! `tests/examples_run.rs`); it exits with an error if any check failed.

#[path = "retroactive/checks.rs"]
mod checks;
#[path = "retroactive/services.rs"]
mod services;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use minitrace::collector::TraceId;

use checks::{Jaeger, Kind, Problems};

/// Roots at least this long are reported (and trigger a retrieval): far
/// above a fast request's ~1 ms, so that a busy machine's stall does not
/// make a fast one slow.
pub const THRESHOLD: Duration = Duration::from_millis(500);
/// What a slow request waits for, after its calls returned.
pub const SLOW_BY: Duration = Duration::from_secs(1);
/// Requests in flight at once.
const CONCURRENCY: usize = 8;

/// What request `n` is made to do: every process works it out alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Design {
    pub slow: bool,
    pub fail: bool,
    pub flag: bool,
}

pub fn design(n: u64) -> Design {
    Design { slow: n % 10_000 == 5_000, fail: n % 10_000 == 2_500, flag: n % 1_000 == 700 }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        services::serve(&args[2]);
        return;
    }
    let requests: u64 = std::env::var("RETRO_REQUESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let problems = orchestrate(requests.max(10_000));
    std::process::exit(if problems { 1 } else { 0 });
}

/// A service in a process of its own: commands on its stdin, answers on
/// its stdout.
struct Process {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    app: String,
    listener: String,
}

impl Process {
    fn start(name: &'static str, run: &str, token: &str, stock: Option<&str>) -> Process {
        let mut child = Command::new(std::env::current_exe().expect("this program"))
            .args(["serve", name])
            .env("RETRO_RUN", run)
            .env("RETRO_TOKEN", token)
            .env("RETRO_STOCK", stock.unwrap_or(""))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {name}: {error}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        let mut process = Process { name, child, stdin, lines, app: String::new(), listener: String::new() };
        let ready = process.expect("READY");
        let mut words = ready.split_whitespace();
        process.app = words.next().unwrap().to_owned();
        process.listener = words.next().unwrap().to_owned();
        process
    }

    /// The next line starting with `word`, without it.
    fn expect(&mut self, word: &str) -> String {
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
                panic!("{} said no {word}", self.name);
            });
            if let Some(rest) = line.strip_prefix(word) {
                return rest.trim().to_owned();
            }
        }
    }

    fn stats(&mut self) -> serde_json::Value {
        writeln!(self.stdin, "stats").expect("a running service");
        serde_json::from_str(&self.expect("STATS")).expect("stats as JSON")
    }

    fn stop(mut self) -> serde_json::Value {
        writeln!(self.stdin, "exit").expect("a running service");
        let stats = serde_json::from_str(&self.expect("STATS")).expect("stats as JSON");
        let _ = self.child.wait();
        stats
    }
}

fn unique_run() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{:x}{:x}", std::process::id(), nanos % (1 << 40))
}

fn orchestrate(requests: u64) -> bool {
    let run = unique_run();
    let token = format!("{:032x}", TraceId::random().0);
    let jaeger = Jaeger::new(&run);
    if let Err(error) = jaeger.ready() {
        eprintln!("retroactive: Jaeger's query API does not answer ({error}): bash scripts/jaeger.sh start");
        std::process::exit(2);
    }
    let stock = Process::start("stock", &run, &token, None);
    let inventory = Process::start("inventory", &run, &token, None);
    let pricing = Process::start("pricing", &run, &token, Some(&stock.app));
    let mut processes = vec![stock, inventory, pricing];
    let frontend = services::Frontend::start(&run, &token, &processes[1].app, &processes[2].app);
    println!(
        "four services on 127.0.0.1 (run {run}), reporting to Jaeger only traces over {THRESHOLD:?} or failed"
    );

    // The load, and the probe timing each triggered trace to Jaeger.
    let (to_probe, probing) = std::sync::mpsc::channel();
    let (load, load_time, probed) = std::thread::scope(|scope| {
        let probe = scope.spawn(|| jaeger.probe(probing, Duration::from_secs(30)));
        let started = Instant::now();
        let load = frontend.load(requests, CONCURRENCY, to_probe);
        let load_time = started.elapsed();
        (load, load_time, probe.join().expect("the probe"))
    });
    println!(
        "{requests} requests in {:.1} s ({:.0}/s): {} slow, {} failed at the leaf, {} flagged",
        load_time.as_secs_f64(),
        requests as f64 / load_time.as_secs_f64(),
        load.of(Kind::Slow).len(),
        load.of(Kind::Failed).len(),
        load.of(Kind::Flagged).len()
    );
    let mut problems = Problems::default();
    for (trace_id, kind) in &load.triggered {
        if !probed.latency_ms.contains_key(trace_id) {
            problems.push(format!("{kind:?} trace {trace_id} never arrived whole in Jaeger"));
        }
    }
    let whole_share = probed.latency_ms.len() as f64 / load.triggered.len().max(1) as f64;
    let seen = Percentiles::of(probed.latency_ms.values().copied().collect());
    println!(
        "whole in Jaeger: {} of {} triggered ({:.2} %); trigger to whole through the query API: {seen}",
        probed.latency_ms.len(),
        load.triggered.len(),
        100.0 * whole_share,
    );

    // Let the last retrievals settle, then the inventory's counts before it dies.
    std::thread::sleep(Duration::from_millis(500));
    let inventory_stats = processes[1].stats();

    // The oldest request: overwritten everywhere long ago.
    frontend.fetch(load.first);
    // The inventory killed; a recent fast request asked for.
    let mut inventory = processes.remove(1);
    let _ = inventory.child.kill();
    let _ = inventory.child.wait();
    frontend.fetch(load.last);
    // Refused: no token, and a forged body with it.
    let refusals = [
        checks::post(&frontend.listener, None, "{}"),
        checks::post(&frontend.listener, Some(&token), r#"{"trace_id":"../../etc","hops":99}"#),
        checks::post(&processes[0].listener, None, "{}"),
        checks::post(&processes[0].listener, Some(&token), r#"{"trace_id":"zz","hops":1}"#),
    ];
    if refusals != [401, 400, 401, 400] {
        problems.push(format!("refusals answered {refusals:?}, want [401, 400, 401, 400]"));
    }
    let last_whole = jaeger.probe_these(&[(load.last, Kind::AfterKill)], Duration::from_secs(30));
    if last_whole.latency_ms.is_empty() {
        problems.push(format!("the trace fetched after the kill ({}) did not arrive", load.last));
    }
    // Past the listener's wait for a root that will never end here.
    std::thread::sleep(services::WAIT_FOR_ROOTS + Duration::from_millis(500));

    let mut stats: BTreeMap<&str, serde_json::Value> = BTreeMap::new();
    stats.insert("inventory", inventory_stats);
    stats.insert("frontend", frontend.stop());
    for process in processes {
        let name = process.name;
        stats.insert(name, process.stop());
    }

    // From each trigger to the last of the trace's parts accepted by
    // Jaeger's OTLP receiver, as the services' reporters saw it.
    let accepted_ms: Vec<f64> = probed
        .trigger_end_us
        .iter()
        .filter_map(|(trace_id, trigger_end_us)| {
            let key = trace_id.to_string();
            let last = stats
                .values()
                .filter_map(|stats| stats["jaeger_accepted_us"][&key].as_f64())
                .reduce(f64::max)?;
            Some((last - trigger_end_us) / 1e3)
        })
        .collect();
    let accepted = Percentiles::of(accepted_ms);
    println!("trigger to the last part accepted by Jaeger: {accepted}");

    let counts = checks::Counts {
        slow: load.of(Kind::Slow).len() as u64,
        failed: load.of(Kind::Failed).len() as u64,
        flagged: load.of(Kind::Flagged).len() as u64,
    };
    problems.extend(checks::listener_counts(&stats, counts));
    let mut expected: HashMap<TraceId, Kind> = load.triggered.iter().copied().collect();
    expected.insert(load.last, Kind::AfterKill);
    problems.extend(jaeger.only_these(&expected, load.first));

    println!("listeners (found / not found / forwarded / failed to forward):");
    for (name, stats) in &stats {
        println!(
            "  {name:<9} {:>4} / {} / {:>4} / {}",
            stats["listener"]["found"],
            stats["listener"]["not_found"],
            stats["listener"]["forwarded"],
            stats["listener"]["forward_failed"]
        );
    }
    problems.report();
    let result = serde_json::json!({
        "requests": requests,
        "slow": counts.slow,
        "failed": counts.failed,
        "flagged": counts.flagged,
        "triggered": load.triggered.len(),
        "whole": probed.latency_ms.len(),
        "whole_share": whole_share,
        "accepted_ms": accepted.json(),
        "seen_ms": seen.json(),
        "load_seconds": load_time.as_secs_f64(),
        "stats": stats,
        "problems": problems.list(),
    });
    println!("RESULT {result}");
    !problems.is_empty()
}

/// The median, 99th percentile and maximum of some times (ms).
#[derive(Debug)]
struct Percentiles {
    p50: f64,
    p99: f64,
    max: f64,
}

impl Percentiles {
    fn of(mut times: Vec<f64>) -> Percentiles {
        times.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((times.len() as f64 * p).ceil() as usize).saturating_sub(1);
            times.get(rank).copied().unwrap_or(f64::NAN)
        };
        Percentiles { p50: at(0.5), p99: at(0.99), max: at(1.0) }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({ "p50": self.p50, "p99": self.p99, "max": self.max })
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms", self.p50, self.p99, self.max)
    }
}
