//! The main job: a key-value service on both cores, every request traced,
//! always on, with the flight recorder keeping every request meanwhile;
//! what that costs, and what it finds.
//!
//! `cargo run --release --example trace`
//!
//! Two worker threads answer requests of about 1 µs each: reads, writes,
//! and a rare `compact` that holds every shard's lock for a millisecond,
//! so the request the other worker is serving waits behind it. Requests to
//! shard 7 do extra work: a cause that only an attribute (the root's
//! `shard` property) reveals. The collector reports only traces whose
//! root took 10 µs or more.
//!
//! The same request mix runs untraced (`minitrace::set_enabled(false)`),
//! untraced with the 8 clock reads a request's spans would make (the floor
//! of any tracer that times each step), traced, and traced with the flight
//! recorder (8 MiB per thread), in interleaved rounds so that the machine's
//! noise hits all four alike; the median round of each gives the cost of
//! tracing. The run then prints
//! the slow requests of the last round, what overlapped a slow `compact`
//! (from the recorder), and writes the recorder's requests as a dump, its
//! summary, and a page (`target/trace-example/requests.html`) that plots
//! every request.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender};
use minitrace::collector::{Config, Reporter, SpanId, SpanRecord, TraceId};
use minitrace::prelude::*;
use minitrace::recorder::{FlightRecorder, RecordedTrace};
use minitrace_flight::Reader;
use minitrace_suite::busy_work;

const WORKERS: u64 = 2;
/// Rounds of each mode; each round answers `REQUESTS_PER_ROUND` requests.
const ROUNDS: usize = 9;
const REQUESTS_PER_ROUND: u64 = 120_000;
const KEYS: u64 = 100_000;
const SHARDS: u64 = 64;
/// The planted cause: requests to this shard do extra work.
const SLOW_SHARD: u64 = 7;
/// Each worker compacts the store once in this many of its requests.
const COMPACT_EVERY: u64 = 20_000;
/// Roots slower than this are reported; the rest are thrown away (and kept
/// by the flight recorder when it is on).
const SLOW: Duration = Duration::from_micros(10);
/// A request whose `store` step took this long waited for the lock.
const BLOCKED: Duration = Duration::from_micros(100);

/// The store: a map per shard, each behind its own lock, so that the two
/// workers seldom wait for each other, except during a compact.
type Store = Arc<Vec<Mutex<HashMap<u64, u64>>>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Untraced,
    /// Untraced, with the clock reads tracing makes (8 a request): the
    /// floor of any tracer that times each step.
    ClockReads,
    Traced,
    Recorded,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::Untraced, Mode::ClockReads, Mode::Traced, Mode::Recorded];

    fn label(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::ClockReads => "clock reads only",
            Mode::Traced => "traced",
            Mode::Recorded => "traced + recorder",
        }
    }
}

/// In [`Mode::ClockReads`], a clock read where tracing makes one, of the
/// kind it makes there (local spans and a root ending on its own thread
/// take the unordered reading).
#[inline(always)]
fn tick(clock_reads: bool) {
    if clock_reads {
        std::hint::black_box(minstant::Instant::now_unordered());
    }
}

/// splitmix64: the same request mix in every mode and round.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

enum Request {
    Get(u64),
    Put(u64),
    Compact,
}

/// One request: a root with its operation, key and shard, over three
/// steps (`#[trace]` fns: a local span each). Returns the value read.
/// `clock_reads`: read the clock where the root and steps would.
fn handle(
    store: &Store,
    shards: &[&'static str],
    request: Request,
    context: SpanContext,
    clock_reads: bool,
) -> u64 {
    let (name, key) = match request {
        Request::Get(key) => ("kv::get", key),
        Request::Put(key) => ("kv::put", key),
        Request::Compact => ("kv::compact", 0),
    };
    let shard = key % SHARDS;
    let root = Span::root(name, context).with_properties(|| {
        [("key", std::borrow::Cow::Owned(key.to_string())), ("shard", shards[shard as usize].into())]
    });
    let _guard = root.set_local_parent();
    tick(clock_reads);
    tick(clock_reads);
    parse(shard);
    tick(clock_reads);
    tick(clock_reads);
    let value = match request {
        Request::Get(key) => read(store, key),
        Request::Put(key) => write(store, key),
        Request::Compact => compact(store),
    };
    tick(clock_reads);
    tick(clock_reads);
    let value = encode(value);
    tick(clock_reads);
    tick(clock_reads);
    value
}

#[trace(short_name = true)]
fn parse(shard: u64) -> u64 {
    // The plant: shard 7's requests do some 20 µs of extra work.
    busy_work(if shard == SLOW_SHARD { 12_000 } else { 150 })
}

#[trace(name = "store")]
fn read(store: &Store, key: u64) -> u64 {
    let value = store[(key % SHARDS) as usize].lock().unwrap().get(&key).copied().unwrap_or_default();
    busy_work(100) & 1 | value
}

#[trace(name = "store")]
fn write(store: &Store, key: u64) -> u64 {
    store[(key % SHARDS) as usize].lock().unwrap().insert(key, key * 2);
    busy_work(100) & 1
}

/// The rare slow command: it holds every shard's lock for about a
/// millisecond.
#[trace(name = "store")]
fn compact(store: &Store) -> u64 {
    let mut shards: Vec<_> = store.iter().map(|shard| shard.lock().unwrap()).collect();
    for shard in &mut shards {
        shard.shrink_to_fit();
    }
    busy_work(500_000) & 1
}

#[trace(short_name = true)]
fn encode(value: u64) -> u64 {
    busy_work(100) & 1 | value
}

/// A worker's share of a round: `requests` requests from `seed`; the sum of
/// the values read, which is the same in every mode.
/// Sends each compact's trace id to `watch`, if given, once it has ended.
fn serve(
    store: &Store,
    shards: &[&'static str],
    worker: u64,
    seed: u64,
    watch: Option<Sender<TraceId>>,
    clock_reads: bool,
) -> u64 {
    let requests = REQUESTS_PER_ROUND / WORKERS;
    let mut random = Random(seed);
    let mut checksum = 0u64;
    for i in 0..requests {
        let draw = random.next();
        let key = (draw >> 8) % KEYS;
        // The workers' compacts a quarter of the gap apart.
        let request = if (i + worker * COMPACT_EVERY / 4) % COMPACT_EVERY == COMPACT_EVERY / 2 {
            Request::Compact
        } else if draw % 10 == 0 {
            Request::Put(key)
        } else {
            Request::Get(key)
        };
        let compact = matches!(request, Request::Compact);
        let context = SpanContext::random();
        checksum = checksum.wrapping_add(handle(store, shards, request, context, clock_reads) & !1);
        if let Some(watch) = watch.as_ref().filter(|_| compact) {
            watch.send(context.trace_id).unwrap();
        }
    }
    checksum
}

/// The root of each slow trace the collector reports, while `listening`.
#[derive(Clone, Debug)]
struct SlowRoot {
    name: String,
    duration_ns: u64,
    shard: String,
}

struct SlowRoots {
    listening: Arc<AtomicBool>,
    roots: Arc<Mutex<Vec<SlowRoot>>>,
}

impl Reporter for SlowRoots {
    fn report(&mut self, spans: &[SpanRecord]) {
        if !self.listening.load(Ordering::Relaxed) {
            return;
        }
        let mut roots = self.roots.lock().unwrap();
        for span in spans.iter().filter(|span| span.parent_id == SpanId::default()) {
            roots.push(SlowRoot {
                name: span.name.to_string(),
                duration_ns: span.duration_ns,
                shard: property(span, "shard").unwrap_or_default().to_string(),
            });
        }
    }
}

fn property<'a>(span: &'a SpanRecord, key: &str) -> Option<&'a str> {
    span.properties.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_ref())
}

fn main() {
    let listening = Arc::new(AtomicBool::new(false));
    let slow_roots = Arc::new(Mutex::new(Vec::new()));
    minitrace::set_reporter(
        SlowRoots { listening: listening.clone(), roots: slow_roots.clone() },
        Config::default().report_slow_traces_only(SLOW),
    );

    let store: Store = Arc::new(
        (0..SHARDS)
            .map(|shard| {
                Mutex::new((shard..KEYS).step_by(SHARDS as usize).map(|key| (key, key * 2)).collect())
            })
            .collect(),
    );
    let shards: &'static [&'static str] =
        Vec::leak((0..SHARDS).map(|shard| &*String::leak(shard.to_string())).collect());
    // Two workers for the whole run (the recorder's memory is per thread):
    // each round, each serves half the requests.
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<u64>();
    type Round = (u64, Option<Sender<TraceId>>, bool);
    let workers: Vec<Sender<Round>> = (0..WORKERS)
        .map(|worker| {
            let (tx, rx): (Sender<Round>, Receiver<Round>) = crossbeam_channel::unbounded();
            let (store, done) = (store.clone(), done_tx.clone());
            std::thread::Builder::new()
                .name(format!("worker-{worker}"))
                .spawn(move || {
                    for (round, watch, clock_reads) in rx {
                        let seed = round * 31 + worker;
                        done.send(serve(&store, shards, worker, seed, watch, clock_reads)).unwrap();
                    }
                })
                .unwrap();
            tx
        })
        .collect();

    // Rounds interleave the modes, rotated so that each runs in every
    // place alike.
    let mut rates: HashMap<&str, Vec<f64>> = HashMap::new();
    let mut checksums: HashMap<&str, u64> = HashMap::new();
    let started = Instant::now();
    for round in 0..ROUNDS {
        for k in 0..Mode::ALL.len() {
            let mode = Mode::ALL[(k + round) % Mode::ALL.len()];
            minitrace::set_enabled(matches!(mode, Mode::Traced | Mode::Recorded));
            if mode == Mode::Recorded {
                FlightRecorder::new().bytes_per_thread(8 << 20).enable();
            }
            let begin = Instant::now();
            for worker in &workers {
                worker.send((round as u64, None, mode == Mode::ClockReads)).unwrap();
            }
            let checksum = (0..WORKERS).map(|_| done_rx.recv().unwrap()).fold(0, u64::wrapping_add);
            let elapsed = begin.elapsed();
            minitrace::flush();
            if mode == Mode::Recorded {
                // Its memory is freed at the collector's next cycle: now,
                // rather than in the next round.
                FlightRecorder::disable();
                minitrace::flush();
            }
            rates.entry(mode.label()).or_default().push(REQUESTS_PER_ROUND as f64 / elapsed.as_secs_f64());
            *checksums.entry(mode.label()).or_default() ^= checksum.rotate_left(round as u32);
        }
    }
    let measured = started.elapsed();

    // Then one more round of the same mix, traced with the recorder, not
    // timed: its slow requests are kept, and a watcher asks the recorder
    // what ran beside each compact as soon as it has ended.
    minitrace::set_enabled(true);
    FlightRecorder::new().bytes_per_thread(8 << 20).enable();
    listening.store(true, Ordering::Relaxed);
    let (watch, watched) = crossbeam_channel::unbounded::<TraceId>();
    let watcher = std::thread::spawn(move || {
        let mut windows = Vec::new();
        for trace_id in watched {
            if let Some(compact) = minitrace::recorder::trace(trace_id) {
                let window = minitrace::recorder::window(compact.begin_unix_ns(), compact.end_unix_ns());
                windows.push((compact, window));
            }
        }
        windows
    });
    for worker in &workers {
        worker.send((ROUNDS as u64, Some(watch.clone()), false)).unwrap();
    }
    drop(watch);
    for _ in 0..WORKERS {
        done_rx.recv().unwrap();
    }
    minitrace::flush();
    // How far back the recorder's memory reaches now, read from its API
    // while the workers still hold theirs.
    let retention = minitrace::recorder::retention();
    listening.store(false, Ordering::Relaxed);
    let windows = watcher.join().unwrap();

    let median = |mode: Mode| {
        let mut rates = rates[mode.label()].clone();
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    };
    let (untraced, clock_reads) = (median(Mode::Untraced), median(Mode::ClockReads));
    let (traced, recorded) = (median(Mode::Traced), median(Mode::Recorded));
    let same = checksums.values().all(|checksum| *checksum == checksums["untraced"]);
    println!(
        "the main job: a key-value service on {WORKERS} worker threads; {} requests per mode \
         (reads, writes, a rare compact), {ROUNDS} interleaved rounds each, in {:.1} s",
        group(REQUESTS_PER_ROUND * ROUNDS as u64),
        measured.as_secs_f64()
    );
    println!(
        "every mode answered the same: {} (checksum {:016x})",
        if same { "yes" } else { "NO" },
        checksums["untraced"]
    );
    println!("throughput, median of {ROUNDS} rounds:");
    for (mode, rate) in [
        (Mode::Untraced, untraced),
        (Mode::ClockReads, clock_reads),
        (Mode::Traced, traced),
        (Mode::Recorded, recorded),
    ] {
        let rounds: Vec<String> = rates[mode.label()].iter().map(|r| format!("{:.0}", r / 1e3)).collect();
        println!(
            "  {:<18} {:>9} requests/s  (rounds, k/s: {})",
            mode.label(),
            group(rate as u64),
            rounds.join(" ")
        );
    }
    // The cost: the extra time per request, untraced / traced − 1.
    let cost = |rate: f64| (untraced / rate - 1.0) * 100.0;
    println!(
        "tracing cost: {:+.1} % (recorder: {:+.1} %); seed target 5 %; its floor, the clock reads alone: {:+.1} %",
        cost(traced),
        cost(recorded),
        cost(clock_reads)
    );
    // The same in time: each worker's share of a request.
    let per_request = |rate: f64| WORKERS as f64 / rate * 1e9;
    println!(
        "per request, of a core: {} untraced; tracing adds {} ns, with the recorder {} ns; 8 clock reads {} ns",
        micros(per_request(untraced) as u64),
        (per_request(traced) - per_request(untraced)).round(),
        (per_request(recorded) - per_request(untraced)).round(),
        (per_request(clock_reads) - per_request(untraced)).round()
    );

    show_slow_requests(&slow_roots.lock().unwrap());
    show_overlaps(&windows);
    show_retention(&retention);

    let stats = minitrace::collector::stats();
    println!(
        "\ncollector, whole run: reported {} spans of slow requests, sampled out {} spans of fast ones, \
         dropped {}",
        stats.spans_reported,
        stats.spans_sampled_out,
        stats.dropped()
    );
    if let Err(error) = show_every_request(Path::new("target/trace-example")) {
        eprintln!("no flight recorder page: {error}");
    }
}

/// `1234567` as `1 234 567`.
fn group(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::new();
    for (k, digit) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(' ');
        }
        out.push(digit);
    }
    out
}

fn micros(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

/// The slow requests of the last round, by cause.
fn show_slow_requests(roots: &[SlowRoot]) {
    let slow_shard = SLOW_SHARD.to_string();
    let compacts = roots.iter().filter(|root| root.name == "kv::compact").count();
    let shard = roots.iter().filter(|root| root.name != "kv::compact" && root.shard == slow_shard).count();
    println!(
        "\nslow requests (root ≥ {} µs) of the last round, with the recorder: {} of {}; kv::compact {compacts}, \
         shard={SLOW_SHARD} {shard}, other {}",
        SLOW.as_micros(),
        roots.len(),
        group(REQUESTS_PER_ROUND),
        roots.len() - compacts - shard
    );
    let mut slowest: Vec<&SlowRoot> = roots.iter().collect();
    slowest.sort_by_key(|root| std::cmp::Reverse(root.duration_ns));
    for root in slowest.iter().take(8) {
        println!("  {:>10}  {} shard={}", micros(root.duration_ns), root.name, root.shard);
    }
}

/// What ran beside the compacts of the last round, from the flight
/// recorder: the requests they blocked on the other worker; the compact
/// that blocked the most, in full.
fn show_overlaps(windows: &[(RecordedTrace, Vec<RecordedTrace>)]) {
    let store = |trace: &RecordedTrace| {
        trace.spans.iter().find(|span| span.name == "store").map_or(0, |span| span.duration_ns)
    };
    let overlaps: Vec<(&RecordedTrace, Vec<&RecordedTrace>, usize)> = windows
        .iter()
        .map(|(compact, window)| {
            let (blocked, beside): (Vec<&RecordedTrace>, Vec<&RecordedTrace>) =
                window.iter().filter(|trace| trace.trace_id != compact.trace_id).partition(|trace| {
                    trace.thread != compact.thread && store(trace) >= BLOCKED.as_nanos() as u64
                });
            (compact, blocked, beside.len())
        })
        .collect();
    let blocked_in_all: usize = overlaps.iter().map(|(_, blocked, _)| blocked.len()).sum();
    let beside_in_all: usize = overlaps.iter().map(|(_, _, beside)| beside).sum();
    println!(
        "\nwhat overlapped the last round's {} compacts, from the flight recorder: {} requests, \
         {blocked_in_all} of them blocked",
        overlaps.len(),
        blocked_in_all + beside_in_all
    );
    let Some((compact, blocked, beside)) = overlaps.iter().max_by_key(|(_, blocked, _)| blocked.len()) else {
        return;
    };
    let line = |trace: &RecordedTrace, role: String| {
        let root = trace.root().unwrap();
        println!(
            "  {:>10}  {:<11} key={} shard={} thread {}  {role}",
            micros(trace.duration_ns()),
            root.name,
            property(root, "key").unwrap_or("?"),
            property(root, "shard").unwrap_or("?"),
            trace.thread
        );
    };
    line(compact, "the compact, holding the lock".to_string());
    for trace in blocked {
        line(trace, format!("blocked: waited in store {}", micros(store(trace))));
    }
    println!("  and {beside} requests beside it that it did not block");
}

/// The whole population, slow or not: the flight recorder's requests as a
/// dump, its summary, and a page that shows them all.
/// How far back each worker's flight-recorder memory reaches: the requests
/// and bytes it holds, and how long ago its oldest request began.
fn show_retention(retention: &minitrace::recorder::Retention) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64);
    let ago = |unix_ns: u64| format!("{:.1} ms", now.saturating_sub(unix_ns) as f64 / 1e6);
    println!(
        "
flight recorder, how far back each thread's memory reaches now:"
    );
    for thread in retention.threads.iter().filter(|thread| thread.roots > 0 && !thread.exited) {
        println!(
            "  thread {}: {} requests in {} bytes, the oldest began {} ago",
            thread.thread,
            group(thread.roots as u64),
            group(thread.bytes as u64),
            thread.oldest_unix_ns.map_or_else(|| "-".to_string(), ago)
        );
    }
    if let Some(oldest) = retention.oldest_unix_ns() {
        println!("  every thread at once: the last {}", ago(oldest));
    }
}

fn show_every_request(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let dump = minitrace_flight::dump_recorder(dir.join("requests.mtf"))?.into_inner();
    let summary = minitrace_view::summarize(Reader::new(BufReader::new(File::open(&dump)?))?)?;
    println!("\nevery request the flight recorder kept, fast or slow:\n{summary}");
    let page = dir.join("requests.html");
    let reader = Reader::new(BufReader::new(File::open(&dump)?))?;
    minitrace_view::render_page(
        reader,
        "minitrace: the main job's requests",
        BufWriter::new(File::create(&page)?),
    )?;
    println!("dump: {}\npage: {} (open it in a browser)", dump.display(), page.display());
    Ok(())
}
