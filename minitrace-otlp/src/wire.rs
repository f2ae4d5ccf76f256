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

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use minitrace::collector::{
    is_reserved_key, EventRecord, SpanContext, SpanRecord, KIND_KEY, LINK_KEY, STATUS_CODE_KEY,
    STATUS_MESSAGE_KEY, TRACESTATE_KEY,
};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

// Wire types.
const LEN: u8 = 2;
const I64: u8 = 1;
const I32: u8 = 5;
const VARINT: u8 = 0;

const fn tag(field: u8, wire_type: u8) -> u8 {
    (field << 3) | wire_type
}

// ExportTraceServiceRequest.resource_spans, ResourceSpans.resource,
// ScopeSpans.scope: field 1; ResourceSpans.scope_spans, ScopeSpans.spans: field 2.
const FIELD_1: u8 = tag(1, LEN);
const FIELD_2: u8 = tag(2, LEN);
// Span.
const SPAN_TRACE_ID: u8 = tag(1, LEN);
const SPAN_SPAN_ID: u8 = tag(2, LEN);
const SPAN_TRACE_STATE: u8 = tag(3, LEN);
const SPAN_PARENT_SPAN_ID: u8 = tag(4, LEN);
const SPAN_NAME: u8 = tag(5, LEN);
const SPAN_KIND: u8 = tag(6, VARINT);
const SPAN_START: u8 = tag(7, I64);
const SPAN_END: u8 = tag(8, I64);
const SPAN_ATTRIBUTES: u8 = tag(9, LEN);
const SPAN_EVENTS: u8 = tag(11, LEN);
const SPAN_LINKS: u8 = tag(13, LEN);
const SPAN_STATUS: u8 = tag(15, LEN);
/// Span.flags, field 16, fixed32: a two-byte tag.
const SPAN_FLAGS: [u8; 2] = [(16 << 3 | I32) | 0x80, 1];
// Span.Event.
const EVENT_TIME: u8 = tag(1, I64);
const EVENT_NAME: u8 = tag(2, LEN);
const EVENT_ATTRIBUTES: u8 = tag(3, LEN);
// Span.Link.
const LINK_TRACE_ID: u8 = tag(1, LEN);
const LINK_SPAN_ID: u8 = tag(2, LEN);
const LINK_FLAGS: u8 = tag(6, I32);
// Status.
const STATUS_MESSAGE: u8 = tag(2, LEN);
const STATUS_CODE: u8 = tag(3, VARINT);
// KeyValue, AnyValue.
const KV_KEY: u8 = tag(1, LEN);
const KV_VALUE: u8 = tag(2, LEN);
const ANY_STRING: u8 = tag(1, LEN);

/// W3C trace flags of an exported span: minitrace reports only recorded
/// spans, which is what "sampled" means.
pub(crate) const SAMPLED: u32 = 0x01;
/// `SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`.
pub(crate) const HAS_IS_REMOTE: u32 = 0x100;
/// `SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`.
pub(crate) const IS_REMOTE: u32 = 0x200;

/// `Status.StatusCode`.
const STATUS_UNSET: u8 = 0;
const STATUS_OK: u8 = 1;
const STATUS_ERROR: u8 = 2;

/// The bytes of `value` as a varint.
#[inline]
fn varint_len(value: u64) -> usize {
    // 1 byte per 7 bits, at least one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// A length-delimited field with a one-byte tag and `len` bytes of content.
#[inline]
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// A string field, left out when empty.
#[inline]
fn string_len(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        field_len(s.len())
    }
}

/// The content of a `KeyValue` with a string `AnyValue`. The value is
/// always written, even empty: it is one of a `oneof`.
#[inline]
fn key_value_len(key: &str, value: &str) -> usize {
    string_len(key) + field_len(field_len(value.len()))
}

#[inline]
fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push(value as u8 | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

#[inline]
fn put_header(buf: &mut Vec<u8>, tag: u8, len: usize) {
    buf.push(tag);
    put_varint(buf, len as u64);
}

#[inline]
fn put_string(buf: &mut Vec<u8>, tag: u8, s: &str) {
    if !s.is_empty() {
        put_header(buf, tag, s.len());
        buf.extend_from_slice(s.as_bytes());
    }
}

#[inline]
fn put_key_value(buf: &mut Vec<u8>, tag: u8, key: &str, value: &str) {
    put_header(buf, tag, key_value_len(key, value));
    put_string(buf, KV_KEY, key);
    put_header(buf, KV_VALUE, field_len(value.len()));
    put_header(buf, ANY_STRING, value.len());
    buf.extend_from_slice(value.as_bytes());
}

#[inline]
fn put_fixed64(buf: &mut Vec<u8>, tag: u8, value: u64) {
    if value != 0 {
        buf.push(tag);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

#[inline]
fn put_id(buf: &mut Vec<u8>, tag: u8, id: &[u8]) {
    buf.push(tag);
    buf.push(id.len() as u8);
    buf.extend_from_slice(id);
}

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
        let mut ahead = ReadAhead { next: range.start };
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

fn fixed64_len(value: u64) -> usize {
    if value == 0 {
        0
    } else {
        9
    }
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

/// Reads ahead the properties of the records a pass is about to reach.
///
/// The traced threads wrote them, on another core, and a pass has much to
/// do between one record's properties and the next's: reading each only
/// when reached, it waited for one cache miss at a time (most of the
/// first pass's time in `benches/export.rs`). Read ahead, in a loop of
/// loads independent of one another, the misses overlap; a few records at
/// a time, so that what is read is still in the nearest cache when used.
#[derive(Debug, Default)]
struct ReadAhead {
    /// The first record not read yet.
    next: usize,
}

impl ReadAhead {
    /// Records read ahead at a time.
    const WINDOW: usize = 128;

    /// Called with each record's index before the record is used.
    #[inline]
    fn before(&mut self, records: &[SpanRecord], index: usize) {
        if index + Self::WINDOW / 2 >= self.next && self.next < records.len() {
            let end = (self.next + Self::WINDOW).min(records.len());
            std::hint::black_box(read_properties(&records[self.next..end]));
            self.next = end;
        }
    }
}

/// Reads the first and the last property of each record.
fn read_properties(records: &[SpanRecord]) -> usize {
    let key_len =
        |property: Option<&(Cow<'static, str>, Cow<'static, str>)>| property.map_or(0, |(key, _)| key.len());
    records
        .iter()
        .fold(0, |sum, record| sum ^ key_len(record.properties.first()) ^ key_len(record.properties.last()))
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

#[cfg(test)]
mod tests {

    use minitrace::collector::{SpanId, TraceId};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

    use super::*;
    use crate::encode::{key_value, span_count, Encoder};

    fn props(pairs: &[(&'static str, &str)]) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
        pairs.iter().map(|(k, v)| (Cow::Borrowed(*k), Cow::Owned(v.to_string()))).collect()
    }

    fn traceparent(trace: u128, span: u64) -> String {
        SpanContext::new(TraceId(trace), SpanId(span)).encode_w3c_traceparent()
    }

    /// Every field the encoder maps, and the edge cases of each: empty and
    /// long strings, zero times, repeated reserved keys, malformed links,
    /// remote and local parents, several traces.
    fn records() -> Vec<SpanRecord> {
        let long = "x".repeat(300);
        let mut records = vec![
            SpanRecord {
                trace_id: TraceId(u128::MAX - 5),
                span_id: SpanId(1),
                parent_id: SpanId(0xfeed),
                begin_time_unix_ns: 1_700_000_000_123_456_789,
                duration_ns: 10_000,
                name: "GET /cart".into(),
                properties: props(&[
                    ("span.kind", "client"),
                    ("span.kind", "server"),
                    ("w3c.tracestate", "first=1"),
                    ("w3c.tracestate", "vendor=opaque"),
                    ("otel.status_code", "OK"),
                    ("http.method", "GET"),
                    ("", "empty key"),
                    ("empty value", ""),
                ]),
                events: vec![],
            },
            SpanRecord {
                trace_id: TraceId(u128::MAX - 5),
                span_id: SpanId(2),
                parent_id: SpanId(1),
                begin_time_unix_ns: 1_700_000_000_123_457_000,
                duration_ns: 2_000,
                name: "SELECT ✓".into(),
                properties: vec![
                    ("otel.status_description".into(), "first".into()),
                    ("otel.status_code".into(), "ERROR".into()),
                    ("otel.status_description".into(), "connection reset".into()),
                    ("otel.link".into(), traceparent(0x1111, 0x2222).into()),
                    ("otel.link".into(), "not a traceparent".into()),
                    ("otel.link".into(), traceparent(7, 3).into()),
                    ("ключ".into(), "значение".into()),
                    ("long".into(), long.clone().into()),
                ],
                events: vec![
                    EventRecord {
                        name: "retry".into(),
                        timestamp_unix_ns: 1_700_000_000_123_457_500,
                        properties: props(&[("attempt", "2"), ("reason", "")]),
                    },
                    EventRecord { name: "".into(), timestamp_unix_ns: 0, properties: vec![] },
                ],
            },
            SpanRecord {
                trace_id: TraceId(u128::MAX - 5),
                span_id: SpanId(3),
                parent_id: SpanId(2),
                name: "".into(),
                properties: props(&[("otel.status_code", "ERROR"), ("span.kind", "sideways")]),
                ..SpanRecord::default()
            },
            SpanRecord {
                trace_id: TraceId(7),
                span_id: SpanId(3),
                parent_id: SpanId(0),
                name: "job".into(),
                properties: props(&[("span.kind", "consumer"), ("otel.status_code", "MAYBE")]),
                begin_time_unix_ns: u64::MAX - 1,
                duration_ns: 10,
                ..SpanRecord::default()
            },
            // Its parent id is a span of another trace: remote.
            SpanRecord {
                trace_id: TraceId(7),
                span_id: SpanId(4),
                parent_id: SpanId(2),
                name: long.into(),
                properties: props(&[("span.kind", "producer"), ("span.kind", "internal")]),
                ..SpanRecord::default()
            },
        ];
        // Many small spans, so that requests split by count and by bytes.
        for i in 0..40 {
            records.push(SpanRecord {
                trace_id: TraceId(9),
                span_id: SpanId(100 + i),
                // One remote parent in a trace of more than `LINEAR_LOOKUP` spans.
                parent_id: SpanId(match i {
                    0 => 0,
                    20 => 0xdead,
                    _ => 99 + i,
                }),
                begin_time_unix_ns: 1_000 + i,
                duration_ns: 1,
                name: Cow::Borrowed("step"),
                properties: vec![(Cow::Borrowed("i"), Cow::Owned(i.to_string()))],
                events: vec![],
            });
        }
        records
    }

    /// The same records, but a trace's records are not together: the
    /// second span of the first trace comes last.
    fn scattered() -> Vec<SpanRecord> {
        let mut records = records();
        let second = records.remove(1);
        records.push(second);
        records
    }

    fn encoder(max_spans: usize, max_bytes: usize) -> Encoder {
        Encoder {
            resource: Resource {
                attributes: vec![key_value("service.name", "checkout"), key_value("host.name", "h")],
                ..Resource::default()
            },
            scope: InstrumentationScope {
                name: "minitrace".into(),
                version: "0.6.8".into(),
                ..InstrumentationScope::default()
            },
            max_spans,
            max_bytes,
        }
    }

    fn wire(encoder: &Encoder) -> WireEncoder {
        WireEncoder::new(&encoder.resource, &encoder.scope, encoder.max_spans, encoder.max_bytes)
    }

    #[test]
    fn decodes_to_what_opentelemetry_proto_would_send() {
        for records in [records(), scattered()] {
            decodes_as_opentelemetry_proto(&records);
        }
    }

    fn decodes_as_opentelemetry_proto(records: &[SpanRecord]) {
        for (max_spans, max_bytes) in [(2048, 1 << 20), (1, usize::MAX), (3, usize::MAX), (usize::MAX, 400)] {
            let encoder = encoder(max_spans, max_bytes);
            let expected = encoder.requests(records);
            let mut bodies: Vec<(Vec<u8>, usize)> = Vec::new();
            // Twice with the same encoder: its scratch space is reused.
            let mut wire = wire(&encoder);
            wire.encode(&records[..3], &mut Vec::new());
            wire.encode(records, &mut bodies);
            let decoded: Vec<ExportTraceServiceRequest> = bodies
                .iter()
                .map(|(body, _)| ExportTraceServiceRequest::decode(body.as_slice()).unwrap())
                .collect();
            // The same spans in the same order, whatever the split...
            let spans = |requests: &[ExportTraceServiceRequest]| -> Vec<_> {
                requests.iter().flat_map(|r| r.resource_spans[0].scope_spans[0].spans.clone()).collect()
            };
            let (got, want) = (spans(&decoded), spans(&expected));
            assert_eq!(got.len(), want.len());
            for (got, want) in got.iter().zip(&want) {
                assert_eq!(got, want, "max_spans {max_spans}, max_bytes {max_bytes}");
            }
            // ...under the same resource and scope in every request...
            for request in &decoded {
                let mut bare = request.clone();
                bare.resource_spans[0].scope_spans[0].spans.clear();
                let mut want = expected[0].clone();
                want.resource_spans[0].scope_spans[0].spans.clear();
                assert_eq!(bare, want);
            }
            for (body, spans) in &bodies {
                let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
                assert_eq!(*spans as u64, span_count(&request));
                // Canonical: as long as prost's encoding, field for field.
                assert_eq!(body.len(), request.encoded_len());
            }
            // ...and split as the message path splits when bytes do not bound it.
            if max_bytes == usize::MAX || max_bytes == 1 << 20 {
                assert_eq!(decoded, expected, "max_spans {max_spans}, max_bytes {max_bytes}");
            }
        }
    }

    #[test]
    fn requests_are_bounded_by_bytes_but_never_empty() {
        let records = records();
        let encoder = encoder(usize::MAX, 400);
        let mut bodies: Vec<(Vec<u8>, usize)> = Vec::new();
        wire(&encoder).encode(&records, &mut bodies);
        for (body, spans) in &bodies {
            assert!(*spans == 1 || body.len() <= 400, "{} bytes, {spans} spans", body.len());
        }
        assert_eq!(bodies.iter().map(|(_, spans)| spans).sum::<usize>(), records.len());
    }

    #[test]
    fn keys_are_classified_as_is_reserved_key_tells() {
        let reserved = [KIND_KEY, STATUS_CODE_KEY, STATUS_MESSAGE_KEY, LINK_KEY, TRACESTATE_KEY];
        // Attributes of a reserved key's length, or close to one.
        let others =
            ["", "step.kind", "span.kinD", "otel.lin", "otel.links", "w3c.tracestatE", "otel.status_codes"];
        for key in reserved.into_iter().chain(others) {
            assert_eq!(classify(key) != Key::Attribute, is_reserved_key(key), "{key}");
        }
        assert_eq!(classify(KIND_KEY), Key::Kind);
        assert_eq!(classify(LINK_KEY), Key::Link);
        assert_eq!(classify(TRACESTATE_KEY), Key::Tracestate);
        assert_eq!(classify(STATUS_CODE_KEY), Key::StatusCode);
        assert_eq!(classify(STATUS_MESSAGE_KEY), Key::StatusMessage);
    }

    #[test]
    fn varint_lengths() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            assert_eq!(buf.len(), varint_len(value), "{value}");
        }
    }
}
