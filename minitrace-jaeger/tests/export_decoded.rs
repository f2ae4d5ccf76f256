//! The HTTP export path end to end: spans made with minitrace's API,
//! reported through the sender thread to a collector stand-in on
//! 127.0.0.1, decoded there by an independent decoder (the `thrift`
//! crate's Binary protocol, with no schema), and compared trace by trace
//! with the records minitrace made.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use minitrace::collector::{
    Config, Reporter, SpanContext, SpanId, SpanKind, SpanRecord, SpanStatus, TraceId,
};
use minitrace::prelude::*;
use minitrace_delivery_testkit::Server;
use minitrace_jaeger::JaegerReporter;
use thrift::protocol::{TBinaryInputProtocol, TInputProtocol, TType};

const REQUESTS: usize = 3_000;

/// A Thrift value as read off the wire.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Bool(bool),
    I32(i32),
    I64(i64),
    Str(String),
    Struct(BTreeMap<i16, Value>),
    List(Vec<Value>),
}

fn read_value(p: &mut dyn TInputProtocol, ty: TType) -> Value {
    match ty {
        TType::Bool => Value::Bool(p.read_bool().unwrap()),
        TType::I32 => Value::I32(p.read_i32().unwrap()),
        TType::I64 => Value::I64(p.read_i64().unwrap()),
        TType::String => Value::Str(p.read_string().unwrap()),
        TType::Struct => {
            p.read_struct_begin().unwrap();
            let mut fields = BTreeMap::new();
            loop {
                let field = p.read_field_begin().unwrap();
                if field.field_type == TType::Stop {
                    break;
                }
                let value = read_value(p, field.field_type);
                assert!(fields.insert(field.id.unwrap(), value).is_none());
                p.read_field_end().unwrap();
            }
            p.read_struct_end().unwrap();
            Value::Struct(fields)
        }
        TType::List => {
            let list = p.read_list_begin().unwrap();
            let items = (0..list.size).map(|_| read_value(p, list.element_type)).collect();
            p.read_list_end().unwrap();
            Value::List(items)
        }
        other => panic!("jaeger.thrift has no {other:?}"),
    }
}

fn fields(value: &Value) -> &BTreeMap<i16, Value> {
    match value {
        Value::Struct(fields) => fields,
        other => panic!("not a struct: {other:?}"),
    }
}

fn list(value: Option<&Value>) -> &[Value] {
    match value {
        Some(Value::List(items)) => items,
        None => &[],
        other => panic!("not a list: {other:?}"),
    }
}

/// A tag or log field as (key, value), every value type shown as a string.
fn tag(value: &Value) -> (String, String) {
    let tag = fields(value);
    let Some(Value::Str(key)) = tag.get(&1) else { panic!("{tag:?}") };
    let value = match (tag.get(&2), tag.get(&3), tag.get(&5)) {
        (Some(Value::I32(0)), Some(Value::Str(value)), _) => value.clone(),
        (Some(Value::I32(2)), _, Some(Value::Bool(value))) => value.to_string(),
        other => panic!("{other:?}"),
    };
    (key.clone(), value)
}

struct Keeping {
    reporter: JaegerReporter,
    made: Arc<Mutex<Vec<SpanRecord>>>,
}

impl Reporter for Keeping {
    fn report(&mut self, spans: &[SpanRecord]) {
        self.made.lock().unwrap().extend_from_slice(spans);
        self.reporter.report(spans);
    }
}

fn request(index: usize) {
    let linked = SpanContext::new(TraceId(0x1234_5678 + index as u128), SpanId(99));
    let root = Span::root("request", SpanContext::random())
        .with_kind(SpanKind::Server)
        .with_properties(|| [("http.route", "/api/v1/checkout"), ("step.kind", "validate")]);
    let _guard = root.set_local_parent();
    for step in 0..7 {
        let _span = LocalSpan::enter_with_local_parent("step")
            .with_properties(|| [("http.route", "/api/v1/checkout"), ("step.kind", "validate")])
            .with_property(|| ("step", step.to_string()));
    }
    {
        let _query = LocalSpan::enter_with_local_parent("query")
            .with_status(SpanStatus::error("timed out"))
            .with_link(linked);
        Event::add_to_local_parent("retry", || [("reason".into(), "timeout".into())]);
    }
    drop(Span::enter_with_parent("async", &root).with_property(|| ("ключ", "значение ✓")));
}

/// What the Jaeger span of `record` must say, from `jaeger.thrift`.
fn check(span: &BTreeMap<i16, Value>, record: &SpanRecord) {
    let trace = record.trace_id.0;
    assert_eq!(span[&1], Value::I64(trace as u64 as i64));
    assert_eq!(span[&2], Value::I64((trace >> 64) as u64 as i64));
    assert_eq!(span[&3], Value::I64(record.span_id.0 as i64));
    assert_eq!(span[&4], Value::I64(record.parent_id.0 as i64));
    assert_eq!(span[&5], Value::Str(record.name.to_string()));
    let start = record.begin_time_unix_ns / 1000;
    let end = (record.begin_time_unix_ns + record.duration_ns) / 1000;
    assert_eq!(
        (span[&8].clone(), span[&9].clone()),
        (Value::I64(start as i64), Value::I64((end - start) as i64))
    );
    // References: the parent, then each link.
    let mut references: Vec<(i32, u64)> = Vec::new();
    if record.parent_id.0 != 0 {
        references.push((0, record.parent_id.0));
    }
    references.extend(record.links().iter().map(|link| (1, link.span_id.0)));
    let got: Vec<(i32, u64)> = list(span.get(&6))
        .iter()
        .map(|reference| {
            let reference = fields(reference);
            let (Value::I32(kind), Value::I64(id)) = (&reference[&1], &reference[&4]) else { panic!() };
            (*kind, *id as u64)
        })
        .collect();
    assert_eq!(got, references);
    // Tags: every property but links, then Jaeger's `error` on a failed span.
    let mut tags: Vec<(String, String)> = record
        .properties
        .iter()
        .filter(|(key, _)| key != "otel.link")
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if matches!(record.status(), SpanStatus::Error(_)) {
        tags.push(("error".into(), "true".into()));
    }
    assert_eq!(list(span.get(&10)).iter().map(tag).collect::<Vec<_>>(), tags);
    let logs: Vec<(i64, Vec<(String, String)>)> = list(span.get(&11))
        .iter()
        .map(|log| {
            let log = fields(log);
            let Value::I64(at) = log[&1] else { panic!() };
            (at, list(log.get(&2)).iter().map(tag).collect())
        })
        .collect();
    let made: Vec<(i64, Vec<(String, String)>)> = record
        .events
        .iter()
        .map(|event| {
            let mut fields = vec![("event".to_string(), event.name.to_string())];
            fields.extend(event.properties.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            ((event.timestamp_unix_ns / 1000) as i64, fields)
        })
        .collect();
    assert_eq!(logs, made);
}

#[test]
fn what_the_collector_decodes_is_what_was_made() {
    let server = Server::start(Vec::new());
    let reporter = JaegerReporter::http(server.addr(), "decoded");
    let stats = reporter.stats();
    let made = Arc::new(Mutex::new(Vec::new()));
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

    let mut decoded: HashMap<u64, Vec<BTreeMap<i16, Value>>> = HashMap::new();
    for received in server.received() {
        let mut rest = received.body.as_slice();
        let batch = read_value(&mut TBinaryInputProtocol::new(&mut rest, true), TType::Struct);
        assert!(rest.is_empty(), "{} bytes left over", rest.len());
        let batch = fields(&batch);
        assert_eq!(fields(&batch[&1])[&1], Value::Str("decoded".into()));
        for span in list(batch.get(&2)) {
            let span = fields(span).clone();
            let Value::I64(low) = span[&1] else { panic!() };
            decoded.entry(low as u64).or_default().push(span);
        }
    }
    let mut by_trace: BTreeMap<u128, Vec<&SpanRecord>> = BTreeMap::new();
    for record in &made {
        by_trace.entry(record.trace_id.0).or_default().push(record);
    }
    assert_eq!(by_trace.len(), REQUESTS);
    for (trace, records) in &by_trace {
        let spans: Vec<&BTreeMap<i16, Value>> = decoded[&(*trace as u64)]
            .iter()
            .filter(|s| s[&2] == Value::I64((trace >> 64) as u64 as i64))
            .collect();
        let mut got: Vec<Value> = spans.iter().map(|s| s[&3].clone()).collect();
        let mut want: Vec<Value> = records.iter().map(|r| Value::I64(r.span_id.0 as i64)).collect();
        got.sort_by_key(|v| format!("{v:?}"));
        want.sort_by_key(|v| format!("{v:?}"));
        assert_eq!(got, want);
    }
    for (trace, records) in by_trace.iter().step_by(97) {
        let spans = &decoded[&(*trace as u64)];
        for record in records {
            let span = spans.iter().find(|s| s[&3] == Value::I64(record.span_id.0 as i64)).unwrap();
            check(span, record);
        }
    }
}
