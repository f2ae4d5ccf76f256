//! The page's block decoder (src/decode.js), run under Node on the blocks
//! of real dumps, gives what the Rust reader gives, field by field: every
//! span's ids, parent, times, name, properties and events, and the
//! request's attributes the page shows (root, name, properties, begin and
//! duration), for synthetic traces and for traces of every odd shape; and
//! its attributes-only pass gives the same names, properties and threads.
//!
//! Needs Node (installed with the browser by `scripts/setup.sh browser`):
//! without it the test is skipped with a message, except under `CI=true`.

#[path = "../../minitrace-flight/tests/forge/mod.rs"]
mod forge;
mod support;

use std::process::Command;

use base64::Engine;
use minitrace_flight::{synthetic, Reader, RecordedTrace, SpanRecord, Writer};
use serde_json::{json, Value};

fn node_ready() -> bool {
    match Command::new("node").arg("--version").output() {
        Ok(output) if output.status.success() => true,
        outcome => {
            let why = format!("node --version failed ({outcome:?}): run bash scripts/setup.sh browser");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true needs node: {why}");
            eprintln!("SKIPPED: no node: {why}");
            false
        }
    }
}

fn properties(list: &[(std::borrow::Cow<'static, str>, std::borrow::Cow<'static, str>)]) -> Value {
    list.iter().map(|(key, value)| json!([key, value])).collect()
}

/// A trace as the decoder's documented shape, from the Rust reader's.
fn expected(trace: &RecordedTrace) -> Value {
    let parent = |span: &SpanRecord| {
        trace.spans.iter().position(|other| other.span_id == span.parent_id).map_or(-1, |at| at as i64)
    };
    let spans: Vec<Value> = trace
        .spans
        .iter()
        .map(|span| {
            json!({
                "traceId": span.trace_id.to_string(),
                "spanId": span.span_id.to_string(),
                "parentId": span.parent_id.to_string(),
                "parent": parent(span),
                "name": span.name,
                "beginNs": span.begin_time_unix_ns.to_string(),
                "durationNs": span.duration_ns.to_string(),
                "properties": properties(&span.properties),
                "events": span.events.iter().map(|event| json!({
                    "name": event.name,
                    "timestampNs": event.timestamp_unix_ns.to_string(),
                    "properties": properties(&event.properties),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let (begin, duration) = minitrace_view::request_extent(trace);
    json!({
        "traceId": trace.trace_id.to_string(),
        "thread": trace.thread,
        "complete": trace.complete,
        "spans": spans,
        "root": trace.root().map_or(-1, |_| trace.spans.len() as i64 - 1),
        "name": minitrace_view::request_name(trace),
        "properties": properties(trace.root().map_or(&[][..], |root| &root.properties)),
        "beginNs": begin.to_string(),
        "durationNs": duration.to_string(),
    })
}

/// A request's attributes, as the decoder's attributes-only pass gives them.
fn expected_attributes(trace: &RecordedTrace) -> Value {
    json!({
        "traceId": trace.trace_id.to_string(),
        "thread": trace.thread,
        "complete": trace.complete,
        "name": minitrace_view::request_name(trace),
        "properties": properties(trace.root().map_or(&[][..], |root| &root.properties)),
        "spanNames": trace.spans.iter().map(|span| span.name.as_ref()).collect::<Vec<_>>(),
    })
}

#[test]
fn the_pages_decoder_reads_every_block_as_the_rust_reader_does() {
    if !node_ready() {
        return;
    }
    // Synthetic traces (the blocked ones have a property and an event), the
    // forged dumps' traces of odd shapes, and more of them in one block.
    let mut traces: Vec<RecordedTrace> = synthetic::traces(2_000, 9).collect();
    let blocked: Vec<RecordedTrace> = synthetic::traces(200_000, 1)
        .filter(|trace| trace.spans.iter().any(|span| !span.events.is_empty()))
        .collect();
    assert!(!blocked.is_empty());
    traces.extend(blocked);
    for _ in 0..3 {
        traces.extend(forge::odd_traces());
    }
    let mut writer = Writer::new(Vec::new()).with_block_traces(500);
    traces.iter().for_each(|trace| writer.write(trace).unwrap());
    let dump = writer.finish().unwrap().into_inner();

    let mut reader = Reader::new(&dump[..]).unwrap();
    let mut blocks = Vec::new();
    let mut read = Vec::new();
    // Each trace's place in its block.
    let mut places = Vec::new();
    while let Some(block) = reader.next_block() {
        let block = block.unwrap();
        places.extend(0..block.traces.len());
        let payload = base64::engine::general_purpose::STANDARD.encode(&block.compressed);
        blocks.push(json!({ "count": block.traces.len(), "payload": payload }));
        read.extend(block.traces);
    }
    assert_eq!(read, traces);

    let dir = support::scratch("decoder");
    let input = dir.join("blocks.json");
    std::fs::write(&input, serde_json::to_vec(&blocks).unwrap()).unwrap();
    let decoder = support::workspace().join("minitrace-view/src/decode.js");
    let script = support::workspace().join("minitrace-view/tests/support/decode_blocks.mjs");
    let output = Command::new("node").arg(script).arg(decoder).arg(&input).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let output: Value = serde_json::from_slice(&output.stdout).unwrap();
    let (decoded, attributes) =
        (output["traces"].as_array().unwrap(), output["attributes"].as_array().unwrap());
    assert_eq!((decoded.len(), attributes.len()), (traces.len(), traces.len()));
    // Decoding only some traces of a block reads past the others.
    let every_third = output["everyThird"].as_array().unwrap();
    assert_eq!(every_third.len(), traces.len());
    for (index, trace) in traces.iter().enumerate() {
        assert_eq!(decoded[index], expected(trace), "trace {index}");
        assert_eq!(attributes[index], expected_attributes(trace), "trace {index}'s attributes");
        let wanted = if places[index] % 3 == 0 { expected(trace) } else { Value::Null };
        assert_eq!(every_third[index], wanted, "trace {index}, decoded alone");
    }
}
