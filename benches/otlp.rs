//! The encoding cost of an OTLP export, per span, with no network:
//! minitrace-otlp turning `SpanRecord`s into protobuf request bytes, beside
//! the path of `opentelemetry-otlp`'s exporters from crates.io, which turn
//! the SDK's `SpanData` into opentelemetry-proto messages
//! (`group_spans_by_resource_and_scope`, what its HTTP and gRPC exporters
//! call) and encode them with prost. The same batch on both sides: 10
//! spans of one trace, each with 3 attributes and 1 event (with 1
//! attribute), under the same resource attributes.
//!
//! A second group encodes a collector's batch of the export workload
//! (`benches/export.rs`): 4 096 spans, 10 per trace, 2 string attributes
//! each, through `encode_each` into reused buffers.
//!
//! `cargo bench --bench otlp`; compare the two medians as a ratio within
//! one run.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use minitrace::collector::{EventRecord, SpanId, SpanRecord, TraceId};
use minitrace_otlp::OtlpReporter;
use opentelemetry::trace::{
    SpanContext, SpanId as OtelSpanId, SpanKind, Status, TraceFlags, TraceId as OtelTraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use opentelemetry_sdk::Resource;
use prost::Message;

const SPANS: u64 = 10;
const TRACE: u128 = 0x0af7651916cd43dd8448eb211c80319c;
const SERVICE: &str = "bench";

fn start_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn records() -> Vec<SpanRecord> {
    let start = start_ns();
    (0..SPANS)
        .map(|i| SpanRecord {
            trace_id: TraceId(TRACE),
            span_id: SpanId(i + 1),
            parent_id: SpanId(i),
            begin_time_unix_ns: start + i * 1_000,
            duration_ns: 50_000,
            name: Cow::Borrowed("query"),
            properties: vec![
                ("db.system".into(), "postgresql".into()),
                ("db.table".into(), "orders".into()),
                ("request.index".into(), i.to_string().into()),
            ],
            events: vec![EventRecord {
                name: "retry".into(),
                timestamp_unix_ns: start + i * 1_000 + 500,
                properties: vec![("reason".into(), "timeout".into())],
            }],
        })
        .collect()
}

fn span_data() -> Vec<SpanData> {
    let start = SystemTime::now();
    let scope = InstrumentationScope::builder("minitrace").with_version("0.6.8").build();
    (0..SPANS)
        .map(|i| {
            let begin = start + Duration::from_nanos(i * 1_000);
            let mut events = SpanEvents::default();
            events.events.push(opentelemetry::trace::Event::new(
                "retry",
                begin + Duration::from_nanos(500),
                vec![KeyValue::new("reason", "timeout")],
                0,
            ));
            SpanData {
                span_context: SpanContext::new(
                    OtelTraceId::from(TRACE),
                    OtelSpanId::from(i + 1),
                    TraceFlags::SAMPLED,
                    false,
                    TraceState::NONE,
                ),
                parent_span_id: OtelSpanId::from(i),
                parent_span_is_remote: false,
                span_kind: SpanKind::Internal,
                name: Cow::Borrowed("query"),
                start_time: begin,
                end_time: begin + Duration::from_micros(50),
                attributes: vec![
                    KeyValue::new("db.system", "postgresql"),
                    KeyValue::new("db.table", "orders"),
                    KeyValue::new("request.index", i.to_string()),
                ],
                dropped_attributes_count: 0,
                events,
                links: SpanLinks::default(),
                status: Status::Unset,
                instrumentation_scope: scope.clone(),
            }
        })
        .collect()
}

fn encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("otlp encode, 10 spans (3 attributes, 1 event)");
    group.throughput(Throughput::Elements(SPANS));

    let reporter = OtlpReporter::builder().env(|_| None).service_name(SERVICE).build().unwrap();
    let records = records();
    group.bench_function("minitrace-otlp", |b| b.iter(|| reporter.encode(criterion::black_box(&records))));

    // The resource the minitrace-otlp reporter sends, converted once, as the exporter does.
    let resource = Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", SERVICE),
            KeyValue::new("host.name", "bench-host"),
            KeyValue::new("telemetry.sdk.name", "opentelemetry"),
            KeyValue::new("telemetry.sdk.language", "rust"),
            KeyValue::new("telemetry.sdk.version", "0.33.1"),
        ])
        .build();
    let resource = ResourceAttributesWithSchema::from(&resource);
    let batch = span_data();
    group.bench_function("opentelemetry-otlp 0.33 path", |b| {
        // The exporter owns its batch: the clone for each run is left out of the time.
        b.iter_batched(
            || batch.clone(),
            |batch| {
                let resource_spans = group_spans_by_resource_and_scope(batch, &resource);
                ExportTraceServiceRequest { resource_spans }.encode_to_vec()
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// Spans in one of the collector's batches to the reporter.
const BATCH: usize = 4096;

/// A collector's batch of the export workload's traces (1 root + 9 spans,
/// 2 string attributes each), encoded into reused buffers: ~1 MiB of
/// records and their properties, more than a core's L2 holds, so a pass
/// over them reads from further out, as the collector's encoding does.
fn encode_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("otlp encode, a collector's batch (4 096 spans, 10 per trace)");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut reporter = OtlpReporter::builder().env(|_| None).service_name(SERVICE).build().unwrap();
    let start = start_ns();
    let records: Vec<SpanRecord> = (0..BATCH as u64)
        .map(|i| {
            let (trace, index) = (i / 10, i % 10);
            SpanRecord {
                trace_id: TraceId(TRACE + u128::from(trace)),
                span_id: SpanId(index + 1),
                parent_id: SpanId(if index == 0 { 0 } else { 1 }),
                begin_time_unix_ns: start + i * 1_000,
                duration_ns: 900,
                name: Cow::Borrowed(if index == 0 { "request" } else { "step" }),
                properties: vec![
                    ("http.route".into(), format!("/orders/{trace}").into()),
                    ("db.key".into(), format!("key-{i}").into()),
                ],
                events: Vec::new(),
            }
        })
        .collect();
    group.bench_function("minitrace-otlp, encode_each", |b| {
        b.iter(|| {
            let mut bytes = 0;
            reporter.encode_each(criterion::black_box(&records), |body, _| bytes += body.len());
            bytes
        })
    });
    group.finish();
}

criterion_group!(benches, encode, encode_batch);
criterion_main!(benches);
