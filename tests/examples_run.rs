//! Runs every example and checks that it exits successfully, in time, with
//! the output it is meant to show. `jaeger` needs the Jaeger that
//! `scripts/test.sh` starts: it runs when that Jaeger is up, and always
//! under `CI=true`, where a missing Jaeger is a failure. So does
//! `two_services`, whose trace is then read back from Jaeger.
//! `axum_service` always runs; what it sent is looked up in that Jaeger on
//! the same terms.
//!
//! The examples are not built here: `cargo test` builds every example of
//! the package, in the same profile as this test, into `examples/` beside
//! the `deps/` directory that holds this test's executable. That is where
//! they are run from, so `cargo test` and `cargo test --release` each run
//! their own build. A test run filtered to this file alone (`--test
//! examples_run`) does not build the examples: a missing or out-of-date
//! example binary fails the test with a hint rather than running stale code.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use minitrace::collector::TraceId;
use serde_json::Value;

/// minitrace-jaeger's end-to-end helpers: finding the local Jaeger and
/// reading its query API.
#[path = "../minitrace-jaeger/tests/common/mod.rs"]
mod jaeger_e2e;

/// minitrace-view's browser helpers: the headless Chromium that looks at
/// the main job's page.
#[path = "../minitrace-view/tests/support/mod.rs"]
mod view_browser;

/// Examples that this test does not run, and why.
const NOT_RUN: &[(&str, &str)] = &[];

/// Each example should finish in well under 10 s (`retroactive`, 100 000
/// requests through four processes, in under a minute); this is the limit
/// for a busy machine.
const TIMEOUT: Duration = Duration::from_secs(240);

struct Output {
    stdout: String,
    stderr: String,
}

impl Output {
    fn assert_stdout_has(&self, expected: &str) -> &Self {
        assert!(self.stdout.contains(expected), "stdout lacks {expected:?}:\n{}", self.stdout);
        self
    }

    fn assert_stderr_has(&self, expected: &str) -> &Self {
        assert!(self.stderr.contains(expected), "stderr lacks {expected:?}:\n{}", self.stderr);
        self
    }
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>/examples`, beside the `deps/` directory this test runs from.
fn examples_dir() -> PathBuf {
    let test_exe = std::env::current_exe().expect("the test's own path");
    let deps = test_exe.parent().expect("the test's directory");
    deps.parent().expect("the profile's directory").join("examples")
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The example's binary, checked to exist and to be newer than its sources.
fn example_binary(name: &str) -> PathBuf {
    let binary = examples_dir().join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let hint = "examples are built by a `cargo test` run without target filters, or by \
                `cargo build --examples` (add `--release` for `cargo test --release`)";
    assert!(binary.exists(), "{} is missing: {hint}", binary.display());
    let built = modified(&binary);
    let mut sources = vec![manifest_dir().join("examples").join(format!("{name}.rs"))];
    let support = manifest_dir().join("examples/support/mod.rs");
    if support.exists() {
        sources.push(support);
    }
    // An example's own modules, in a directory named after it.
    if let Ok(entries) = std::fs::read_dir(manifest_dir().join("examples").join(name)) {
        sources.extend(entries.map(|entry| entry.unwrap().path()));
    }
    for source in sources {
        assert!(
            modified(&source) <= built,
            "{} is older than {}: {hint}",
            binary.display(),
            source.display()
        );
    }
    binary
}

/// Runs the example to completion and checks that it succeeded.
fn run(name: &str) -> Output {
    let binary = example_binary(name);
    let mut child = Command::new(&binary)
        .current_dir(manifest_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));

    // Read both pipes while the example runs, so that it never blocks on a
    // full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));

    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the example's status") {
            break Some(status);
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = Output { stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    let report = format!("--- stdout:\n{}\n--- stderr:\n{}", output.stdout, output.stderr);
    match status {
        None => panic!("example {name} did not finish within {TIMEOUT:?}\n{report}"),
        Some(status) if !status.success() => panic!("example {name} failed: {status}\n{report}"),
        Some(_) => {
            println!("example {name} ran in {:?}", start.elapsed());
            output
        }
    }
}

/// Every example is either run by a test below or listed in [`NOT_RUN`].
#[test]
fn every_example_is_covered() {
    let this_file = std::fs::read_to_string(manifest_dir().join("tests/examples_run.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(manifest_dir().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "rs") {
            let name = path.file_stem().unwrap().to_str().unwrap().to_string();
            let covered = this_file.contains(&format!("run(\"{name}\")"))
                || NOT_RUN.iter().any(|(skipped, _)| *skipped == name);
            if !covered {
                missing.push(name);
            }
        }
    }
    assert!(missing.is_empty(), "examples neither run nor listed in NOT_RUN: {missing:?}");
}

#[test]
fn get_started() {
    run("get_started").assert_stdout_has("total = 10").assert_stderr_has("name: \"get_started::parse\"");
}

#[test]
fn synchronous() {
    run("synchronous")
        .assert_stdout_has("check_stock item=xylophone")
        .assert_stdout_has("* backordered item=xylophone")
        .assert_stdout_has("handled 2 orders (totals [900, 1800]); printed 2 traces");
}

#[test]
fn asynchronous() {
    run("asynchronous")
        .assert_stdout_has("fetch_user user=1")
        .assert_stdout_has("poll warm_cache")
        .assert_stdout_has("served [\"USER 1\", \"USER 2\"]; printed 2 traces");
}

#[test]
fn tail_sampling() {
    let output = run("tail_sampling");
    output
        .assert_stdout_has("request id=250")
        .assert_stdout_has("* cache miss key=250")
        .assert_stdout_has("traced 2000 requests");
    // The example's 2 000 requests: the four whose key is 250 (ids 250,
    // 750, 1250, 1750) wait 2 ms, the rest take microseconds. Exactly those
    // four are printed, plus any other whose root did take 1 ms or more (a
    // request preempted on a busy machine is rightly reported as slow).
    let mut slow_by_design = Vec::new();
    let mut slowed_down = 0;
    for root in output.stdout.lines().filter(|line| line.contains(" µs  request id=")) {
        // "      0.0 µs    2097.7 µs  request id=250"
        let fields: Vec<&str> = root.split_whitespace().collect();
        let duration_us: f64 = fields[2].parse().unwrap_or_else(|_| panic!("a root line: {root:?}"));
        let id: u64 = fields[5].strip_prefix("id=").and_then(|id| id.parse().ok()).expect(root);
        match id % 500 {
            250 => slow_by_design.push(id),
            _ => {
                assert!(duration_us >= 1000.0, "a fast request was reported: {root:?}\n{}", output.stdout);
                slowed_down += 1;
            }
        }
    }
    assert_eq!(slow_by_design, [250, 750, 1250, 1750], "\n{}", output.stdout);
    let printed = slow_by_design.len() + slowed_down;
    // Each request makes 4 spans (request, parse, lookup, encode), a slow
    // one a 5th (read from disk): every one reported or sampled out.
    let reported_spans = 5 * slow_by_design.len() + 4 * slowed_down;
    let sampled_out = 4 * 2_000 + slow_by_design.len() - reported_spans;
    output.assert_stdout_has(&format!(
        "reported {printed} traces slower than 1ms ({reported_spans} spans); sampled out {sampled_out} spans \
         of fast traces; dropped 0"
    ));
}

#[test]
fn log_events() {
    run("log_events")
        .assert_stdout_has("* user alice authenticated level=INFO target=log_events")
        .assert_stdout_has("* unknown user mallory level=WARN")
        .assert_stderr_has("[INFO  log_events] service stopped");
}

#[test]
fn test_harness() {
    run("test_harness")
        .assert_stdout_has("parses_prices outcome=passed")
        .assert_stdout_has("parse_price text=12.50")
        .assert_stdout_has("test result: ok. 2 passed");
}

#[test]
fn batch_write() {
    run("batch_write")
        .assert_stdout_has("commit batch writes=")
        .assert_stdout_has("fsync")
        .assert_stdout_has("committed 6 puts in")
        .assert_stdout_has("printed 6 traces");
}

/// Held by the examples that load both cores for seconds, `trace` and
/// `retroactive`, so that they do not run at once: `retroactive` counts
/// the requests that turned slow, and `trace`'s load made fast ones slow.
static BOTH_CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn trace() {
    let output = {
        let _alone = BOTH_CORES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        run("trace")
    };
    output
        .assert_stdout_has("the main job: a key-value service on 2 worker threads")
        .assert_stdout_has("every mode answered the same: yes")
        .assert_stdout_has("every request the flight recorder kept")
        .assert_stdout_has("latency  p50")
        .assert_stdout_has("page: target/trace-example/requests.html");
    let lines: Vec<&str> = output.stdout.lines().collect();
    // The recorder's reach, from its API: each worker holds requests in at
    // most its 8 MiB, the oldest begun a positive time ago, and every
    // thread at once reaches back no further than the shortest of them.
    let reach: Vec<(f64, f64, f64)> = lines
        .iter()
        .skip_while(|line| !line.starts_with("flight recorder, how far back"))
        .skip(1)
        .map_while(|line| line.trim_start().strip_prefix("thread "))
        .map(|line| {
            let (_, rest) = line.split_once(": ").unwrap();
            let (requests, rest) = rest.split_once(" requests in ").unwrap();
            let (bytes, rest) = rest.split_once(" bytes, the oldest began ").unwrap();
            let ago = rest.strip_suffix(" ms ago").unwrap();
            let number = |text: &str| text.replace(' ', "").parse::<f64>().unwrap();
            (number(requests), number(bytes), number(ago))
        })
        .collect();
    assert!(reach.len() >= 2, "a line per worker:\n{}", output.stdout);
    for &(requests, bytes, ago) in &reach {
        assert!(requests > 0.0 && bytes > 0.0 && bytes <= (8 << 20) as f64 && ago > 0.0, "{reach:?}");
    }
    let every: f64 = lines
        .iter()
        .find_map(|line| line.trim_start().strip_prefix("every thread at once: the last "))
        .and_then(|rest| rest.strip_suffix(" ms"))
        .unwrap_or_else(|| panic!("no reach for every thread:\n{}", output.stdout))
        .parse()
        .unwrap();
    let shortest = reach.iter().map(|&(.., ago)| ago).fold(f64::INFINITY, f64::min);
    assert!(every > 0.0 && every <= shortest + 0.1, "{every} against {reach:?}");
    let after = |prefix: &str| -> &str {
        let line = lines.iter().find(|line| line.trim_start().starts_with(prefix));
        line.unwrap_or_else(|| panic!("no line starts with {prefix:?}:\n{}", output.stdout)).trim_start()
    };
    let number = |text: &str| -> f64 {
        text.trim().replace(' ', "").parse().unwrap_or_else(|_| panic!("not a number: {text:?}"))
    };

    // The three throughputs: each the median of its rounds as printed.
    let rounds: usize = after("throughput, median of ")["throughput, median of ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let mut rates = Vec::new();
    for mode in ["untraced ", "clock reads only ", "traced ", "traced + recorder "] {
        let line = after(mode);
        let (rate, rest) = line[mode.len()..].split_once(" requests/s").unwrap();
        let rate = number(rate);
        let mut each: Vec<f64> = rest
            .trim()
            .trim_start_matches("(rounds, k/s:")
            .trim_end_matches(')')
            .split_whitespace()
            .map(number)
            .collect();
        assert_eq!(each.len(), rounds, "{line}");
        each.sort_by(f64::total_cmp);
        // Each round is printed in whole k/s: within 0.5 of its value.
        assert!((each[rounds / 2] - rate / 1e3).abs() <= 0.5, "{line}: the median is not {rate}");
        assert!(rate > 0.0, "{line}");
        rates.push(rate);
    }
    // The cost of tracing: the extra time per request, as printed.
    let cost = after("tracing cost: ");
    let (traced, recorded) = cost["tracing cost: ".len()..].split_once(" % (recorder: ").unwrap();
    let (recorded, floor) =
        recorded.split_once(" %); seed target 5 %; its floor, the clock reads alone: ").unwrap();
    let floor = floor.strip_suffix(" %").unwrap_or_else(|| panic!("{cost}"));
    for (printed, rate) in [(floor, rates[1]), (traced, rates[2]), (recorded, rates[3])] {
        let expected = (rates[0] / rate - 1.0) * 100.0;
        assert!((number(printed) - expected).abs() <= 0.06, "{cost}: {printed} % is not {expected:.2} %");
    }

    // The slow requests of the last round, by cause: the counts add up.
    let slow = after("slow requests (root ≥ ");
    let count = |label: &str| -> u64 {
        let text = slow.split_once(label).unwrap_or_else(|| panic!("{slow} lacks {label:?}")).1;
        let digits: String = text.chars().take_while(|c| c.is_ascii_digit() || *c == ' ').collect();
        number(&digits) as u64
    };
    let total = count(", with the recorder: ");
    let (compacts, shard7, other) = (count("kv::compact "), count("shard=7 "), count("other "));
    assert_eq!(compacts + shard7 + other, total, "{slow}");
    assert!((1..=6).contains(&compacts), "{slow}: every worker compacts 3 times a round");
    assert!(shard7 > 0, "{slow}: the planted cause");

    // What overlapped a compact, from the flight recorder: the compact is
    // listed, with the requests it blocked on the other worker.
    let overlapped = after("what overlapped the last round's ");
    let (overlapping, blocked) = overlapped.rsplit_once(": ").unwrap().1.split_once(" requests, ").unwrap();
    let overlapping: usize = overlapping.parse().unwrap();
    let blocked: usize = blocked.trim_end_matches(" of them blocked").parse().unwrap();
    // The compacts come mid-round: the other worker is serving meanwhile.
    // Whether it asks for the lock then is up to the scheduler (on a
    // loaded machine it may wait its turn for a core instead): no count
    // of blocked requests is asserted, only that they are listed.
    assert!(overlapping >= 1 && blocked <= overlapping, "{overlapped}");
    let compact = after_with(&lines, "the compact, holding the lock");
    assert!(compact.contains("kv::compact"), "{compact}");
    let thread = |line: &str| line.split(" thread ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let listed: Vec<&&str> = lines.iter().filter(|line| line.contains("blocked: waited in store")).collect();
    assert!(listed.len() <= blocked && (blocked == 0 || !listed.is_empty()), "{listed:?} of {blocked}");
    for line in listed {
        assert_ne!(thread(line), thread(compact), "{line} is blocked by {compact}");
    }

    // The dump holds the last requests of the last round, as the recorder
    // held them: a root per request with its key and shard.
    let dump = std::fs::File::open(manifest_dir().join("target/trace-example/requests.mtf")).unwrap();
    let traces: Vec<minitrace_flight::RecordedTrace> =
        minitrace_flight::Reader::new(std::io::BufReader::new(dump)).unwrap().map(Result::unwrap).collect();
    assert!(traces.len() > 1_000, "{} requests in the dump", traces.len());
    let get = traces.iter().find_map(|trace| trace.root().filter(|root| root.name == "kv::get")).unwrap();
    let keys: Vec<&str> = get.properties.iter().map(|(key, _)| key.as_ref()).collect();
    assert_eq!(keys, ["key", "shard"]);
    let steps: BTreeSet<&str> =
        traces.iter().flat_map(|trace| &trace.spans).map(|span| span.name.as_ref()).collect();
    assert!(["parse", "store", "encode"].iter().all(|step| steps.contains(step)), "{steps:?}");

    // The page, in headless Chromium (skipped without it, except under
    // CI=true): a brush over every latency above the slow threshold ranks
    // the planted cause first. The screenshot stays in
    // target/browser-artifacts/trace-example.
    if view_browser::browser_ready() {
        let page = manifest_dir().join("target/trace-example/requests.html");
        let results = view_browser::explain(&page, &view_browser::artifacts("trace-example"), 10.0);
        assert_eq!(results["errors"], Value::Array(vec![]), "no script error, no network request");
        assert!(results["selected"].as_u64().unwrap() > 0, "{results}");
        let first: Vec<&str> =
            results["ranking"][0].as_array().unwrap().iter().map(|cell| cell.as_str().unwrap()).collect();
        assert_eq!(first[..2], ["property", "shard=7"], "{results}");
        // Where the selection's time went: the planted stage (`parse`, some
        // 80 times the work for shard 7) among the two stages that add the
        // most, the other being `store` for the requests a compact blocked.
        eprintln!("critical path of the slow: {}", results["critical"]);
        let stages: Vec<&str> =
            results["critical"].as_array().unwrap().iter().map(|row| row[0].as_str().unwrap()).collect();
        assert!(stages[..2].contains(&"parse"), "{stages:?}");
    }
}

/// The first of `lines` that contains `text`.
fn after_with<'a>(lines: &[&'a str], text: &str) -> &'a str {
    lines.iter().find(|line| line.contains(text)).unwrap_or_else(|| panic!("no line has {text:?}"))
}

#[test]
fn clock() {
    run("clock").assert_stdout_has("source:");
}

/// Where the local Jaeger's query API answers.
const JAEGER_QUERY: &str = "127.0.0.1:16686";

/// Whether the local Jaeger answers; outside CI, a `false` is printed as a
/// skip of `test`'s Jaeger checks, and under `CI=true` it fails the test.
fn jaeger_is_up(test: &str) -> bool {
    let query = JAEGER_QUERY.parse().unwrap();
    let up = std::net::TcpStream::connect_timeout(&query, Duration::from_secs(1)).is_ok();
    let why = format!("no Jaeger on {query} (start one with `bash scripts/jaeger.sh`)");
    if !up && std::env::var("CI").as_deref() == Ok("true") {
        panic!("examples_run::{test}: {why}");
    }
    if !up {
        // Straight to stderr: libtest captures `eprintln!` of passing tests.
        let _ = writeln!(std::io::stderr(), "SKIPPED examples_run::{test} (its Jaeger part): {why}");
    }
    up
}

#[test]
fn jaeger() {
    if jaeger_is_up("jaeger") {
        run("jaeger").assert_stdout_has("trace: http://").assert_stdout_has("Jaeger has all");
    }
}

/// A span as Jaeger's query API gives it.
#[derive(Debug)]
struct JaegerSpan {
    name: String,
    /// The parent's name: `<remote>` for a parent outside the trace.
    parent: String,
    tags: Vec<(String, String)>,
    /// Each log's first field: the event's name.
    logs: Vec<String>,
}

/// A trace as Jaeger's query API gives it.
struct JaegerTrace(Vec<JaegerSpan>);

impl JaegerTrace {
    /// Polls Jaeger until trace `id` has `spans` spans, or 20 s pass.
    fn fetch(id: &str, spans: usize) -> JaegerTrace {
        // Jaeger names a trace whose high 64 bits are 0 by its low 16 digits.
        let id = id.strip_prefix("0000000000000000").unwrap_or(id);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let trace = jaeger_get(&format!("/api/traces/{id}")).map(|answer| JaegerTrace::parse(&answer));
            match trace {
                Some(trace) if trace.0.len() >= spans => return trace,
                _ if Instant::now() > deadline => {
                    panic!("trace {id} did not reach Jaeger with {spans} spans: {:?}", trace.map(|t| t.0))
                }
                _ => std::thread::sleep(Duration::from_millis(300)),
            }
        }
    }

    fn parse(answer: &serde_json::Value) -> JaegerTrace {
        let spans = answer["data"][0]["spans"].as_array().cloned().unwrap_or_default();
        let text = |value: &serde_json::Value| value.as_str().map_or(value.to_string(), str::to_string);
        let name_of = |id: &serde_json::Value| {
            let span = spans.iter().find(|span| &span["spanID"] == id);
            span.map_or("<remote>".to_string(), |span| text(&span["operationName"]))
        };
        let parse_span = |span: &serde_json::Value| {
            let references = span["references"].as_array().cloned().unwrap_or_default();
            let parent = references.iter().find(|reference| reference["refType"] == "CHILD_OF");
            let tags = span["tags"].as_array().cloned().unwrap_or_default();
            let logs = span["logs"].as_array().cloned().unwrap_or_default();
            JaegerSpan {
                name: text(&span["operationName"]),
                parent: parent.map_or("<none>".to_string(), |parent| name_of(&parent["spanID"])),
                tags: tags.iter().map(|tag| (text(&tag["key"]), text(&tag["value"]))).collect(),
                logs: logs.iter().map(|log| text(&log["fields"][0]["value"])).collect(),
            }
        };
        JaegerTrace(spans.iter().map(parse_span).collect())
    }

    /// The one span named `name`.
    fn span(&self, name: &str) -> &JaegerSpan {
        let mut found = self.0.iter().filter(|span| span.name == name);
        let span = found.next().unwrap_or_else(|| panic!("no span {name} in {:?}", self.0));
        assert!(found.next().is_none(), "two spans {name} in {:?}", self.0);
        span
    }

    /// Whether the one span named `name` has tag `key` = `value`.
    fn has_tag(&self, name: &str, key: &str, value: &str) -> bool {
        self.span(name).tags.iter().any(|(k, v)| k == key && v == value)
    }
}

/// GETs `path` from Jaeger's query API: the JSON, or `None` if it is not (yet) there.
fn jaeger_get(path: &str) -> Option<serde_json::Value> {
    let query = JAEGER_QUERY.parse().unwrap();
    let mut stream = std::net::TcpStream::connect_timeout(&query, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    // HTTP/1.0: the body ends where the connection does, never chunked.
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {query}\r\n\r\n").ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let split = response.windows(4).position(|window| window == b"\r\n\r\n")?;
    (response.starts_with(b"HTTP/1.0 200") || response.starts_with(b"HTTP/1.1 200")).then_some(())?;
    serde_json::from_slice(&response[split + 4..]).ok()
}

#[test]
fn axum_service() {
    // Asked first, so that under CI a missing Jaeger fails before the run.
    let jaeger_up = jaeger_is_up("axum_service");
    let output = run("axum_service");
    output.assert_stdout_has("GET /users/7 -> 200").assert_stdout_has("GET /users/404 -> 404");
    // "trace <id> GET <path> -> <status>", one line per request.
    let traces: Vec<(&str, &str)> =
        output.stdout.lines().filter_map(|line| line.strip_prefix("trace ")?.split_once(" GET ")).collect();
    assert_eq!(traces.len(), 3, "{}", output.stdout);
    let (user, orders) = (traces[0], traces[1]);
    // The caller's traceparent was continued, and log lines carry the ids.
    output.assert_stdout_has(&format!("the caller's traceparent was 00-{}-", user.0));
    for (id, _) in &traces {
        output.assert_stderr_has(&format!("trace_id={id} span_id="));
    }
    if !jaeger_up {
        return;
    }
    // One tree: the root, tower-http's span, the handler, the driver's spans.
    let trace = JaegerTrace::fetch(user.0, 6);
    // The root: minitrace-tower's, named after the route.
    assert_eq!(trace.span("GET /users/{id}").parent, "<remote>", "the caller's span is the root's parent");
    assert!(trace.has_tag("GET /users/{id}", "url.path", "/users/7"), "{:?}", trace.0);
    assert!(trace.has_tag("GET /users/{id}", "http.response.status_code", "200"), "{:?}", trace.0);
    assert_eq!(trace.span("request").parent, "GET /users/{id}");
    assert!(trace.has_tag("request", "tracing.target", "tower_http::trace::make_span"), "{:?}", trace.0);
    assert!(trace.has_tag("request", "uri", "/users/7"), "{:?}", trace.0);
    assert!(trace.span("request").logs.contains(&"finished processing request".to_string()));
    assert_eq!(trace.span("get_user").parent, "request");
    assert_eq!(trace.span("get_user").logs, ["user 7 is user-7"]);
    assert_eq!(trace.span("query").parent, "get_user");
    assert!(trace.has_tag("query", "db.system", "sqlite"), "{:?}", trace.0);
    assert_eq!(trace.span("acquire").parent, "query");
    assert_eq!(trace.span("render").parent, "get_user");

    let trace = JaegerTrace::fetch(orders.0, 8);
    assert_eq!(trace.span("get_orders").parent, "request");
    let queries: Vec<_> = trace.0.iter().filter(|span| span.name == "query").collect();
    assert_eq!(queries.len(), 2);
    assert!(queries.iter().all(|query| query.parent == "get_orders"), "{:?}", trace.0);
}

/// The spans of the example's one trace: (service, name, parent's name), a
/// name repeated once per span. The backend's root is the child of the
/// frontend's `fetch_price`, across the process boundary.
const TWO_SERVICES_SPANS: &[(&str, &str, Option<&str>)] = &[
    ("frontend", "GET /checkout", None),
    ("frontend", "load_cart", Some("GET /checkout")),
    ("frontend", "read session", Some("load_cart")),
    ("frontend", "fetch_price", Some("GET /checkout")),
    ("frontend", "connect", Some("fetch_price")),
    ("frontend", "read answer", Some("fetch_price")),
    ("frontend", "render", Some("GET /checkout")),
    ("backend", "GET /price", Some("fetch_price")),
    ("backend", "parse_request", Some("GET /price")),
    ("backend", "lookup_price", Some("GET /price")),
    ("backend", "db query", Some("lookup_price")),
    ("backend", "lookup_price", Some("GET /price")),
    ("backend", "db query", Some("lookup_price")),
    ("backend", "write answer", Some("GET /price")),
];

#[test]
fn two_services() {
    let Some(jaeger) = jaeger_e2e::jaeger("examples_run::two_services") else {
        return;
    };
    let output = run("two_services");
    output.assert_stdout_has("checkout: xylophone and mallets for 135 EUR");
    let trace_id = output
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("trace id: "))
        .unwrap_or_else(|| panic!("no trace id printed:\n{}", output.stdout));
    let trace_id: TraceId = trace_id.trim().parse().expect("a hex trace id");

    // Jaeger stores spans a moment after they arrive: poll until all are there.
    let path = format!("/api/traces/{trace_id}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let answer = jaeger.get(&path);
        let spans =
            answer.as_ref().map_or(0, |answer| answer["data"][0]["spans"].as_array().map_or(0, Vec::len));
        if spans >= TWO_SERVICES_SPANS.len() || Instant::now() > deadline {
            break answer.unwrap_or_else(|error| panic!("trace {trace_id} not in Jaeger: {error}"));
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let traces = answer["data"].as_array().expect("a list of traces");
    assert_eq!(traces.len(), 1, "{answer:#}");
    let trace = &traces[0];
    assert_eq!(trace["traceID"], jaeger_e2e::jaeger_trace_id(trace_id).as_str());

    // Two processes, one per service.
    let processes = trace["processes"].as_object().expect("the trace's processes");
    let services: BTreeMap<&str, &str> = processes
        .iter()
        .map(|(id, process)| (id.as_str(), process["serviceName"].as_str().unwrap_or("")))
        .collect();
    let names: BTreeSet<&str> = services.values().copied().collect();
    assert_eq!((services.len(), names), (2, BTreeSet::from(["backend", "frontend"])), "{services:?}");

    // Every span as (service, name, parent's name), the parent found by the
    // span id of its one CHILD_OF reference.
    let spans = trace["spans"].as_array().expect("the trace's spans");
    let by_id: HashMap<&str, &Value> =
        spans.iter().map(|span| (span["spanID"].as_str().unwrap(), span)).collect();
    let mut got: Vec<(String, String, Option<String>)> = spans
        .iter()
        .map(|span| {
            let references = span["references"].as_array().cloned().unwrap_or_default();
            assert!(references.len() <= 1, "{span:#}");
            let parent = references.first().map(|reference| {
                assert_eq!(reference["refType"], "CHILD_OF", "{span:#}");
                assert_eq!(reference["traceID"], trace["traceID"], "{span:#}");
                let parent = by_id.get(reference["spanID"].as_str().unwrap());
                parent.map_or("<missing>".to_string(), |parent| {
                    parent["operationName"].as_str().unwrap().to_string()
                })
            });
            let service = services[span["processID"].as_str().unwrap()].to_string();
            (service, span["operationName"].as_str().unwrap().to_string(), parent)
        })
        .collect();
    let mut want: Vec<(String, String, Option<String>)> = TWO_SERVICES_SPANS
        .iter()
        .map(|(service, name, parent)| (service.to_string(), name.to_string(), parent.map(str::to_string)))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);

    // The link across the processes: the backend's root names the very span
    // of the frontend that made the request.
    let server_root = spans.iter().find(|span| span["operationName"] == "GET /price").unwrap();
    let client_span = spans.iter().find(|span| span["operationName"] == "fetch_price").unwrap();
    assert_eq!(server_root["references"][0]["spanID"], client_span["spanID"]);
    assert_eq!(services[client_span["processID"].as_str().unwrap()], "frontend");
    assert_eq!(services[server_root["processID"].as_str().unwrap()], "backend");
}

/// Four services in four processes keep every request's parts; the slow,
/// the failed and the flagged ones reach Jaeger whole, fetched from every
/// service they touched, and nothing else does. The example checks each
/// trace through Jaeger's query API and each listener's counts exactly;
/// this test holds it to its verdict and to the share of whole traces.
#[test]
fn retroactive() {
    if !jaeger_is_up("retroactive") {
        return;
    }
    let output = {
        let _alone = BOTH_CORES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        run("retroactive")
    };
    output.assert_stdout_has("every check passed");
    let result = output
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line:\n{}", output.stdout));
    let result: serde_json::Value = serde_json::from_str(result).expect("RESULT is JSON");
    assert_eq!(result["problems"], serde_json::json!([]), "{}", output.stdout);
    assert_eq!(result["requests"], 100_000);
    let triggered = result["triggered"].as_u64().unwrap();
    // 1 in 10 000 slow, 1 in 10 000 failed, 1 in 1 000 flagged.
    assert_eq!(triggered, 10 + 10 + 100);
    assert!(result["whole_share"].as_f64().unwrap() >= 0.999, "{}", output.stdout);
    println!("retroactive: trigger to last part accepted by Jaeger {}", result["accepted_ms"]);
}
