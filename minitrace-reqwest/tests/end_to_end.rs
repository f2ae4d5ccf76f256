//! One trace across three services on 127.0.0.1, each traced by the
//! middlewares, reported to one `TestReporter`:
//!
//! - a front service (axum, `ServerLayer` inside its router) whose handler
//!   calls the other two;
//! - an inventory service (hyper through hyper-util, `ServerLayer`), called
//!   through reqwest with `TraceMiddleware`; it answers with a streamed body;
//! - a gRPC inventory (tonic, `ServerLayer`; a service written by hand with
//!   prost messages), called through a tonic `Channel` under `ClientLayer`.
//!
//! The test sends the front a request as a caller in another process would
//! (a `traceparent`, a `tracestate` with the caller's breadcrumb) and reads
//! the tree back. Spans reach the reporter when their roots end, which for
//! a server is after its client has read the answer: each test waits for
//! the spans it checks (bounded), then checks their contents.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use http::uri::PathAndQuery;
use http::StatusCode;
use http_body_util::{BodyExt, Full, StreamBody};
use minitrace::collector::{
    Config, SpanContext, SpanId, SpanKind, SpanRecord, SpanStatus, TestReporter, TraceId,
};
use minitrace::future::StreamExt as _;
use minitrace::local::LocalSpan;
use minitrace::trace;
use minitrace_remote::breadcrumbs;
use minitrace_reqwest::TraceMiddleware;
use minitrace_tower::{keys, ClientLayer, ServerLayer, TraceClient};
use parking_lot::Mutex;
use reqwest_middleware::ClientWithMiddleware;
use tonic_prost::ProstCodec;
use tower::ServiceBuilder;

/// The reporter's records, and this process's listener (a port held
/// open, so that no one else takes it).
struct Setup {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
    listener: SocketAddr,
    _held: std::net::TcpListener,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listener = held.local_addr().unwrap();
        breadcrumbs::set_local_listener(Some(listener));
        let (reporter, spans) = TestReporter::new();
        minitrace::set_reporter(reporter, Config::default());
        Setup { spans, listener, _held: held }
    })
}

/// The records of `trace_id`, once every name of `expected` is among them
/// (waiting at most 10 s: the servers' roots end as their bodies end).
fn wait_for(trace_id: TraceId, expected: &[&str]) -> Vec<SpanRecord> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        minitrace::flush();
        let records: Vec<SpanRecord> =
            setup().spans.lock().iter().filter(|record| record.trace_id == trace_id).cloned().collect();
        let missing: Vec<_> =
            expected.iter().filter(|name| !records.iter().any(|record| record.name == **name)).collect();
        if missing.is_empty() {
            return records;
        }
        assert!(Instant::now() < deadline, "missing {missing:?} in {records:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn named<'a>(records: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    let mut found = records.iter().filter(|record| record.name == name);
    let record = found.next().unwrap_or_else(|| panic!("no span {name} in {records:#?}"));
    assert!(found.next().is_none(), "two spans {name}");
    record
}

fn property<'a>(record: &'a SpanRecord, key: &str) -> Option<&'a str> {
    record.properties.iter().rev().find(|(k, _)| k == key).map(|(_, value)| value.as_ref())
}

/// The parent of `record`'s parent, which must be a poll of a body's
/// stream (`enter_on_poll`).
fn grandparent(records: &[SpanRecord], record: &SpanRecord) -> SpanId {
    let parent = records.iter().find(|parent| parent.span_id == record.parent_id).expect("a parent");
    assert_eq!(parent.name, "poll", "{} is made in a poll of its stream", record.name);
    parent.parent_id
}

fn end(record: &SpanRecord) -> u64 {
    record.begin_time_unix_ns + record.duration_ns
}

/// Every span's parent is a span of the trace, but the root's, which is
/// the caller's span.
fn assert_one_tree(records: &[SpanRecord], caller: SpanId) {
    for record in records {
        assert!(
            record.parent_id == caller || records.iter().any(|parent| parent.span_id == record.parent_id),
            "{} has no parent in the trace: {records:#?}",
            record.name
        );
    }
}

/// `count` chunks, a millisecond apart, each made under a local span
/// `{name} {n}`, inside a local span `poll` per poll of the stream
/// (`enter_on_poll`), under the local parent where the body is polled: its
/// server's root.
fn chunks(name: &'static str, count: u32) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    futures::stream::unfold(0, move |n| async move {
        if n == count {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        let chunk = {
            let _making = LocalSpan::enter_with_local_parent(format!("{name} {n}"));
            Bytes::from(format!("{name} {n}\n"))
        };
        Some((Ok(chunk), n + 1))
    })
    .enter_on_poll("poll")
}

// ---- The inventory over HTTP: hyper, through hyper-util. ----

type BoxBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn inventory(
    request: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<BoxBody>, Infallible> {
    let seen = request.headers().get("traceparent").cloned();
    let mut response = if request.uri().path() == "/fail" {
        let mut response = http::Response::new(Full::new(Bytes::from_static(b"out of stock\n")).boxed());
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        response
    } else {
        let frames = chunks("stock", 3).map(|chunk| chunk.map(hyper::body::Frame::data));
        http::Response::new(BodyExt::boxed(StreamBody::new(frames)))
    };
    if let Some(seen) = seen {
        response.headers_mut().insert("x-seen-traceparent", seen);
    }
    Ok(response)
}

async fn start_inventory() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            // Named apart from the callers' spans (`GET /inventory/7`).
            let layer =
                ServerLayer::new().with_name(|request| format!("inventory {}", request.uri.path()).into());
            let service = ServiceBuilder::new().layer(layer).service_fn(inventory);
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                hyper_util::rt::TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service),
            ));
        }
    });
    address
}

// ---- The inventory over gRPC: tonic, a service written by hand. ----

#[derive(Clone, PartialEq, prost::Message)]
struct Item {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    name: String,
}

/// `test.Inventory`: `Check` answers an item (NOT_FOUND for 404, as a
/// trailers-only response); `Watch` streams two, then fails (INTERNAL, in
/// the trailers) for 500.
#[derive(Clone, Debug)]
struct GrpcInventory;

impl tonic::server::NamedService for GrpcInventory {
    const NAME: &'static str = "test.Inventory";
}

type GrpcFuture = Pin<Box<dyn Future<Output = Result<http::Response<tonic::body::Body>, Infallible>> + Send>>;

impl tower::Service<http::Request<tonic::body::Body>> for GrpcInventory {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = GrpcFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> GrpcFuture {
        match request.uri().path() {
            "/test.Inventory/Check" => Box::pin(async move {
                Ok(tonic::server::Grpc::new(ProstCodec::default()).unary(Check, request).await)
            }),
            "/test.Inventory/Watch" => Box::pin(async move {
                Ok(tonic::server::Grpc::new(ProstCodec::default()).server_streaming(Watch, request).await)
            }),
            _ => Box::pin(async { Ok(tonic::Status::unimplemented("no such method").into_http()) }),
        }
    }
}

struct Check;

impl tonic::server::UnaryService<Item> for Check {
    type Response = Item;
    type Future = std::future::Ready<Result<tonic::Response<Item>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Item>) -> Self::Future {
        let id = request.into_inner().id;
        let _lookup = LocalSpan::enter_with_local_parent("lookup").with_property(|| ("item", id.to_string()));
        std::future::ready(match id {
            404 => Err(tonic::Status::not_found("no such item")),
            id => Ok(tonic::Response::new(Item { id, name: format!("item {id}") })),
        })
    }
}

struct Watch;

impl tonic::server::ServerStreamingService<Item> for Watch {
    type Response = Item;
    type ResponseStream = futures::stream::Iter<std::vec::IntoIter<Result<Item, tonic::Status>>>;
    type Future = std::future::Ready<Result<tonic::Response<Self::ResponseStream>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Item>) -> Self::Future {
        let id = request.into_inner().id;
        let mut items: Vec<_> = (0..2).map(|n| Ok(Item { id, name: format!("change {n}") })).collect();
        if id == 500 {
            items.push(Err(tonic::Status::internal("the watch broke")));
        }
        std::future::ready(Ok(tonic::Response::new(futures::stream::iter(items))))
    }
}

async fn start_grpc() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    // Named apart from the callers' spans (`test.Inventory/Check`).
    let layer = ServerLayer::new().with_name(|request| format!("{}/server", &request.uri.path()[1..]).into());
    let server = tonic::transport::Server::builder().layer(layer).add_service(GrpcInventory);
    tokio::spawn(server.serve_with_incoming(incoming));
    address
}

type GrpcClient = tonic::client::Grpc<TraceClient<tonic::transport::Channel>>;

async fn grpc_check(client: &mut GrpcClient, id: u64) -> Result<Item, tonic::Status> {
    client.ready().await.map_err(|_| tonic::Status::unavailable("not ready"))?;
    let request = tonic::Request::new(Item { id, name: String::new() });
    let path = PathAndQuery::from_static("/test.Inventory/Check");
    Ok(client.unary(request, path, ProstCodec::default()).await?.into_inner())
}

async fn grpc_watch(client: &mut GrpcClient, id: u64) -> Result<Vec<Item>, tonic::Status> {
    client.ready().await.map_err(|_| tonic::Status::unavailable("not ready"))?;
    let request = tonic::Request::new(Item { id, name: String::new() });
    let path = PathAndQuery::from_static("/test.Inventory/Watch");
    let mut stream = client.server_streaming(request, path, ProstCodec::default()).await?.into_inner();
    let mut items = Vec::new();
    while let Some(item) = stream.message().await? {
        items.push(item);
    }
    Ok(items)
}

// ---- The front: axum, calling both. ----

#[derive(Clone)]
struct Front {
    http: ClientWithMiddleware,
    grpc: GrpcClient,
    inventory: SocketAddr,
}

#[trace(short_name = true)]
async fn get_order(front: State<Front>, id: Path<u64>) -> Response {
    let Front { http, mut grpc, inventory } = front.0;
    let id = id.0;
    let stock = http.get(format!("http://{inventory}/inventory/{id}?token=secret")).send().await.unwrap();
    let seen = stock.headers().get("x-seen-traceparent").cloned();
    let stock = stock.text().await.unwrap();
    let item = grpc_check(&mut grpc, id).await.unwrap();
    assert_eq!(item.name, format!("item {id}"));
    let body = axum::body::Body::from_stream(
        futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from(stock)) })
            .chain(chunks("line", 3)),
    );
    let mut response = body.into_response();
    if let Some(seen) = seen {
        response.headers_mut().insert("x-downstream-traceparent", seen);
    }
    response
}

#[trace(short_name = true)]
async fn get_failing(front: State<Front>) -> Response {
    let Front { http, mut grpc, inventory } = front.0;
    let stock = http.get(format!("http://{inventory}/fail")).send().await.unwrap();
    assert_eq!(stock.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(grpc_check(&mut grpc, 404).await.unwrap_err().code(), tonic::Code::NotFound);
    assert_eq!(grpc_watch(&mut grpc, 500).await.unwrap_err().code(), tonic::Code::Internal);
    (StatusCode::INTERNAL_SERVER_ERROR, "no order\n").into_response()
}

/// The three services; the front's address.
async fn start() -> (SocketAddr, SocketAddr) {
    setup();
    let inventory = start_inventory().await;
    let grpc = start_grpc().await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc}")).unwrap().connect_lazy();
    let front = Front {
        http: reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
            .with(TraceMiddleware::new())
            .build(),
        grpc: tonic::client::Grpc::new(ServiceBuilder::new().layer(ClientLayer::new()).service(channel)),
        inventory,
    };
    let app = axum::Router::new()
        .route("/orders/{id}", axum::routing::get(get_order))
        .route("/failing", axum::routing::get(get_failing))
        .with_state(front)
        .layer(ServerLayer::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (address, inventory)
}

/// A caller in another process: its span, and its breadcrumb.
fn caller() -> SpanContext {
    SpanContext::new(TraceId::random(), SpanId::random())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_across_three_services() {
    let (front, inventory) = start().await;
    let listener = setup().listener.to_string();
    let caller = caller();
    let tracestate = format!("vendor=opaque,mt={listener}");
    let response = reqwest::Client::new()
        .get(format!("http://{front}/orders/7"))
        .header("traceparent", caller.encode_w3c_traceparent())
        .header("tracestate", &tracestate)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[breadcrumbs::LISTENER_HEADER], listener.as_str());
    let body = response.text().await.unwrap();
    assert_eq!(body, "stock 0\nstock 1\nstock 2\nline 0\nline 1\nline 2\n");

    let records = tokio::task::spawn_blocking(move || {
        wait_for(
            caller.trace_id,
            &["GET /orders/{id}", "inventory /inventory/7", "test.Inventory/Check/server"],
        )
    })
    .await
    .unwrap();
    assert_one_tree(&records, caller.span_id);

    // The front's root: under the caller's span, with its tracestate and
    // breadcrumb.
    let root = named(&records, "GET /orders/{id}");
    assert_eq!(root.parent_id, caller.span_id);
    assert_eq!(root.kind(), SpanKind::Server);
    assert_eq!(root.status(), SpanStatus::Unset);
    assert_eq!(root.tracestate(), Some(tracestate.as_str()));
    assert_eq!(property(root, breadcrumbs::FROM_KEY), Some(listener.as_str()));
    assert_eq!(property(root, keys::HTTP_ROUTE), Some("/orders/{id}"));
    assert_eq!(property(root, keys::URL_PATH), Some("/orders/7"));
    assert_eq!(property(root, keys::HTTP_RESPONSE_STATUS_CODE), Some("200"));
    let handler = named(&records, "get_order");
    assert_eq!(handler.parent_id, root.span_id);
    // The front's streamed body: made under its root, which outlived it.
    for line in ["line 0", "line 1", "line 2"] {
        assert_eq!(grandparent(&records, named(&records, line)), root.span_id, "{line}");
    }
    assert!(end(root) >= end(named(&records, "line 2")), "the root ends after its body's last chunk");

    // reqwest, through the middleware, to the inventory.
    let call = named(&records, "GET /inventory/7");
    assert_eq!(call.kind(), SpanKind::Client);
    assert_eq!(call.parent_id, handler.span_id);
    assert_eq!(call.status(), SpanStatus::Unset);
    assert_eq!(property(call, keys::SERVER_ADDRESS), Some("127.0.0.1"));
    assert_eq!(property(call, keys::SERVER_PORT), Some(inventory.port().to_string().as_str()));
    assert_eq!(property(call, keys::HTTP_RESPONSE_STATUS_CODE), Some("200"));
    assert_eq!(property(call, breadcrumbs::TO_KEY), Some(listener.as_str()));
    for record in &records {
        assert!(record.properties.iter().all(|(_, value)| !value.contains("secret")), "{record:?}");
    }

    // The inventory's root: under the call, its tracestate our breadcrumb
    // first, then the caller's other entries; its streamed body under it.
    let served = named(&records, "inventory /inventory/7");
    assert_eq!(served.parent_id, call.span_id);
    assert_eq!(served.kind(), SpanKind::Server);
    assert_eq!(served.status(), SpanStatus::Unset);
    assert_eq!(served.tracestate(), Some(format!("mt={listener},vendor=opaque").as_str()));
    assert_eq!(property(served, breadcrumbs::FROM_KEY), Some(listener.as_str()));
    assert_eq!(property(served, keys::URL_PATH), Some("/inventory/7"));
    for chunk in ["stock 0", "stock 1", "stock 2"] {
        assert_eq!(grandparent(&records, named(&records, chunk)), served.span_id, "{chunk}");
    }
    assert!(end(served) >= end(named(&records, "stock 2")), "the root ends after its body's last chunk");

    // tonic, under the client layer, to the gRPC inventory.
    let check = named(&records, "test.Inventory/Check");
    assert_eq!(check.kind(), SpanKind::Client);
    assert_eq!(check.parent_id, handler.span_id);
    assert_eq!(check.status(), SpanStatus::Unset);
    assert_eq!(property(check, keys::RPC_GRPC_STATUS_CODE), Some("0"), "from the trailers");
    assert_eq!(property(check, breadcrumbs::TO_KEY), Some(listener.as_str()));
    let checked = named(&records, "test.Inventory/Check/server");
    assert_eq!(checked.parent_id, check.span_id);
    assert_eq!(checked.kind(), SpanKind::Server);
    assert_eq!(checked.status(), SpanStatus::Unset);
    assert_eq!(property(checked, keys::RPC_SERVICE), Some("test.Inventory"));
    assert_eq!(property(checked, keys::RPC_METHOD), Some("Check"));
    assert_eq!(property(checked, keys::RPC_GRPC_STATUS_CODE), Some("0"));
    assert_eq!(property(checked, breadcrumbs::FROM_KEY), Some(listener.as_str()));
    assert_eq!(named(&records, "lookup").parent_id, checked.span_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_and_non_ok_grpc_statuses_are_errors() {
    let (front, _) = start().await;
    let caller = caller();
    let response = reqwest::Client::new()
        .get(format!("http://{front}/failing"))
        .header("traceparent", caller.encode_w3c_traceparent())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 500);
    response.text().await.unwrap();

    let expected = [
        "GET /failing",
        "inventory /fail",
        "test.Inventory/Check/server",
        "test.Inventory/Watch/server",
        "test.Inventory/Watch",
    ];
    let records = tokio::task::spawn_blocking(move || wait_for(caller.trace_id, &expected)).await.unwrap();
    assert_one_tree(&records, caller.span_id);
    let http_500 = SpanStatus::error("HTTP 500 Internal Server Error");
    let root = named(&records, "GET /failing");
    assert_eq!(root.status(), http_500, "a 5xx answer");
    let handler = named(&records, "get_failing");
    assert_eq!(handler.parent_id, root.span_id);

    let call = named(&records, "GET /fail");
    assert_eq!((call.kind(), call.parent_id), (SpanKind::Client, handler.span_id));
    assert_eq!(call.status(), http_500, "the client's side of the 500");
    let served = named(&records, "inventory /fail");
    assert_eq!(served.parent_id, call.span_id);
    assert_eq!(served.status(), http_500, "the server's side of the 500");

    // NOT_FOUND in a trailers-only answer; INTERNAL in the trailers after
    // two messages.
    for (method, status) in [("Check", "gRPC NOT_FOUND"), ("Watch", "gRPC INTERNAL")] {
        let call = named(&records, &format!("test.Inventory/{method}"));
        assert_eq!((call.kind(), call.parent_id), (SpanKind::Client, handler.span_id), "{method}");
        assert_eq!(call.status(), SpanStatus::error(status), "client {method}");
        let served = named(&records, &format!("test.Inventory/{method}/server"));
        assert_eq!((served.kind(), served.parent_id), (SpanKind::Server, call.span_id), "{method}");
        assert_eq!(served.status(), SpanStatus::error(status), "server {method}");
        let code = if method == "Check" { "5" } else { "13" };
        assert_eq!(property(served, keys::RPC_GRPC_STATUS_CODE), Some(code));
        assert_eq!(property(call, keys::RPC_GRPC_STATUS_CODE), Some(code));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsampled_caller_records_nothing_in_any_service() {
    let (front, _) = start().await;
    let caller = caller();
    let unsampled = caller.encode_w3c_traceparent_with_sampled(false);
    let response = reqwest::Client::new()
        .get(format!("http://{front}/orders/9001"))
        .header("traceparent", &unsampled)
        .header("tracestate", "vendor=opaque")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The decision went on to the inventory, through the middleware.
    assert_eq!(response.headers()["x-downstream-traceparent"], unsampled.as_str());
    response.text().await.unwrap();

    // A sampled request after it, through the same services: once its
    // trace is in, whatever the first would have recorded would be too.
    let later = self::caller();
    let response = reqwest::Client::new()
        .get(format!("http://{front}/orders/9002"))
        .header("traceparent", later.encode_w3c_traceparent())
        .send()
        .await
        .unwrap();
    response.text().await.unwrap();
    tokio::task::spawn_blocking(move || {
        wait_for(
            later.trace_id,
            &["GET /orders/{id}", "inventory /inventory/9002", "test.Inventory/Check/server"],
        )
    })
    .await
    .unwrap();
    let spans = setup().spans.lock();
    assert!(spans.iter().all(|record| record.trace_id != caller.trace_id));
    let of_9001 = |record: &&SpanRecord| {
        record.name.contains("9001") || record.properties.iter().any(|(_, value)| value.contains("9001"))
    };
    let recorded: Vec<_> = spans.iter().filter(of_9001).collect();
    assert!(recorded.is_empty(), "no service recorded the unsampled request: {recorded:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_trace_context_starts_a_fresh_root_across_the_services() {
    let (front, _) = start().await;
    let valid = caller();
    let valid_traceparent = valid.encode_w3c_traceparent();
    // The order's id, `traceparent` and `tracestate`.
    type Case<'a> = (u64, &'a [u8], Option<&'a [u8]>);
    let cases: [Case; 3] = [
        (9101, b"00-not-a-traceparent-01", None),
        (9102, b"00-\xff\xfe\xfd-zz", Some(b"mt=127.0.0.1:1")),
        (9103, valid_traceparent.as_bytes(), Some(b"=,\xff broken")),
    ];
    for (id, traceparent, tracestate) in cases {
        let mut request = reqwest::Client::new()
            .get(format!("http://{front}/orders/{id}"))
            .header("traceparent", reqwest::header::HeaderValue::from_bytes(traceparent).unwrap());
        if let Some(tracestate) = tracestate {
            request =
                request.header("tracestate", reqwest::header::HeaderValue::from_bytes(tracestate).unwrap());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{id}");
        response.text().await.unwrap();

        let path = format!("/orders/{id}");
        let root = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                minitrace::flush();
                let found = setup()
                    .spans
                    .lock()
                    .iter()
                    .find(|record| {
                        record.name == "GET /orders/{id}" && property(record, keys::URL_PATH) == Some(&path)
                    })
                    .cloned();
                match found {
                    Some(root) => return root,
                    None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                    None => panic!("no root for {path}"),
                }
            }
        })
        .await
        .unwrap();
        let continued = id == 9103;
        assert_eq!(root.trace_id == valid.trace_id, continued, "{id}");
        assert_eq!(root.parent_id, if continued { valid.span_id } else { SpanId(0) }, "{id}");
        assert_eq!(root.tracestate(), None, "{id}");
        assert_eq!(property(&root, breadcrumbs::FROM_KEY), None, "{id}");
        let inventory = format!("inventory /inventory/{id}");
        let records = tokio::task::spawn_blocking(move || {
            wait_for(root.trace_id, &[&inventory, "test.Inventory/Check/server"])
        })
        .await
        .unwrap();
        assert_one_tree(&records, if continued { valid.span_id } else { SpanId(0) });
    }
}
