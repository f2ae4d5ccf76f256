//! The encoder's tests: what it writes decodes as opentelemetry-proto's
//! own encoding would, within its bounds.

use std::borrow::Cow;

use minitrace::collector::{SpanId, TraceId};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::*;
use crate::encode::{key_value, span_count, Encoder};

fn props(pairs: &[(&'static str, &str)]) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
    pairs.iter().map(|(k, v)| (Cow::Borrowed(*k), Cow::Owned(v.to_string()))).collect()
}

fn traceparent(trace: u128, span: u64) -> String {
    SpanContext::new(TraceId(trace), SpanId(span)).encode_w3c_traceparent()
}

/// Every field the encoder maps, and the edge cases of each: empty and
/// long strings, zero times, repeated reserved keys, malformed links,
/// remote and local parents, several traces.
fn records() -> Vec<SpanRecord> {
    let long = "x".repeat(300);
    let mut records = vec![
        SpanRecord {
            trace_id: TraceId(u128::MAX - 5),
            span_id: SpanId(1),
            parent_id: SpanId(0xfeed),
            begin_time_unix_ns: 1_700_000_000_123_456_789,
            duration_ns: 10_000,
            name: "GET /cart".into(),
            properties: props(&[
                ("span.kind", "client"),
                ("span.kind", "server"),
                ("w3c.tracestate", "first=1"),
                ("w3c.tracestate", "vendor=opaque"),
                ("otel.status_code", "OK"),
                ("http.method", "GET"),
                ("", "empty key"),
                ("empty value", ""),
            ]),
            events: vec![],
        },
        SpanRecord {
            trace_id: TraceId(u128::MAX - 5),
            span_id: SpanId(2),
            parent_id: SpanId(1),
            begin_time_unix_ns: 1_700_000_000_123_457_000,
            duration_ns: 2_000,
            name: "SELECT ✓".into(),
            properties: vec![
                ("otel.status_description".into(), "first".into()),
                ("otel.status_code".into(), "ERROR".into()),
                ("otel.status_description".into(), "connection reset".into()),
                ("otel.link".into(), traceparent(0x1111, 0x2222).into()),
                ("otel.link".into(), "not a traceparent".into()),
                ("otel.link".into(), traceparent(7, 3).into()),
                ("ключ".into(), "значение".into()),
                ("long".into(), long.clone().into()),
            ],
            events: vec![
                EventRecord {
                    name: "retry".into(),
                    timestamp_unix_ns: 1_700_000_000_123_457_500,
                    properties: props(&[("attempt", "2"), ("reason", "")]),
                },
                EventRecord { name: "".into(), timestamp_unix_ns: 0, properties: vec![] },
            ],
        },
        SpanRecord {
            trace_id: TraceId(u128::MAX - 5),
            span_id: SpanId(3),
            parent_id: SpanId(2),
            name: "".into(),
            properties: props(&[("otel.status_code", "ERROR"), ("span.kind", "sideways")]),
            ..SpanRecord::default()
        },
        SpanRecord {
            trace_id: TraceId(7),
            span_id: SpanId(3),
            parent_id: SpanId(0),
            name: "job".into(),
            properties: props(&[("span.kind", "consumer"), ("otel.status_code", "MAYBE")]),
            begin_time_unix_ns: u64::MAX - 1,
            duration_ns: 10,
            ..SpanRecord::default()
        },
        // Its parent id is a span of another trace: remote.
        SpanRecord {
            trace_id: TraceId(7),
            span_id: SpanId(4),
            parent_id: SpanId(2),
            name: long.into(),
            properties: props(&[("span.kind", "producer"), ("span.kind", "internal")]),
            ..SpanRecord::default()
        },
    ];
    // Many small spans, so that requests split by count and by bytes.
    for i in 0..40 {
        records.push(SpanRecord {
            trace_id: TraceId(9),
            span_id: SpanId(100 + i),
            // One remote parent in a trace of more than `LINEAR_LOOKUP` spans.
            parent_id: SpanId(match i {
                0 => 0,
                20 => 0xdead,
                _ => 99 + i,
            }),
            begin_time_unix_ns: 1_000 + i,
            duration_ns: 1,
            name: Cow::Borrowed("step"),
            properties: vec![(Cow::Borrowed("i"), Cow::Owned(i.to_string()))],
            events: vec![],
        });
    }
    records
}

/// The same records, but a trace's records are not together: the
/// second span of the first trace comes last.
fn scattered() -> Vec<SpanRecord> {
    let mut records = records();
    let second = records.remove(1);
    records.push(second);
    records
}

/// The records many times over, each copy its own traces: requests of
/// hundreds of kilobytes, whose lengths take 3 bytes.
fn many() -> Vec<SpanRecord> {
    (0..200u128)
        .flat_map(|copy| {
            records().into_iter().map(move |mut record| {
                record.trace_id.0 = record.trace_id.0.wrapping_add(copy << 64);
                record
            })
        })
        .collect()
}

fn encoder(max_spans: usize, max_bytes: usize) -> Encoder {
    Encoder {
        resource: Resource {
            attributes: vec![key_value("service.name", "checkout"), key_value("host.name", "h")],
            ..Resource::default()
        },
        scope: InstrumentationScope {
            name: "minitrace".into(),
            version: "0.6.8".into(),
            ..InstrumentationScope::default()
        },
        max_spans,
        max_bytes,
    }
}

fn wire(encoder: &Encoder) -> WireEncoder {
    WireEncoder::new(&encoder.resource, &encoder.scope, encoder.max_spans, encoder.max_bytes)
}

#[test]
fn decodes_to_what_opentelemetry_proto_would_send() {
    for records in [records(), scattered(), many()] {
        decodes_as_opentelemetry_proto(&records);
    }
}

fn decodes_as_opentelemetry_proto(records: &[SpanRecord]) {
    // 100 bytes: every span is larger, and goes alone.
    let bounds = [(2048, 1 << 20), (1, usize::MAX), (3, usize::MAX), (usize::MAX, 400), (usize::MAX, 100)];
    for (max_spans, max_bytes) in bounds {
        let encoder = encoder(max_spans, max_bytes);
        let expected = encoder.requests(records);
        let mut bodies: Vec<(Vec<u8>, usize)> = Vec::new();
        // Twice with the same encoder: its scratch space is reused.
        let mut wire = wire(&encoder);
        wire.encode(&records[..3], &mut Vec::new());
        wire.encode(records, &mut bodies);
        let decoded: Vec<ExportTraceServiceRequest> = bodies
            .iter()
            .map(|(body, _)| ExportTraceServiceRequest::decode(body.as_slice()).unwrap())
            .collect();
        // The same spans in the same order, whatever the split...
        let spans = |requests: &[ExportTraceServiceRequest]| -> Vec<_> {
            requests.iter().flat_map(|r| r.resource_spans[0].scope_spans[0].spans.clone()).collect()
        };
        let (got, want) = (spans(&decoded), spans(&expected));
        assert_eq!(got.len(), want.len());
        for (got, want) in got.iter().zip(&want) {
            assert_eq!(got, want, "max_spans {max_spans}, max_bytes {max_bytes}");
        }
        // ...under the same resource and scope in every request...
        for request in &decoded {
            let mut bare = request.clone();
            bare.resource_spans[0].scope_spans[0].spans.clear();
            let mut want = expected[0].clone();
            want.resource_spans[0].scope_spans[0].spans.clear();
            assert_eq!(bare, want);
        }
        for (body, spans) in &bodies {
            let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            assert_eq!(*spans as u64, span_count(&request));
            // Canonical: as long as prost's encoding, field for field.
            assert_eq!(body.len(), request.encoded_len());
        }
        // ...and split as the message path splits when bytes do not bound it.
        if max_bytes == usize::MAX || max_bytes == 1 << 20 {
            assert_eq!(decoded, expected, "max_spans {max_spans}, max_bytes {max_bytes}");
        }
    }
}

#[test]
fn requests_are_bounded_by_bytes_but_never_empty() {
    let records = records();
    let encoder = encoder(usize::MAX, 400);
    let mut bodies: Vec<(Vec<u8>, usize)> = Vec::new();
    wire(&encoder).encode(&records, &mut bodies);
    for (body, spans) in &bodies {
        assert!(*spans == 1 || body.len() <= 400, "{} bytes, {spans} spans", body.len());
    }
    assert_eq!(bodies.iter().map(|(_, spans)| spans).sum::<usize>(), records.len());
}

#[test]
fn keys_are_classified_as_is_reserved_key_tells() {
    let reserved = [KIND_KEY, STATUS_CODE_KEY, STATUS_MESSAGE_KEY, LINK_KEY, TRACESTATE_KEY];
    // Attributes of a reserved key's length, or close to one.
    let others =
        ["", "step.kind", "span.kinD", "otel.lin", "otel.links", "w3c.tracestatE", "otel.status_codes"];
    for key in reserved.into_iter().chain(others) {
        assert_eq!(classify(key) != Key::Attribute, is_reserved_key(key), "{key}");
    }
    assert_eq!(classify(KIND_KEY), Key::Kind);
    assert_eq!(classify(LINK_KEY), Key::Link);
    assert_eq!(classify(TRACESTATE_KEY), Key::Tracestate);
    assert_eq!(classify(STATUS_CODE_KEY), Key::StatusCode);
    assert_eq!(classify(STATUS_MESSAGE_KEY), Key::StatusMessage);
}

#[test]
fn varint_lengths() {
    for value in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
        let mut buf = Vec::new();
        put_varint(&mut buf, value);
        assert_eq!(buf.len(), varint_len(value), "{value}");
    }
}
