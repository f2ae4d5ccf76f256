//! The retrieval listener: "report trace X" requests, from other processes
//! or from this one, served off the traced threads.
//!
//! ```text
//! POST /v1/retrieve
//! authorization: Bearer <token>          (when the listener has one)
//! content-type: application/json
//!
//! {"trace_id": "<32 hex digits>", "hops": 7, "visited": ["127.0.0.1:7001"]}
//! ```
//!
//! The answer comes at once (202, or 4xx for a request refused: malformed,
//! unauthenticated, too many, unknown path); the work is queued. A worker
//! thread takes the trace's parts from the flight recorder and reports them
//! through this process's reporter (once: a trace already reported when its
//! root ended is not reported again), then passes the request on to the
//! listeners its breadcrumbs name that are not in `visited`, with one hop
//! less and `visited` grown by them: each process is asked once per trace
//! (a process also forgets a trace id it has just handled), at most
//! `max_hops` away, at most `max_fan_out` processes a hop, and the listener
//! takes at most `rate` requests a second. The traced threads never wait on
//! any of it: the recorder reads their memory while they write elsewhere.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use minitrace::collector::TraceId;

use crate::breadcrumbs;

mod worker;
use worker::work_on;

/// The path of retrieval requests.
pub const PATH: &str = "/v1/retrieve";
/// The largest request body taken.
const MAX_BODY: usize = 8 << 10;
/// Retrievals waiting for the worker; more are refused (429).
const MAX_QUEUED: usize = 1 << 10;

/// Why a listener did not start.
#[derive(Debug)]
pub enum Error {
    /// Bound to an address other than loopback without a token.
    TokenRequired(SocketAddr),
    /// The address could not be bound, or the listener's threads could not start.
    Io(std::io::Error),
    /// A listener already runs in this process.
    AlreadyRunning,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TokenRequired(address) => {
                write!(f, "a retrieval listener on {address} (not loopback) needs a token")
            }
            Error::Io(error) => write!(f, "the retrieval listener could not start: {error}"),
            Error::AlreadyRunning => f.write_str("a retrieval listener already runs in this process"),
        }
    }
}

impl std::error::Error for Error {}

/// What a listener did, since it started. Every request received ends in
/// exactly one of `accepted`, `refused_malformed`, `refused_unauthorized`,
/// `refused_unknown`, `refused_rate`, `refused_full`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenerStats {
    /// Requests taken (queued for the worker).
    pub accepted: u64,
    /// Refused: a body that is not a retrieval request (400).
    pub refused_malformed: u64,
    /// Refused: a missing or wrong token (401).
    pub refused_unauthorized: u64,
    /// Refused: another path or method (404, 405).
    pub refused_unknown: u64,
    /// Refused: over the rate (429).
    pub refused_rate: u64,
    /// Refused: too many waiting (429).
    pub refused_full: u64,
    /// Retrievals started here (by [`Listener::fetch`] or the recorder's
    /// hook), not received.
    pub triggered: u64,
    /// Retrievals skipped: the trace was handled here lately.
    pub duplicates: u64,
    /// Retrievals that found the trace's parts here (and reported them).
    pub found: u64,
    /// Retrievals that found nothing of the trace here (after waiting for
    /// its root, see `awaited`).
    pub not_found: u64,
    /// Retrievals that came while the trace's root still ran here (or
    /// found nothing): they wait for it to end, then count as `found`, or
    /// as `not_found` after [`ListenerBuilder::wait_for_roots`].
    pub awaited: u64,
    /// Requests passed on to other listeners and taken by them.
    pub forwarded: u64,
    /// Requests passed on that failed (unreachable, refused, too slow).
    pub forward_failed: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused_malformed: AtomicU64,
    refused_unauthorized: AtomicU64,
    refused_unknown: AtomicU64,
    refused_rate: AtomicU64,
    refused_full: AtomicU64,
    triggered: AtomicU64,
    duplicates: AtomicU64,
    found: AtomicU64,
    not_found: AtomicU64,
    awaited: AtomicU64,
    forwarded: AtomicU64,
    forward_failed: AtomicU64,
}

impl Counters {
    fn read(&self) -> ListenerStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ListenerStats {
            accepted: read(&self.accepted),
            refused_malformed: read(&self.refused_malformed),
            refused_unauthorized: read(&self.refused_unauthorized),
            refused_unknown: read(&self.refused_unknown),
            refused_rate: read(&self.refused_rate),
            refused_full: read(&self.refused_full),
            triggered: read(&self.triggered),
            duplicates: read(&self.duplicates),
            found: read(&self.found),
            not_found: read(&self.not_found),
            awaited: read(&self.awaited),
            forwarded: read(&self.forwarded),
            forward_failed: read(&self.forward_failed),
        }
    }
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A listener's settings; [`start`](ListenerBuilder::start) starts it.
#[derive(Clone)]
pub struct ListenerBuilder {
    address: SocketAddr,
    token: Option<String>,
    max_hops: u8,
    max_fan_out: usize,
    rate: u32,
    on_kept: bool,
    wait_for_roots: Duration,
}

impl fmt::Debug for ListenerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerBuilder")
            .field("address", &self.address)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("max_hops", &self.max_hops)
            .field("max_fan_out", &self.max_fan_out)
            .field("rate", &self.rate)
            .field("on_kept", &self.on_kept)
            .field("wait_for_roots", &self.wait_for_roots)
            .finish()
    }
}

impl ListenerBuilder {
    /// The address to bind (default `127.0.0.1:0`: loopback, a port the
    /// kernel picks). Any other than loopback needs a [`token`](Self::token).
    pub fn address(mut self, address: SocketAddr) -> ListenerBuilder {
        self.address = address;
        self
    }

    /// A shared secret that requests must carry (`authorization: Bearer
    /// <token>`), and that this listener sends to others. Required off
    /// loopback; never printed.
    pub fn token(mut self, token: impl Into<String>) -> ListenerBuilder {
        self.token = Some(token.into());
        self
    }

    /// How far a retrieval goes from where it started (default 8 hops).
    pub fn max_hops(mut self, hops: u8) -> ListenerBuilder {
        self.max_hops = hops;
        self
    }

    /// The most listeners a retrieval is passed on to from here (default 16).
    pub fn max_fan_out(mut self, fan_out: usize) -> ListenerBuilder {
        self.max_fan_out = fan_out;
        self
    }

    /// The most requests a second the listener takes (default 1 000).
    pub fn rate(mut self, per_second: u32) -> ListenerBuilder {
        self.rate = per_second;
        self
    }

    /// Whether a trace the collector keeps for its length or a trigger
    /// starts a retrieval from here (default yes): the recorder's
    /// [`on_kept`](minitrace::recorder::on_kept) hook.
    pub fn fetch_kept_traces(mut self, fetch: bool) -> ListenerBuilder {
        self.on_kept = fetch;
        self
    }

    /// How long a retrieval that came before the trace's root ended here
    /// waits for it (default 2 s): the root is kept when it ends (see
    /// [`minitrace::recorder::report`]), then the retrieval goes on from
    /// here. Past it, the trace counts as not found.
    pub fn wait_for_roots(mut self, wait: Duration) -> ListenerBuilder {
        self.wait_for_roots = wait;
        self
    }

    /// Binds the address and starts the listener's threads; this process's
    /// breadcrumbs name it from now on.
    pub fn start(self) -> Result<Listener, Error> {
        if !self.address.ip().is_loopback() && self.token.is_none() {
            return Err(Error::TokenRequired(self.address));
        }
        let mut running = RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if running.is_some() {
            return Err(Error::AlreadyRunning);
        }
        let std_listener = std::net::TcpListener::bind(self.address).map_err(Error::Io)?;
        std_listener.set_nonblocking(true).map_err(Error::Io)?;
        let address = std_listener.local_addr().map_err(Error::Io)?;
        let shared = Arc::new(Shared {
            address,
            token: self.token,
            max_hops: self.max_hops,
            max_fan_out: self.max_fan_out,
            wait_for_roots: self.wait_for_roots,
            counters: Counters::default(),
            rate: Mutex::new(Bucket::new(self.rate)),
            jobs: Mutex::new(None),
        });
        let (jobs, work) = mpsc::sync_channel(MAX_QUEUED);
        *shared.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(jobs);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("minitrace-remote-listener".into())
                .spawn(move || serve(std_listener, shared, stopped))
                .map_err(Error::Io)?
        };
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("minitrace-remote-worker".into())
                .spawn(move || work_on(work, shared))
                .map_err(Error::Io)?
        };
        breadcrumbs::set_local_listener(Some(address));
        if self.on_kept {
            let weak = Arc::downgrade(&shared);
            minitrace::recorder::on_kept(Some(Arc::new(move |trace_id| {
                if let Some(shared) = weak.upgrade() {
                    shared.start_retrieval(trace_id);
                }
            })));
        }
        *running = Some(address);
        Ok(Listener { shared, stop: Some(stop), threads: vec![server, worker] })
    }
}

/// The address of the listener running in this process, if any.
static RUNNING: Mutex<Option<SocketAddr>> = Mutex::new(None);

/// A running retrieval listener; dropping it stops it.
pub struct Listener {
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener").field("address", &self.shared.address).finish()
    }
}

impl Listener {
    /// The settings, loopback and defaults.
    pub fn builder() -> ListenerBuilder {
        ListenerBuilder {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            max_hops: 8,
            max_fan_out: 16,
            rate: 1_000,
            on_kept: true,
            wait_for_roots: Duration::from_secs(2),
        }
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.shared.address
    }

    /// What it did so far.
    pub fn stats(&self) -> ListenerStats {
        self.shared.counters.read()
    }

    /// Starts a retrieval of `trace_id` from here: its parts in this
    /// process reported, and every process its breadcrumbs lead to asked
    /// for theirs. Returns at once.
    pub fn fetch(&self, trace_id: TraceId) {
        self.shared.start_retrieval(trace_id);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        minitrace::recorder::on_kept(None);
        breadcrumbs::set_local_listener(None);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.shared.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        *RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }
}

/// A retrieval to carry out.
struct Job {
    trace_id: TraceId,
    hops: u8,
    visited: Vec<SocketAddr>,
    /// Started here (the application, or the recorder's hook), not received.
    local: bool,
}

struct Shared {
    address: SocketAddr,
    token: Option<String>,
    max_hops: u8,
    max_fan_out: usize,
    wait_for_roots: Duration,
    counters: Counters,
    rate: Mutex<Bucket>,
    jobs: Mutex<Option<mpsc::SyncSender<Job>>>,
}

impl Shared {
    fn start_retrieval(&self, trace_id: TraceId) {
        self.queue(Job { trace_id, hops: self.max_hops, visited: Vec::new(), local: true });
    }

    /// `false`: the queue is full (or the listener stopped).
    fn queue(&self, job: Job) -> bool {
        let jobs = self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        jobs.as_ref().is_some_and(|jobs| jobs.try_send(job).is_ok())
    }
}

/// A token bucket: `rate` a second, as many at once.
struct Bucket {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: u32) -> Bucket {
        Bucket { rate: f64::from(rate), tokens: f64::from(rate), last: Instant::now() }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(self.rate);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The body of a retrieval request.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Body {
    trace_id: String,
    hops: u8,
    #[serde(default)]
    visited: Vec<String>,
}

fn serve(listener: std::net::TcpListener, shared: Arc<Shared>, stopped: tokio::sync::oneshot::Receiver<()>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build() else {
        eprintln!("minitrace-remote: the listener's runtime could not start");
        return;
    };
    runtime.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
        let mut stopped = stopped;
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = &mut stopped => return,
            };
            let Ok((stream, _)) = accepted else { continue };
            let shared = shared.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let shared = shared.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(request, &shared).await) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
}

async fn answer(request: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let respond = |status: StatusCode, counter: &AtomicU64| {
        add(counter);
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = status;
        response
    };
    let counters = &shared.counters;
    if request.uri().path() != PATH {
        return respond(StatusCode::NOT_FOUND, &counters.refused_unknown);
    }
    if request.method() != Method::POST {
        return respond(StatusCode::METHOD_NOT_ALLOWED, &counters.refused_unknown);
    }
    if let Some(token) = &shared.token {
        let given = request.headers().get(http::header::AUTHORIZATION).and_then(|value| value.to_str().ok());
        let expected = format!("Bearer {token}");
        if !given.is_some_and(|given| constant_time_eq(given.as_bytes(), expected.as_bytes())) {
            return respond(StatusCode::UNAUTHORIZED, &counters.refused_unauthorized);
        }
    }
    let Ok(body) = Limited::new(request.into_body(), MAX_BODY).collect().await else {
        return respond(StatusCode::BAD_REQUEST, &counters.refused_malformed);
    };
    let Some(job) = parse(&body.to_bytes(), shared.max_hops) else {
        return respond(StatusCode::BAD_REQUEST, &counters.refused_malformed);
    };
    if !shared.rate.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
        return respond(StatusCode::TOO_MANY_REQUESTS, &counters.refused_rate);
    }
    if !shared.queue(job) {
        return respond(StatusCode::TOO_MANY_REQUESTS, &counters.refused_full);
    }
    respond(StatusCode::ACCEPTED, &counters.accepted)
}

/// A retrieval request's body, checked: a trace id of 32 hex digits (not
/// 0), hops within the bound, socket addresses (at most 256 of them).
fn parse(body: &[u8], max_hops: u8) -> Option<Job> {
    let body: Body = serde_json::from_slice(body).ok()?;
    if body.trace_id.len() != 32 || body.visited.len() > 256 {
        return None;
    }
    let trace_id = u128::from_str_radix(&body.trace_id, 16).ok().filter(|id| *id != 0)?;
    let visited = body.visited.iter().map(|address| address.parse().ok()).collect::<Option<Vec<_>>>()?;
    Some(Job { trace_id: TraceId(trace_id), hops: body.hops.min(max_hops), visited, local: false })
}

/// Compares secrets in time that does not depend on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |difference, (x, y)| difference | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_parsed_strictly() {
        let good = br#"{"trace_id":"0000000000000000000000000000002a","hops":20,"visited":["127.0.0.1:9"]}"#;
        let job = parse(good, 8).unwrap();
        assert_eq!((job.trace_id, job.hops, job.visited.len()), (TraceId(42), 8, 1));
        for bad in [
            &br#"{"trace_id":"2a","hops":1}"#[..],
            br#"{"trace_id":"00000000000000000000000000000000","hops":1}"#,
            br#"{"trace_id":"0000000000000000000000000000002a","hops":1,"visited":["nowhere"]}"#,
            br#"{"trace_id":"0000000000000000000000000000002a","hops":-1}"#,
            br#"{"trace_id":"0000000000000000000000000000002a","hops":1,"extra":1}"#,
            b"not json",
        ] {
            assert!(parse(bad, 8).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_token_is_compared_whole() {
        assert!(constant_time_eq(b"Bearer s", b"Bearer s"));
        assert!(!constant_time_eq(b"Bearer s", b"Bearer t"));
        assert!(!constant_time_eq(b"Bearer", b"Bearer s"));
    }
}
