//! The four services of `retroactive`, each traced as a real one would be:
//! minitrace-tower's `ServerLayer` for its requests, minitrace-reqwest or
//! `ClientLayer` for its calls, the flight recorder, an OTLP reporter to
//! Jaeger that keeps only slow or failed traces, and a retrieval listener.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io::BufRead;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::uri::PathAndQuery;
use minitrace::collector::{Config, Reporter, SpanContext, SpanRecord, SpanStatus, TraceId};
use minitrace::future::FutureExt as _;
use minitrace::local::LocalSpan;
use minitrace::recorder::FlightRecorder;
use minitrace::Span;
use minitrace_otlp::OtlpReporter;
use minitrace_remote::Listener;
use minitrace_reqwest::TraceMiddleware;
use minitrace_tower::{ClientLayer, ServerLayer, TraceClient};
use reqwest_middleware::ClientWithMiddleware;
use tonic_prost::ProstCodec;
use tower::ServiceBuilder;

use super::checks::{Kind, Load};
use super::{design, SLOW_BY, THRESHOLD};

/// How long a retrieval that came before its root ended waits for it.
pub const WAIT_FOR_ROOTS: Duration = Duration::from_secs(1);
/// Each thread's flight memory: a few seconds of this load (a slow
/// request's trigger comes 1 s after its backends' parts ended), and
/// the oldest request is overwritten long before the end.
const BYTES_PER_THREAD: usize = 8 << 20;

/// The OTLP reporter, noting when Jaeger accepted each trace's spans: the
/// end of the export that carried them (only retrieved and slow traces
/// are reported here, so waiting for each delivery costs the load nothing).
struct Timed {
    otlp: OtlpReporter,
    accepted: Accepted,
}

/// Per trace, when (µs since the epoch) Jaeger last accepted a part of it.
type Accepted = Arc<Mutex<HashMap<TraceId, u64>>>;

impl Reporter for Timed {
    fn report(&mut self, spans: &[SpanRecord]) {
        self.otlp.report(spans);
        self.otlp.wait_for_delivery();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
        let mut accepted = self.accepted.lock().unwrap();
        for span in spans {
            accepted.insert(span.trace_id, now);
        }
    }
}

/// What a service keeps of its tracing: the export's counts, when each
/// trace was accepted, and the retrieval listener.
struct Tracing {
    sent: minitrace_otlp::StatsHandle,
    accepted: Accepted,
    listener: Listener,
}

/// The tracing every service sets up.
fn trace_to_jaeger(service: &str, run: &str, token: &str) -> Tracing {
    let otlp = OtlpReporter::builder()
        .env(|_| None)
        .endpoint("http://127.0.0.1:4318")
        .service_name(format!("retro-{service}-{run}"))
        .build()
        .expect("an OTLP reporter");
    let sent = otlp.stats();
    let accepted = Accepted::default();
    let reporter = Timed { otlp, accepted: accepted.clone() };
    minitrace::set_reporter(reporter, Config::default().report_slow_traces_only(THRESHOLD));
    FlightRecorder::new().bytes_per_thread(BYTES_PER_THREAD).report_errors().enable();
    let listener = Listener::builder()
        .token(token)
        .wait_for_roots(WAIT_FOR_ROOTS)
        .start()
        .expect("a retrieval listener");
    Tracing { sent, accepted, listener }
}

/// What a service tells about itself, as JSON.
fn stats_json(tracing: &Tracing) -> serde_json::Value {
    let l = tracing.listener.stats();
    let recorder = minitrace::recorder::stats();
    let accepted: serde_json::Map<String, serde_json::Value> = tracing
        .accepted
        .lock()
        .unwrap()
        .iter()
        .map(|(trace_id, at)| (trace_id.to_string(), (*at).into()))
        .collect();
    serde_json::json!({
        "listener": {
            "accepted": l.accepted, "triggered": l.triggered, "found": l.found,
            "not_found": l.not_found, "awaited": l.awaited, "duplicates": l.duplicates,
            "forwarded": l.forwarded, "forward_failed": l.forward_failed,
            "refused_unauthorized": l.refused_unauthorized, "refused_malformed": l.refused_malformed,
            "refused_other": l.refused_unknown + l.refused_rate + l.refused_full,
        },
        "recorder": { "overwritten_spans": recorder.overwritten_spans, "retrieved": recorder.retrieved },
        "spans_sent": tracing.sent.get().spans_sent,
        "spans_failed": tracing.sent.get().spans_failed,
        "jaeger_accepted_us": accepted,
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

fn http_client() -> ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new()).with(TraceMiddleware::new()).build()
}

async fn bind() -> (tokio::net::TcpListener, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let address = listener.local_addr().unwrap();
    (listener, address)
}

/// A child process: serves `role` until its stdin says `exit` (or closes).
pub fn serve(role: &str) {
    let run = std::env::var("RETRO_RUN").unwrap_or_default();
    let token = std::env::var("RETRO_TOKEN").unwrap_or_default();
    let tracing = trace_to_jaeger(role, &run, &token);
    let runtime = runtime();
    let app = runtime.block_on(async {
        match role {
            "inventory" => start_http(axum::routing::get(inventory), "/stock/{n}", "inventory").await,
            "stock" => start_http(axum::routing::get(stock), "/level/{n}", "stock").await,
            "pricing" => start_pricing(std::env::var("RETRO_STOCK").expect("the stock's address")).await,
            other => panic!("no service {other}"),
        }
    });
    println!("READY {app} {}", tracing.listener.address());
    for line in std::io::stdin().lock().lines() {
        match line.as_deref() {
            Ok("stats") => println!("STATS {}", stats_json(&tracing)),
            _ => break,
        }
    }
    minitrace::flush();
    println!("STATS {}", stats_json(&tracing));
    drop(runtime);
}

async fn start_http(route: axum::routing::MethodRouter, path: &str, name: &'static str) -> SocketAddr {
    let app =
        axum::Router::new().route(path, route).layer(ServerLayer::new().with_name(move |_| name.into()));
    let (listener, address) = bind().await;
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

async fn inventory(Path(n): Path<u64>) -> String {
    let _count = LocalSpan::enter_with_local_parent("count");
    format!("{} in stock", n % 7)
}

async fn stock(Path(n): Path<u64>) -> Response {
    let read = LocalSpan::enter_with_local_parent("read level");
    if design(n).fail {
        drop(read.with_status(SpanStatus::error("checksum mismatch")));
        return (http::StatusCode::INTERNAL_SERVER_ERROR, "no level\n").into_response();
    }
    format!("{}\n", n % 100).into_response()
}

// ---- pricing: tonic, a service written by hand (no code generation). ----

/// The request and the answer of `retro.Pricing/Quote`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Quote {
    #[prost(uint64, tag = "1")]
    pub n: u64,
    #[prost(uint64, tag = "2")]
    pub cents: u64,
}

#[derive(Clone)]
struct Pricing {
    http: ClientWithMiddleware,
    stock: Arc<String>,
}

impl tonic::server::NamedService for Pricing {
    const NAME: &'static str = "retro.Pricing";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl tower::Service<http::Request<tonic::body::Body>> for Pricing {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let pricing = self.clone();
        Box::pin(async move {
            match request.uri().path() {
                "/retro.Pricing/Quote" => {
                    Ok(tonic::server::Grpc::new(ProstCodec::default()).unary(pricing, request).await)
                }
                _ => Ok(tonic::Status::unimplemented("no such method").into_http()),
            }
        })
    }
}

impl tonic::server::UnaryService<Quote> for Pricing {
    type Response = Quote;
    type Future = BoxFuture<Result<tonic::Response<Quote>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Quote>) -> Self::Future {
        let Pricing { http, stock } = self.clone();
        Box::pin(async move {
            let n = request.into_inner().n;
            let level = http.get(format!("http://{stock}/level/{n}")).send().await;
            // The stock failing is not the caller's problem: a list price.
            let level: u64 = match level {
                Ok(answer) if answer.status().is_success() => {
                    answer.text().await.ok().and_then(|text| text.trim().parse().ok()).unwrap_or(50)
                }
                _ => 50,
            };
            let _quote = LocalSpan::enter_with_local_parent("quote");
            Ok(tonic::Response::new(Quote { n, cents: 1_000 + level }))
        })
    }
}

async fn start_pricing(stock: String) -> SocketAddr {
    let (listener, address) = bind().await;
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let pricing = Pricing { http: http_client(), stock: Arc::new(stock) };
    let server = tonic::transport::Server::builder()
        .layer(ServerLayer::new().with_name(|_| "pricing".into()))
        .add_service(pricing);
    tokio::spawn(server.serve_with_incoming(incoming));
    address
}

// ---- frontend: axum, in the orchestrating process. ----

type GrpcClient = tonic::client::Grpc<TraceClient<tonic::transport::Channel>>;

#[derive(Clone)]
struct Front {
    http: ClientWithMiddleware,
    grpc: GrpcClient,
    inventory: Arc<String>,
}

static TRACING: OnceLock<Tracing> = OnceLock::new();

async fn order(State(front): State<Front>, Path(n): Path<u64>) -> Response {
    let Front { http, mut grpc, inventory } = front;
    let trace_id = SpanContext::current_local_parent().map(|context| context.trace_id);
    let count = http.get(format!("http://{inventory}/stock/{n}")).send().await;
    let in_stock = match count {
        Ok(answer) => answer.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let quote = async {
        grpc.ready().await.map_err(|_| tonic::Status::unavailable("pricing not ready"))?;
        let path = PathAndQuery::from_static("/retro.Pricing/Quote");
        grpc.unary::<Quote, Quote, _>(tonic::Request::new(Quote { n, cents: 0 }), path, ProstCodec::default())
            .await
    };
    let cents = match quote.await {
        Ok(quote) => quote.into_inner().cents,
        Err(status) => return (http::StatusCode::BAD_GATEWAY, status.message().to_owned()).into_response(),
    };
    let design = design(n);
    if design.slow {
        // Slow here, after every call returned: no backend's part is.
        tokio::time::sleep(SLOW_BY).in_span(Span::enter_with_local_parent("render")).await;
    }
    if let (true, Some(trace_id), Some(listener)) =
        (design.flag, trace_id, TRACING.get().map(|tracing| &tracing.listener))
    {
        // The application's own trigger: this one matters.
        listener.fetch(trace_id);
    }
    let mut response = format!("{in_stock}, {cents} cents\n").into_response();
    if let Some(trace_id) = trace_id {
        response.headers_mut().insert("x-trace-id", trace_id.to_string().parse().unwrap());
    }
    response
}

/// The frontend, served in this process.
pub struct Frontend {
    runtime: tokio::runtime::Runtime,
    app: SocketAddr,
    /// Its listener's address.
    pub listener: String,
}

impl Frontend {
    pub fn start(run: &str, token: &str, inventory: &str, pricing: &str) -> Frontend {
        let tracing = trace_to_jaeger("frontend", run, token);
        let address = tracing.listener.address().to_string();
        let _ = TRACING.set(tracing);
        let runtime = runtime();
        let _inside = runtime.enter();
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{pricing}"))
            .expect("a URL")
            .connect_lazy();
        let front = Front {
            http: http_client(),
            grpc: tonic::client::Grpc::new(ServiceBuilder::new().layer(ClientLayer::new()).service(channel)),
            inventory: Arc::new(inventory.to_owned()),
        };
        let app = runtime.block_on(async {
            let app = axum::Router::new()
                .route("/order/{n}", axum::routing::get(order))
                .with_state(front)
                .layer(ServerLayer::new().with_name(|_| "frontend".into()));
            let (listener, address) = bind().await;
            tokio::spawn(async move { axum::serve(listener, app).await });
            address
        });
        drop(_inside);
        Frontend { runtime, app, listener: address }
    }

    /// Sends `requests` requests, `concurrency` at a time, as an untraced
    /// client would; notes the trace ids of those that matter and sends
    /// each to `probe` as soon as its answer is in.
    pub fn load(&self, requests: u64, concurrency: usize, probe: Sender<(TraceId, Kind)>) -> Load {
        let app = self.app;
        let load = Arc::new(Mutex::new(Load::default()));
        self.runtime.block_on(async {
            let client = reqwest::Client::new();
            let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let mut workers = Vec::new();
            for _ in 0..concurrency {
                let (client, next, load, probe) = (client.clone(), next.clone(), load.clone(), probe.clone());
                workers.push(tokio::spawn(async move {
                    loop {
                        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if n >= requests {
                            return;
                        }
                        let answer = client.get(format!("http://{app}/order/{n}")).send().await;
                        let answer = answer.unwrap_or_else(|error| panic!("request {n}: {error}"));
                        assert!(answer.status().is_success(), "request {n}: {}", answer.status());
                        let trace_id =
                            answer.headers().get("x-trace-id").and_then(|value| value.to_str().ok());
                        let trace_id =
                            trace_id.and_then(|hex| u128::from_str_radix(hex, 16).ok()).map(TraceId);
                        let trace_id = trace_id.unwrap_or_else(|| panic!("request {n}: no x-trace-id"));
                        let _ = answer.bytes().await;
                        let noted = load.lock().unwrap().note(n, requests, design(n), trace_id);
                        if let Some(kind) = noted {
                            let _ = probe.send((trace_id, kind));
                        }
                    }
                }));
            }
            for worker in workers {
                worker.await.expect("a load worker");
            }
        });
        let load = std::mem::take(&mut *load.lock().unwrap());
        load
    }

    /// Starts a retrieval of `trace_id` from the frontend (the
    /// application's call).
    pub fn fetch(&self, trace_id: TraceId) {
        TRACING.get().expect("the frontend's tracing").listener.fetch(trace_id);
    }

    pub fn stop(self) -> serde_json::Value {
        minitrace::flush();
        let stats = stats_json(TRACING.get().expect("the frontend's tracing"));
        drop(self.runtime);
        stats
    }
}

impl Load {
    /// Notes request `n`; the kind of trace it should leave in Jaeger, if any.
    fn note(&mut self, n: u64, requests: u64, design: super::Design, trace_id: TraceId) -> Option<Kind> {
        if n == 0 {
            self.first = trace_id;
        }
        if n + 1 == requests {
            self.last = trace_id;
        }
        let kind = match design {
            super::Design { slow: true, .. } => Kind::Slow,
            super::Design { fail: true, .. } => Kind::Failed,
            super::Design { flag: true, .. } => Kind::Flagged,
            _ => return None,
        };
        self.triggered.push((trace_id, kind));
        Some(kind)
    }
}
