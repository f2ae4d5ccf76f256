//! The export path end to end: spans made with minitrace's API, reported
//! through the sender thread to an HTTP receiver on 127.0.0.1, decoded
//! there by an independent decoder (opentelemetry-proto's prost types),
//! and compared trace by trace with the records minitrace made.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use minitrace::collector::{
    Config, Reporter, SpanContext, SpanId, SpanKind, SpanRecord, SpanStatus, TraceId, KIND_KEY, LINK_KEY,
    STATUS_CODE_KEY, STATUS_MESSAGE_KEY, TRACESTATE_KEY,
};
use minitrace::prelude::*;
use minitrace_delivery_testkit::Server;
use minitrace_otlp::OtlpReporter;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
use prost::Message;

const REQUESTS: usize = 3_000;

/// Forwards every report to the real reporter, and keeps a copy of what
/// was made.
struct Keeping {
    reporter: OtlpReporter,
    made: Arc<Mutex<Vec<SpanRecord>>>,
}

impl Reporter for Keeping {
    fn report(&mut self, spans: &[SpanRecord]) {
        self.made.lock().unwrap().extend_from_slice(spans);
        self.reporter.report(spans);
    }
}

/// One request: a server root with a tracestate, local children, an
/// event, an error status, a link, a thread-safe child.
fn request(index: usize) {
    let linked = SpanContext::new(TraceId(0x1234_5678 + index as u128), SpanId(99));
    let root = Span::root("request", SpanContext::random())
        .with_kind(SpanKind::Server)
        .with_tracestate(format!("minitrace=t{index}"))
        .with_properties(|| [("http.route", "/api/v1/checkout"), ("step.kind", "validate")]);
    let _guard = root.set_local_parent();
    for step in 0..7 {
        let _span = LocalSpan::enter_with_local_parent("step")
            .with_properties(|| [("http.route", "/api/v1/checkout"), ("step.kind", "validate")])
            .with_property(|| ("step", step.to_string()));
    }
    {
        let _query = LocalSpan::enter_with_local_parent("query")
            .with_kind(SpanKind::Client)
            .with_status(SpanStatus::error("timed out"))
            .with_link(linked);
        Event::add_to_local_parent("retry", || [("reason".into(), "timeout".into())]);
    }
    let child = Span::enter_with_parent("async", &root).with_property(|| ("ключ", "значение ✓"));
    drop(child);
}

/// An event: its name, time and attributes.
type Made = (String, u64, Vec<(String, String)>);

fn strings(attributes: &[KeyValue]) -> Vec<(String, String)> {
    attributes
        .iter()
        .map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(Value::StringValue(s)) => (kv.key.clone(), s.clone()),
            other => panic!("{}: not a string: {other:?}", kv.key),
        })
        .collect()
}

/// What the OTLP span of `record` must say, written from the OTLP spec,
/// not from the reporter's encoder.
fn check(span: &OtlpSpan, record: &SpanRecord, root: &SpanRecord) {
    let last = |record: &SpanRecord, key: &str| {
        record.properties.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.to_string())
    };
    assert_eq!(span.trace_id, record.trace_id.0.to_be_bytes());
    assert_eq!(span.span_id, record.span_id.0.to_be_bytes());
    let parent = match record.parent_id.0 {
        0 => Vec::new(),
        parent => parent.to_be_bytes().to_vec(),
    };
    assert_eq!(span.parent_span_id, parent, "{}", record.name);
    assert_eq!(span.name, record.name);
    assert_eq!(span.start_time_unix_nano, record.begin_time_unix_ns);
    assert_eq!(span.end_time_unix_nano, record.begin_time_unix_ns + record.duration_ns);
    let kind = match last(record, KIND_KEY).as_deref() {
        Some("server") => 2,
        Some("client") => 3,
        _ => 1,
    };
    assert_eq!(span.kind, kind, "{}", record.name);
    let reserved = [KIND_KEY, STATUS_CODE_KEY, STATUS_MESSAGE_KEY, LINK_KEY, TRACESTATE_KEY];
    let attributes: Vec<(String, String)> = record
        .properties
        .iter()
        .filter(|(k, _)| !reserved.contains(&k.as_ref()))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(strings(&span.attributes), attributes);
    assert_eq!(Some(span.trace_state.clone()), last(root, TRACESTATE_KEY));
    match last(record, STATUS_CODE_KEY).as_deref() {
        Some("ERROR") => {
            let status = span.status.as_ref().unwrap();
            assert_eq!((status.code, status.message.clone()), (2, last(record, STATUS_MESSAGE_KEY).unwrap()));
        }
        None => assert_eq!(span.status, None),
        other => panic!("{other:?}"),
    }
    let events: Vec<Made> =
        span.events.iter().map(|e| (e.name.clone(), e.time_unix_nano, strings(&e.attributes))).collect();
    let made: Vec<Made> = record
        .events
        .iter()
        .map(|e| {
            let attributes = e.properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            (e.name.to_string(), e.timestamp_unix_ns, attributes)
        })
        .collect();
    assert_eq!(events, made);
    let links: Vec<SpanContext> = record
        .properties
        .iter()
        .filter(|(k, _)| k == LINK_KEY)
        .filter_map(|(_, v)| SpanContext::decode_w3c_traceparent(v))
        .collect();
    assert_eq!(span.links.len(), links.len());
    for (got, want) in span.links.iter().zip(&links) {
        assert_eq!(
            (got.trace_id.as_slice(), got.span_id.as_slice()),
            (&want.trace_id.0.to_be_bytes()[..], &want.span_id.0.to_be_bytes()[..])
        );
    }
    // Sampled; the root's parent (none) is not remote; every parent is local.
    assert_eq!(span.flags, 0x101);
}

#[test]
fn what_the_receiver_decodes_is_what_was_made() {
    let server = Server::start(Vec::new());
    let reporter =
        OtlpReporter::builder().env(|_| None).endpoint(server.url()).service_name("decoded").build().unwrap();
    let stats = reporter.stats();
    let made = Arc::new(Mutex::new(Vec::new()));
    // Lossless, so that every span made is reported however loaded the machine.
    minitrace::set_reporter(
        Keeping { reporter, made: made.clone() },
        Config::default().wait_when_queue_full(true),
    );
    for index in 0..REQUESTS {
        request(index);
    }
    minitrace::flush();
    assert!(stats.wait_for_delivery(std::time::Duration::from_secs(60)));

    let made = made.lock().unwrap().clone();
    assert_eq!(made.len(), REQUESTS * 10);
    let sent = stats.get();
    assert_eq!((sent.spans_sent, sent.spans_failed), (made.len() as u64, 0), "{sent:?}");

    // Every body, decoded independently, grouped by trace.
    let mut decoded: HashMap<Vec<u8>, Vec<OtlpSpan>> = HashMap::new();
    for received in server.received() {
        assert_eq!(received.header("content-type"), Some("application/x-protobuf"));
        let request = ExportTraceServiceRequest::decode(received.body.as_slice()).expect("a valid body");
        for resource_spans in request.resource_spans {
            let resource = resource_spans.resource.unwrap();
            let service = strings(&resource.attributes).into_iter().find(|(k, _)| k == "service.name");
            assert_eq!(service, Some(("service.name".into(), "decoded".into())));
            for scope_spans in resource_spans.scope_spans {
                assert_eq!(scope_spans.scope.unwrap().name, "minitrace");
                for span in scope_spans.spans {
                    decoded.entry(span.trace_id.clone()).or_default().push(span);
                }
            }
        }
    }
    let mut by_trace: BTreeMap<u128, Vec<&SpanRecord>> = BTreeMap::new();
    for record in &made {
        by_trace.entry(record.trace_id.0).or_default().push(record);
    }
    assert_eq!(decoded.len(), REQUESTS);
    assert_eq!(by_trace.len(), REQUESTS);
    // Every trace arrived whole, each span once...
    for (trace, records) in &by_trace {
        let spans = &decoded[&trace.to_be_bytes().to_vec()];
        let mut got: Vec<Vec<u8>> = spans.iter().map(|s| s.span_id.clone()).collect();
        let mut want: Vec<Vec<u8>> = records.iter().map(|r| r.span_id.0.to_be_bytes().to_vec()).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
    // ...and a sample, field by field.
    for (trace, records) in by_trace.iter().step_by(97) {
        let spans = &decoded[&trace.to_be_bytes().to_vec()];
        let root = records.iter().find(|r| r.parent_id.0 == 0).expect("a root");
        for record in records {
            let span = spans.iter().find(|s| s.span_id == record.span_id.0.to_be_bytes()).unwrap();
            check(span, record, root);
        }
    }
}
