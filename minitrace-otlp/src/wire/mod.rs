//! OTLP protobuf written by hand, straight from minitrace's [`SpanRecord`]s
//! into a reused buffer: the default (HTTP/protobuf) path.
//!
//! Only the messages of an `ExportTraceServiceRequest` that minitrace fills
//! are written, with the field numbers of the OTLP schema
//! (`opentelemetry/proto/trace/v1/trace.proto` and its imports). Names,
//! keys and values are copied once, from the record into the body; no
//! intermediate message is built, and nothing is allocated per span once
//! the encoder's scratch vectors have grown to a report's size.
//!
//! Every length is computed before its message is written (a first pass
//! over a report's records), so each body is exact, canonical protobuf: the
//! fields in schema order, defaults (empty strings, zero numbers) left out,
//! as prost writes them. The resource and the scope are encoded once, when
//! the reporter is built, and copied into each body.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use minitrace::collector::{
    is_reserved_key, EventRecord, SpanContext, SpanRecord, KIND_KEY, LINK_KEY, STATUS_CODE_KEY,
    STATUS_MESSAGE_KEY, TRACESTATE_KEY,
};
use minitrace_delivery::ReadAhead;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

mod protobuf;
#[cfg(test)]
mod tests;

use protobuf::*;

/// A hasher for random ids: they are already well mixed.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u128(&mut self, value: u128) {
        self.write_u64(value as u64);
        self.write_u64((value >> 64) as u64);
    }
}

type IdBuild = BuildHasherDefault<IdHasher>;

const NONE: u32 = u32::MAX;

/// What the first pass learnt of one span: its length and the OTLP fields
/// read from its reserved properties.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// The length of the encoded `Span` message.
    len: u32,
    flags: u32,
    /// `Span.SpanKind`.
    kind: u8,
    /// `Status.StatusCode`.
    status: u8,
    /// Whether any property has a reserved key: if not, every property is an attribute.
    reserved: bool,
    /// The property holding the error status's message, or `NONE`.
    status_message: u32,
    /// Where the trace's `tracestate` is: (record, property), or `NONE`s.
    tracestate: (u32, u32),
    /// This span's links in `Scratch::links`.
    links: (u32, u32),
}

/// Scratch space reused from one report to the next.
#[derive(Debug, Default)]
struct Scratch {
    /// The traces met so far in a report, in [`plan_by_trace`].
    traces: HashSet<u128, IdBuild>,
    /// The span ids of one trace, in [`plan_by_trace`].
    ids: Vec<u64>,
    /// Every (trace, span) of the report: a parent outside it is remote
    /// (when a trace's records are not together).
    local: HashSet<(u128, u64), IdBuild>,
    /// Each trace's `tracestate`: the (record, property) of the root that carries it.
    tracestates: HashMap<u128, (u32, u32), IdBuild>,
    plans: Vec<Plan>,
    links: Vec<SpanContext>,
}

/// A trace with more spans than this looks its parents up in its sorted
/// span ids rather than among all of them.
const LINEAR_LOOKUP: usize = 32;

/// Where [`WireEncoder::encode`] writes: buffers to fill, and what to do
/// with them once full.
pub(crate) trait Bodies {
    /// A buffer for the next request (cleared by the encoder).
    fn empty(&mut self) -> Vec<u8>;
    /// A request of `spans` spans, written.
    fn full(&mut self, body: Vec<u8>, spans: usize);
}

/// Collects the requests.
impl Bodies for Vec<(Vec<u8>, usize)> {
    fn empty(&mut self) -> Vec<u8> {
        Vec::new()
    }

    fn full(&mut self, body: Vec<u8>, spans: usize) {
        self.push((body, spans));
    }
}

/// Writes OTLP `ExportTraceServiceRequest`s from span records.
#[derive(Debug)]
pub(crate) struct WireEncoder {
    /// `ResourceSpans.resource`, tag and length included.
    resource: Vec<u8>,
    /// `ScopeSpans.scope`, tag and length included.
    scope: Vec<u8>,
    max_spans: usize,
    max_bytes: usize,
    scratch: Scratch,
}

impl Clone for WireEncoder {
    fn clone(&self) -> WireEncoder {
        WireEncoder {
            resource: self.resource.clone(),
            scope: self.scope.clone(),
            max_spans: self.max_spans,
            max_bytes: self.max_bytes,
            scratch: Scratch::default(),
        }
    }
}

/// `message` as a length-delimited field 1.
fn field_1(message: &impl Message) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(message.encoded_len() + 6);
    put_header(&mut bytes, FIELD_1, message.encoded_len());
    message.encode(&mut bytes).expect("a Vec grows as needed");
    bytes
}

impl WireEncoder {
    /// An encoder whose every request carries `resource` and `scope`, and
    /// at most `max_spans` spans in about `max_bytes` bytes.
    pub(crate) fn new(
        resource: &Resource,
        scope: &InstrumentationScope,
        max_spans: usize,
        max_bytes: usize,
    ) -> WireEncoder {
        WireEncoder {
            resource: field_1(resource),
            scope: field_1(scope),
            max_spans: max_spans.max(1),
            max_bytes,
            scratch: Scratch::default(),
        }
    }

    /// The bytes every request has besides its spans, at most.
    fn overhead(&self) -> usize {
        // Two tags and two lengths of up to 5 bytes each.
        self.resource.len() + self.scope.len() + 12
    }

    /// Encodes every span of `records` into requests of at most
    /// `max_spans` spans and about `max_bytes` bytes (a span larger than
    /// that goes alone), in the records' order, each into a buffer that
    /// `bodies` gives and takes back.
    pub(crate) fn encode(&mut self, records: &[SpanRecord], bodies: &mut impl Bodies) {
        if records.is_empty() {
            return;
        }
        self.plan(records);
        let overhead = self.overhead();
        let mut first = 0;
        while first < records.len() {
            // The spans of this request: [first, end).
            let mut end = first;
            let mut bytes = overhead;
            let mut spans_len = 0;
            while end < records.len() && end - first < self.max_spans {
                let size = field_len(self.scratch.plans[end].len as usize);
                if end > first && bytes + size > self.max_bytes {
                    break;
                }
                bytes += size;
                spans_len += size;
                end += 1;
            }
            let mut buf = bodies.empty();
            buf.clear();
            self.write_request(&mut buf, records, first..end, spans_len);
            bodies.full(buf, end - first);
            first = end;
        }
    }

    fn write_request(
        &self,
        buf: &mut Vec<u8>,
        records: &[SpanRecord],
        range: std::ops::Range<usize>,
        spans_len: usize,
    ) {
        let scope_spans = self.scope.len() + spans_len;
        let resource_spans = self.resource.len() + field_len(scope_spans);
        buf.reserve(field_len(resource_spans));
        put_header(buf, FIELD_1, resource_spans);
        buf.extend_from_slice(&self.resource);
        put_header(buf, FIELD_2, scope_spans);
        buf.extend_from_slice(&self.scope);
        let before = buf.len();
        let mut ahead = ReadAhead::from(range.start);
        for index in range {
            ahead.before(records, index);
            self.write_span(buf, records, index);
        }
        debug_assert_eq!(buf.len() - before, spans_len);
    }

    /// The first pass: each span's plan and length, whether its parent is
    /// local, and its trace's tracestate.
    fn plan(&mut self, records: &[SpanRecord]) {
        let scratch = &mut self.scratch;
        scratch.plans.clear();
        scratch.links.clear();
        scratch.plans.reserve(records.len());
        if !plan_by_trace(records, scratch) {
            plan_scattered(records, scratch);
        }
        debug_assert_eq!(scratch.plans.len(), records.len());
    }

    fn write_span(&self, buf: &mut Vec<u8>, records: &[SpanRecord], index: usize) {
        let record = &records[index];
        let plan = &self.scratch.plans[index];
        put_header(buf, FIELD_2, plan.len as usize);
        put_id(buf, SPAN_TRACE_ID, &record.trace_id.0.to_be_bytes());
        put_id(buf, SPAN_SPAN_ID, &record.span_id.0.to_be_bytes());
        put_string(buf, SPAN_TRACE_STATE, tracestate(records, plan));
        if record.parent_id.0 != 0 {
            put_id(buf, SPAN_PARENT_SPAN_ID, &record.parent_id.0.to_be_bytes());
        }
        put_string(buf, SPAN_NAME, &record.name);
        buf.push(SPAN_KIND);
        buf.push(plan.kind);
        put_fixed64(buf, SPAN_START, record.begin_time_unix_ns);
        put_fixed64(buf, SPAN_END, end_time(record));
        for (key, value) in &record.properties {
            if !plan.reserved || classify(key) == Key::Attribute {
                put_key_value(buf, SPAN_ATTRIBUTES, key, value);
            }
        }
        for event in &record.events {
            put_header(buf, SPAN_EVENTS, event_len(event));
            put_fixed64(buf, EVENT_TIME, event.timestamp_unix_ns);
            put_string(buf, EVENT_NAME, &event.name);
            for (key, value) in &event.properties {
                put_key_value(buf, EVENT_ATTRIBUTES, key, value);
            }
        }
        for link in &self.scratch.links[plan.links.0 as usize..plan.links.1 as usize] {
            put_header(buf, SPAN_LINKS, LINK_LEN);
            put_id(buf, LINK_TRACE_ID, &link.trace_id.0.to_be_bytes());
            put_id(buf, LINK_SPAN_ID, &link.span_id.0.to_be_bytes());
            // A linked context comes from elsewhere: its remoteness is unknown.
            buf.push(LINK_FLAGS);
            buf.extend_from_slice(&SAMPLED.to_le_bytes());
        }
        if plan.status != STATUS_UNSET {
            let message = status_message(record, plan);
            put_header(buf, SPAN_STATUS, status_len(message));
            put_string(buf, STATUS_MESSAGE, message);
            buf.push(STATUS_CODE);
            buf.push(plan.status);
        }
        buf.extend_from_slice(&SPAN_FLAGS);
        buf.extend_from_slice(&plan.flags.to_le_bytes());
    }
}

/// The length of a `Span.Link`'s content: two ids and the flags.
const LINK_LEN: usize = 18 + 10 + 5;

fn end_time(record: &SpanRecord) -> u64 {
    record.begin_time_unix_ns.saturating_add(record.duration_ns)
}

fn tracestate<'a>(records: &'a [SpanRecord], plan: &Plan) -> &'a str {
    if plan.tracestate.0 == NONE {
        return "";
    }
    tracestate_of(records, plan.tracestate)
}

/// The value of property `.1` of record `.0`.
fn tracestate_of(records: &[SpanRecord], (record, property): (u32, u32)) -> &str {
    &records[record as usize].properties[property as usize].1
}

fn status_message<'a>(record: &'a SpanRecord, plan: &Plan) -> &'a str {
    if plan.status_message == NONE {
        ""
    } else {
        &record.properties[plan.status_message as usize].1
    }
}

fn status_len(message: &str) -> usize {
    string_len(message) + 2
}

fn event_len(event: &EventRecord) -> usize {
    let mut len = fixed64_len(event.timestamp_unix_ns) + string_len(&event.name);
    for (key, value) in &event.properties {
        len += field_len(key_value_len(key, value));
    }
    len
}

/// `Span.SpanKind` of a `span.kind` value, as `SpanKind::parse` reads it.
fn kind_code(value: &str) -> u8 {
    match value {
        "server" => 2,
        "client" => 3,
        "producer" => 4,
        "consumer" => 5,
        // Internal, and any value minitrace does not know.
        _ => 1,
    }
}

/// What a property's key makes of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    /// An attribute: not a reserved key.
    Attribute,
    Kind,
    StatusCode,
    StatusMessage,
    Link,
    Tracestate,
}

/// The reserved key `key` is, if any, as [`is_reserved_key`] tells: keys
/// are told apart by their length first (the reserved ones are 9, 14, 16
/// and 23 bytes long), then compared whole at a length known here.
#[inline]
fn classify(key: &str) -> Key {
    fn is<const N: usize>(key: &[u8], reserved: &str) -> bool {
        // Both are N bytes long: a comparison of constant size.
        <&[u8; N]>::try_from(key).is_ok_and(|key| key == <&[u8; N]>::try_from(reserved.as_bytes()).unwrap())
    }
    let bytes = key.as_bytes();
    let class = match bytes.len() {
        9 if is::<9>(bytes, KIND_KEY) => Key::Kind,
        9 if is::<9>(bytes, LINK_KEY) => Key::Link,
        14 if is::<14>(bytes, TRACESTATE_KEY) => Key::Tracestate,
        16 if is::<16>(bytes, STATUS_CODE_KEY) => Key::StatusCode,
        23 if is::<23>(bytes, STATUS_MESSAGE_KEY) => Key::StatusMessage,
        _ => Key::Attribute,
    };
    debug_assert_eq!(class != Key::Attribute, is_reserved_key(key), "{key}");
    class
}

/// Plans a report whose every trace's records are together, trace by
/// trace: a parent is local if it is among its trace's spans, which are
/// few. Returns `false`, having planned part of it, if a trace's records
/// are not together.
fn plan_by_trace(records: &[SpanRecord], scratch: &mut Scratch) -> bool {
    scratch.traces.clear();
    let mut ahead = ReadAhead::default();
    let mut start = 0;
    while start < records.len() {
        let trace = records[start].trace_id.0;
        let end = start + records[start..].iter().take_while(|record| record.trace_id.0 == trace).count();
        if !scratch.traces.insert(trace) {
            return false;
        }
        let trace_records = &records[start..end];
        scratch.ids.clear();
        scratch.ids.extend(trace_records.iter().map(|record| record.span_id.0));
        let sorted = scratch.ids.len() > LINEAR_LOOKUP;
        if sorted {
            scratch.ids.sort_unstable();
        }
        let mut tracestate = (NONE, NONE);
        for (index, record) in (start..).zip(trace_records) {
            ahead.before(records, index);
            let parent = record.parent_id.0;
            let local = if sorted {
                scratch.ids.binary_search(&parent).is_ok()
            } else {
                scratch.ids.contains(&parent)
            };
            let (plan, state) = plan_span(record, parent != 0 && !local, &mut scratch.links);
            if state != NONE {
                // The last one counts, as in `SpanRecord::tracestate`.
                tracestate = (index as u32, state);
            }
            scratch.plans.push(plan);
        }
        if tracestate.0 != NONE {
            let extra =
                string_len(&records[tracestate.0 as usize].properties[tracestate.1 as usize].1) as u32;
            for plan in &mut scratch.plans[start..end] {
                plan.tracestate = tracestate;
                plan.len += extra;
            }
        }
        start = end;
    }
    true
}

/// Plans any report: every span's (trace, span) goes into a set.
fn plan_scattered(records: &[SpanRecord], scratch: &mut Scratch) {
    scratch.plans.clear();
    scratch.links.clear();
    scratch.local.clear();
    scratch.tracestates.clear();
    scratch.local.reserve(records.len());
    let mut ahead = ReadAhead::default();
    for (index, record) in records.iter().enumerate() {
        ahead.before(records, index);
        scratch.local.insert((record.trace_id.0, record.span_id.0));
        let (plan, state) = plan_span(record, false, &mut scratch.links);
        if state != NONE {
            scratch.tracestates.insert(record.trace_id.0, (index as u32, state));
        }
        scratch.plans.push(plan);
    }
    for (record, plan) in records.iter().zip(&mut scratch.plans) {
        let trace = record.trace_id.0;
        if record.parent_id.0 != 0 && !scratch.local.contains(&(trace, record.parent_id.0)) {
            plan.flags |= IS_REMOTE;
        }
        if let Some(&tracestate) = scratch.tracestates.get(&trace) {
            plan.tracestate = tracestate;
            plan.len += string_len(tracestate_of(records, tracestate)) as u32;
        }
    }
}

/// Reads one span's OTLP fields from its properties and computes its
/// encoded length but for its trace's tracestate, recording its links in
/// `links`. Returns the plan and the span's last tracestate property, or `NONE`.
fn plan_span(record: &SpanRecord, remote: bool, links: &mut Vec<SpanContext>) -> (Plan, u32) {
    let mut kind = 1;
    let mut status_code: Option<&str> = None;
    let mut message_property = NONE;
    let mut tracestate = NONE;
    let mut reserved = false;
    let links_start = links.len() as u32;
    let mut len = 18 + 10 + 2 + 6; // trace and span ids, kind, flags
    len += string_len(&record.name);
    len += fixed64_len(record.begin_time_unix_ns) + fixed64_len(end_time(record));
    if record.parent_id.0 != 0 {
        len += 10;
    }
    for (index, (key, value)) in record.properties.iter().enumerate() {
        let class = classify(key);
        if class == Key::Attribute {
            len += field_len(key_value_len(key, value));
            continue;
        }
        reserved = true;
        match class {
            Key::Kind => kind = kind_code(value),
            Key::StatusCode => status_code = Some(value),
            Key::StatusMessage => message_property = index as u32,
            Key::Link => {
                if let Some(context) = SpanContext::decode_w3c_traceparent(value) {
                    links.push(context);
                    len += field_len(LINK_LEN);
                }
            }
            Key::Tracestate => tracestate = index as u32,
            Key::Attribute => {}
        }
    }
    let (status, message) = match status_code {
        Some("OK") => (STATUS_OK, NONE),
        Some("ERROR") => (STATUS_ERROR, message_property),
        _ => (STATUS_UNSET, NONE),
    };
    let mut flags = SAMPLED | HAS_IS_REMOTE;
    if remote {
        flags |= IS_REMOTE;
    }
    let plan = Plan {
        len: 0,
        flags,
        kind,
        status,
        reserved,
        status_message: message,
        tracestate: (NONE, NONE),
        links: (links_start, links.len() as u32),
    };
    if status != STATUS_UNSET {
        len += field_len(status_len(status_message(record, &plan)));
    }
    for event in &record.events {
        len += field_len(event_len(event));
    }
    (Plan { len: len as u32, ..plan }, tracestate)
}
