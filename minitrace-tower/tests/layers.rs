//! The layers in process, without a network: each request through a
//! `tower::service_fn`, its trace read back from a `TestReporter`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use minitrace::collector::{
    Config, SpanContext, SpanId, SpanKind, SpanRecord, SpanStatus, TestReporter, TraceId,
};
use minitrace::local::LocalSpan;
use minitrace::Span;
use minitrace_remote::breadcrumbs;
use minitrace_tower::{keys, ClientLayer, ServerLayer};
use parking_lot::Mutex;
use tower::{service_fn, Layer, ServiceExt};

type Frame = http_body::Frame<Bytes>;
/// A body of frames made beforehand.
type Frames = StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame, Infallible>>>>;
/// A malformed case: its name, `traceparent`, `tracestate`, and whether the trace goes on.
type Case = (&'static str, Vec<u8>, Option<Vec<u8>>, bool);

/// This process's listener, set once for every test of the file.
const LISTENER: &str = "127.0.0.1:7001";

fn reported() -> Arc<Mutex<Vec<SpanRecord>>> {
    static SPANS: OnceLock<Arc<Mutex<Vec<SpanRecord>>>> = OnceLock::new();
    SPANS
        .get_or_init(|| {
            breadcrumbs::set_local_listener(Some(LISTENER.parse().unwrap()));
            let (reporter, spans) = TestReporter::new();
            minitrace::set_reporter(reporter, Config::default());
            spans
        })
        .clone()
}

fn trace(trace_id: TraceId) -> Vec<SpanRecord> {
    let spans = reported();
    minitrace::flush();
    let spans = spans.lock();
    spans.iter().filter(|record| record.trace_id == trace_id).cloned().collect()
}

fn named<'a>(records: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    records
        .iter()
        .find(|record| record.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {records:#?}"))
}

fn property<'a>(record: &'a SpanRecord, key: &str) -> Option<&'a str> {
    record.properties.iter().rev().find(|(k, _)| k == key).map(|(_, value)| value.as_ref())
}

fn end(record: &SpanRecord) -> u64 {
    record.begin_time_unix_ns + record.duration_ns
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

#[test]
fn a_request_continues_its_caller_and_its_root_lasts_until_the_body_is_sent() {
    reported();
    let caller = SpanContext::new(TraceId::random(), SpanId::random());
    let service = ServerLayer::new().layer(service_fn(|request: Request<Empty<Bytes>>| async move {
        // A handler's span, under the root.
        let _handler = LocalSpan::enter_with_local_parent("handler");
        let path = request.uri().path().to_owned();
        let chunks = (0..3).map(move |n| {
            // Made while the body is polled: under the root too.
            let _chunk = LocalSpan::enter_with_local_parent(format!("chunk {n}"));
            Ok::<_, Infallible>(Frame::data(Bytes::from(format!("{path} {n}\n"))))
        });
        Ok::<_, Infallible>(Response::new(StreamBody::new(futures::stream::iter(chunks))))
    }));
    let request = Request::get("/users/7?token=secret")
        .header("traceparent", caller.encode_w3c_traceparent())
        .header("tracestate", "vendor=opaque,mt=127.0.0.1:9")
        .body(Empty::new())
        .unwrap();
    let response = runtime().block_on(service.oneshot(request)).unwrap();
    assert_eq!(response.headers()[breadcrumbs::LISTENER_HEADER], LISTENER);
    let (_, body) = response.into_parts();
    let sent = runtime().block_on(body.collect()).unwrap().to_bytes();
    assert_eq!(sent, "/users/7 0\n/users/7 1\n/users/7 2\n");

    let records = trace(caller.trace_id);
    let root = named(&records, "GET /users/7");
    assert_eq!(root.parent_id, caller.span_id, "the caller's span is the root's parent");
    assert_eq!(root.kind(), SpanKind::Server);
    assert_eq!(root.status(), SpanStatus::Unset);
    assert_eq!(root.tracestate(), Some("vendor=opaque,mt=127.0.0.1:9"));
    assert_eq!(property(root, breadcrumbs::FROM_KEY), Some("127.0.0.1:9"));
    assert_eq!(property(root, keys::HTTP_REQUEST_METHOD), Some("GET"));
    assert_eq!(property(root, keys::URL_PATH), Some("/users/7"), "no query");
    assert_eq!(property(root, keys::HTTP_RESPONSE_STATUS_CODE), Some("200"));
    assert!(root.properties.iter().all(|(_, value)| !value.contains("secret")));
    assert_eq!(named(&records, "handler").parent_id, root.span_id);
    for chunk in ["chunk 0", "chunk 1", "chunk 2"] {
        assert_eq!(named(&records, chunk).parent_id, root.span_id, "{chunk}");
    }
    assert!(end(root) >= end(named(&records, "chunk 2")), "the root ends after the last chunk");
}

/// A gRPC answer: `grpc-status` in the headers (trailers-only) or in the
/// trailers after a message.
fn grpc_response(status: &'static str, trailers_only: bool) -> Response<Frames> {
    let mut frames = Vec::new();
    let mut response = Response::builder().header("content-type", "application/grpc");
    if trailers_only {
        response = response.header("grpc-status", status);
    } else {
        frames.push(Ok(Frame::data(Bytes::from_static(b"\0\0\0\0\0"))));
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static(status));
        trailers.insert("grpc-message", HeaderValue::from_static("secret%20detail"));
        frames.push(Ok(Frame::trailers(trailers)));
    }
    response.body(StreamBody::new(futures::stream::iter(frames))).unwrap()
}

fn grpc_call(method: &str, status: &'static str, trailers_only: bool) -> (TraceId, Vec<SpanRecord>) {
    reported();
    let caller = SpanContext::new(TraceId::random(), SpanId::random());
    let service = ServerLayer::new().layer(service_fn(move |_: Request<Empty<Bytes>>| async move {
        Ok::<_, Infallible>(grpc_response(status, trailers_only))
    }));
    let request = Request::post(format!("/test.Inventory/{method}"))
        .header("content-type", "application/grpc")
        .header("traceparent", caller.encode_w3c_traceparent())
        .body(Empty::new())
        .unwrap();
    let runtime = runtime();
    let response = runtime.block_on(service.oneshot(request)).unwrap();
    runtime.block_on(response.into_body().collect()).unwrap();
    (caller.trace_id, trace(caller.trace_id))
}

#[test]
fn a_grpc_status_marks_the_root_from_the_headers_or_the_trailers() {
    for (method, status, trailers_only, expected) in [
        ("Check", "0", false, SpanStatus::Unset),
        ("Check", "5", true, SpanStatus::error("gRPC NOT_FOUND")),
        ("Watch", "13", false, SpanStatus::error("gRPC INTERNAL")),
        ("Watch", "0", true, SpanStatus::Unset),
    ] {
        let (_, records) = grpc_call(method, status, trailers_only);
        let root = named(&records, &format!("test.Inventory/{method}"));
        assert_eq!(root.status(), expected, "{method} {status} trailers-only: {trailers_only}");
        assert_eq!(property(root, keys::RPC_GRPC_STATUS_CODE), Some(status));
        assert_eq!(property(root, keys::RPC_SYSTEM), Some("grpc"));
        assert_eq!(property(root, keys::RPC_SERVICE), Some("test.Inventory"));
        assert_eq!(property(root, keys::RPC_METHOD), Some(method));
        assert!(root.properties.iter().all(|(_, value)| !value.contains("secret")), "{root:?}");
    }
}

#[test]
fn a_5xx_or_a_failed_service_marks_the_root_and_a_4xx_does_not() {
    reported();
    for (path, expected) in [
        ("/500", Some(SpanStatus::error("HTTP 500 Internal Server Error"))),
        ("/404", Some(SpanStatus::Unset)),
        ("/fail", None),
    ] {
        let caller = SpanContext::new(TraceId::random(), SpanId::random());
        let service = ServerLayer::new().layer(service_fn(|request: Request<Empty<Bytes>>| async move {
            let status = match request.uri().path() {
                "/500" => StatusCode::INTERNAL_SERVER_ERROR,
                "/404" => StatusCode::NOT_FOUND,
                _ => return Err(std::io::Error::other("refused")),
            };
            Ok(Response::builder().status(status).body(Full::new(Bytes::from_static(b"no"))).unwrap())
        }));
        let request = Request::get(path)
            .header("traceparent", caller.encode_w3c_traceparent())
            .body(Empty::new())
            .unwrap();
        let answer = runtime().block_on(service.oneshot(request));
        assert_eq!(answer.is_ok(), expected.is_some(), "{path}");
        drop(answer);
        let records = trace(caller.trace_id);
        let root = named(&records, &format!("GET {path}"));
        match expected {
            Some(status) => assert_eq!(root.status(), status, "{path}"),
            None => {
                assert_eq!(root.status(), SpanStatus::error("the service failed"));
                assert_eq!(property(root, keys::ERROR_TYPE), Some("std::io::error::Error"));
            }
        }
    }
}

#[test]
fn an_unsampled_caller_records_nothing_and_its_calls_go_on_unsampled() {
    reported();
    let caller = SpanContext::new(TraceId::random(), SpanId::random());
    let unsampled = caller.encode_w3c_traceparent_with_sampled(false);
    // The request's client: echoes what it was sent in the answer's headers.
    let downstream = ClientLayer::new().layer(service_fn(|request: Request<Empty<Bytes>>| async move {
        let mut response = Response::new(Empty::<Bytes>::new());
        *response.headers_mut() = request.headers().clone();
        Ok::<_, Infallible>(response)
    }));
    let service = ServerLayer::new().layer(service_fn(move |_: Request<Empty<Bytes>>| {
        let downstream = downstream.clone();
        async move {
            let _handler = LocalSpan::enter_with_local_parent("handler");
            let answer = downstream
                .oneshot(Request::get("http://127.0.0.1:1/down").body(Empty::new()).unwrap())
                .await?;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!("{:?}", answer.headers())))))
        }
    }));
    let request = Request::get("/up")
        .header("traceparent", &unsampled)
        .header("tracestate", "vendor=opaque")
        .body(Empty::new())
        .unwrap();
    let runtime = runtime();
    let response = runtime.block_on(service.oneshot(request)).unwrap();
    let echoed = runtime.block_on(response.into_body().collect()).unwrap().to_bytes();
    let echoed = String::from_utf8(echoed.to_vec()).unwrap();
    assert!(echoed.contains(&format!("\"traceparent\": \"{unsampled}\"")), "{echoed}");
    assert!(echoed.contains("\"tracestate\": \"vendor=opaque\""), "{echoed}");
    assert!(trace(caller.trace_id).is_empty());
}

#[test]
fn malformed_trace_context_starts_a_fresh_root_or_drops_the_tracestate() {
    reported();
    let valid = SpanContext::new(TraceId::random(), SpanId::random());
    let cases: Vec<Case> = vec![
        ("short", b"00-abc-def-01".to_vec(), None, false),
        ("not hex", b"00-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-b7ad6b7169203331-01".to_vec(), None, false),
        ("zero trace", b"00-00000000000000000000000000000000-b7ad6b7169203331-01".to_vec(), None, false),
        ("zero span", b"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01".to_vec(), None, false),
        ("version ff", b"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_vec(), None, false),
        ("not ascii", b"00-\xff\xfe-01".to_vec(), None, false),
        ("empty", Vec::new(), None, false),
        ("bad state", valid.encode_w3c_traceparent().into_bytes(), Some(b"a=1,=broken,\xff".to_vec()), true),
        ("long state", valid.encode_w3c_traceparent().into_bytes(), Some(vec![b'a'; 4096]), true),
    ];
    for (case, traceparent, tracestate, continued) in cases {
        let path = format!("/malformed/{}", case.replace(' ', "-"));
        let service = ServerLayer::new().layer(service_fn(|_: Request<Empty<Bytes>>| async {
            let context = SpanContext::current_local_parent().expect("a root");
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(context.encode_w3c_traceparent()))))
        }));
        let mut request = Request::get(&path).body(Empty::new()).unwrap();
        request.headers_mut().insert("traceparent", HeaderValue::from_bytes(&traceparent).unwrap());
        if let Some(tracestate) = tracestate {
            request.headers_mut().insert("tracestate", HeaderValue::from_bytes(&tracestate).unwrap());
        }
        let runtime = runtime();
        let response = runtime.block_on(service.oneshot(request)).unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{case}");
        let root = runtime.block_on(response.into_body().collect()).unwrap().to_bytes();
        let root = SpanContext::decode_w3c_traceparent(std::str::from_utf8(&root).unwrap()).unwrap();
        assert_eq!(root.trace_id == valid.trace_id, continued, "{case}");
        let records = trace(root.trace_id);
        let record = named(&records, &format!("GET {path}"));
        assert_eq!(record.tracestate(), None, "{case}");
        let expected_parent = if continued { valid.span_id } else { SpanId(0) };
        assert_eq!(record.parent_id, expected_parent, "{case}");
    }
}

#[test]
fn a_client_call_injects_its_span_and_records_the_answer() {
    reported();
    let callee: SocketAddr = "127.0.0.1:7002".parse().unwrap();
    // The callee: answers with its listener and what the path asks.
    let client = ClientLayer::new().layer(service_fn(move |request: Request<Empty<Bytes>>| async move {
        let seen = format!(
            "{}|{}",
            request.headers()["traceparent"].to_str().unwrap(),
            request.headers()["tracestate"].to_str().unwrap()
        );
        let response = match request.uri().path() {
            "/refused" => return Err(std::io::Error::other("connection refused to http://user:secret@x")),
            "/test.Inventory/Watch" => grpc_response("14", false).map(|body| body.boxed()),
            path => Response::builder()
                .status(if path == "/missing" { 404 } else { 200 })
                .header(breadcrumbs::LISTENER_HEADER, callee.to_string())
                .body(Full::new(Bytes::from(seen)).map_err(|never| match never {}).boxed())
                .unwrap(),
        };
        Ok(response)
    }));
    let root_context = SpanContext::random();
    let root = Span::root("request", root_context);
    let runtime = runtime();
    let mut seen = Vec::new();
    for uri in [
        "http://user:secret@127.0.0.1:8080/ok?key=secret",
        "http://127.0.0.1:8080/missing",
        "http://localhost/refused",
    ] {
        let call = client.clone().oneshot(Request::get(uri).body(Empty::new()).unwrap());
        let answer = runtime
            .block_on(minitrace::future::FutureExt::in_span(call, Span::enter_with_parent("step", &root)));
        if let Ok(answer) = answer {
            let body = runtime.block_on(answer.into_body().collect()).unwrap().to_bytes();
            seen.push(String::from_utf8(body.to_vec()).unwrap());
        }
    }
    let grpc = Request::post("http://127.0.0.1:50051/test.Inventory/Watch")
        .header("content-type", "application/grpc")
        .body(Empty::new())
        .unwrap();
    let call = client.clone().oneshot(grpc);
    let answer =
        runtime.block_on(minitrace::future::FutureExt::in_span(call, Span::enter_with_parent("step", &root)));
    runtime.block_on(answer.unwrap().into_body().collect()).unwrap();
    drop(root);

    let records = trace(root_context.trace_id);
    let steps: Vec<_> = records.iter().filter(|record| record.name == "step").collect();
    let ok = named(&records, "GET /ok");
    assert!(steps.iter().any(|step| step.span_id == ok.parent_id), "under the local parent");
    assert_eq!(ok.kind(), SpanKind::Client);
    assert_eq!(ok.status(), SpanStatus::Unset);
    assert_eq!(property(ok, keys::SERVER_ADDRESS), Some("127.0.0.1"));
    assert_eq!(property(ok, keys::SERVER_PORT), Some("8080"));
    assert_eq!(property(ok, keys::HTTP_RESPONSE_STATUS_CODE), Some("200"));
    assert_eq!(property(ok, breadcrumbs::TO_KEY), Some("127.0.0.1:7002"));
    let (traceparent, tracestate) = seen[0].split_once('|').unwrap();
    let sent = SpanContext::decode_w3c_traceparent(traceparent).unwrap();
    assert_eq!((sent.trace_id, sent.span_id), (ok.trace_id, ok.span_id), "the callee's parent is the call");
    assert_eq!(tracestate, format!("mt={LISTENER}"));

    let missing = named(&records, "GET /missing");
    assert_eq!(missing.status(), SpanStatus::error("HTTP 404 Not Found"));
    let refused = named(&records, "GET /refused");
    assert_eq!(refused.status(), SpanStatus::error("the request failed"));
    assert_eq!(property(refused, keys::ERROR_TYPE), Some("std::io::error::Error"));
    assert_eq!(property(refused, keys::SERVER_PORT), Some("80"));
    let watch = named(&records, "test.Inventory/Watch");
    assert_eq!(watch.status(), SpanStatus::error("gRPC UNAVAILABLE"), "from the trailers: {watch:?}");
    for record in &records {
        assert!(record.properties.iter().all(|(_, value)| !value.contains("secret")), "{record:?}");
    }
}

#[cfg(feature = "axum")]
#[test]
fn inside_an_axum_router_the_root_is_named_after_the_route() {
    use axum::routing::get;
    reported();
    let caller = SpanContext::new(TraceId::random(), SpanId::random());
    let app = axum::Router::new().route("/users/{id}", get(|| async { "user" })).layer(ServerLayer::new());
    let request = Request::get("/users/7")
        .header("traceparent", caller.encode_w3c_traceparent())
        .body(axum::body::Body::empty())
        .unwrap();
    let runtime = runtime();
    let response = runtime.block_on(app.oneshot(request)).unwrap();
    runtime.block_on(response.into_body().collect()).unwrap();
    let records = trace(caller.trace_id);
    let root = named(&records, "GET /users/{id}");
    assert_eq!(property(root, keys::HTTP_ROUTE), Some("/users/{id}"));
    assert_eq!(property(root, keys::URL_PATH), Some("/users/7"));
}
