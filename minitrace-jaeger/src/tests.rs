//! Round trips: our bytes decoded by an independent Thrift implementation
//! (Apache Thrift's `thrift` crate), read generically field by field and
//! compared with what the records say.

use std::borrow::Cow;
use std::collections::BTreeMap;

use minitrace::collector::{EventRecord, SpanId, SpanRecord, TraceId};
use thrift::protocol::{TBinaryInputProtocol, TCompactInputProtocol, TInputProtocol, TMessageType, TType};

use crate::model::tests::messages;
use crate::model::{batch_message, ClientStats, Process, TRUNCATED_TAG};
use crate::thrift::{Binary, Compact, Protocol};

/// A Thrift value as read off the wire, with no schema.
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
        TType::Struct => Value::Struct(read_struct(p)),
        TType::List => {
            let list = p.read_list_begin().unwrap();
            let items = (0..list.size).map(|_| read_value(p, list.element_type)).collect();
            p.read_list_end().unwrap();
            Value::List(items)
        }
        other => panic!("jaeger.thrift has no {other:?}"),
    }
}

fn read_struct(p: &mut dyn TInputProtocol) -> BTreeMap<i16, Value> {
    p.read_struct_begin().unwrap();
    let mut fields = BTreeMap::new();
    loop {
        let field = p.read_field_begin().unwrap();
        if field.field_type == TType::Stop {
            break;
        }
        let id = field.id.unwrap();
        let value = read_value(p, field.field_type);
        assert!(fields.insert(id, value).is_none(), "field {id} twice");
        p.read_field_end().unwrap();
    }
    p.read_struct_end().unwrap();
    fields
}

/// Decodes an agent datagram: checks the envelope, returns the `Batch`.
fn decode_compact(datagram: &[u8]) -> BTreeMap<i16, Value> {
    let mut rest = datagram;
    let mut args = {
        let mut p = TCompactInputProtocol::new(&mut rest);
        let message = p.read_message_begin().unwrap();
        assert_eq!(message.name, "emitBatch");
        assert_eq!(message.message_type, TMessageType::OneWay);
        let args = read_struct(&mut p);
        p.read_message_end().unwrap();
        args
    };
    assert!(rest.is_empty(), "{} bytes left over", rest.len());
    assert_eq!(args.len(), 1);
    match args.remove(&1) {
        Some(Value::Struct(batch)) => batch,
        other => panic!("args.1 is {other:?}"),
    }
}

/// Decodes a collector request body: a bare `Batch`.
fn decode_binary(body: &[u8]) -> BTreeMap<i16, Value> {
    let mut rest = body;
    let batch = read_struct(&mut TBinaryInputProtocol::new(&mut rest, true));
    assert!(rest.is_empty(), "{} bytes left over", rest.len());
    batch
}

fn s(v: &str) -> Value {
    Value::Str(v.to_string())
}

fn fields(entries: Vec<(i16, Value)>) -> Value {
    Value::Struct(entries.into_iter().collect())
}

fn string_tag(key: &str, value: &str) -> Value {
    fields(vec![(1, s(key)), (2, Value::I32(0)), (3, s(value))])
}

fn bool_tag(key: &str, value: bool) -> Value {
    fields(vec![(1, s(key)), (2, Value::I32(2)), (5, Value::Bool(value))])
}

/// What Jaeger should receive for `record`, written from the IDL rather than
/// from the encoder.
fn expected_span(record: &SpanRecord) -> Value {
    let low = Value::I64(record.trace_id.0 as u64 as i64);
    let high = Value::I64((record.trace_id.0 >> 64) as u64 as i64);
    let start = record.begin_time_unix_ns / 1000;
    let end = (record.begin_time_unix_ns + record.duration_ns) / 1000;
    let mut span = vec![
        (1, low.clone()),
        (2, high.clone()),
        (3, Value::I64(record.span_id.0 as i64)),
        (4, Value::I64(record.parent_id.0 as i64)),
        (5, s(&record.name)),
        (7, Value::I32(1)),
        (8, Value::I64(start as i64)),
        (9, Value::I64((end - start) as i64)),
    ];
    if record.parent_id.0 != 0 {
        let reference =
            fields(vec![(1, Value::I32(0)), (2, low), (3, high), (4, Value::I64(record.parent_id.0 as i64))]);
        span.push((6, Value::List(vec![reference])));
    }
    if !record.properties.is_empty() {
        span.push((10, Value::List(record.properties.iter().map(|(k, v)| string_tag(k, v)).collect())));
    }
    if !record.events.is_empty() {
        let logs = record
            .events
            .iter()
            .map(|event| {
                let mut log_fields = vec![string_tag("event", &event.name)];
                log_fields.extend(event.properties.iter().map(|(k, v)| string_tag(k, v)));
                fields(vec![
                    (1, Value::I64((event.timestamp_unix_ns / 1000) as i64)),
                    (2, Value::List(log_fields)),
                ])
            })
            .collect();
        span.push((11, Value::List(logs)));
    }
    fields(span)
}

fn process() -> Process {
    Process {
        service_name: "svc ✓".to_string(),
        tags: vec![("hostname".to_string(), "host".to_string()), ("ключ".to_string(), "".to_string())],
    }
}

fn expected_process() -> Value {
    fields(vec![
        (1, s("svc ✓")),
        (2, Value::List(vec![string_tag("hostname", "host"), string_tag("ключ", "")])),
    ])
}

fn property(
    k: impl Into<Cow<'static, str>>,
    v: impl Into<Cow<'static, str>>,
) -> (Cow<'static, str>, Cow<'static, str>) {
    (k.into(), v.into())
}

/// Spans at the edges: ids 0 and all ones, unicode, empty and long strings.
fn edge_records() -> Vec<SpanRecord> {
    vec![
        SpanRecord {
            trace_id: TraceId(0),
            span_id: SpanId(0),
            parent_id: SpanId(0),
            begin_time_unix_ns: 0,
            duration_ns: 0,
            name: "".into(),
            properties: vec![],
            events: vec![],
        },
        SpanRecord {
            trace_id: TraceId(u128::MAX),
            span_id: SpanId(u64::MAX),
            parent_id: SpanId(u64::MAX - 1),
            begin_time_unix_ns: 1_700_000_000_123_456_789,
            duration_ns: 999,
            name: "数据库 query 🚀 ünïcödé".into(),
            properties: vec![property("ключ", "значение ✓"), property("", ""), property("k", "v")],
            events: vec![
                EventRecord {
                    name: "cache miss 🙈".into(),
                    timestamp_unix_ns: 1_700_000_000_123_999_999,
                    properties: vec![],
                },
                EventRecord {
                    name: "retry".into(),
                    timestamp_unix_ns: u64::MAX,
                    properties: vec![property("attempt", "2"), property("why", "timeout")],
                },
            ],
        },
        SpanRecord {
            trace_id: TraceId((1u128 << 64) | 1),
            span_id: SpanId(1 << 63),
            parent_id: SpanId(1),
            begin_time_unix_ns: u64::MAX - 5000,
            duration_ns: 4000,
            name: "x".repeat(300).into(),
            properties: (0..40).map(|i| property(format!("key{i}"), "v".repeat(i))).collect(),
            events: vec![],
        },
    ]
}

/// A span whose one tag is `bytes` long.
fn huge_tag_record(bytes: usize) -> SpanRecord {
    SpanRecord {
        trace_id: TraceId(7),
        span_id: SpanId(8),
        parent_id: SpanId(9),
        begin_time_unix_ns: 1_000_000,
        duration_ns: 2_000,
        name: "huge".into(),
        properties: vec![property("blob", "é".repeat(bytes / 2)), property("small", "ok")],
        events: vec![EventRecord { name: "e".into(), timestamp_unix_ns: 1_500_000, properties: vec![] }],
    }
}

fn batch_spans(batch: &BTreeMap<i16, Value>) -> Vec<Value> {
    match batch.get(&2) {
        Some(Value::List(spans)) => spans.clone(),
        other => panic!("Batch.spans is {other:?}"),
    }
}

/// The byte-level test vector of the wire facts.
#[test]
fn test_vector_matches_byte_for_byte() {
    let expected: Vec<u8> = [
        &[0x82, 0x81, 0x01, 0x09][..],
        b"emitBatch",
        &[0x1c],
        &[0x1c, 0x18, 0x03, b's', b'v', b'c', 0x00],
        &[0x19, 0x1c],
        &[0x16, 0x02, 0x16, 0x00, 0x16, 0x04, 0x16, 0x00],
        &[0x18, 0x02, b'o', b'p'],
        &[0x25, 0x02],
        &[0x16, 0x80, 0x80, 0xf2, 0x81, 0x83, 0x89, 0x85, 0x06],
        &[0x16, 0x0a],
        &[0x19, 0x2c],
        &[0x18, 0x01, b'k', 0x15, 0x00, 0x18, 0x01, b'v', 0x00],
        &[0x18, 0x01, b'b', 0x15, 0x04, 0x31, 0x00],
        &[0x00],
        &[0x16, 0x02],
        &[0x00, 0x00],
    ]
    .concat();

    // The vector's span has a bool tag, which records never produce: write
    // it with the protocol's own calls.
    let mut span = Compact::default();
    span.struct_begin();
    span.field_i64(1, 1);
    span.field_i64(2, 0);
    span.field_i64(3, 2);
    span.field_i64(4, 0);
    span.field_string(5, "op");
    span.field_i32(7, 1);
    span.field_i64(8, 1_700_000_000_000_000);
    span.field_i64(9, 5);
    span.field(10, crate::thrift::Type::List);
    span.list_begin(crate::thrift::Type::Struct, 2);
    crate::model::string_tag(&mut span, "k", "v");
    crate::model::bool_tag(&mut span, "b", true);
    span.struct_end();

    let mut process_bytes = Compact::default();
    crate::model::process(&mut process_bytes, &Process { service_name: "svc".into(), tags: vec![] });
    let mut message = Compact::default();
    batch_message(&mut message, &process_bytes.buf, &span.buf, 1, 1, None);
    assert_eq!(message.buf, expected);

    // And the model's own span encoding, for the same span with only the
    // string tag, matches the vector's bytes too.
    let record = SpanRecord {
        trace_id: TraceId(1),
        span_id: SpanId(2),
        parent_id: SpanId(0),
        begin_time_unix_ns: 1_700_000_000_000_000_000,
        duration_ns: 5_000,
        name: "op".into(),
        properties: vec![property("k", "v")],
        events: vec![],
    };
    let (out, _) =
        messages::<Compact>(&Process { service_name: "svc".into(), tags: vec![] }, 65_000, &[record]);
    let datagram = &out[0].0;
    assert_eq!(expected.len(), 71);
    let span_bytes: Vec<u8> = [&expected[23..48], &[0x19, 0x1c], &expected[50..59], &[0x00]].concat();
    assert_eq!(&datagram[..23], &expected[..23]);
    assert_eq!(&datagram[23..23 + span_bytes.len()], &span_bytes[..]);
    // Then seqNo 1 and the ClientStats of a reporter that lost nothing.
    assert_eq!(
        &datagram[23 + span_bytes.len()..],
        &[0x16, 0x02, 0x1c, 0x16, 0x00, 0x16, 0x00, 0x16, 0x00, 0x00, 0x00, 0x00]
    );
}

#[test]
fn empty_batch_round_trips() {
    let mut process_bytes = Compact::default();
    crate::model::process(&mut process_bytes, &process());
    let mut message = Compact::default();
    batch_message(&mut message, &process_bytes.buf, &[], 0, 42, Some(&ClientStats::default()));
    let batch = decode_compact(&message.buf);
    assert_eq!(batch[&1], expected_process());
    assert_eq!(batch[&2], Value::List(vec![]));
    assert_eq!(batch[&3], Value::I64(42));

    let mut process_bytes = Binary::default();
    crate::model::process(&mut process_bytes, &process());
    let mut body = Binary::default();
    batch_message(&mut body, &process_bytes.buf, &[], 0, -1, None);
    let batch = decode_binary(&body.buf);
    assert_eq!(batch[&1], expected_process());
    assert_eq!(batch[&2], Value::List(vec![]));
    assert_eq!(batch[&3], Value::I64(-1));
    assert!(!batch.contains_key(&4));
}

#[test]
fn edge_cases_round_trip_in_both_protocols() {
    let records = edge_records();
    let expected: Vec<Value> = records.iter().map(expected_span).collect();

    let (datagrams, outcome) = messages::<Compact>(&process(), 65_000, &records);
    assert_eq!(outcome, Default::default());
    assert_eq!(datagrams.len(), 1);
    let batch = decode_compact(&datagrams[0].0);
    assert_eq!(batch[&1], expected_process());
    assert_eq!(batch_spans(&batch), expected);
    assert_eq!(batch[&3], Value::I64(1));
    assert_eq!(batch[&4], fields(vec![(1, Value::I64(0)), (2, Value::I64(0)), (3, Value::I64(0))]));

    let (bodies, outcome) = messages::<Binary>(&process(), 1 << 20, &records);
    assert_eq!(outcome, Default::default());
    let batch = decode_binary(&bodies[0].0);
    assert_eq!(batch[&1], expected_process());
    assert_eq!(batch_spans(&batch), expected);
}

#[test]
fn huge_tags_go_whole_over_http_and_truncated_over_udp() {
    let record = huge_tag_record(1 << 20);

    let (bodies, outcome) = messages::<Binary>(&process(), 4 << 20, std::slice::from_ref(&record));
    assert_eq!(outcome, Default::default());
    assert_eq!(batch_spans(&decode_binary(&bodies[0].0)), vec![expected_span(&record)]);

    let (datagrams, outcome) = messages::<Compact>(&process(), 65_000, std::slice::from_ref(&record));
    assert_eq!((outcome.truncated, outcome.dropped), (1, 0));
    assert_eq!(datagrams.len(), 1);
    assert!(datagrams[0].0.len() <= 65_000);
    let spans = batch_spans(&decode_compact(&datagrams[0].0));
    let Value::Struct(span) = &spans[0] else { panic!() };
    // Ids, name and times intact; the blob cut at a char boundary; the
    // small tag and the log kept; the truncation tagged.
    let Value::Struct(whole) = expected_span(&record) else { panic!() };
    for id in [1, 2, 3, 4, 5, 6, 7, 8, 9, 11] {
        assert_eq!(span[&id], whole[&id], "field {id}");
    }
    let Value::List(tags) = &span[&10] else { panic!() };
    let Value::Struct(blob) = &tags[0] else { panic!() };
    let Value::Str(cut) = &blob[&3] else { panic!() };
    assert!(cut.len() > 10_000 && cut.len() < 65_000, "{}", cut.len());
    assert!(cut.chars().all(|c| c == 'é'));
    assert_eq!(tags[1], string_tag("small", "ok"));
    assert_eq!(tags[2], bool_tag(TRUNCATED_TAG, true));
}

#[test]
fn too_many_tags_leave_a_bare_span_and_too_small_a_limit_drops_it() {
    let mut record = huge_tag_record(10);
    record.properties = (0..20_000).map(|i| property(format!("k{i}"), "value")).collect();
    let (datagrams, outcome) = messages::<Compact>(&process(), 65_000, std::slice::from_ref(&record));
    assert_eq!((outcome.truncated, outcome.dropped), (1, 0));
    let spans = batch_spans(&decode_compact(&datagrams[0].0));
    let Value::Struct(span) = &spans[0] else { panic!() };
    assert_eq!(span[&5], s("huge"));
    assert_eq!(span[&10], Value::List(vec![bool_tag(TRUNCATED_TAG, true)]));
    assert!(!span.contains_key(&11));

    // A limit below the process and one bare span: dropped, nothing sent.
    let (datagrams, outcome) = messages::<Compact>(&process(), 100, &[record.clone(), record]);
    assert_eq!((outcome.truncated, outcome.dropped), (0, 2));
    assert!(datagrams.is_empty());
}

#[test]
fn large_reports_are_split_in_order_under_the_limit() {
    let records: Vec<SpanRecord> = (0..20_000u64)
        .map(|i| SpanRecord {
            trace_id: TraceId(12345),
            span_id: SpanId(i + 1),
            parent_id: SpanId(i / 2),
            begin_time_unix_ns: 1_700_000_000_000_000_000 + i * 1000,
            duration_ns: 500,
            name: format!("span {i}").into(),
            properties: vec![property("index", i.to_string())],
            events: vec![],
        })
        .collect();
    for max in [65_000, 1_400] {
        let (datagrams, outcome) = messages::<Compact>(&process(), max, &records);
        assert_eq!(outcome, Default::default());
        let mut decoded = Vec::new();
        for (seq, (datagram, count)) in datagrams.iter().enumerate() {
            assert!(datagram.len() <= max, "{} > {max}", datagram.len());
            let batch = decode_compact(datagram);
            assert_eq!(batch[&3], Value::I64(seq as i64 + 1));
            let spans = batch_spans(&batch);
            assert_eq!(spans.len(), *count);
            decoded.extend(spans);
        }
        assert_eq!(decoded.len(), records.len());
        assert!(decoded.iter().zip(&records).all(|(got, record)| *got == expected_span(record)));
        // Well packed: each datagram is at least half full but the last.
        let full = datagrams.iter().rev().skip(1).all(|(d, _)| d.len() > max / 2);
        assert!(full, "{max}");
    }
}

/// Spans minitrace drops at a full queue count in `ClientStats` from the
/// reporter's start: a replacement reporter is a new Jaeger client, which
/// must not report its predecessors' drops again.
#[test]
fn queue_drops_count_from_the_reporters_start() {
    use minitrace::prelude::*;
    use std::sync::mpsc;

    // A reporter that holds the collector thread, so that queues fill up.
    struct Held {
        entered: mpsc::Sender<()>,
        release: mpsc::Receiver<()>,
    }
    impl minitrace::collector::Reporter for Held {
        fn report(&mut self, _spans: &[SpanRecord]) {
            let _ = self.entered.send(());
            let _ = self.release.recv();
        }
    }
    let (entered, collector_held) = mpsc::channel();
    let (release, released) = mpsc::channel();
    minitrace::set_reporter(Held { entered, release: released }, minitrace::collector::Config::default());
    // Reported at the collector's next interval, where it stays.
    drop(Span::root("holds the collector", SpanContext::random()));
    collector_held.recv().unwrap();
    let fill = || {
        for _ in 0..3_000 {
            let root = Span::root("request", SpanContext::random());
            let _guard = root.set_local_parent();
            for _ in 0..99 {
                let _span = minitrace::local::LocalSpan::enter_with_local_parent("step");
            }
        }
    };
    let drops = || minitrace::collector::stats().dropped_queue_full;

    fill();
    let counters = crate::Counters::starting_now(Default::default());
    let before = drops();
    assert!(before > 0, "the held collector let nothing be dropped");
    fill();
    let (queue_drops, after) = (counters.client_stats().full_queue_dropped_spans, drops());
    assert!(after > before);
    assert_eq!(queue_drops, (after - before) as i64, "drops before the reporter was made were counted");
    drop(release);
}

#[test]
fn kind_status_and_links_map_to_jaeger_tags_and_references() {
    use minitrace::collector::{SpanContext, KIND_KEY, LINK_KEY, STATUS_CODE_KEY, STATUS_MESSAGE_KEY};
    let linked = SpanContext::new(TraceId(0xaaaa_0000_0000_0000_0000_0000_0000_bbbb), SpanId(0xcc));
    let record = SpanRecord {
        trace_id: TraceId(0x11),
        span_id: SpanId(2),
        parent_id: SpanId(1),
        begin_time_unix_ns: 1_000_000,
        duration_ns: 5_000,
        name: "call".into(),
        properties: vec![
            (KIND_KEY.into(), "client".into()),
            (LINK_KEY.into(), linked.encode_w3c_traceparent().into()),
            (STATUS_CODE_KEY.into(), "ERROR".into()),
            (STATUS_MESSAGE_KEY.into(), "refused".into()),
        ],
        events: Vec::new(),
    };
    let (datagrams, _) = messages::<Compact>(&process(), 65_000, std::slice::from_ref(&record));
    let span = batch_spans(&decode_compact(&datagrams[0].0)).remove(0);
    let Value::Struct(span) = span else { panic!("a span is a struct") };
    let child_of =
        fields(vec![(1, Value::I32(0)), (2, Value::I64(0x11)), (3, Value::I64(0)), (4, Value::I64(1))]);
    let follows_from = fields(vec![
        (1, Value::I32(1)),
        (2, Value::I64(0xbbbb)),
        (3, Value::I64(0xaaaa_0000_0000_0000_u64 as i64)),
        (4, Value::I64(0xcc)),
    ]);
    assert_eq!(span[&6], Value::List(vec![child_of, follows_from]));
    // The link is a reference, not a tag; a failed span gets Jaeger's `error` tag.
    let tags = vec![
        string_tag(KIND_KEY, "client"),
        string_tag(STATUS_CODE_KEY, "ERROR"),
        string_tag(STATUS_MESSAGE_KEY, "refused"),
        bool_tag("error", true),
    ];
    assert_eq!(span[&10], Value::List(tags));
}

/// The auto traits of 0.6.7's `JaegerReporter`, which a 0.6 user may rely
/// on: kept whatever the transports hold.
#[test]
fn the_reporter_keeps_the_auto_traits_of_0_6() {
    use std::panic::{RefUnwindSafe, UnwindSafe};
    fn auto_traits<T: Send + Sync + Unpin + UnwindSafe + RefUnwindSafe>() {}
    auto_traits::<crate::JaegerReporter>();
    auto_traits::<crate::StatsHandle>();
}
