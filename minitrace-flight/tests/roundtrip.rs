//! What is written is read back equal, record for record: the recorder's
//! traces with their ids, parents, times, names, properties and events,
//! across blocks, extremes and the atomic file helper.

use std::borrow::Cow;

use minitrace::collector::{KIND_KEY, LINK_KEY, STATUS_CODE_KEY, STATUS_MESSAGE_KEY, TRACESTATE_KEY};
use minitrace_flight::{
    synthetic, write_file_atomically, Block, EventRecord, Reader, RecordedTrace, SpanId, SpanRecord, TraceId,
    Writer,
};

fn write(traces: &[RecordedTrace], block_traces: usize) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new()).with_block_traces(block_traces);
    for trace in traces {
        writer.write(trace).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn read(dump: &[u8]) -> Vec<RecordedTrace> {
    Reader::new(dump).unwrap().collect::<Result<_, _>>().unwrap()
}

#[test]
fn synthetic_traces_round_trip_in_blocks_of_any_size() {
    let traces: Vec<RecordedTrace> = synthetic::traces(10_000, 3).collect();
    for block_traces in [1, 7, 4096, 100_000] {
        assert_eq!(read(&write(&traces, block_traces)), traces, "blocks of {block_traces}");
    }
}

const T: u64 = 1_700_000_000_000_000_000;

fn span(trace: u128, id: u64, parent: u64, name: &'static str, begin: u64, duration: u64) -> SpanRecord {
    SpanRecord {
        trace_id: TraceId(trace),
        span_id: SpanId(id),
        parent_id: SpanId(parent),
        begin_time_unix_ns: T + begin,
        duration_ns: duration,
        name: Cow::Borrowed(name),
        properties: Vec::new(),
        events: Vec::new(),
    }
}

/// A service's request as the recorder hands it out: a server root from a
/// remote caller, with kind, status, a link and a tracestate (reserved
/// keys); a span with two parents (one record under each, as the collector
/// delivers it); events with properties; names and properties both static
/// and owned; a span ended on another thread before its parent ended.
fn a_request() -> RecordedTrace {
    let id = 0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c;
    let mut root = span(id, 0xb7ad_6b71_6920_3331, 0x00f0_67aa_0ba9_02b7, "GET /users/7", 0, 90_000);
    root.properties = vec![
        (KIND_KEY.into(), "server".into()),
        (STATUS_CODE_KEY.into(), "ERROR".into()),
        (STATUS_MESSAGE_KEY.into(), Cow::Owned(format!("user {} not found", 7))),
        (LINK_KEY.into(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        (TRACESTATE_KEY.into(), "vendor=opaque".into()),
        ("http.method".into(), "GET".into()),
    ];
    let mut parse = span(id, 0x1000, root.span_id.0, "parse", 1_000, 2_000);
    parse.properties = vec![("bytes".into(), Cow::Owned(512.to_string()))];
    let mut query = span(id, 0x1001, root.span_id.0, "query", 3_500, 60_000);
    query.events = vec![
        EventRecord {
            name: "cache miss".into(),
            timestamp_unix_ns: T + 3_600,
            properties: vec![("key".into(), "user:7".into())],
        },
        EventRecord {
            name: Cow::Owned("retry".to_string()),
            timestamp_unix_ns: T + 30_000,
            properties: vec![("attempt".into(), "2".into()), ("reason".into(), Cow::Owned("timeout".into()))],
        },
    ];
    let acquire = span(id, 0x1002, 0x1001, "acquire", 3_600, 100);
    // One span with two parents: a record under each, ids mixed per parent.
    let batch_under_parse = span(id, 0x77aa_0001, 0x1000, "wait for batch", 1_200, 500);
    let batch_under_query = span(id, 0x77bb_0001, 0x1001, "wait for batch", 1_200, 500);
    // Ended on another thread, listed before the span it belongs to.
    let mut remote = span(id, 0x5eed_0000_0000_0001, 0x2000, "render", 70_000, 10_000);
    remote.events =
        vec![EventRecord { name: "flushed".into(), timestamp_unix_ns: T + 79_000, properties: vec![] }];
    let render_parent = span(id, 0x2000, root.span_id.0, "respond", 69_000, 20_000);
    RecordedTrace {
        trace_id: TraceId(id),
        thread: 3,
        spans: vec![parse, batch_under_parse, query, acquire, batch_under_query, remote, render_parent, root],
        complete: true,
    }
}

#[test]
fn a_request_with_events_properties_links_and_several_parents_reads_back_equal() {
    let trace = a_request();
    // Another trace after it, cut short: spans missing, children of missing
    // spans under the root, as the recorder re-parents them.
    let mut cut = a_request();
    cut.trace_id = TraceId(99);
    cut.spans.retain(|span| span.name != "query");
    for span in &mut cut.spans {
        span.trace_id = TraceId(99);
        if span.parent_id == SpanId(0x1001) {
            span.parent_id = SpanId(0xb7ad_6b71_6920_3331);
        }
    }
    cut.complete = false;
    let traces = vec![trace, cut];
    let read = read(&write(&traces, 4096));
    assert_eq!(read, traces);
    // What the typed accessors of the core read back, as written.
    let root = read[0].root().unwrap();
    assert_eq!(root.kind(), minitrace::collector::SpanKind::Server);
    assert_eq!(root.status(), minitrace::collector::SpanStatus::error("user 7 not found"));
    assert_eq!(root.links().len(), 1);
    assert_eq!(read[0].spans.iter().filter(|span| span.name == "wait for batch").count(), 2);
    assert_eq!(read[0].spans[2].events[1].properties[1], ("reason".into(), "timeout".into()));
}

#[test]
fn extremes_round_trip() {
    let mut root = span(u128::MAX, u64::MAX, u64::MAX, "ünïcødé ⏱", 0, u64::MAX);
    root.begin_time_unix_ns = u64::MAX;
    root.properties = vec![("".into(), "".into()), ("k".into(), "v\0with nul".into())];
    let mut first = span(u128::MAX, 0, 0, "a", 0, u64::MAX);
    first.begin_time_unix_ns = 0;
    first.events = vec![
        EventRecord {
            name: "".into(),
            timestamp_unix_ns: u64::MAX,
            properties: vec![("".into(), "".into())],
        },
        EventRecord { name: "early".into(), timestamp_unix_ns: 0, ..EventRecord::default() },
    ];
    // Another trace's span, a span that is its own parent, repeated ids,
    // ids at both ends, times out of order.
    let mut elsewhere = span(3, u64::MAX, 0, "b", 0, 0);
    elsewhere.begin_time_unix_ns = u64::MAX;
    let traces = vec![
        RecordedTrace {
            trace_id: TraceId(u128::MAX),
            thread: u32::MAX,
            spans: vec![
                first,
                elsewhere,
                span(u128::MAX, 1, 1, "a", 5, 1),
                span(u128::MAX, 1, u64::MAX, "c", 4, 2),
                span(u128::MAX, u64::MAX - 1, 0, "", 9, 0),
                root,
            ],
            complete: false,
        },
        RecordedTrace::default(),
        RecordedTrace { thread: 0, spans: vec![span(0, 1, 2, "x", 1, 1)], ..RecordedTrace::default() },
        RecordedTrace {
            trace_id: TraceId(1),
            spans: vec![SpanRecord { name: "x".repeat(100_000).into(), ..SpanRecord::default() }],
            ..RecordedTrace::default()
        },
    ];
    assert_eq!(read(&write(&traces, 2)), traces);
}

#[test]
fn big_traces_find_their_parents_anywhere() {
    // Past the writer's scan of small traces, parents are looked up by id:
    // before, after, far away, or missing.
    let count = 5_000u64;
    let spans: Vec<SpanRecord> = (0..count)
        .map(|index| {
            let parent = match index % 4 {
                0 => (index * 7919) % count + 10,
                1 => index + 9,
                2 => 0,
                _ => 1 << 40,
            };
            span(5, index + 10, parent, "s", index * 10, 5)
        })
        .collect();
    let trace = RecordedTrace { trace_id: TraceId(5), thread: 2, spans, complete: true };
    assert_eq!(read(&write(std::slice::from_ref(&trace), 1)), [trace]);
}

#[test]
fn an_empty_dump_reads_as_no_traces() {
    let written = Writer::new(Vec::new()).finish().unwrap();
    assert_eq!((written.traces, written.blocks, written.bytes), (0, 0, 31));
    assert!(read(&written.into_inner()).is_empty());
}

#[test]
fn blocks_carry_their_traces_and_payload() {
    let traces: Vec<RecordedTrace> = synthetic::traces(25, 5).collect();
    let dump = write(&traces, 10);
    let mut reader = Reader::new(&dump[..]).unwrap();
    let blocks: Vec<Block> = std::iter::from_fn(|| reader.next_block()).collect::<Result<_, _>>().unwrap();
    assert_eq!(blocks.iter().map(|block| block.traces.len()).collect::<Vec<_>>(), [10, 10, 5]);
    assert_eq!(blocks.iter().map(|block| block.index).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(blocks.iter().flat_map(|block| block.traces.clone()).collect::<Vec<_>>(), traces);
    // zlib framing: the payload is what a browser's DecompressionStream("deflate") takes.
    assert!(blocks.iter().all(|block| block.compressed[0] == 0x78));
    assert_eq!(reader.traces_read(), 25);
}

#[test]
fn written_counts_every_span_roots_included() {
    let traces: Vec<RecordedTrace> = synthetic::traces(100, 2).collect();
    let mut writer = Writer::new(Vec::new());
    traces.iter().for_each(|trace| writer.write(trace).unwrap());
    let written = writer.finish().unwrap();
    assert_eq!((written.traces, written.spans), (100, 1_100));
    assert_eq!(written.bytes_per_span(), written.bytes as f64 / 1_100.0);
}

#[test]
fn write_file_atomically_replaces_the_file_whole() {
    let dir = std::env::temp_dir().join(format!("mtf-atomic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.mtf");
    std::fs::write(&path, b"an older dump").unwrap();
    let traces: Vec<RecordedTrace> = synthetic::traces(100, 9).collect();
    let written = write_file_atomically(&path, &traces).unwrap();
    assert_eq!(written.traces, 100);
    assert_eq!(read(&std::fs::read(&path).unwrap()), traces);
    // No temporary file is left beside it.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
