//! An HTTP service (axum on tokio) whose every request is one trace: its
//! root from `minitrace-tower`'s `ServerLayer` (continuing the caller's
//! `traceparent`, named after the route, open until the response body is
//! sent), the framework's span (tower-http's `TraceLayer`, a `tracing`
//! span bridged by `minitrace-tracing`), the handlers' `#[trace]` spans,
//! and the spans of a database driver instrumented with `tracing`; its log
//! lines carry their trace and span ids (`minitrace-log`).
//!
//! It serves on 127.0.0.1 at a free port, sends itself a few requests,
//! prints each one's trace id, reports to a Jaeger agent on
//! 127.0.0.1:6831 and exits.
//!
//! ```sh
//! bash scripts/jaeger.sh                        # a local Jaeger (without one, traces are lost, counted)
//! cargo run --release --example axum_service
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use axum::extract::{Path, Request};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use log::{LevelFilter, Log, Metadata, Record};
use minitrace::collector::{Config, SpanContext, SpanId, TraceId};
use minitrace::prelude::*;
use minitrace_jaeger::JaegerReporter;
use minitrace_tower::ServerLayer;
use minitrace_tracing::MinitraceLayer;
use tower_http::trace::TraceLayer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Layer, SubscriberExt};

/// A database driver, instrumented with `tracing` as sqlx is: it knows
/// nothing of minitrace.
mod db {
    use std::time::Duration;

    /// A pooled connection, held for one query.
    pub struct Connection;

    #[tracing::instrument(level = "debug")]
    async fn acquire() -> Connection {
        tokio::time::sleep(Duration::from_micros(300)).await;
        Connection
    }

    /// Runs `statement` for `key`: a row, unless the key is 404.
    #[tracing::instrument(skip(statement), fields(db.system = "sqlite", db.statement = statement))]
    pub async fn query(statement: &'static str, key: u64) -> Option<String> {
        let _connection = acquire().await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        let row = (key != 404).then(|| format!("user-{key}"));
        tracing::debug!(rows = u8::from(row.is_some()), "fetched");
        row
    }
}

#[trace(short_name = true)]
async fn get_user(Path(id): Path<u64>) -> Result<String, StatusCode> {
    match db::query("SELECT name FROM users WHERE id = ?", id).await {
        Some(name) => {
            log::info!("user {id} is {name}");
            Ok(render(&name, 0))
        }
        None => {
            log::warn!("no user {id}");
            Err(StatusCode::NOT_FOUND)
        }
    }
}

#[trace(short_name = true)]
async fn get_orders(Path(id): Path<u64>) -> String {
    // Two queries at once, each its own span under this handler's.
    let (name, orders) = tokio::join!(
        db::query("SELECT name FROM users WHERE id = ?", id),
        db::query("SELECT count(*) FROM orders WHERE user_id = ?", id),
    );
    log::info!("orders of user {id} listed");
    render(&name.unwrap_or_default(), usize::from(orders.is_some()) * 3)
}

#[trace(short_name = true, properties = { "orders": "{orders}" })]
fn render(name: &str, orders: usize) -> String {
    format!("{name}: {orders} orders\n")
}

/// Tells the caller its request's trace id (the root's, the local parent
/// while the request is handled), so that it can find the trace.
async fn trace_id_header(request: Request, next: Next) -> Response {
    let trace_id = SpanContext::current_local_parent().map(|context| context.trace_id);
    let mut response = next.run(request).await;
    if let Some(trace_id) = trace_id.and_then(|id| HeaderValue::from_str(&id.to_string()).ok()) {
        response.headers_mut().insert("x-trace-id", trace_id);
    }
    response
}

/// The application's own logger; `minitrace_log::Logger` wraps it.
struct Stderr;

impl Log for Stderr {
    fn enabled(&self, _: &Metadata) -> bool {
        true
    }

    fn log(&self, record: &Record) {
        eprintln!("[{:<5} {}] {}", record.level(), record.target(), record.args());
    }

    fn flush(&self) {}
}

/// A blocking HTTP/1.1 GET of `path`: the status and the `x-trace-id`.
fn http_get(server: SocketAddr, path: &str, traceparent: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(server)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let extra = traceparent.map(|value| format!("traceparent: {value}\r\n")).unwrap_or_default();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n{extra}\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.split(' ').nth(1).and_then(|status| status.parse().ok()).unwrap_or(0);
    let trace_id = response
        .lines()
        .find_map(|line| line.strip_prefix("x-trace-id: "))
        .unwrap_or("none")
        .trim()
        .to_string();
    Ok((status, trace_id))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let logger = minitrace_log::Logger::new(Stderr).with_ids_stamped();
    log::set_boxed_logger(Box::new(logger)).expect("no other logger");
    log::set_max_level(LevelFilter::Info);

    // tower-http's request span is at DEBUG, as is the driver's `acquire`.
    let filter = Targets::new()
        .with_target("tower_http", tracing::Level::DEBUG)
        .with_target("axum_service", tracing::Level::DEBUG)
        .with_default(tracing::Level::INFO);
    let subscriber = tracing_subscriber::registry().with(MinitraceLayer::new().with_filter(filter));
    tracing::subscriber::set_global_default(subscriber).expect("no other subscriber");

    let reporter =
        JaegerReporter::new("127.0.0.1:6831".parse().unwrap(), "axum-service").expect("a UDP socket");
    let stats = reporter.stats();
    minitrace::set_reporter(reporter, Config::default());

    let app = Router::new()
        .route("/users/{id}", get(get_user))
        .route("/users/{id}/orders", get(get_orders))
        .layer(TraceLayer::new_for_http())
        .layer(middleware::from_fn(trace_id_header))
        // Outermost: a root per request, named `GET /users/{id}` (inside
        // the router, it sees the route), under which everything below
        // starts, tower-http's span included.
        .layer(ServerLayer::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let server = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        let shutdown = async move { stopped.await.unwrap_or(()) };
        axum::serve(listener, app).with_graceful_shutdown(shutdown).await
    });
    log::info!("serving on http://{server}");

    // A caller with a trace of its own: the service continues it.
    let caller = SpanContext::new(TraceId::random(), SpanId::random()).encode_w3c_traceparent();
    let requests = [("/users/7", Some(caller.clone())), ("/users/7/orders", None), ("/users/404", None)];
    let answers = tokio::task::spawn_blocking(move || {
        requests.map(|(path, traceparent)| (path, http_get(server, path, traceparent.as_deref())))
    })
    .await
    .unwrap();
    for (path, answer) in answers {
        match answer {
            Ok((status, trace_id)) => println!("trace {trace_id} GET {path} -> {status}"),
            Err(error) => println!("GET {path} failed: {error}"),
        }
    }
    println!("the caller's traceparent was {caller}");

    let _ = stop.send(());
    if let Ok(Err(error)) = serving.await {
        println!("server error: {error}");
    }
    minitrace::flush();
    let sent = stats.get();
    println!("sent {} spans to Jaeger ({} lost)", sent.spans_sent, sent.spans_failed);
    println!("each trace: http://127.0.0.1:16686/api/traces/<trace id>");
}
