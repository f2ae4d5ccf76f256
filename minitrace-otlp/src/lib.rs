//! An [OpenTelemetry](https://opentelemetry.io/) (OTLP) reporter for
//! `minitrace`: it sends the traces that minitrace's collector assembles to
//! any OTLP backend: Jaeger v2, the OpenTelemetry Collector, Tempo, or a
//! vendor's endpoint.
//!
//! ```
//! use minitrace::collector::{SpanId, SpanKind, SpanRecord, TraceId};
//! use minitrace_otlp::OtlpReporter;
//!
//! let reporter = OtlpReporter::builder()
//!     .endpoint("http://127.0.0.1:4318")
//!     .service_name("checkout")
//!     .build()?;
//! assert_eq!(reporter.url(), "http://127.0.0.1:4318/v1/traces");
//!
//! // What it would send for one span: one protobuf `ExportTraceServiceRequest`.
//! let span = SpanRecord {
//!     trace_id: TraceId(1),
//!     span_id: SpanId(2),
//!     name: "GET /cart".into(),
//!     properties: vec![("span.kind".into(), SpanKind::Server.as_str().into())],
//!     ..SpanRecord::default()
//! };
//! let requests = reporter.encode(&[span]);
//! assert_eq!(requests.len(), 1);
//!
//! // In a program: hand it to minitrace, which calls it on its collector thread.
//! minitrace::set_reporter(reporter, minitrace::collector::Config::default());
//! # Ok::<(), minitrace_otlp::Error>(())
//! ```
//!
//! # Configuration
//!
//! Each setting comes from the [builder](OtlpReporterBuilder) if set there,
//! else from the standard environment variable, else the OTLP default:
//!
//! | setting | variable | default |
//! |---|---|---|
//! | [`endpoint`](OtlpReporterBuilder::endpoint) (`/v1/traces` appended over HTTP) | `OTEL_EXPORTER_OTLP_ENDPOINT` | `http://localhost:4318` (gRPC: `:4317`) |
//! | [`traces_endpoint`](OtlpReporterBuilder::traces_endpoint) (used as is) | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | |
//! | [`protocol`](OtlpReporterBuilder::protocol) | `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`: `http/protobuf`, `grpc`, `http/json` | `http/protobuf` |
//! | [`header`](OtlpReporterBuilder::header)s | `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`: `k=v,k=v`, URL-encoded | none |
//! | [`timeout`](OtlpReporterBuilder::timeout) | `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`, in ms | 10 s |
//! | [`compression`](OtlpReporterBuilder::compression) | `OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION`: `gzip`, `none` | none |
//! | [`service_name`](OtlpReporterBuilder::service_name) | `OTEL_SERVICE_NAME` | `unknown_service:{executable}` |
//! | [`resource_attribute`](OtlpReporterBuilder::resource_attribute)s | `OTEL_RESOURCE_ATTRIBUTES`: `k=v,k=v`, URL-encoded | none |
//!
//! A `TRACES_` variable takes precedence over its general one. A malformed
//! value, set in code or in the environment, makes
//! [`build`](OtlpReporterBuilder::build) return an [`Error`] that names
//! it; the builder never panics. [`OtlpReporterBuilder::env`] reads the
//! variables from elsewhere than the process environment.
//!
//! # What is sent
//!
//! Each report goes out as OTLP `ExportTraceServiceRequest`s. Over
//! HTTP/protobuf, the default, they are written by hand, straight from
//! minitrace's records into a reused buffer: names, keys and values copied
//! once, from the record into the body; the resource and the scope encoded
//! once, when the reporter is built; every length computed before its
//! message is written, so each body is exact, canonical protobuf; nothing
//! allocated per span. OTLP/gRPC sends the same bodies, through tonic;
//! OTLP/JSON is built from `opentelemetry-proto`'s generated types,
//! through their serde derives, with the same content. The
//! resource carries `service.name`, `service.version` (when set),
//! `host.name`, `telemetry.sdk.name = "minitrace"`,
//! `telemetry.sdk.language = "rust"`, `telemetry.sdk.version` and the
//! attributes set by the user; the instrumentation scope is `minitrace`
//! with this crate's version. Each [`SpanRecord`] becomes an OTLP span:
//! its ids, name, times, properties as string attributes, events, and the
//! OpenTelemetry fields minitrace keeps under reserved property keys
//! (which are not repeated as attributes): its kind, status, links and the
//! W3C `tracestate` of its trace's root, given to every span of that trace
//! in the report. A span whose parent is not in the report has a remote
//! parent (the `flags` say so); the others are marked as having a local
//! one.
//!
//! # Delivery and failures
//!
//! Reports are split into requests of at most
//! [`max_spans_per_request`](OtlpReporterBuilder::max_spans_per_request)
//! spans and about [`max_request_bytes`](OtlpReporterBuilder::max_request_bytes)
//! bytes, so a trace of any size goes whole. Each request, over HTTP or
//! gRPC, is handed to a sender thread of the reporter's own
//! ([minitrace-delivery](minitrace_delivery)'s `Pipeline`), which delivers
//! it while minitrace's collector thread encodes the next: `report` returns
//! once its requests are queued, and waits only when 8 are already
//! waiting (the endpoint is slower than the spans come), which leaves the
//! choice to minitrace's own policy (`Config::wait_when_queue_full`: by
//! default spans are then dropped and counted at the traced threads; with
//! `true` they wait). `minitrace::flush()` still returns only once the
//! requests are answered (it calls `Reporter::wait_for_delivery`); from
//! another thread, [`StatsHandle::wait_for_delivery`] waits for them.
//! Buffers come back from the sender thread for later requests.
//!
//! Each request is delivered with the OTLP spec's retry policy, shared with
//! minitrace-jaeger: a request answered with HTTP 429, 502, 503 or 504
//! (gRPC `UNAVAILABLE`, `RESOURCE_EXHAUSTED` and the other codes the OTLP
//! spec lists) is sent again after the server's `Retry-After` (seconds or
//! an HTTP date) or an exponential backoff with jitter, and one whose
//! kept-alive connection closed unanswered at once; but no request of a
//! report is tried past the report's [timeout](OtlpReporterBuilder::timeout),
//! counted from its call: a retry that would not fit is not made. Any other
//! status is not retried, nor a partial success, nor a TLS failure; a
//! refused connection is not retried, nor the rest of the report sent.
//! After a timeout, requests fail unsent for 5 s, so that a dead endpoint
//! does not hold every report. Redirects are never followed: a `3xx` is a
//! failed delivery, so spans and their headers (a vendor's key) never go
//! to another host.
//!
//! Compression is off by default: to an endpoint on the same machine or
//! network, gzip costs more CPU than it saves (measured with
//! `benches/export.rs`); turn it on for a remote, metered endpoint.
//!
//! Every span handed to the reporter ends counted in exactly one of sent,
//! rejected (in an OTLP partial success) and failed (refused, timed out,
//! answered with an error) in the reporter's [`stats`](OtlpReporter::stats);
//! the last two also in minitrace's loss counters with
//! [`count_dropped_by_reporter`](minitrace::collector::count_dropped_by_reporter).
//! Errors are written to standard error at most once per
//! [interval](OtlpReporterBuilder::error_interval).
//!
//! # Secrets
//!
//! Header values, from the builder or `OTEL_EXPORTER_OTLP_HEADERS`, are
//! never shown: not by `Debug` (of the builder or the reporter, which show
//! header names only), not in a build [`Error`] (a malformed
//! `OTEL_EXPORTER_OTLP_HEADERS` is named, with which item is wrong, never
//! its text), not in a log line or
//! [`last_error`](ReporterStats::last_error), even when the endpoint's
//! answer quotes them. An endpoint with user information
//! (`https://user:password@host`) is refused, and shown with it replaced
//! by `***`: credentials go in a header.
//!
//! # Features
//!
//! - default: OTLP/HTTP with protobuf bodies, through `ureq` (plain
//!   `http://`).
//! - `grpc`: OTLP/gRPC through `tonic`, on a current-thread tokio runtime
//!   the reporter owns, driven by its sender thread.
//! - `http-json`: OTLP/HTTP with JSON bodies, from `opentelemetry-proto`'s
//!   serde derives (hex ids, lowerCamelCase names, enums as numbers, 64-bit
//!   numbers as strings: OTLP/JSON).
//! - `tls`: `https://` endpoints, with rustls and the webpki roots, or the
//!   roots given to `OtlpReporterBuilder::tls_root_certificate_pem` (a
//!   private CA's), over HTTP and gRPC.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod encode;
#[cfg(feature = "grpc")]
mod grpc;
mod http;
mod stats;
mod wire;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use minitrace::collector::{Reporter, SpanRecord};
use minitrace_delivery::{Counters, Delivery, Pipeline, Report, DEFAULT_PIPELINE_DEPTH};

pub use crate::config::{
    Compression, Error, OtlpReporterBuilder, Protocol, DEFAULT_ERROR_INTERVAL, DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_SPANS_PER_REQUEST, DEFAULT_TIMEOUT,
};
pub use crate::stats::{ReporterStats, StatsHandle};

use crate::config::Settings;
use crate::encode::{span_count, Encoder};
use crate::wire::{Bodies, WireEncoder};

/// Reports spans to an OTLP endpoint; see the [crate docs](crate).
///
/// ```
/// let reporter = minitrace_otlp::OtlpReporter::builder().service_name("checkout").build().unwrap();
/// minitrace::set_reporter(reporter, minitrace::collector::Config::default());
/// ```
pub struct OtlpReporter {
    /// opentelemetry-proto's messages: for OTLP/JSON.
    encoder: Encoder,
    /// Protobuf written by hand: the bodies of OTLP/HTTP (the default) and gRPC.
    wire: WireEncoder,
    /// The buffer of [`OtlpReporter::encode_each`].
    scratch: Vec<u8>,
    transport: Transport,
    /// The sender thread, started at the first report.
    pipeline: Option<Pipeline>,
    url: String,
    protocol: Protocol,
    timeout: Duration,
    /// Shared with the sender thread.
    delivery: Arc<Mutex<Delivery>>,
    counters: Arc<Counters>,
}

impl fmt::Debug for OtlpReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpReporter")
            .field("url", &self.url)
            .field("protocol", &self.protocol)
            .field("timeout", &self.timeout)
            // The transport shows its headers' names only.
            .field("transport", &self.transport)
            .field("stats", &self.stats().get())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Transport {
    // Boxed: the client, the runtime and the channel are large, and one
    // reporter has one transport.
    Http(Box<http::HttpExporter>),
    #[cfg(feature = "grpc")]
    Grpc(Box<grpc::GrpcExporter>),
}

impl Transport {
    /// What the sender thread tries each body with.
    fn sender(&self) -> minitrace_delivery::Transport {
        match self {
            Transport::Http(http) => {
                let client = http.client.clone();
                Box::new(move |body: &[u8], left| client.post(body, left))
            }
            #[cfg(feature = "grpc")]
            Transport::Grpc(grpc) => {
                let mut grpc = (**grpc).clone();
                Box::new(move |body: &[u8], left| grpc.send(body, left))
            }
        }
    }
}

impl OtlpReporter {
    /// A builder, with every setting from the environment or the defaults
    /// until set.
    ///
    /// ```
    /// let reporter = minitrace_otlp::OtlpReporter::builder().env(|_| None).build().unwrap();
    /// assert_eq!(reporter.url(), "http://localhost:4318/v1/traces");
    /// ```
    pub fn builder() -> OtlpReporterBuilder {
        OtlpReporterBuilder::default()
    }

    fn from_settings(settings: Settings) -> Result<OtlpReporter, Error> {
        let transport = match settings.protocol {
            #[cfg(feature = "grpc")]
            Protocol::Grpc => Transport::Grpc(Box::new(grpc::GrpcExporter::new(&settings)?)),
            _ => Transport::Http(Box::new(http::HttpExporter::new(&settings)?)),
        };
        let mut delivery = Delivery::new("minitrace-otlp", settings.url.clone());
        delivery.set_error_interval(settings.error_interval);
        for (_, value) in &settings.headers {
            delivery.hide(&String::from_utf8_lossy(value.as_bytes()));
        }
        let encoder = settings.encoder;
        let wire = WireEncoder::new(&encoder.resource, &encoder.scope, encoder.max_spans, encoder.max_bytes);
        Ok(OtlpReporter {
            encoder,
            wire,
            scratch: Vec::new(),
            transport,
            pipeline: None,
            url: settings.url,
            protocol: settings.protocol,
            timeout: settings.timeout,
            counters: delivery.counters().clone(),
            delivery: Arc::new(Mutex::new(delivery)),
        })
    }

    /// Where spans go: the URL of `POST` requests over HTTP, the server
    /// over gRPC.
    ///
    /// ```
    /// let reporter = minitrace_otlp::OtlpReporter::builder()
    ///     .traces_endpoint("http://127.0.0.1:9999/otlp/traces")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(reporter.url(), "http://127.0.0.1:9999/otlp/traces");
    /// ```
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The transport in use.
    ///
    /// ```
    /// let reporter = minitrace_otlp::OtlpReporter::builder().env(|_| None).build().unwrap();
    /// assert_eq!(reporter.protocol(), minitrace_otlp::Protocol::HttpProtobuf);
    /// ```
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// A handle to this reporter's counters, readable from any thread.
    ///
    /// ```
    /// let reporter = minitrace_otlp::OtlpReporter::builder().build().unwrap();
    /// let stats = reporter.stats();
    /// assert_eq!(stats.get().spans_failed, 0);
    /// ```
    pub fn stats(&self) -> StatsHandle {
        StatsHandle(self.counters.clone())
    }

    /// The protobuf `ExportTraceServiceRequest`s this reporter would send
    /// for `spans` over HTTP/protobuf, uncompressed, one per request: for
    /// inspection and tests. Sends nothing.
    ///
    /// ```
    /// use minitrace::collector::SpanRecord;
    ///
    /// let reporter = minitrace_otlp::OtlpReporter::builder().max_spans_per_request(2).build().unwrap();
    /// let spans = vec![SpanRecord::default(); 5];
    /// assert_eq!(reporter.encode(&spans).len(), 3);
    /// ```
    pub fn encode(&self, spans: &[SpanRecord]) -> Vec<Vec<u8>> {
        let mut requests: Vec<(Vec<u8>, usize)> = Vec::new();
        self.wire.clone().encode(spans, &mut requests);
        requests.into_iter().map(|(body, _)| body).collect()
    }

    /// Encodes `spans` as [`encode`](OtlpReporter::encode) does, but into
    /// one buffer that the reporter keeps and reuses: each request's bytes
    /// are handed to `each` with the number of spans in it, then the buffer
    /// is reused for the next. Sends nothing: for measuring the encoding
    /// alone, which allocates nothing once the buffer and the encoder's
    /// scratch space have grown to a report's size.
    ///
    /// ```
    /// use minitrace::collector::SpanRecord;
    ///
    /// let mut reporter = minitrace_otlp::OtlpReporter::builder().build().unwrap();
    /// let mut total = 0;
    /// reporter.encode_each(&vec![SpanRecord::default(); 3], |body, spans| {
    ///     assert!(!body.is_empty());
    ///     total += spans;
    /// });
    /// assert_eq!(total, 3);
    /// ```
    pub fn encode_each(&mut self, spans: &[SpanRecord], each: impl FnMut(&[u8], usize)) {
        struct Reuse<'a, F> {
            buffer: &'a mut Vec<u8>,
            each: F,
        }
        impl<F: FnMut(&[u8], usize)> Bodies for Reuse<'_, F> {
            fn empty(&mut self) -> Vec<u8> {
                std::mem::take(self.buffer)
            }
            fn full(&mut self, body: Vec<u8>, spans: usize) {
                (self.each)(&body, spans);
                *self.buffer = body;
            }
        }
        self.wire.encode(spans, &mut Reuse { buffer: &mut self.scratch, each });
    }
}

/// Hands each encoded body to the sender thread, gzip-compressed if asked.
struct ToPipeline<'a> {
    pipeline: &'a mut Pipeline,
    report: &'a Report,
    gzip: Option<&'a mut http::Gzip>,
}

impl Bodies for ToPipeline<'_> {
    fn empty(&mut self) -> Vec<u8> {
        self.pipeline.buffer()
    }

    fn full(&mut self, body: Vec<u8>, spans: usize) {
        let body = match &mut self.gzip {
            None => body,
            Some(gzip) => {
                let mut compressed = self.pipeline.buffer();
                gzip.compress(&body, &mut compressed);
                self.pipeline.put_back(body);
                compressed
            }
        };
        self.pipeline.send(self.report, body, spans as u64);
    }
}

fn lock(delivery: &Mutex<Delivery>) -> std::sync::MutexGuard<'_, Delivery> {
    delivery.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl Reporter for OtlpReporter {
    /// Waits until every span reported so far has been delivered or
    /// failed, and so counted in [`stats`](OtlpReporter::stats): `report`
    /// returns as soon as its requests are queued for the sender thread.
    /// `minitrace::flush()` calls it.
    ///
    /// ```
    /// use minitrace::collector::Reporter;
    ///
    /// let mut reporter = minitrace_otlp::OtlpReporter::builder().endpoint("http://127.0.0.1:1").build().unwrap();
    /// reporter.report(&[minitrace::collector::SpanRecord::default()]);
    /// reporter.wait_for_delivery();
    /// assert_eq!(reporter.stats().get().spans_failed, 1); // nothing listens on port 1
    /// ```
    fn wait_for_delivery(&mut self) {
        if let Some(pipeline) = &mut self.pipeline {
            pipeline.wait();
        }
    }

    fn report(&mut self, spans: &[SpanRecord]) {
        if spans.is_empty() {
            return;
        }
        let report = Report::new(self.timeout);
        if self.pipeline.is_none() {
            let sender = self.transport.sender();
            self.pipeline = Pipeline::new(self.delivery.clone(), DEFAULT_PIPELINE_DEPTH, sender).ok();
        }
        let Some(pipeline) = self.pipeline.as_mut() else {
            lock(&self.delivery).lost(spans.len() as u64, "no sender thread could be started");
            return;
        };
        let (gzip, json) = match &mut self.transport {
            Transport::Http(http) => (http.gzip.as_mut(), http.json),
            // tonic compresses, on the sender thread, if asked.
            #[cfg(feature = "grpc")]
            Transport::Grpc(_) => (None, false),
        };
        let mut sink = ToPipeline { pipeline, report: &report, gzip };
        if json {
            for request in self.encoder.requests(spans) {
                sink.full(http::encode_request(json, &request), span_count(&request) as usize);
            }
        } else {
            self.wire.encode(spans, &mut sink);
        }
        // Not waited for: delivered by the sender thread while minitrace's
        // collector thread goes on.
    }
}
