//! Our OTLP bytes, decoded by an independent decoder (opentelemetry-proto's
//! prost types, not the reporter's encoder), field by field.

use std::collections::HashMap;

use minitrace::collector::{EventRecord, SpanContext, SpanId, SpanRecord, TraceId};
use minitrace_otlp::OtlpReporter;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

const TRACE_A: u128 = 0x0af7651916cd43dd8448eb211c80319c;
const TRACE_B: u128 = 0x42;
const SAMPLED: u32 = 0x01;
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

fn props(
    pairs: &[(&'static str, &'static str)],
) -> Vec<(std::borrow::Cow<'static, str>, std::borrow::Cow<'static, str>)> {
    pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
}

fn link(trace: u128, span: u64) -> String {
    SpanContext::new(TraceId(trace), SpanId(span)).encode_w3c_traceparent()
}

/// Two traces: A continues a remote request (its root's parent is not in
/// the batch) and carries a tracestate; B is local, with a span whose
/// parent id exists only in trace A, so is remote too.
fn records() -> Vec<SpanRecord> {
    let link_1 = link(0x1111, 0x2222);
    let link_2 = link(TRACE_B, 3);
    vec![
        SpanRecord {
            trace_id: TraceId(TRACE_A),
            span_id: SpanId(1),
            parent_id: SpanId(0xb7ad6b7169203331),
            begin_time_unix_ns: 1_700_000_000_000_000_000,
            duration_ns: 5_000,
            name: "GET /cart".into(),
            properties: props(&[
                ("http.method", "GET"),
                ("span.kind", "server"),
                ("w3c.tracestate", "vendor=opaque,other=1"),
                ("otel.status_code", "OK"),
            ]),
            events: vec![],
        },
        SpanRecord {
            trace_id: TraceId(TRACE_A),
            span_id: SpanId(2),
            parent_id: SpanId(1),
            begin_time_unix_ns: 1_700_000_000_000_001_000,
            duration_ns: 2_000,
            name: "SELECT ✓".into(),
            properties: vec![
                ("db.system".into(), "postgresql".into()),
                ("span.kind".into(), "client".into()),
                ("otel.status_code".into(), "ERROR".into()),
                ("otel.status_description".into(), "connection reset".into()),
                ("otel.link".into(), link_1.into()),
                ("otel.link".into(), link_2.into()),
                ("ключ".into(), "значение".into()),
            ],
            events: vec![
                EventRecord {
                    name: "retry".into(),
                    timestamp_unix_ns: 1_700_000_000_000_001_500,
                    properties: props(&[("attempt", "2"), ("reason", "reset")]),
                },
                EventRecord {
                    name: "gave up".into(),
                    timestamp_unix_ns: 1_700_000_000_000_002_900,
                    properties: vec![],
                },
            ],
        },
        SpanRecord {
            trace_id: TraceId(TRACE_A),
            span_id: SpanId(3),
            parent_id: SpanId(2),
            name: "decode".into(),
            properties: props(&[("span.kind", "internal")]),
            ..SpanRecord::default()
        },
        SpanRecord {
            trace_id: TraceId(TRACE_B),
            span_id: SpanId(3),
            parent_id: SpanId(0),
            name: "job".into(),
            properties: props(&[("span.kind", "consumer")]),
            ..SpanRecord::default()
        },
        SpanRecord {
            trace_id: TraceId(TRACE_B),
            span_id: SpanId(4),
            parent_id: SpanId(2),
            name: "publish".into(),
            properties: props(&[("span.kind", "producer")]),
            ..SpanRecord::default()
        },
    ]
}

fn strings(attributes: &[KeyValue]) -> Vec<(String, String)> {
    attributes
        .iter()
        .map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(Value::StringValue(s)) => (kv.key.clone(), s.clone()),
            other => panic!("{}: not a string: {other:?}", kv.key),
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn decode() -> ExportTraceServiceRequest {
    let reporter = OtlpReporter::builder()
        .env(|_| None)
        .service_name("checkout")
        .service_version("1.2.3")
        .resource_attribute("deployment.environment.name", "test")
        .build()
        .unwrap();
    let requests = reporter.encode(&records());
    assert_eq!(requests.len(), 1);
    ExportTraceServiceRequest::decode(requests[0].as_slice()).expect("independent decoder")
}

#[test]
fn resource_and_scope() {
    let request = decode();
    assert_eq!(request.resource_spans.len(), 1);
    let resource_spans = &request.resource_spans[0];
    let resource: HashMap<String, String> =
        strings(&resource_spans.resource.as_ref().unwrap().attributes).into_iter().collect();
    assert_eq!(resource["service.name"], "checkout");
    assert_eq!(resource["service.version"], "1.2.3");
    assert_eq!(resource["deployment.environment.name"], "test");
    assert_eq!(resource["telemetry.sdk.name"], "minitrace");
    assert_eq!(resource["telemetry.sdk.language"], "rust");
    assert_eq!(resource["telemetry.sdk.version"], env!("CARGO_PKG_VERSION"));
    assert!(!resource["host.name"].is_empty());
    assert_eq!(resource_spans.scope_spans.len(), 1);
    let scope = resource_spans.scope_spans[0].scope.as_ref().unwrap();
    assert_eq!((scope.name.as_str(), scope.version.as_str()), ("minitrace", env!("CARGO_PKG_VERSION")));
}

#[test]
fn every_span_field_by_field() {
    let request = decode();
    let spans: &[Span] = &request.resource_spans[0].scope_spans[0].spans;
    assert_eq!(spans.len(), 5);
    let [root, query, decode, job, publish] = spans else { unreachable!() };

    assert_eq!(root.trace_id, TRACE_A.to_be_bytes());
    assert_eq!(root.span_id, 1u64.to_be_bytes());
    assert_eq!(root.parent_span_id, 0xb7ad6b7169203331u64.to_be_bytes());
    assert_eq!(root.name, "GET /cart");
    assert_eq!(root.kind, SpanKind::Server as i32);
    assert_eq!(root.start_time_unix_nano, 1_700_000_000_000_000_000);
    assert_eq!(root.end_time_unix_nano, 1_700_000_000_000_005_000);
    assert_eq!(root.trace_state, "vendor=opaque,other=1");
    assert_eq!(root.flags, SAMPLED | HAS_IS_REMOTE | IS_REMOTE, "its parent is not in the batch");
    // Reserved keys became fields: only the user's property is an attribute.
    assert_eq!(strings(&root.attributes), pairs(&[("http.method", "GET")]));
    let status = root.status.as_ref().unwrap();
    assert_eq!((status.code, status.message.as_str()), (StatusCode::Ok as i32, ""));
    assert!(root.events.is_empty() && root.links.is_empty());

    assert_eq!(query.trace_id, TRACE_A.to_be_bytes());
    assert_eq!(query.parent_span_id, 1u64.to_be_bytes());
    assert_eq!(query.name, "SELECT ✓");
    assert_eq!(query.kind, SpanKind::Client as i32);
    assert_eq!(
        query.trace_state, "vendor=opaque,other=1",
        "the root's tracestate, on every span of its trace"
    );
    assert_eq!(query.flags, SAMPLED | HAS_IS_REMOTE);
    assert_eq!(strings(&query.attributes), pairs(&[("db.system", "postgresql"), ("ключ", "значение")]));
    let status = query.status.as_ref().unwrap();
    assert_eq!((status.code, status.message.as_str()), (StatusCode::Error as i32, "connection reset"));
    assert_eq!(query.events.len(), 2);
    assert_eq!(query.events[0].name, "retry");
    assert_eq!(query.events[0].time_unix_nano, 1_700_000_000_000_001_500);
    assert_eq!(strings(&query.events[0].attributes), pairs(&[("attempt", "2"), ("reason", "reset")]));
    assert_eq!(query.events[1].name, "gave up");
    assert!(query.events[1].attributes.is_empty());
    let links: Vec<(Vec<u8>, Vec<u8>)> =
        query.links.iter().map(|l| (l.trace_id.clone(), l.span_id.clone())).collect();
    assert_eq!(
        links,
        [
            (0x1111u128.to_be_bytes().to_vec(), 0x2222u64.to_be_bytes().to_vec()),
            (TRACE_B.to_be_bytes().to_vec(), 3u64.to_be_bytes().to_vec())
        ]
    );

    assert_eq!(decode.kind, SpanKind::Internal as i32);
    assert_eq!(decode.status, None, "unset");
    assert!(decode.attributes.is_empty());
    assert_eq!(decode.trace_state, "vendor=opaque,other=1");
    assert_eq!(decode.flags, SAMPLED | HAS_IS_REMOTE);

    assert_eq!(job.trace_id, TRACE_B.to_be_bytes());
    assert!(job.parent_span_id.is_empty(), "a root");
    assert_eq!(job.kind, SpanKind::Consumer as i32);
    assert_eq!(job.trace_state, "", "trace B has no tracestate");
    assert_eq!(job.flags, SAMPLED | HAS_IS_REMOTE);

    assert_eq!(publish.kind, SpanKind::Producer as i32);
    assert_eq!(publish.parent_span_id, 2u64.to_be_bytes());
    assert_eq!(publish.flags, SAMPLED | HAS_IS_REMOTE | IS_REMOTE, "span 2 is in another trace");
}

#[test]
fn a_large_report_is_split_into_bounded_requests_that_hold_every_span() {
    let reporter = OtlpReporter::builder().env(|_| None).max_request_bytes(64 * 1024).build().unwrap();
    let records: Vec<SpanRecord> = (0..20_000u64)
        .map(|i| SpanRecord {
            trace_id: TraceId(9),
            span_id: SpanId(i + 1),
            parent_id: SpanId(i / 8),
            name: "span".into(),
            properties: props(&[("index", "value")]),
            ..SpanRecord::default()
        })
        .collect();
    let requests = reporter.encode(&records);
    assert!(requests.len() > 1);
    let mut ids = Vec::new();
    for bytes in &requests {
        assert!(bytes.len() <= 64 * 1024, "{}", bytes.len());
        let request = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        for span in &request.resource_spans[0].scope_spans[0].spans {
            ids.push(u64::from_be_bytes(span.span_id.as_slice().try_into().unwrap()));
            // Parents in other requests of the same report are still local.
            assert_eq!(span.flags & IS_REMOTE, 0);
        }
    }
    assert_eq!(ids, (1..=20_000).collect::<Vec<u64>>());
}

/// OTLP/gRPC sends the bytes OTLP/HTTP does: what tonic's server decodes,
/// gzip or not, is the request checked field by field above, and a report
/// larger than a request arrives as bounded requests, every span once.
#[cfg(feature = "grpc")]
#[test]
fn grpc_carries_the_same_requests() {
    use minitrace::collector::Reporter;
    use minitrace_delivery_testkit::GrpcServer;
    use minitrace_otlp::{Compression, Protocol};

    for compression in [Compression::None, Compression::Gzip] {
        let server = GrpcServer::start(None);
        let builder = || {
            OtlpReporter::builder()
                .env(|_| None)
                .endpoint(server.url())
                .protocol(Protocol::Grpc)
                .compression(compression)
                .service_name("checkout")
                .service_version("1.2.3")
                .resource_attribute("deployment.environment.name", "test")
        };
        let mut reporter = builder().build().unwrap();
        let stats = reporter.stats();
        reporter.report(&records());
        reporter.wait_for_delivery();
        assert_eq!(server.requests(), [decode()], "{compression:?}");

        let mut reporter = builder().max_spans_per_request(7).build().unwrap();
        let many: Vec<SpanRecord> = (1..=100u64)
            .map(|i| SpanRecord {
                trace_id: TraceId(5),
                span_id: SpanId(i),
                name: "step".into(),
                ..records()[2].clone()
            })
            .collect();
        reporter.report(&many);
        reporter.wait_for_delivery();
        let requests = server.requests();
        assert_eq!(requests.len(), 1 + 100usize.div_ceil(7), "{compression:?}");
        let ids: Vec<u64> = requests[1..]
            .iter()
            .flat_map(|request| &request.resource_spans[0].scope_spans[0].spans)
            .map(|span| u64::from_be_bytes(span.span_id.as_slice().try_into().unwrap()))
            .collect();
        assert_eq!(ids, (1..=100).collect::<Vec<u64>>(), "{compression:?}");
        let sent = stats.get();
        assert_eq!((sent.spans_sent, sent.spans_failed), (5, 0), "{compression:?}: {sent:?}");
    }
}
