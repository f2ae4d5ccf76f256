//! What `ServerLayer` adds to each request of an axum service, in process
//! (no network: the router called as a tower service, its body read), with
//! a reporter that keeps only slow traces (`report_slow_traces_only(1 s)`:
//! every request here is fast, its trace thrown away) and the flight
//! recorder off. Beside it, what a thrown-away local request costs
//! (a root, its local parent guard and one local span), the figure a
//! request that stays fast should cost each service.
//!
//! ```sh
//! cargo bench -p minitrace-tower --features axum --bench server
//! ```

// `criterion_group!` defines an undocumented function.
#![allow(missing_docs)]

use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use criterion::{criterion_group, criterion_main, Criterion};
use http::Request;
use http_body_util::BodyExt;
use minitrace::collector::{Config, Reporter, SpanContext, SpanId, SpanRecord, TraceId};
use minitrace::local::LocalSpan;
use minitrace::Span;
use minitrace_tower::ServerLayer;
use tower::{Service, ServiceExt};

/// Throws every span away (none reaches it: every trace is fast).
struct Discard;

impl Reporter for Discard {
    fn report(&mut self, _: &[SpanRecord]) {}
}

fn app() -> Router {
    Router::new().route("/users/{id}", get(|| async { "user" }))
}

fn request(traceparent: Option<&str>) -> Request<Body> {
    let mut request = Request::get("/users/7");
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    request.body(Body::empty()).unwrap()
}

async fn serve(app: &mut Router, traceparent: Option<&str>) -> usize {
    let response =
        ServiceExt::<Request<Body>>::ready(app).await.unwrap().call(request(traceparent)).await.unwrap();
    response.into_body().collect().await.unwrap().to_bytes().len()
}

fn server(c: &mut Criterion) {
    minitrace::set_reporter(Discard, Config::default().report_slow_traces_only(Duration::from_secs(1)));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let caller = SpanContext::new(TraceId::random(), SpanId::random()).encode_w3c_traceparent();
    let mut group = c.benchmark_group("server");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(30);

    let mut untraced = app();
    group.bench_function("axum untraced", |b| b.iter(|| runtime.block_on(serve(&mut untraced, None))));
    // Any layer inside a router costs axum a boxed service and body: the
    // fair baseline of a traced router is one with a layer that does
    // nothing.
    let mut identity = app().layer(tower::layer::util::Identity::new());
    group.bench_function("axum + no-op layer", |b| b.iter(|| runtime.block_on(serve(&mut identity, None))));
    let mut traced = app().layer(ServerLayer::new());
    group.bench_function("axum + ServerLayer, new trace", |b| {
        b.iter(|| runtime.block_on(serve(&mut traced, None)))
    });
    group.bench_function("axum + ServerLayer, caller's traceparent", |b| {
        b.iter(|| runtime.block_on(serve(&mut traced, Some(&caller))))
    });
    group.bench_function("local request thrown away", |b| {
        b.iter(|| {
            let root = Span::root("GET /users/{id}", SpanContext::random());
            let _guard = root.set_local_parent();
            let _span = LocalSpan::enter_with_local_parent("handler");
        })
    });
    group.finish();
}

criterion_group!(benches, server);
criterion_main!(benches);
