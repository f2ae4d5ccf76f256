//! The protobuf wire format's primitives that the encoder writes with:
//! field tags of the OTLP schema, lengths computed ahead, and the writers
//! of varints, headers, strings, key-values, fixed64s and ids.

// Wire types.
pub(super) const LEN: u8 = 2;
pub(super) const I64: u8 = 1;
pub(super) const I32: u8 = 5;
pub(super) const VARINT: u8 = 0;

pub(super) const fn tag(field: u8, wire_type: u8) -> u8 {
    (field << 3) | wire_type
}

// ExportTraceServiceRequest.resource_spans, ResourceSpans.resource,
// ScopeSpans.scope: field 1; ResourceSpans.scope_spans, ScopeSpans.spans: field 2.
pub(super) const FIELD_1: u8 = tag(1, LEN);
pub(super) const FIELD_2: u8 = tag(2, LEN);
// Span.
pub(super) const SPAN_TRACE_ID: u8 = tag(1, LEN);
pub(super) const SPAN_SPAN_ID: u8 = tag(2, LEN);
pub(super) const SPAN_TRACE_STATE: u8 = tag(3, LEN);
pub(super) const SPAN_PARENT_SPAN_ID: u8 = tag(4, LEN);
pub(super) const SPAN_NAME: u8 = tag(5, LEN);
pub(super) const SPAN_KIND: u8 = tag(6, VARINT);
pub(super) const SPAN_START: u8 = tag(7, I64);
pub(super) const SPAN_END: u8 = tag(8, I64);
pub(super) const SPAN_ATTRIBUTES: u8 = tag(9, LEN);
pub(super) const SPAN_EVENTS: u8 = tag(11, LEN);
pub(super) const SPAN_LINKS: u8 = tag(13, LEN);
pub(super) const SPAN_STATUS: u8 = tag(15, LEN);
/// Span.flags, field 16, fixed32: a two-byte tag.
pub(super) const SPAN_FLAGS: [u8; 2] = [(16 << 3 | I32) | 0x80, 1];
// Span.Event.
pub(super) const EVENT_TIME: u8 = tag(1, I64);
pub(super) const EVENT_NAME: u8 = tag(2, LEN);
pub(super) const EVENT_ATTRIBUTES: u8 = tag(3, LEN);
// Span.Link.
pub(super) const LINK_TRACE_ID: u8 = tag(1, LEN);
pub(super) const LINK_SPAN_ID: u8 = tag(2, LEN);
pub(super) const LINK_FLAGS: u8 = tag(6, I32);
// Status.
pub(super) const STATUS_MESSAGE: u8 = tag(2, LEN);
pub(super) const STATUS_CODE: u8 = tag(3, VARINT);
// KeyValue, AnyValue.
pub(super) const KV_KEY: u8 = tag(1, LEN);
pub(super) const KV_VALUE: u8 = tag(2, LEN);
pub(super) const ANY_STRING: u8 = tag(1, LEN);

/// W3C trace flags of an exported span: minitrace reports only recorded
/// spans, which is what "sampled" means.
pub(crate) const SAMPLED: u32 = 0x01;
/// `SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`.
pub(crate) const HAS_IS_REMOTE: u32 = 0x100;
/// `SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`.
pub(crate) const IS_REMOTE: u32 = 0x200;

/// `Status.StatusCode`.
pub(super) const STATUS_UNSET: u8 = 0;
pub(super) const STATUS_OK: u8 = 1;
pub(super) const STATUS_ERROR: u8 = 2;

/// The bytes of `value` as a varint.
#[inline]
pub(super) fn varint_len(value: u64) -> usize {
    // 1 byte per 7 bits, at least one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// A length-delimited field with a one-byte tag and `len` bytes of content.
#[inline]
pub(super) fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// A string field, left out when empty.
#[inline]
pub(super) fn string_len(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        field_len(s.len())
    }
}

/// The content of a `KeyValue` with a string `AnyValue`. The value is
/// always written, even empty: it is one of a `oneof`.
#[inline]
pub(super) fn key_value_len(key: &str, value: &str) -> usize {
    string_len(key) + field_len(field_len(value.len()))
}

#[inline]
pub(super) fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push(value as u8 | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

#[inline]
pub(super) fn put_header(buf: &mut Vec<u8>, tag: u8, len: usize) {
    buf.push(tag);
    put_varint(buf, len as u64);
}

#[inline]
pub(super) fn put_string(buf: &mut Vec<u8>, tag: u8, s: &str) {
    if !s.is_empty() {
        put_header(buf, tag, s.len());
        buf.extend_from_slice(s.as_bytes());
    }
}

#[inline]
pub(super) fn put_key_value(buf: &mut Vec<u8>, tag: u8, key: &str, value: &str) {
    put_header(buf, tag, key_value_len(key, value));
    put_string(buf, KV_KEY, key);
    put_header(buf, KV_VALUE, field_len(value.len()));
    put_header(buf, ANY_STRING, value.len());
    buf.extend_from_slice(value.as_bytes());
}

#[inline]
pub(super) fn put_fixed64(buf: &mut Vec<u8>, tag: u8, value: u64) {
    if value != 0 {
        buf.push(tag);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

#[inline]
pub(super) fn put_id(buf: &mut Vec<u8>, tag: u8, id: &[u8]) {
    buf.push(tag);
    buf.push(id.len() as u8);
    buf.extend_from_slice(id);
}

/// An 8-byte fixed field, left out when zero.
pub(super) fn fixed64_len(value: u64) -> usize {
    if value == 0 {
        0
    } else {
        9
    }
}
