//! minitrace's [`SpanRecord`]s as OTLP messages, in requests of bounded
//! size: the HTTP/JSON path, whose serde derives need the messages (the
//! protobuf bodies of HTTP and gRPC are written by `crate::wire`).

use std::collections::{HashMap, HashSet};

use minitrace::collector::{is_reserved_key, EventRecord, SpanKind, SpanRecord, SpanStatus};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{self, Event, Link};
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, SpanFlags, Status};
use prost::Message;

/// W3C trace flags of an exported span: minitrace reports only recorded
/// spans, which is what "sampled" means.
const SAMPLED: u32 = 0x01;
/// The key, length and nesting overhead of one span inside a request,
/// beyond its own encoded length (a generous bound).
const SPAN_OVERHEAD: usize = 8;

/// The resource and scope every request carries, and the request bounds.
#[derive(Debug, Clone)]
pub(crate) struct Encoder {
    pub(crate) resource: Resource,
    pub(crate) scope: InstrumentationScope,
    pub(crate) max_spans: usize,
    pub(crate) max_bytes: usize,
}

/// A string attribute.
pub(crate) fn key_value(key: impl Into<String>, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
        ..KeyValue::default()
    }
}

impl Encoder {
    /// Every span of `records` as OTLP export requests, each of at most
    /// `max_spans` spans and about `max_bytes` bytes (a span larger than
    /// that on its own goes alone), in the records' order.
    pub(crate) fn requests(&self, records: &[SpanRecord]) -> Vec<ExportTraceServiceRequest> {
        let batch = Batch::new(records);
        let mut requests = Vec::new();
        let mut spans = Vec::new();
        let mut bytes = 0;
        for record in records {
            let span = batch.span(record);
            let size = span.encoded_len() + SPAN_OVERHEAD;
            if !spans.is_empty() && (spans.len() >= self.max_spans || bytes + size > self.max_bytes) {
                requests.push(self.request(std::mem::take(&mut spans)));
                bytes = 0;
            }
            bytes += size;
            spans.push(span);
        }
        if !spans.is_empty() {
            requests.push(self.request(spans));
        }
        requests
    }

    fn request(&self, spans: Vec<Span>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(self.resource.clone()),
                scope_spans: vec![ScopeSpans {
                    scope: Some(self.scope.clone()),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }
}

/// How many spans a request carries.
pub(crate) fn span_count(request: &ExportTraceServiceRequest) -> u64 {
    let spans = request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len());
    spans.sum::<usize>() as u64
}

/// What one span's encoding needs to know about the rest of its report.
struct Batch<'a> {
    /// Each trace's `tracestate`, from the root that carries it.
    tracestates: HashMap<u128, &'a str>,
    /// Every (trace, span) of the report: a parent outside it is remote.
    local: HashSet<(u128, u64)>,
}

impl<'a> Batch<'a> {
    fn new(records: &'a [SpanRecord]) -> Batch<'a> {
        let tracestates =
            records.iter().filter_map(|r| r.tracestate().map(|state| (r.trace_id.0, state))).collect();
        let local = records.iter().map(|r| (r.trace_id.0, r.span_id.0)).collect();
        Batch { tracestates, local }
    }

    fn span(&self, record: &SpanRecord) -> Span {
        let trace = record.trace_id.0;
        let remote = record.parent_id.0 != 0 && !self.local.contains(&(trace, record.parent_id.0));
        let mut flags = SAMPLED | SpanFlags::ContextHasIsRemoteMask as u32;
        if remote {
            flags |= SpanFlags::ContextIsRemoteMask as u32;
        }
        Span {
            trace_id: trace.to_be_bytes().to_vec(),
            span_id: record.span_id.0.to_be_bytes().to_vec(),
            trace_state: self.tracestates.get(&trace).map_or_else(String::new, |state| (*state).to_owned()),
            parent_span_id: match record.parent_id.0 {
                0 => Vec::new(),
                parent => parent.to_be_bytes().to_vec(),
            },
            flags,
            name: record.name.to_string(),
            kind: kind(record.kind()) as i32,
            start_time_unix_nano: record.begin_time_unix_ns,
            end_time_unix_nano: record.begin_time_unix_ns.saturating_add(record.duration_ns),
            attributes: record
                .properties
                .iter()
                .filter(|(key, _)| !is_reserved_key(key))
                .map(|(key, value)| key_value(key.as_ref(), value.as_ref()))
                .collect(),
            events: record.events.iter().map(event).collect(),
            links: record
                .links()
                .into_iter()
                .map(|context| Link {
                    trace_id: context.trace_id.0.to_be_bytes().to_vec(),
                    span_id: context.span_id.0.to_be_bytes().to_vec(),
                    // A linked context comes from elsewhere: its remoteness is unknown.
                    flags: SAMPLED,
                    ..Link::default()
                })
                .collect(),
            status: status(record.status()),
            ..Span::default()
        }
    }
}

fn kind(kind: SpanKind) -> span::SpanKind {
    match kind {
        SpanKind::Server => span::SpanKind::Server,
        SpanKind::Client => span::SpanKind::Client,
        SpanKind::Producer => span::SpanKind::Producer,
        SpanKind::Consumer => span::SpanKind::Consumer,
        // `SpanKind` is non-exhaustive: a kind added later reads as internal.
        _ => span::SpanKind::Internal,
    }
}

fn status(status: SpanStatus) -> Option<Status> {
    match status {
        SpanStatus::Unset => None,
        SpanStatus::Ok => Some(Status { code: status::StatusCode::Ok as i32, message: String::new() }),
        SpanStatus::Error(message) => {
            Some(Status { code: status::StatusCode::Error as i32, message: message.into_owned() })
        }
    }
}

fn event(event: &EventRecord) -> Event {
    Event {
        time_unix_nano: event.timestamp_unix_ns,
        name: event.name.to_string(),
        attributes: event
            .properties
            .iter()
            .map(|(key, value)| key_value(key.as_ref(), value.as_ref()))
            .collect(),
        dropped_attributes_count: 0,
    }
}

#[cfg(test)]
mod tests {
    use minitrace::collector::{SpanId, TraceId};

    use super::*;

    fn encoder(max_spans: usize, max_bytes: usize) -> Encoder {
        Encoder {
            resource: Resource::default(),
            scope: InstrumentationScope::default(),
            max_spans,
            max_bytes,
        }
    }

    fn records(count: u64) -> Vec<SpanRecord> {
        (1..=count)
            .map(|i| SpanRecord {
                trace_id: TraceId(5),
                span_id: SpanId(i),
                parent_id: SpanId(i - 1),
                name: "step".into(),
                ..SpanRecord::default()
            })
            .collect()
    }

    #[test]
    fn requests_are_bounded_by_span_count() {
        let requests = encoder(4, usize::MAX).requests(&records(10));
        let counts: Vec<u64> = requests.iter().map(span_count).collect();
        assert_eq!(counts, [4, 4, 2]);
    }

    #[test]
    fn requests_are_bounded_by_bytes_but_never_empty() {
        let requests = encoder(usize::MAX, 1).requests(&records(3));
        assert_eq!(requests.iter().map(span_count).collect::<Vec<_>>(), [1, 1, 1]);
        let requests = encoder(usize::MAX, 10_000).requests(&records(100));
        assert!(requests.iter().all(|request| request.encoded_len() <= 10_000));
        assert_eq!(requests.iter().map(span_count).sum::<u64>(), 100);
    }

    #[test]
    fn a_parent_in_another_request_of_the_same_report_is_local() {
        let requests = encoder(1, usize::MAX).requests(&records(2));
        let child = &requests[1].resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(child.flags & SpanFlags::ContextIsRemoteMask as u32, 0);
    }
}
