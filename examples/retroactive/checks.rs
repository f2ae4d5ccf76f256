//! What `retroactive` checks: Jaeger's query API read back (each trace
//! whole, with the right services under the right parents; nothing else
//! there), and every listener's counts against what happened.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use minitrace::collector::TraceId;
use serde_json::Value;

/// Why a trace should be in Jaeger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Slow in the frontend, after its calls: triggered there.
    Slow,
    /// Failed in `stock`, the leaf: triggered there.
    Failed,
    /// Asked for by the frontend's code while it answered.
    Flagged,
    /// A fast one asked for after `inventory` was killed: no part of it.
    AfterKill,
}

impl Kind {
    /// The services whose parts the trace must hold.
    fn services(self) -> &'static [&'static str] {
        match self {
            Kind::AfterKill => &["frontend", "pricing", "stock"],
            _ => &["frontend", "inventory", "pricing", "stock"],
        }
    }

    /// The service whose root's end triggered it.
    fn trigger(self) -> &'static str {
        match self {
            Kind::Failed => "stock",
            _ => "frontend",
        }
    }
}

/// What the load did: the requests that matter, and the first and last.
#[derive(Debug, Default)]
pub struct Load {
    pub triggered: Vec<(TraceId, Kind)>,
    pub first: TraceId,
    pub last: TraceId,
}

impl Load {
    pub fn of(&self, kind: Kind) -> Vec<TraceId> {
        self.triggered.iter().filter(|(_, k)| *k == kind).map(|(id, _)| *id).collect()
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Counts {
    pub slow: u64,
    pub failed: u64,
    pub flagged: u64,
}

#[derive(Debug, Default)]
pub struct Problems(Vec<String>);

impl Problems {
    pub fn push(&mut self, problem: String) {
        self.0.push(problem);
    }

    pub fn extend(&mut self, problems: Vec<String>) {
        self.0.extend(problems);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn list(&self) -> &[String] {
        &self.0
    }

    pub fn report(&self) {
        match self.0.len() {
            0 => println!("every check passed"),
            n => {
                println!("{n} problems:");
                for problem in self.0.iter().take(20) {
                    println!("  {problem}");
                }
            }
        }
    }
}

/// One HTTP/1.1 request to 127.0.0.1; the status and the body.
fn request(address: &str, head: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{head}\r\nhost: {address}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let (headers, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let body = if headers.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        unchunk(body)
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A retrieval request to a listener; the status.
pub fn post(listener: &str, token: Option<&str>, body: &str) -> u16 {
    let authorization = token.map_or(String::new(), |token| format!("\r\nauthorization: Bearer {token}"));
    let head = format!("POST {} HTTP/1.1{authorization}", minitrace_remote::PATH);
    request(listener, &head, body).map_or(0, |(status, _)| status)
}

/// Jaeger's query API, for this run's services.
pub struct Jaeger {
    run: String,
}

/// What a probe saw.
#[derive(Debug, Default)]
pub struct Probed {
    /// From each trace's trigger to the first poll that found it whole.
    pub latency_ms: HashMap<TraceId, f64>,
    /// Each whole trace's trigger: the end of the root that fired it (µs
    /// since the epoch).
    pub trigger_end_us: HashMap<TraceId, f64>,
}

const QUERY: &str = "127.0.0.1:16686";

fn now_unix_us() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1e6
}

impl Jaeger {
    pub fn new(run: &str) -> Jaeger {
        Jaeger { run: run.to_owned() }
    }

    pub fn ready(&self) -> std::io::Result<()> {
        let (status, _) = request(QUERY, "GET /api/services HTTP/1.1", "")?;
        match status {
            200 => Ok(()),
            other => Err(std::io::Error::other(format!("status {other}"))),
        }
    }

    fn get(&self, path: &str) -> Option<Value> {
        let (status, body) = request(QUERY, &format!("GET {path} HTTP/1.1"), "").ok()?;
        (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
    }

    fn trace(&self, trace_id: TraceId) -> Option<Value> {
        let trace = self.get(&format!("/api/traces/{trace_id}"))?;
        trace["data"].get(0).cloned()
    }

    /// Polls Jaeger for each trace sent on `traces`, while more arrive,
    /// until it is whole; gives up on the rest `timeout` after the sender
    /// is gone.
    pub fn probe(&self, traces: Receiver<(TraceId, Kind)>, timeout: Duration) -> Probed {
        let mut probed = Probed::default();
        let mut pending: Vec<(TraceId, Kind)> = Vec::new();
        let mut deadline = None;
        loop {
            loop {
                match traces.try_recv() {
                    Ok(trace) => pending.push(trace),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        deadline.get_or_insert(Instant::now() + timeout);
                        break;
                    }
                }
            }
            if deadline.is_some_and(|deadline| pending.is_empty() || Instant::now() >= deadline) {
                return probed;
            }
            pending.retain(|(trace_id, kind)| {
                let Some(trace) = self.trace(*trace_id) else { return true };
                let seen = now_unix_us();
                match self.whole(&trace, *kind) {
                    Ok(trigger_end_us) => {
                        probed.latency_ms.insert(*trace_id, (seen - trigger_end_us) / 1e3);
                        probed.trigger_end_us.insert(*trace_id, trigger_end_us);
                        false
                    }
                    Err(_) => true,
                }
            });
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// [`Jaeger::probe`] for traces all known now.
    pub fn probe_these(&self, traces: &[(TraceId, Kind)], timeout: Duration) -> Probed {
        let (sender, receiver) = std::sync::mpsc::channel();
        for trace in traces {
            let _ = sender.send(*trace);
        }
        drop(sender);
        self.probe(receiver, timeout)
    }

    /// Whether `trace` holds every part `kind` asks for, each under the
    /// right parent; the end of its trigger's root (µs), or what is wrong.
    fn whole(&self, trace: &Value, kind: Kind) -> Result<f64, String> {
        let spans = trace["spans"].as_array().cloned().unwrap_or_default();
        let service_of = |span: &Value| -> String {
            let process = &trace["processes"][span["processID"].as_str().unwrap_or("")];
            let name = process["serviceName"].as_str().unwrap_or("");
            name.strip_prefix("retro-")
                .and_then(|rest| rest.strip_suffix(&format!("-{}", self.run)))
                .unwrap_or(name)
                .to_owned()
        };
        let tag = |span: &Value, key: &str| -> Option<String> {
            span["tags"].as_array()?.iter().find(|tag| tag["key"] == key).map(|tag| match &tag["value"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        };
        let by_id: HashMap<&str, &Value> =
            spans.iter().filter_map(|s| Some((s["spanID"].as_str()?, s))).collect();
        let parent = |span: &Value| -> Option<&Value> {
            let reference = span["references"].as_array()?.first()?;
            by_id.get(reference["spanID"].as_str()?).copied()
        };
        let mut services: BTreeMap<String, usize> = BTreeMap::new();
        for span in &spans {
            *services.entry(service_of(span)).or_default() += 1;
        }
        let want: BTreeMap<String, usize> = kind
            .services()
            .iter()
            .map(|service| {
                let spans = match *service {
                    "frontend" if kind == Kind::Slow => 4,
                    "frontend" | "pricing" => 3,
                    _ => 2,
                };
                (service.to_string(), spans)
            })
            .collect();
        if services != want {
            return Err(format!("spans by service {services:?}, want {want:?}"));
        }
        let mut trigger_end = None;
        for span in &spans {
            let service = service_of(span);
            let server = tag(span, "span.kind").as_deref() == Some("server");
            match (parent(span), server) {
                (None, true) if service == "frontend" => {}
                (None, _) => return Err(format!("{service}: {} has no parent", span["operationName"])),
                (Some(parent), true) => {
                    let caller = service_of(parent);
                    let called_by = if service == "stock" { "pricing" } else { "frontend" };
                    if caller != called_by || tag(parent, "span.kind").as_deref() != Some("client") {
                        return Err(format!("{service}'s root under {caller}'s {}", parent["operationName"]));
                    }
                }
                (Some(parent), false) if service_of(parent) != service => {
                    return Err(format!("{service}: {} under another service's span", span["operationName"]));
                }
                (Some(_), false) => {}
            }
            if server && service == kind.trigger() {
                let end =
                    span["startTime"].as_f64().unwrap_or(0.0) + span["duration"].as_f64().unwrap_or(0.0);
                trigger_end = Some(end);
            }
        }
        trigger_end.ok_or_else(|| format!("no root in {}", kind.trigger()))
    }

    /// Every trace of this run in Jaeger, by service: they must be exactly
    /// `expected` (no fast trace), each whole; `overwritten` not there.
    pub fn only_these(&self, expected: &HashMap<TraceId, Kind>, overwritten: TraceId) -> Vec<String> {
        let mut problems = Vec::new();
        let mut found: HashSet<TraceId> = HashSet::new();
        for service in ["frontend", "inventory", "pricing", "stock"] {
            let path = format!("/api/traces?service=retro-{service}-{}&limit=100000&lookback=2h", self.run);
            let Some(traces) = self.get(&path) else {
                problems.push(format!("Jaeger did not answer for {service}"));
                continue;
            };
            for trace in traces["data"].as_array().cloned().unwrap_or_default() {
                let id = trace["traceID"].as_str().and_then(|hex| u128::from_str_radix(hex, 16).ok());
                let Some(trace_id) = id.map(TraceId) else { continue };
                if !found.insert(trace_id) {
                    continue;
                }
                match expected.get(&trace_id) {
                    None => problems.push(format!("trace {trace_id} in Jaeger, not triggered: a fast trace")),
                    Some(kind) => {
                        // The whole trace, not the service's view of it.
                        let whole =
                            self.trace(trace_id).ok_or("gone".to_owned()).and_then(|t| self.whole(&t, *kind));
                        if let Err(problem) = whole {
                            problems.push(format!("{kind:?} trace {trace_id}: {problem}"));
                        }
                    }
                }
            }
        }
        for (trace_id, kind) in expected {
            if !found.contains(trace_id) {
                problems.push(format!("{kind:?} trace {trace_id} not in Jaeger"));
            }
        }
        if found.contains(&overwritten) {
            problems.push(format!("the overwritten trace {overwritten} is in Jaeger"));
        }
        problems
    }
}

/// Each listener's counts against what the run did: `slow` triggered in
/// the frontend, `failed` in stock, `flagged` by the frontend's code, then
/// the oldest trace asked for (overwritten), `inventory` killed, a recent
/// trace asked for, and two refusals at the frontend and at stock.
pub fn listener_counts(stats: &BTreeMap<&str, Value>, counts: Counts) -> Vec<String> {
    let Counts { slow: s, failed: f, flagged: a } = counts;
    let want: [(&str, &[(&str, u64)]); 4] = [
        (
            "frontend",
            &[
                ("triggered", s + a + 2),
                ("accepted", f),
                ("found", s + a + f + 1),
                ("not_found", 1),
                ("duplicates", 0),
                ("forwarded", 2 * s + 2 * a + f + 1),
                ("forward_failed", 1),
                ("refused_unauthorized", 1),
                ("refused_malformed", 1),
            ],
        ),
        (
            "inventory",
            &[
                ("triggered", 0),
                ("accepted", s + a + f),
                ("found", s + a + f),
                ("not_found", 0),
                ("forwarded", 0),
            ],
        ),
        (
            "pricing",
            &[
                ("triggered", 0),
                ("accepted", s + a + f + 1),
                ("found", s + a + f + 1),
                ("not_found", 0),
                ("duplicates", 0),
                ("forwarded", s + a + f + 1),
                ("forward_failed", 0),
            ],
        ),
        (
            "stock",
            &[
                ("triggered", f),
                ("accepted", s + a + 1),
                ("found", s + a + f + 1),
                ("not_found", 0),
                ("duplicates", 0),
                ("forwarded", f),
                ("forward_failed", 0),
                ("refused_unauthorized", 1),
                ("refused_malformed", 1),
            ],
        ),
    ];
    let mut problems = Vec::new();
    for (service, fields) in want {
        let listener = &stats[service]["listener"];
        for (field, expected) in fields {
            if listener[field].as_u64() != Some(*expected) {
                problems.push(format!("{service}: {field} = {}, want {expected}", listener[field]));
            }
        }
        if stats[service]["spans_failed"].as_u64() != Some(0) {
            problems.push(format!(
                "{service}: spans not delivered to Jaeger: {}",
                stats[service]["spans_failed"]
            ));
        }
    }
    problems
}
