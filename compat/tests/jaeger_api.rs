//! minitrace-jaeger 0.6.7's `JaegerReporter`: the constructor's signature and error type, its
//! trait impls, and what it sends: one-way `emitBatch` messages in Thrift's compact protocol,
//! one UDP datagram each, to the agent address. The datagrams are decoded with the independent
//! `thrift` crate and checked field by field against jaeger.thrift.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::error::Error;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use minitrace::collector::{Config, EventRecord, Reporter, SpanContext, SpanId, SpanRecord, TraceId};
use minitrace::Span;
use minitrace_compat_06::serial;
use minitrace_jaeger::JaegerReporter;
use thrift::protocol::{TCompactInputProtocol, TInputProtocol, TMessageType, TType};

/// A Thrift value of any type, as decoded without the IDL.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    Double(f64),
    Bytes(Vec<u8>),
    Struct(BTreeMap<i16, Value>),
    List(Vec<Value>),
}

fn read_value(input: &mut impl TInputProtocol, kind: TType) -> Value {
    match kind {
        TType::Bool => Value::Bool(input.read_bool().unwrap()),
        TType::I08 => Value::I8(input.read_i8().unwrap()),
        TType::I16 => Value::I16(input.read_i16().unwrap()),
        TType::I32 => Value::I32(input.read_i32().unwrap()),
        TType::I64 => Value::I64(input.read_i64().unwrap()),
        TType::Double => Value::Double(input.read_double().unwrap()),
        TType::String => Value::Bytes(input.read_bytes().unwrap()),
        TType::Struct => {
            input.read_struct_begin().unwrap();
            let mut fields = BTreeMap::new();
            loop {
                let field = input.read_field_begin().unwrap();
                if field.field_type == TType::Stop {
                    break;
                }
                let value = read_value(input, field.field_type);
                assert!(fields.insert(field.id.unwrap(), value).is_none(), "a field sent twice");
                input.read_field_end().unwrap();
            }
            input.read_struct_end().unwrap();
            Value::Struct(fields)
        }
        TType::List => {
            let list = input.read_list_begin().unwrap();
            let items = (0..list.size).map(|_| read_value(input, list.element_type)).collect();
            input.read_list_end().unwrap();
            Value::List(items)
        }
        other => panic!("jaeger.thrift has no {other:?} fields"),
    }
}

/// Decodes one datagram: the message must be a one-way `emitBatch`; returns its `Batch`.
fn decode_batch(datagram: &[u8]) -> BTreeMap<i16, Value> {
    let mut input = TCompactInputProtocol::new(datagram);
    let message = input.read_message_begin().unwrap();
    assert_eq!(message.name, "emitBatch");
    assert_eq!(message.message_type, TMessageType::OneWay);
    let Value::Struct(mut arguments) = read_value(&mut input, TType::Struct) else { unreachable!() };
    input.read_message_end().unwrap();
    // `emitBatch(1: Batch batch)` is its only argument.
    assert_eq!(arguments.len(), 1);
    match arguments.remove(&1) {
        Some(Value::Struct(batch)) => batch,
        other => panic!("not a batch: {other:?}"),
    }
}

/// The `Process` of a batch.
fn process(batch: &BTreeMap<i16, Value>) -> &BTreeMap<i16, Value> {
    match field(batch, 1) {
        Value::Struct(process) => process,
        other => panic!("not a process: {other:?}"),
    }
}

fn field(fields: &BTreeMap<i16, Value>, id: i16) -> &Value {
    fields.get(&id).unwrap_or_else(|| panic!("field {id} missing from {fields:?}"))
}

fn string(fields: &BTreeMap<i16, Value>, id: i16) -> String {
    match field(fields, id) {
        Value::Bytes(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        other => panic!("field {id} is not a string: {other:?}"),
    }
}

fn i64_field(fields: &BTreeMap<i16, Value>, id: i16) -> i64 {
    match field(fields, id) {
        Value::I64(value) => *value,
        other => panic!("field {id} is not an i64: {other:?}"),
    }
}

/// An optional list field; absent counts as empty.
fn structs(fields: &BTreeMap<i16, Value>, id: i16) -> Vec<BTreeMap<i16, Value>> {
    match fields.get(&id) {
        None => vec![],
        Some(Value::List(items)) => items
            .iter()
            .map(|item| match item {
                Value::Struct(fields) => fields.clone(),
                other => panic!("not a struct: {other:?}"),
            })
            .collect(),
        Some(other) => panic!("field {id} is not a list: {other:?}"),
    }
}

/// String tags as `(key, value)`; `vType` 0 is STRING.
fn string_tags(fields: &BTreeMap<i16, Value>, id: i16) -> Vec<(String, String)> {
    structs(fields, id)
        .iter()
        .map(|tag| {
            assert_eq!(field(tag, 2), &Value::I32(0), "not a string tag: {tag:?}");
            (string(tag, 1), string(tag, 3))
        })
        .collect()
}

fn agent() -> UdpSocket {
    let agent = UdpSocket::bind("127.0.0.1:0").unwrap();
    agent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    agent
}

/// Receives datagrams until `spans` spans arrived; returns the batches and datagram sizes.
fn receive(agent: &UdpSocket, spans: usize) -> (Vec<BTreeMap<i16, Value>>, Vec<usize>) {
    let mut buffer = vec![0; 70_000];
    let (mut batches, mut sizes, mut received) = (Vec::new(), Vec::new(), 0);
    while received < spans {
        let size = agent.recv(&mut buffer).expect("a datagram from the reporter");
        let batch = decode_batch(&buffer[..size]);
        received += structs(&batch, 2).len();
        batches.push(batch);
        sizes.push(size);
    }
    assert_eq!(received, spans);
    (batches, sizes)
}

/// What 0.6.7's `JaegerReporter::new` returns.
type NewResult = Result<JaegerReporter, Box<dyn Error + Send + Sync + 'static>>;

fn jaeger_reporter<T: Reporter + Send + Sync + Unpin + 'static>() {}

#[test]
fn the_constructor_and_trait_impls_are_067s() {
    jaeger_reporter::<JaegerReporter>();
    let _: fn(SocketAddr, &'static str) -> NewResult = JaegerReporter::new;
    let _: fn(SocketAddr, String) -> NewResult = JaegerReporter::new;
    let _: fn(&mut JaegerReporter, &[SpanRecord]) = <JaegerReporter as Reporter>::report;

    // 0.6 code propagates the error with `?`, or unsizes it to a plain boxed error.
    fn propagated(addr: SocketAddr) -> Result<JaegerReporter, Box<dyn Error + Send + Sync>> {
        let reporter = JaegerReporter::new(addr, String::from("service"))?;
        Ok(reporter)
    }
    fn unsized_error(addr: SocketAddr) -> Result<JaegerReporter, Box<dyn Error>> {
        JaegerReporter::new(addr, "service").map_err(|error| -> Box<dyn Error> { error })
    }
    let addr: SocketAddr = "127.0.0.1:6831".parse().unwrap();
    assert!(propagated(addr).is_ok());
    assert!(unsized_error(addr).is_ok());
    let boxed: Box<dyn Reporter> = Box::new(JaegerReporter::new(addr, "service").unwrap());
    drop(boxed);
}

#[test]
fn report_sends_one_way_emit_batch_with_067s_fields() {
    let agent = agent();
    let created: Result<JaegerReporter, Box<dyn Error + Send + Sync + 'static>> =
        JaegerReporter::new(agent.local_addr().unwrap(), "compat-service");
    let mut reporter = created.unwrap();
    // High bits set, to check the signed split of the ids.
    let trace_id = TraceId(0x8000_0000_0000_0001_ffff_ffff_ffff_fffe);
    let record = SpanRecord {
        trace_id,
        span_id: SpanId(0xfedc_ba98_7654_3210),
        parent_id: SpanId(0x0123_4567_89ab_cdef),
        begin_time_unix_ns: 1_700_000_000_123_456_789,
        duration_ns: 5_000_999,
        name: Cow::Borrowed("operation"),
        properties: vec![("k".into(), "v".into()), ("k2".into(), "v2".into())],
        events: vec![EventRecord {
            name: "an event".into(),
            timestamp_unix_ns: 1_700_000_000_124_000_999,
            properties: vec![("ek".into(), "ev".into())],
        }],
    };
    let root = SpanRecord {
        trace_id,
        span_id: SpanId(7),
        parent_id: SpanId(0),
        begin_time_unix_ns: 1_700_000_000_000_000_000,
        duration_ns: 999,
        name: Cow::Owned(String::from("root")),
        properties: vec![],
        events: vec![],
    };
    reporter.report(&[record, root]);

    let (batches, _) = receive(&agent, 2);
    assert_eq!(batches.len(), 1);
    let batch = &batches[0];
    let process = process(batch);
    assert_eq!(string(process, 1), "compat-service");
    // A deliberate difference from 0.6.7, which sends no process tags: the
    // ones Jaeger's own clients send, so that its UI can tell hosts and
    // process instances apart (documented in the crate docs).
    let process_tags = string_tags(process, 2);
    let keys: Vec<&str> = process_tags.iter().map(|(key, _)| key.as_str()).collect();
    assert!(
        keys.contains(&"jaeger.version") && keys.contains(&"client-uuid"),
        "process tags {process_tags:?}"
    );

    let spans = structs(batch, 2);
    assert_eq!(spans.len(), 2);
    let span = &spans[0];
    assert_eq!(i64_field(span, 1), 0xffff_ffff_ffff_fffe_u64 as i64, "traceIdLow");
    assert_eq!(i64_field(span, 2), 0x8000_0000_0000_0001_u64 as i64, "traceIdHigh");
    assert_eq!(i64_field(span, 3), 0xfedc_ba98_7654_3210_u64 as i64, "spanId");
    assert_eq!(i64_field(span, 4), 0x0123_4567_89ab_cdef, "parentSpanId");
    assert_eq!(string(span, 5), "operation");
    // A deliberate difference from 0.6.7, which sets only parentSpanId: a
    // CHILD_OF reference to the parent too, the form Jaeger's model prefers
    // (and the one links will use).
    let references = structs(span, 6);
    assert_eq!(references.len(), 1, "references");
    assert_eq!(i64_field(&references[0], 4), 0x0123_4567_89ab_cdef, "reference to the parent");
    assert_eq!(field(span, 7), &Value::I32(1), "flags: sampled");
    // Microseconds, truncated.
    assert_eq!(i64_field(span, 8), 1_700_000_000_123_456, "startTime");
    // A deliberate difference from 0.6.7 (duration_ns / 1000 = 5 000): both
    // ends are floored to µs, so that a child never seems to outlast its
    // parent in Jaeger; here the end, ...128_456.788, floors to 5 001 µs on.
    assert_eq!(i64_field(span, 9), 5_001, "duration");
    let tags = [("k".to_string(), "v".to_string()), ("k2".to_string(), "v2".to_string())];
    assert_eq!(string_tags(span, 10), tags);
    let logs = structs(span, 11);
    assert_eq!(logs.len(), 1);
    assert_eq!(i64_field(&logs[0], 1), 1_700_000_000_124_000, "log timestamp");
    // The event's name is the first field. A deliberate difference from
    // 0.6.7, which names it "name": "event", the key Jaeger itself gives an
    // OTLP event's name, so both reporters' logs read the same.
    let fields = [("event".to_string(), "an event".to_string()), ("ek".to_string(), "ev".to_string())];
    assert_eq!(string_tags(&logs[0], 2), fields);

    let root = &spans[1];
    assert_eq!(i64_field(root, 3), 7);
    assert_eq!(i64_field(root, 4), 0);
    assert_eq!(string(root, 5), "root");
    assert!(string_tags(root, 10).is_empty() && structs(root, 11).is_empty());

    // Nothing to report sends nothing.
    reporter.report(&[]);
    agent.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    assert!(agent.recv(&mut [0; 16]).is_err(), "an empty report sent a datagram");
}

#[test]
fn large_reports_are_split_into_datagrams_the_agent_accepts() {
    let agent = agent();
    let mut reporter = JaegerReporter::new(agent.local_addr().unwrap(), String::from("split")).unwrap();
    let records: Vec<SpanRecord> = (0..500)
        .map(|i| SpanRecord {
            trace_id: TraceId(1),
            span_id: SpanId(i + 1),
            name: format!("span {i}").into(),
            properties: vec![("payload".into(), "x".repeat(100).into())],
            ..SpanRecord::default()
        })
        .collect();
    reporter.report(&records);
    let (batches, sizes) = receive(&agent, 500);
    assert!(batches.len() > 1, "one datagram of {sizes:?} bytes");
    // The agent's UDP limit.
    assert!(sizes.iter().all(|&size| size <= 65_000), "{sizes:?}");
    let mut ids: Vec<i64> =
        batches.iter().flat_map(|batch| structs(batch, 2)).map(|s| i64_field(&s, 3)).collect();
    ids.sort();
    assert_eq!(ids, (1..=500).collect::<Vec<i64>>());
}

#[test]
fn an_agent_that_is_gone_does_not_stop_the_reporter() {
    let gone = agent();
    let addr = gone.local_addr().unwrap();
    drop(gone);
    let mut reporter = JaegerReporter::new(addr, "nobody listens").unwrap();
    // 0.6.7 logs the failure and carries on.
    for _ in 0..3 {
        reporter.report(&[SpanRecord { name: "lost".into(), ..SpanRecord::default() }]);
    }
}

#[test]
fn an_ipv6_agent_is_reached() {
    // A machine without an IPv6 loopback has nothing to check here.
    let Ok(agent) = UdpSocket::bind("[::1]:0") else { return };
    agent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reporter = JaegerReporter::new(agent.local_addr().unwrap(), "v6").unwrap();
    reporter.report(&[SpanRecord { name: "over v6".into(), ..SpanRecord::default() }]);
    let (batches, _) = receive(&agent, 1);
    assert_eq!(string(&structs(&batches[0], 2)[0], 5), "over v6");
}

#[test]
fn as_the_global_reporter_it_sends_finished_traces() {
    let _serial = serial();
    let agent = agent();
    let reporter = JaegerReporter::new(agent.local_addr().unwrap(), "global").unwrap();
    minitrace::set_reporter(reporter, Config::default());
    let started = Instant::now();
    {
        let root = Span::root("root", SpanContext::random()).with_property(|| ("k", "v"));
        let _child = Span::enter_with_parent("child", &root);
    }
    minitrace::flush();
    let (batches, _) = receive(&agent, 2);
    assert!(started.elapsed() < Duration::from_secs(5));
    let spans: Vec<BTreeMap<i16, Value>> = batches.iter().flat_map(|batch| structs(batch, 2)).collect();
    let root = spans.iter().find(|span| string(span, 5) == "root").expect("the root");
    let child = spans.iter().find(|span| string(span, 5) == "child").expect("the child");
    assert_eq!(i64_field(child, 4), i64_field(root, 3));
    assert_eq!((i64_field(child, 1), i64_field(child, 2)), (i64_field(root, 1), i64_field(root, 2)));
    assert_eq!(string_tags(root, 10), [("k".to_string(), "v".to_string())]);
    assert_eq!(string(process(&batches[0]), 1), "global");
}
