//! The Perfetto export keeps what the dump keeps of each span: its ids, its
//! properties, and its events as instant events; a trace whose root was not
//! held still shows its spans, each naming its trace.

use minitrace_flight::{EventRecord, Reader, RecordedTrace, SpanId, SpanRecord, TraceId, Writer};
use minitrace_view::{export_perfetto, Exported, PerfettoOptions};
use serde_json::{json, Value};

const T: u64 = 1_700_000_000_000_000_000;

fn span(trace: u128, id: u64, parent: u64, name: &'static str, begin: u64, duration: u64) -> SpanRecord {
    SpanRecord {
        trace_id: TraceId(trace),
        span_id: SpanId(id),
        parent_id: SpanId(parent),
        begin_time_unix_ns: T + begin,
        duration_ns: duration,
        name: name.into(),
        ..SpanRecord::default()
    }
}

#[test]
fn the_perfetto_export_keeps_each_spans_ids_properties_and_events() {
    let mut root = span(7, 0xa, 0, "GET /users", 0, 90_000);
    root.properties = vec![("http.method".into(), "GET".into())];
    let mut query = span(7, 0xb, 0xa, "query", 1_000, 50_000);
    query.properties = vec![("db".into(), "sqlite".into())];
    query.events = vec![EventRecord {
        name: "retry".into(),
        timestamp_unix_ns: T + 6_000,
        properties: vec![("attempt".into(), "2".into())],
    }];
    let traces = [
        RecordedTrace { trace_id: TraceId(7), thread: 2, spans: vec![query, root], complete: true },
        RecordedTrace {
            trace_id: TraceId(8),
            thread: 0,
            spans: vec![span(8, 0xc, 0xf, "orphan", 100_000, 5)],
            complete: false,
        },
    ];
    let mut writer = Writer::new(Vec::new());
    traces.iter().for_each(|trace| writer.write(trace).unwrap());
    let dump = writer.finish().unwrap().into_inner();

    let mut out = Vec::new();
    let exported =
        export_perfetto(Reader::new(&dump[..]).unwrap(), &PerfettoOptions::default(), &mut out).unwrap();
    assert_eq!(exported, Exported { requests: 2, events: 3, instants: 1, tracks: 1 });
    let json: Value = serde_json::from_slice(&out).unwrap();
    let events: Vec<&Value> =
        json["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] != "M").collect();
    let strip = |event: &Value| {
        let mut event = event.clone();
        event.as_object_mut().unwrap().remove("pid");
        event
    };
    assert_eq!(
        events.iter().map(|event| strip(event)).collect::<Vec<_>>(),
        [
            json!({"ph": "X", "cat": "request", "name": "GET /users", "tid": 1, "ts": 0.0, "dur": 90.0,
                "args": {"span_id": "000000000000000a", "parent_id": "0000000000000000",
                    "trace_id": "00000000000000000000000000000007", "thread": 2, "complete": true,
                    "duration": "90.0µs", "properties": {"http.method": "GET"}}}),
            json!({"ph": "X", "cat": "span", "name": "query", "tid": 1, "ts": 1.0, "dur": 50.0,
                "args": {"span_id": "000000000000000b", "parent_id": "000000000000000a",
                    "properties": {"db": "sqlite"}}}),
            json!({"ph": "i", "s": "t", "cat": "event", "name": "retry", "tid": 1, "ts": 6.0,
                "args": {"attempt": "2"}}),
            json!({"ph": "X", "cat": "span", "name": "orphan", "tid": 1, "ts": 100.0, "dur": 0.005,
                "args": {"span_id": "000000000000000c", "parent_id": "000000000000000f",
                    "trace_id": "00000000000000000000000000000008", "thread": 0, "complete": false,
                    "properties": {}}}),
        ]
    );
}
