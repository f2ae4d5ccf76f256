//! What the layers add to each request, in process (no network), with a
//! reporter that keeps only slow traces (`report_slow_traces_only(1 s)`:
//! every request here is fast, its trace thrown away) and the flight
//! recorder off: the cost a request that stays fast pays. Each figure is
//! the CPU time of the whole process (the collector thread included) per
//! request, less the time spent making the requests: they are made ahead,
//! a batch at a time, small enough to stay in the cache as a request a
//! server has just read would.
//!
//! - `server`: an axum router called as a tower service, its body read.
//!   Every row serves the same route with the same response; a row with
//!   the caller's `traceparent` serves the same request as its no-op
//!   baseline (the header costs axum and `http` something of their own).
//!   Beside them, what a thrown-away local request costs (a root, its
//!   local parent guard and one local span), the figure a request that
//!   stays fast should cost each service, and the floor of what the layer
//!   does: the `traceparent` read, the root, and the local parent of the
//!   service's `call`, of its future's poll and of the body's poll.
//! - `client`: a call through `ClientLayer` to a service that answers at
//!   once, under a local root thrown away, beside the same call through a
//!   no-op layer under the same root.
//!
//! ```sh
//! cargo bench -p minitrace-tower --features axum --bench server
//! ```

// `criterion_group!` defines an undocumented function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use minitrace::collector::{Config, Reporter, SpanContext, SpanId, SpanRecord, TraceId};
use minitrace::future::run_in_span;
use minitrace::local::LocalSpan;
use minitrace::Span;
use minitrace_tower::{breadcrumbs, ClientLayer, ServerLayer};
use tower::layer::util::Identity;
use tower::{service_fn, Layer, Service, ServiceExt};

/// Throws every span away (none reaches it: every trace is fast).
struct Discard;

impl Reporter for Discard {
    fn report(&mut self, _: &[SpanRecord]) {}
}

fn app() -> Router {
    Router::new().route("/users/{id}", get(|| async { "user" }))
}

fn request(traceparent: Option<&HeaderValue>) -> Request<Body> {
    let mut request = Request::get("/users/7");
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    request.body(Body::empty()).unwrap()
}

async fn serve(app: &mut Router, request: Request<Body>) -> usize {
    let response = ServiceExt::<Request<Body>>::ready(app).await.unwrap().call(request).await.unwrap();
    response.into_body().collect().await.unwrap().to_bytes().len()
}

/// CPU time used so far by `clock` (the process's, or this thread's).
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec to write to, and both CPU clocks
    // this is called with exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Inputs made at a time: enough that reading the clocks costs little per
/// run, few enough to stay in the cache.
const BATCH: u64 = 128;

/// The CPU time of the process over `iters` runs of `run`, each on an input
/// `make` made beforehand (a batch at a time; this thread's time making
/// them is left out).
fn timed<I, R>(iters: u64, make: impl Fn() -> I, mut run: impl FnMut(I) -> R) -> Duration {
    let mut inputs = Vec::with_capacity(BATCH as usize);
    let mut making = Duration::ZERO;
    let start = cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID);
    let mut left = iters;
    while left > 0 {
        let batch = left.min(BATCH);
        let made = cpu_time(libc::CLOCK_THREAD_CPUTIME_ID);
        inputs.extend((0..batch).map(|_| make()));
        making += cpu_time(libc::CLOCK_THREAD_CPUTIME_ID) - made;
        for input in inputs.drain(..) {
            criterion::black_box(run(input));
        }
        left -= batch;
    }
    (cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID) - start).saturating_sub(making)
}

fn server(c: &mut Criterion) {
    minitrace::set_reporter(Discard, Config::default().report_slow_traces_only(Duration::from_secs(1)));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let caller = SpanContext::new(TraceId::random(), SpanId::random()).encode_w3c_traceparent();
    let caller = HeaderValue::from_str(&caller).unwrap();
    let mut group = c.benchmark_group("server");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(30);

    // The request is made apart from the measurement: each row times the
    // service alone.
    let mut row = |name: &str, mut app: Router, traceparent: Option<&HeaderValue>| {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                timed(iters, || request(traceparent), |request| runtime.block_on(serve(&mut app, request)))
            })
        });
    };
    row("axum untraced", app(), None);
    // Any layer inside a router costs axum a boxed service and body: the
    // fair baseline of a traced router is one with a layer that does
    // nothing.
    row("axum + no-op layer", app().layer(Identity::new()), None);
    row("axum + no-op layer, caller's traceparent", app().layer(Identity::new()), Some(&caller));
    row("axum + ServerLayer, new trace", app().layer(ServerLayer::new()), None);
    row("axum + ServerLayer, caller's traceparent", app().layer(ServerLayer::new()), Some(&caller));

    group.bench_function("local request thrown away", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                || (),
                |()| {
                    let root = Span::root("GET /users/{id}", SpanContext::random());
                    let _guard = root.set_local_parent();
                    let _span = LocalSpan::enter_with_local_parent("handler");
                },
            )
        })
    });
    let mut headers = HeaderMap::new();
    headers.insert("traceparent", caller.clone());
    group.bench_function("floor: traceparent read, root, 3 local parents", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                || (),
                |()| {
                    let incoming = breadcrumbs::extract(criterion::black_box(&headers));
                    let root =
                        Span::root("GET /users/{id}", incoming.context.unwrap_or_else(SpanContext::random));
                    for _ in 0..3 {
                        run_in_span(&root, || criterion::black_box(()));
                    }
                },
            )
        })
    });
    group.finish();
}

fn client(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut group = c.benchmark_group("client");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(30);
    let answer = || {
        service_fn(|_: Request<Full<Bytes>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"user"))))
        })
    };
    let request =
        || Request::get("http://users.internal:8080/users/7").body(Full::new(Bytes::new())).unwrap();

    async fn call<S, B>(service: &mut S, request: Request<Full<Bytes>>) -> usize
    where
        S: Service<Request<Full<Bytes>>, Response = Response<B>>,
        S::Error: std::fmt::Debug,
        B: http_body::Body,
        B::Error: std::fmt::Debug,
    {
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        response.into_body().collect().await.unwrap().to_bytes().len()
    }

    let mut plain = Identity::new().layer(answer());
    group.bench_function("no-op layer, under a root thrown away", |b| {
        b.iter_custom(|iters| {
            timed(iters, request, |request| {
                let root = Span::root("request", SpanContext::random());
                let _guard = root.set_local_parent();
                runtime.block_on(call(&mut plain, request))
            })
        })
    });
    let mut traced = ClientLayer::new().layer(answer());
    group.bench_function("ClientLayer, under a root thrown away", |b| {
        b.iter_custom(|iters| {
            timed(iters, request, |request| {
                let root = Span::root("request", SpanContext::random());
                let _guard = root.set_local_parent();
                runtime.block_on(call(&mut traced, request))
            })
        })
    });
    group.finish();
}

criterion_group!(benches, server, client);
criterion_main!(benches);
