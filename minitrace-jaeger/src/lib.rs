//! A [Jaeger](https://www.jaegertracing.io/) reporter for `minitrace`: it
//! sends the traces that minitrace's collector assembles to a Jaeger agent
//! (UDP) or collector (HTTP), where they can be searched and viewed as
//! timelines.
//!
//! ```
//! use std::net::UdpSocket;
//! use std::time::Duration;
//!
//! use minitrace::collector::Config;
//! use minitrace::prelude::*;
//! use minitrace_jaeger::JaegerReporter;
//!
//! // A socket that stands in for a Jaeger agent (usually 127.0.0.1:6831).
//! let agent = UdpSocket::bind("127.0.0.1:0").unwrap();
//! agent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
//!
//! let reporter = JaegerReporter::new(agent.local_addr().unwrap(), "checkout").unwrap();
//! let stats = reporter.stats();
//! minitrace::set_reporter(reporter, Config::default());
//! {
//!     let root = Span::root("request", SpanContext::random());
//!     let _guard = root.set_local_parent();
//!     let _query = LocalSpan::enter_with_local_parent("query").with_property(|| ("table", "orders"));
//! }
//! minitrace::flush();
//!
//! // The trace's two spans went out in one datagram.
//! let mut datagram = vec![0; 65_536];
//! let bytes = agent.recv(&mut datagram).unwrap();
//! assert_eq!(stats.get().spans_sent, 2);
//! assert_eq!(stats.get().bytes_sent, bytes as u64);
//! ```
//!
//! Against a real Jaeger, only the address changes; or report over HTTP to
//! its collector, where no span is lost unseen:
//!
//! ```no_run
//! use minitrace::collector::Config;
//! use minitrace_jaeger::JaegerReporter;
//!
//! // To the agent over UDP, in Thrift Compact protocol...
//! let reporter = JaegerReporter::new("127.0.0.1:6831".parse().unwrap(), "checkout").unwrap();
//! // ...or to the collector over HTTP, in Thrift Binary protocol.
//! let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "checkout");
//! minitrace::set_reporter(reporter, Config::default());
//! ```
//!
//! # Viewing traces
//!
//! In this crate's repository, `bash scripts/jaeger.sh` starts a Jaeger v2
//! all-in-one on 127.0.0.1 (building it with `go build` on first use), and
//! `cargo run --release --example jaeger` sends it a trace and prints its
//! address in the Jaeger UI, at <http://127.0.0.1:16686> (a placeholder page
//! in that build; the query API answers). Any Jaeger with the agent's UDP
//! port 6831 or the collector's HTTP port 14268 open will do.
//!
//! # How it fits in minitrace
//!
//! A reporter receives finished traces from minitrace's collector thread
//! (see `minitrace::collector::Reporter`): encoding spans to Thrift
//! happens there, never on a traced thread, into buffers reused from one
//! report to the next (no allocation per span). Over UDP, datagrams are
//! sent there too (a send does not wait for an answer). Over HTTP, each
//! batch is handed to a sender thread of the reporter's own, which posts
//! it while the collector thread goes on: `report` returns once its
//! batches are queued, and waits only when 8 are already waiting, leaving
//! the choice to minitrace's policy (`Config::wait_when_queue_full`).
//! `minitrace::flush()` returns once the answers are in (it calls
//! `Reporter::wait_for_delivery`). A slow or dead Jaeger never slows a traced
//! thread (every operation has a timeout). Spans are
//! sent as they are reported, in batches of one or more messages, so
//! minitrace's sampling applies before anything is encoded: with
//! `Config::report_slow_traces_only`, only the slow traces are sent to
//! Jaeger, and the fast ones cost nothing here.
//!
//! # What is sent
//!
//! Each [`SpanRecord`] becomes a Jaeger `Span`: the 128-bit trace id split
//! into its high and low halves, the span and parent ids, a `CHILD_OF`
//! reference to the parent, the name as the operation name, start and
//! duration in microseconds, properties as string tags, and events as logs
//! (an `event` field with the event's name, then its properties). The
//! process carries the service name and the tags `hostname`,
//! `jaeger.version` and `client-uuid`, plus any added with
//! [`JaegerReporter::with_process_tag`]. Each message's `Batch.seqNo` counts
//! up from 1, so the agent can tell when datagrams went missing.
//!
//! # Transports
//!
//! - [`JaegerReporter::new`]: UDP datagrams to an agent (port 6831), each an
//!   `Agent.emitBatch` oneway call in Thrift Compact protocol, at most
//!   65 000 bytes (see [`with_max_message_size`](JaegerReporter::with_max_message_size)).
//!   Cheap and never slow, but the network, the kernel or a busy agent may
//!   drop datagrams without anyone knowing.
//! - [`JaegerReporter::http`]: `POST /api/traces` to a collector (port
//!   14268) with a Thrift Binary `Batch`, answered `202 Accepted`. Every
//!   failure is seen. [`JaegerReporter::http_endpoint`] takes the endpoint
//!   as a URL instead, so that a host name is resolved, any path used, and,
//!   with this crate's `tls` feature, `https://` spoken; add headers such as
//!   `Authorization` with [`with_header`](JaegerReporter::with_header)
//!   (credentials in the URL, `user:password@`, are refused).
//!   The HTTP client is [minitrace-delivery](minitrace_delivery)'s, shared
//!   with minitrace-otlp: [ureq](https://docs.rs/ureq), a small blocking
//!   client, built without TLS unless `tls` is on; one kept-alive
//!   connection, no proxy, and no redirect followed (a `3xx` is a failed
//!   delivery: a batch and its headers never go to another host).
//!
//! # Features
//!
//! - `tls`: `https://` endpoints, through rustls with the Mozilla root
//!   certificates (no system OpenSSL), or a private CA's given with
//!   `JaegerReporter::with_tls_root_certificate_pem`.
//!   Off by default: most collectors listen on a private network, and TLS
//!   is most of the build.
//!
//! # Sizes and failures
//!
//! A report larger than one message is split across several. A span larger
//! than a message on its own is truncated: its strings are cut, then its tags
//! and logs removed, and it gets the tag `minitrace.truncated = true`; if even
//! that does not fit, it is dropped. Spans that cannot be delivered (dropped
//! as too large, a send error, an unreachable agent or collector, an HTTP
//! status other than 2xx) are counted in minitrace's loss counters with
//! [`count_dropped_by_reporter`]
//! and in this reporter's [`stats`](JaegerReporter::stats) (every span
//! handed to the reporter ends in exactly one of sent, failed and too
//! large), and reported on standard error at most once per
//! [interval](JaegerReporter::with_error_interval); no line shows a header's
//! value.
//!
//! HTTP follows the retry policy of OTLP, which minitrace-otlp shares: a
//! request answered 429, 502, 503 or 504 is sent again after the
//! collector's `Retry-After` or an exponential backoff with jitter, and one
//! that found its kept-alive connection closed, unanswered, at once; any
//! other status, a redirect included, is not retried, nor is a refused
//! connection (nor, then, the rest of the report). The reporter never
//! panics, and each UDP send and each report's HTTP requests, retries
//! included, have a [timeout](JaegerReporter::with_timeout); after an HTTP
//! timeout it stops trying for 5 s, dropping (and counting) what comes
//! meanwhile, so that a dead collector cannot stall minitrace's collector
//! thread.
//!
//! [`SpanRecord`]: minitrace::collector::SpanRecord

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod model;
mod stats;
mod thrift;
mod udp;

#[cfg(test)]
mod tests;

use std::error::Error;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use minitrace::collector::{count_dropped_by_reporter, Reporter, SpanRecord};
#[cfg(feature = "tls")]
pub use minitrace_delivery::CertificateError;
use minitrace_delivery::{Attempt, Delivery, Endpoint, HttpClient, Pipeline, Report, DEFAULT_PIPELINE_DEPTH};

use crate::model::{Encoder, Process, TRUNCATED_TAG};
use crate::stats::Counters;
pub use crate::stats::{ReporterStats, StatsHandle};
use crate::thrift::{Binary, Compact};

/// The collector's path for Thrift over HTTP, used when an endpoint has none.
const DEFAULT_PATH: &str = "/api/traces";
/// The prefix of the error log's lines.
const LOG_PREFIX: &str = "minitrace-jaeger";

/// The largest UDP datagram sent by default, as in Jaeger's own clients.
///
/// ```
/// use minitrace_jaeger::{JaegerReporter, DEFAULT_MAX_DATAGRAM_SIZE};
///
/// // Halve the datagrams, e.g. for an agent with a small receive buffer.
/// let reporter = JaegerReporter::new("127.0.0.1:6831".parse().unwrap(), "my-service")
///     .unwrap()
///     .with_max_message_size(DEFAULT_MAX_DATAGRAM_SIZE / 2);
/// # drop(reporter);
/// ```
pub const DEFAULT_MAX_DATAGRAM_SIZE: usize = 65_000;
/// The largest HTTP request body sent by default.
///
/// ```
/// use minitrace_jaeger::{JaegerReporter, DEFAULT_MAX_REQUEST_SIZE};
///
/// // Larger requests, for fewer round trips with big traces.
/// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service")
///     .with_max_message_size(4 * DEFAULT_MAX_REQUEST_SIZE);
/// # drop(reporter);
/// ```
pub const DEFAULT_MAX_REQUEST_SIZE: usize = 4 * 1024 * 1024;
/// The default timeout of each report: of each UDP send, and of the HTTP
/// requests of one report, retries included.
///
/// ```
/// use minitrace_jaeger::{JaegerReporter, DEFAULT_TIMEOUT};
///
/// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service")
///     .with_timeout(DEFAULT_TIMEOUT * 5);
/// # drop(reporter);
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// The default shortest time between two error messages on standard error.
///
/// ```
/// use minitrace_jaeger::{JaegerReporter, DEFAULT_ERROR_INTERVAL};
///
/// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service")
///     .with_error_interval(DEFAULT_ERROR_INTERVAL * 6);
/// # drop(reporter);
/// ```
pub const DEFAULT_ERROR_INTERVAL: Duration = Duration::from_secs(10);

/// Reports spans to Jaeger: to an agent over UDP ([`new`](JaegerReporter::new))
/// or to a collector over HTTP ([`http`](JaegerReporter::http)).
///
/// ```no_run
/// use minitrace_jaeger::JaegerReporter;
///
/// let reporter = JaegerReporter::new("127.0.0.1:6831".parse().unwrap(), "my-service").unwrap();
/// minitrace::set_reporter(reporter, minitrace::collector::Config::default());
/// ```
pub struct JaegerReporter {
    process: Process,
    transport: Transport,
    next_seq_no: i64,
    counters: Arc<Counters>,
    /// Shared with the sender thread of HTTP.
    delivery: Arc<Mutex<Delivery>>,
    timeout: Duration,
}

enum Transport {
    Udp {
        agent: udp::Agent,
        encoder: Encoder<Compact>,
        max_size: usize,
    },
    Http {
        client: HttpClient,
        encoder: Encoder<Binary>,
        max_size: usize,
        /// The sender thread, started at the first report (with the client
        /// as it is then: the builder's settings come before).
        pipeline: Option<Box<Pipeline>>,
    },
}

impl fmt::Debug for JaegerReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("JaegerReporter");
        debug.field("process", &self.process);
        match &self.transport {
            Transport::Udp { agent, max_size, .. } => debug.field("agent", agent).field("max_size", max_size),
            // The headers' names only: their values may be credentials.
            Transport::Http { client, max_size, .. } => debug
                .field("endpoint", &client.endpoint().to_string())
                .field("headers", &client.header_names())
                .field("max_size", max_size),
        };
        debug
            .field("timeout", &self.timeout)
            .field("next_seq_no", &self.next_seq_no)
            .field("stats", &self.stats().get())
            .finish()
    }
}

impl JaegerReporter {
    /// A reporter that sends UDP datagrams to the Jaeger agent at `agent_addr`
    /// (usually port 6831), for the service `service_name`.
    ///
    /// Fails if no local UDP socket can be bound or connected to that address.
    ///
    /// ```
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// // Nothing is sent before the first report: no agent is needed here.
    /// let reporter = JaegerReporter::new("127.0.0.1:6831".parse().unwrap(), "my-service");
    /// assert!(reporter.is_ok());
    /// ```
    pub fn new(
        agent_addr: SocketAddr,
        service_name: impl Into<String>,
    ) -> Result<Self, Box<dyn Error + Send + Sync + 'static>> {
        let process = default_process(service_name.into());
        let agent = udp::Agent::connect(agent_addr, DEFAULT_TIMEOUT)?;
        let encoder = Encoder::new(&process, DEFAULT_MAX_DATAGRAM_SIZE);
        let delivery = Delivery::new(LOG_PREFIX, format!("the agent at {agent_addr}"));
        let transport = Transport::Udp { agent, encoder, max_size: DEFAULT_MAX_DATAGRAM_SIZE };
        Ok(JaegerReporter::with_transport(process, transport, delivery))
    }

    /// A reporter that posts to the Jaeger collector's HTTP endpoint at
    /// `collector_addr` (usually port 14268; the path is `/api/traces`), for
    /// the service `service_name`. It connects on the first report.
    ///
    /// ```
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service");
    /// minitrace::set_reporter(reporter, minitrace::collector::Config::default());
    /// ```
    pub fn http(collector_addr: SocketAddr, service_name: impl Into<String>) -> Self {
        // Without an IPv6 scope id, which a URL cannot carry.
        let host = match collector_addr {
            SocketAddr::V4(addr) => addr.ip().to_string(),
            SocketAddr::V6(addr) => format!("[{}]", addr.ip()),
        };
        let url = format!("http://{host}:{}{DEFAULT_PATH}", collector_addr.port());
        let endpoint = Endpoint::parse(&url).expect("an IP address and port make a valid URL");
        JaegerReporter::http_to(endpoint, service_name.into())
    }

    /// A reporter that posts to the Jaeger collector's HTTP endpoint at
    /// `url`, for the service `service_name`: `http://host:port/path`, or
    /// `https://` with this crate's `tls` feature. The host may be a name,
    /// resolved at each new connection; an empty path means `/api/traces`.
    /// It connects on the first report.
    ///
    /// Fails, saying why, if `url` is not such a URL, holds user information
    /// (`user:password@`: credentials go in a header, see
    /// [`with_header`](JaegerReporter::with_header)), or is `https://` in a
    /// build without the `tls` feature. The error never shows the user
    /// information.
    ///
    /// ```
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let reporter = JaegerReporter::http_endpoint("http://jaeger-collector:14268", "my-service")
    ///     .unwrap()
    ///     .with_header("authorization", "Bearer my-token");
    /// # drop(reporter);
    ///
    /// let error = JaegerReporter::http_endpoint("jaeger-collector:14268", "my-service").unwrap_err();
    /// assert!(error.to_string().contains("no scheme"));
    /// ```
    pub fn http_endpoint(url: &str, service_name: impl Into<String>) -> Result<Self, EndpointError> {
        let endpoint = Endpoint::parse(url).map_err(|error| EndpointError {
            url: error.url().to_string(),
            reason: error.reason().to_string(),
        })?;
        if endpoint.is_https() && !cfg!(feature = "tls") {
            let reason =
                "https:// needs minitrace-jaeger's `tls` feature, which this build lacks".to_string();
            return Err(EndpointError { url: endpoint.to_string(), reason });
        }
        Ok(JaegerReporter::http_to(endpoint.or_path(DEFAULT_PATH), service_name.into()))
    }

    fn http_to(endpoint: Endpoint, service_name: String) -> Self {
        let process = default_process(service_name);
        let delivery = Delivery::new(LOG_PREFIX, endpoint.to_string());
        let mut client = HttpClient::new(endpoint, "application/x-thrift");
        client.set_user_agent(concat!("minitrace-jaeger/", env!("CARGO_PKG_VERSION")));
        let encoder = Encoder::new(&process, DEFAULT_MAX_REQUEST_SIZE);
        let transport =
            Transport::Http { client, encoder, max_size: DEFAULT_MAX_REQUEST_SIZE, pipeline: None };
        JaegerReporter::with_transport(process, transport, delivery)
    }

    fn with_transport(process: Process, transport: Transport, mut delivery: Delivery) -> Self {
        delivery.set_error_interval(DEFAULT_ERROR_INTERVAL);
        JaegerReporter {
            process,
            transport,
            next_seq_no: 1,
            counters: Arc::new(Counters::starting_now(delivery.counters().clone())),
            delivery: Arc::new(Mutex::new(delivery)),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Sets the largest message: a UDP datagram (default
    /// [`DEFAULT_MAX_DATAGRAM_SIZE`]; keep it at most 65 000, what the agent
    /// accepts by default) or an HTTP request body (default
    /// [`DEFAULT_MAX_REQUEST_SIZE`]). Larger reports are split; larger spans
    /// are truncated, or dropped if a message cannot hold even their ids.
    ///
    /// ```
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// // E.g. for a network path whose MTU forbids IP fragments.
    /// let reporter = JaegerReporter::new("127.0.0.1:6831".parse().unwrap(), "my-service")
    ///     .unwrap()
    ///     .with_max_message_size(1400);
    /// # drop(reporter);
    /// ```
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        match &mut self.transport {
            Transport::Udp { max_size, .. } | Transport::Http { max_size, .. } => *max_size = bytes,
        }
        self.rebuild_encoder();
        self
    }

    /// Adds a tag to the process, which Jaeger shows with every span of it.
    ///
    /// ```
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service")
    ///     .with_process_tag("version", "1.2.3")
    ///     .with_process_tag("region", "eu-west");
    /// # drop(reporter);
    /// ```
    pub fn with_process_tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.process.tags.push((key.into(), value.into()));
        self.rebuild_encoder();
        self
    }

    /// Sets the timeout of each UDP send, and the longest one report takes
    /// over HTTP: every request of it as a whole (name resolution,
    /// connecting, sending and the answer) and every retry included
    /// (default [`DEFAULT_TIMEOUT`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service")
    ///     .with_timeout(Duration::from_millis(500));
    /// # drop(reporter);
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        if let Transport::Udp { agent, .. } = &mut self.transport {
            if let Err(error) = agent.set_timeout(timeout) {
                self.delivery().log(|| format!("cannot set the UDP send timeout: {error}"));
            }
        }
        self
    }

    /// Adds a header to every HTTP request, e.g. the `Authorization` a
    /// collector behind a gateway asks for; a later one replaces an earlier
    /// one of the same name. Its value is kept out of `Debug` output, error
    /// messages and [`last_error`](StatsHandle::last_error). A name or
    /// value that HTTP forbids is left out, and so is any header of a UDP
    /// reporter; either is reported on standard error.
    ///
    /// ```
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service")
    ///     .with_header("authorization", "Bearer my-token")
    ///     .with_header("x-tenant", "shop");
    /// # drop(reporter);
    /// ```
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        let Transport::Http { client, pipeline, .. } = &mut self.transport else {
            self.delivery().log(|| format!("header {name:?} left out: a UDP reporter sends no HTTP headers"));
            return self;
        };
        // A sender thread already started has the client as it was.
        *pipeline = None;
        match client.add_header(name, value) {
            Ok(()) => self.delivery().hide(value),
            Err(error) => self.delivery().log(|| format!("header {name:?} left out: {error}")),
        }
        self
    }

    /// Trusts only the root certificates of `pem` (one or more PEM
    /// `CERTIFICATE` blocks, e.g. a private CA's) for an `https://`
    /// collector, instead of the Mozilla roots that are trusted by default.
    /// Fails, saying why, if `pem` holds no certificate or one that a root
    /// store refuses, or if this reporter does not speak HTTP.
    ///
    /// ```no_run
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let ca = std::fs::read("/etc/ssl/private-ca.pem").unwrap();
    /// let reporter = JaegerReporter::http_endpoint("https://jaeger.internal:14268", "my-service")
    ///     .unwrap()
    ///     .with_tls_root_certificate_pem(&ca)
    ///     .unwrap();
    /// # drop(reporter);
    /// ```
    #[cfg(feature = "tls")]
    pub fn with_tls_root_certificate_pem(mut self, pem: &[u8]) -> Result<Self, CertificateError> {
        let Transport::Http { client, pipeline, .. } = &mut self.transport else {
            return Err(CertificateError::new("a UDP reporter speaks no TLS"));
        };
        *pipeline = None;
        client.set_root_certificates(minitrace_delivery::RootCertificates::from_pem(pem)?);
        Ok(self)
    }

    /// Sets the shortest time between two error messages on standard error
    /// (default [`DEFAULT_ERROR_INTERVAL`]); errors in between are counted and
    /// their number told with the next message.
    ///
    /// ```
    /// use std::time::Duration;
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service")
    ///     .with_error_interval(Duration::from_secs(60));
    /// # drop(reporter);
    /// ```
    pub fn with_error_interval(self, interval: Duration) -> Self {
        self.delivery().set_error_interval(interval);
        self
    }

    /// A handle on this reporter's counters, which stays valid after the
    /// reporter was handed to [`minitrace::set_reporter`].
    ///
    /// ```
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service");
    /// let stats = reporter.stats();
    /// minitrace::set_reporter(reporter, minitrace::collector::Config::default());
    /// // ... later:
    /// println!("{} spans sent to Jaeger", stats.get().spans_sent);
    /// ```
    pub fn stats(&self) -> StatsHandle {
        StatsHandle(self.counters.clone())
    }

    /// Encodes `spans` into the messages this reporter would send (Thrift
    /// Compact datagrams for UDP, Thrift Binary bodies for HTTP), each
    /// handed to `each` with the number of spans in it, and sends nothing:
    /// for measuring the encoding alone. The messages are written into
    /// buffers the reporter keeps and reuses, and take sequence numbers
    /// as sent messages do.
    ///
    /// ```
    /// use minitrace::collector::SpanRecord;
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// let mut reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "my-service");
    /// let mut spans = 0;
    /// reporter.encode_each(&vec![SpanRecord::default(); 3], |message, count| {
    ///     assert!(!message.is_empty());
    ///     spans += count;
    /// });
    /// assert_eq!(spans, 3);
    /// ```
    pub fn encode_each(&mut self, spans: &[SpanRecord], mut each: impl FnMut(&[u8], usize)) {
        let JaegerReporter { transport, next_seq_no, counters, .. } = self;
        let stats = || counters.client_stats();
        match transport {
            Transport::Udp { encoder, .. } => encoder.encode(spans, next_seq_no, stats, &mut each),
            Transport::Http { encoder, .. } => encoder.encode(spans, next_seq_no, stats, &mut each),
        };
    }

    fn delivery(&self) -> MutexGuard<'_, Delivery> {
        lock(&self.delivery)
    }

    fn rebuild_encoder(&mut self) {
        match &mut self.transport {
            Transport::Udp { encoder, max_size, .. } => *encoder = Encoder::new(&self.process, *max_size),
            Transport::Http { encoder, max_size, .. } => *encoder = Encoder::new(&self.process, *max_size),
        }
    }
}

fn lock(delivery: &Mutex<Delivery>) -> MutexGuard<'_, Delivery> {
    delivery.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl Reporter for JaegerReporter {
    /// Waits until every span reported so far has been delivered or
    /// failed, and so counted in [`stats`](JaegerReporter::stats): over
    /// HTTP, `report` returns as soon as its batches are queued for the
    /// sender thread (over UDP, a datagram is sent at once). For a reporter
    /// already handed to minitrace, `minitrace::flush()` calls it.
    ///
    /// ```
    /// use minitrace::collector::Reporter;
    /// use minitrace_jaeger::JaegerReporter;
    ///
    /// // Nothing listens on port 1.
    /// let mut reporter = JaegerReporter::http("127.0.0.1:1".parse().unwrap(), "my-service");
    /// reporter.report(&[minitrace::collector::SpanRecord::default()]);
    /// reporter.wait_for_delivery();
    /// assert_eq!(reporter.stats().get().spans_failed, 1);
    /// ```
    fn wait_for_delivery(&mut self) {
        if let Transport::Http { pipeline: Some(pipeline), .. } = &mut self.transport {
            pipeline.wait();
        }
    }

    fn report(&mut self, spans: &[SpanRecord]) {
        if spans.is_empty() {
            return;
        }
        let JaegerReporter { transport, next_seq_no, counters, delivery: shared, timeout, .. } = self;
        let counters: &Counters = counters;
        let stats = || counters.client_stats();
        let mut report = Report::new(*timeout);
        let outcome = match transport {
            Transport::Udp { agent, encoder, .. } => {
                let mut delivery = lock(shared);
                encoder.encode(spans, next_seq_no, stats, |datagram, count| {
                    let mut refused_before = 0;
                    delivery.deliver(&mut report, count as u64, datagram.len() as u64, |_| {
                        match agent.send(datagram, count) {
                            Ok(()) => Attempt::Delivered { rejected: 0, message: String::new() },
                            Err(error) => {
                                refused_before = error.refused_before;
                                Attempt::Failed(format!("UDP send to the agent failed: {}", error.error))
                            }
                        }
                    });
                    delivery
                        .unsent(refused_before as u64, "the agent refused the datagram that carried them");
                })
            }
            Transport::Http { client, encoder, pipeline, .. } => {
                if pipeline.is_none() {
                    let client = client.clone();
                    let transport = Box::new(move |body: &[u8], left| client.post(body, left));
                    *pipeline =
                        Pipeline::new(shared.clone(), DEFAULT_PIPELINE_DEPTH, transport).ok().map(Box::new);
                }
                let Some(pipeline) = pipeline else {
                    lock(shared).lost(spans.len() as u64, "no sender thread could be started");
                    return;
                };
                // Each body is sent while the next one is encoded.
                let outcome = encoder.encode(spans, next_seq_no, stats, |body, count| {
                    let mut buffer = pipeline.buffer();
                    buffer.extend_from_slice(body);
                    pipeline.send(&report, buffer, count as u64);
                });
                // Not waited for: delivered by the sender thread while
                // minitrace's collector thread goes on.
                outcome
            }
        };
        let mut delivery = lock(shared);
        if outcome.dropped > 0 {
            Counters::add(&counters.spans_too_large, outcome.dropped);
            count_dropped_by_reporter(outcome.dropped);
            let dropped = outcome.dropped;
            delivery
                .report_error(format!("{dropped} spans lost: too large for one message even when truncated"));
        }
        if outcome.truncated > 0 {
            Counters::add(&counters.spans_truncated, outcome.truncated);
            let truncated = outcome.truncated;
            delivery
                .log(|| format!("{truncated} spans truncated to fit one message (tagged {TRUNCATED_TAG})"));
        }
    }
}

/// A service's process with the default tags.
fn default_process(service_name: String) -> Process {
    let version = concat!("Rust-minitrace-jaeger-", env!("CARGO_PKG_VERSION"));
    let mut tags = vec![("jaeger.version".to_string(), version.to_string())];
    if let Some(hostname) = hostname() {
        tags.push(("hostname".to_string(), hostname));
    }
    tags.push(("client-uuid".to_string(), client_uuid()));
    Process { service_name, tags }
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// A random id for this reporter, in UUID form: the agent keys its
/// per-client counters (from `seqNo` and `ClientStats`) on it.
fn client_uuid() -> String {
    // std's hasher keys are random (seeded by the OS) per `RandomState`.
    let random = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        hasher.write_u128(now.map_or(0, |since| since.as_nanos()));
        hasher.finish()
    };
    let (high, low) = (random(), random());
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

/// Why [`JaegerReporter::http_endpoint`] refused a URL: the URL (with any
/// user information replaced by `***`), and what is wrong with it.
///
/// ```
/// use minitrace_jaeger::JaegerReporter;
///
/// let error = JaegerReporter::http_endpoint("ftp://jaeger:14268", "my-service").unwrap_err();
/// assert_eq!(error.url(), "ftp://jaeger:14268");
/// assert!(error.to_string().contains("neither http:// nor https://"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointError {
    url: String,
    reason: String,
}

impl EndpointError {
    /// The URL refused, with any user information (`user:password@`)
    /// replaced by `***`.
    ///
    /// ```
    /// let error = minitrace_jaeger::JaegerReporter::http_endpoint("jaeger", "svc").unwrap_err();
    /// assert_eq!(error.url(), "jaeger");
    /// ```
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid Jaeger collector endpoint {:?}: {}", self.url, self.reason)
    }
}

impl Error for EndpointError {}
