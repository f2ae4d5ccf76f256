//! The Jaeger model (`jaeger.thrift`): minitrace's records as Jaeger `Span`s,
//! packed into `Batch`es that never exceed a size limit.
//!
//! Every span is encoded once, on its own: a struct inside a Thrift list
//! starts its field ids afresh in both protocols, so its bytes are the same
//! wherever it lands. Batches are then cut from those bytes, which makes the
//! size of each message known before it is written.

use minitrace::collector::{SpanRecord, SpanStatus, LINK_KEY};
use minitrace_delivery::ReadAhead;

use crate::thrift::{Binary, Compact, Protocol, Type};

/// How a span that is too large for one message is cut down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Detail {
    /// Everything.
    Full,
    /// Every string (name, tag and log keys and values) cut to this many
    /// bytes, and a `minitrace.truncated` tag.
    Capped(usize),
    /// Only ids, times, a name cut to [`BARE_NAME_BYTES`], and the
    /// `minitrace.truncated` tag.
    Bare,
}

/// The longest operation name kept on a span reduced to [`Detail::Bare`].
const BARE_NAME_BYTES: usize = 256;

/// The tag that marks a span whose tags or logs were cut to fit a message.
pub(crate) const TRUNCATED_TAG: &str = "minitrace.truncated";

/// Room left in every message besides the process and the spans: a list
/// header longer than the empty one (up to 6 bytes instead of 1).
const LIST_HEADER_GROWTH: usize = 5;

/// Strings are cut to this many bytes at most even in [`Detail::Full`], so
/// that every length fits the Binary protocol's i32.
const MAX_STRING_BYTES: usize = i32::MAX as usize / 2;

/// The `seq_no` whose encoding is the longest: as `Batch.seqNo`, an i64 that
/// takes 10 bytes as a Compact zigzag varint (any value below -2^62 does);
/// as the Compact message's sequence id, its low 32 bits, here all ones,
/// which take 5 bytes as a plain varint (`i64::MIN` alone would take 1).
const WIDEST_SEQ_NO: i64 = i64::MIN | 0xffff_ffff;

/// `Batch.process`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Process {
    pub(crate) service_name: String,
    /// String tags.
    pub(crate) tags: Vec<(String, String)>,
}

/// `Batch.stats` (`ClientStats`): counters since the reporter started;
/// `full_queue_dropped_spans` from minitrace's `Stats::dropped_queue_full`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClientStats {
    pub(crate) full_queue_dropped_spans: i64,
    pub(crate) too_large_dropped_spans: i64,
    pub(crate) failed_to_emit_spans: i64,
}

/// A protocol together with the message that carries a `Batch` in it.
pub(crate) trait Wire: Protocol + Default {
    /// Writes what precedes the `Batch` struct.
    fn message_begin(&mut self, seq_id: i32);
    /// Writes what follows the `Batch` struct.
    fn message_end(&mut self);
}

/// The agent's UDP message: `Agent.emitBatch(1: Batch batch)`, oneway.
impl Wire for Compact {
    fn message_begin(&mut self, seq_id: i32) {
        self.message_begin_oneway("emitBatch", seq_id);
        self.struct_begin(); // the arguments
        self.field(1, Type::Struct);
    }

    fn message_end(&mut self) {
        self.struct_end();
    }
}

/// The collector's HTTP body: a bare `Batch`.
impl Wire for Binary {
    fn message_begin(&mut self, _seq_id: i32) {}

    fn message_end(&mut self) {}
}

/// The first `max_bytes` bytes of `s`, cut back to a char boundary.
fn cut(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

pub(crate) fn string_tag<P: Protocol>(w: &mut P, key: &str, value: &str) {
    w.struct_begin();
    w.field_string(1, key);
    w.field_i32(2, 0); // TagType.STRING
    w.field_string(3, value);
    w.struct_end();
}

pub(crate) fn bool_tag<P: Protocol>(w: &mut P, key: &str, value: bool) {
    w.struct_begin();
    w.field_string(1, key);
    w.field_i32(2, 2); // TagType.BOOL
    w.field_bool(5, value);
    w.struct_end();
}

/// Writes a `Process` struct.
pub(crate) fn process<P: Protocol>(w: &mut P, process: &Process) {
    w.struct_begin();
    w.field_string(1, cut(&process.service_name, MAX_STRING_BYTES));
    if !process.tags.is_empty() {
        w.field(2, Type::List);
        w.list_begin(Type::Struct, process.tags.len());
        for (key, value) in &process.tags {
            string_tag(w, cut(key, MAX_STRING_BYTES), cut(value, MAX_STRING_BYTES));
        }
    }
    w.struct_end();
}

/// A `SpanRef`'s reference types.
const CHILD_OF: i32 = 0;
const FOLLOWS_FROM: i32 = 1;

/// Writes one `SpanRef` struct.
fn span_ref<P: Protocol>(w: &mut P, ref_type: i32, trace_low: i64, trace_high: i64, span_id: u64) {
    w.struct_begin();
    w.field_i32(1, ref_type);
    w.field_i64(2, trace_low);
    w.field_i64(3, trace_high);
    w.field_i64(4, span_id as i64);
    w.struct_end();
}

/// Writes one `Span` struct.
fn span<P: Protocol>(w: &mut P, span: &SpanRecord, detail: Detail) {
    let limit = match detail {
        Detail::Full => MAX_STRING_BYTES,
        Detail::Capped(bytes) => bytes,
        Detail::Bare => BARE_NAME_BYTES,
    };
    let truncated = detail != Detail::Full;
    // IDs are unsigned in minitrace and i64 on the wire: same bits.
    let trace_low = span.trace_id.0 as u64 as i64;
    let trace_high = (span.trace_id.0 >> 64) as u64 as i64;
    // Both ends are floored to µs, so a child never seems to outlast its parent.
    let start_us = span.begin_time_unix_ns / 1000;
    let end_us = span.begin_time_unix_ns.saturating_add(span.duration_ns) / 1000;

    w.struct_begin();
    w.field_i64(1, trace_low);
    w.field_i64(2, trace_high);
    w.field_i64(3, span.span_id.0 as i64);
    w.field_i64(4, span.parent_id.0 as i64);
    w.field_string(5, cut(&span.name, limit));
    // Links are FOLLOWS_FROM references; few spans have any, so look first.
    let has_links = span.properties.iter().any(|(key, _)| key == LINK_KEY);
    let links = if has_links { span.links() } else { Vec::new() };
    let references = usize::from(span.parent_id.0 != 0) + links.len();
    if references > 0 {
        w.field(6, Type::List);
        w.list_begin(Type::Struct, references);
        if span.parent_id.0 != 0 {
            span_ref(w, CHILD_OF, trace_low, trace_high, span.parent_id.0);
        }
        for link in &links {
            span_ref(
                w,
                FOLLOWS_FROM,
                link.trace_id.0 as u64 as i64,
                (link.trace_id.0 >> 64) as u64 as i64,
                link.span_id.0,
            );
        }
    }
    w.field_i32(7, 1); // sampled
    w.field_i64(8, start_us as i64);
    w.field_i64(9, (end_us - start_us) as i64);

    let properties: &[_] = if detail == Detail::Bare { &[] } else { &span.properties };
    let tag_of = |(key, _): &&(_, _)| !has_links || key != LINK_KEY;
    // Jaeger's own mark of a failed span, beside OpenTelemetry's status tags.
    let error = detail != Detail::Bare && matches!(span.status(), SpanStatus::Error(_));
    let tags = properties.iter().filter(tag_of).count() + usize::from(truncated) + usize::from(error);
    if tags > 0 {
        w.field(10, Type::List);
        w.list_begin(Type::Struct, tags);
        for (key, value) in properties.iter().filter(tag_of) {
            string_tag(w, cut(key, limit), cut(value, limit));
        }
        if error {
            bool_tag(w, "error", true);
        }
        if truncated {
            bool_tag(w, TRUNCATED_TAG, true);
        }
    }

    if detail != Detail::Bare && !span.events.is_empty() {
        w.field(11, Type::List);
        w.list_begin(Type::Struct, span.events.len());
        for event in &span.events {
            w.struct_begin(); // Log
            w.field_i64(1, (event.timestamp_unix_ns / 1000) as i64);
            w.field(2, Type::List);
            w.list_begin(Type::Struct, 1 + event.properties.len());
            string_tag(w, "event", cut(&event.name, limit));
            for (key, value) in &event.properties {
                string_tag(w, cut(key, limit), cut(value, limit));
            }
            w.struct_end();
        }
    }
    w.struct_end();
}

/// Writes a whole message: `process` and `span_count` spans already encoded
/// back to back in `spans`.
pub(crate) fn batch_message<W: Wire>(
    w: &mut W,
    process: &[u8],
    spans: &[u8],
    span_count: usize,
    seq_no: i64,
    stats: Option<&ClientStats>,
) {
    w.message_begin(seq_no as i32);
    w.struct_begin(); // Batch
    w.field(1, Type::Struct);
    w.buf().extend_from_slice(process);
    w.field(2, Type::List);
    w.list_begin(Type::Struct, span_count);
    w.buf().extend_from_slice(spans);
    w.field_i64(3, seq_no);
    if let Some(stats) = stats {
        w.field(4, Type::Struct);
        w.struct_begin(); // ClientStats
        w.field_i64(1, stats.full_queue_dropped_spans);
        w.field_i64(2, stats.too_large_dropped_spans);
        w.field_i64(3, stats.failed_to_emit_spans);
        w.struct_end();
    }
    w.struct_end();
    w.message_end();
}

/// What [`Encoder::encode`] did besides producing messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EncodeOutcome {
    /// Spans sent with their strings cut or their tags and logs removed.
    pub(crate) truncated: u64,
    /// Spans too large for a message even when cut down: not sent.
    pub(crate) dropped: u64,
}

/// Turns span records into messages of at most `max_message` bytes.
pub(crate) struct Encoder<W> {
    /// The encoded `Process` struct, the same in every message.
    process: Vec<u8>,
    /// The most span bytes one message can carry.
    span_budget: usize,
    /// Encoded spans, back to back.
    spans: W,
    /// Where each encoded span ends in `spans`.
    ends: Vec<usize>,
    /// The message being assembled.
    message: W,
}

impl<W: Wire> Encoder<W> {
    pub(crate) fn new(process_info: &Process, max_message: usize) -> Encoder<W> {
        let mut w = W::default();
        process(&mut w, process_info);
        let process = std::mem::take(w.buf());
        // The longest an empty message can be: every counter at its widest.
        let widest = ClientStats {
            full_queue_dropped_spans: i64::MIN,
            too_large_dropped_spans: i64::MIN,
            failed_to_emit_spans: i64::MIN,
        };
        let mut empty = W::default();
        batch_message(&mut empty, &process, &[], 0, WIDEST_SEQ_NO, Some(&widest));
        let overhead = empty.buf().len() + LIST_HEADER_GROWTH;
        Encoder {
            process,
            span_budget: max_message.saturating_sub(overhead),
            spans: W::default(),
            ends: Vec::new(),
            message: W::default(),
        }
    }

    /// Encodes `records` into as few messages as the size limit allows and
    /// hands each to `send` with the number of spans in it. `next_seq_no`
    /// numbers the messages; `stats` is read before each message.
    pub(crate) fn encode(
        &mut self,
        records: &[SpanRecord],
        next_seq_no: &mut i64,
        stats: impl Fn() -> ClientStats,
        mut send: impl FnMut(&[u8], usize),
    ) -> EncodeOutcome {
        let mut outcome = EncodeOutcome::default();
        self.spans.buf().clear();
        self.ends.clear();
        let mut ahead = ReadAhead::default();
        for (index, record) in records.iter().enumerate() {
            ahead.before(records, index);
            match self.encode_fitting(record) {
                Some(Detail::Full) => self.ends.push(self.spans.buf().len()),
                Some(_) => {
                    outcome.truncated += 1;
                    self.ends.push(self.spans.buf().len());
                }
                None => outcome.dropped += 1,
            }
        }

        let mut chunk_start = 0; // byte offset of the chunk's first span
        let mut chunk_spans = 0;
        for i in 0..self.ends.len() {
            let end = self.ends[i];
            if chunk_spans > 0 && end - chunk_start > self.span_budget {
                let chunk_end = self.ends[i - 1];
                self.send_message(chunk_start, chunk_end, chunk_spans, next_seq_no, &stats, &mut send);
                chunk_start = chunk_end;
                chunk_spans = 0;
            }
            chunk_spans += 1;
        }
        if chunk_spans > 0 {
            let chunk_end = self.spans.buf().len();
            self.send_message(chunk_start, chunk_end, chunk_spans, next_seq_no, &stats, &mut send);
        }
        outcome
    }

    fn send_message(
        &mut self,
        start: usize,
        end: usize,
        span_count: usize,
        next_seq_no: &mut i64,
        stats: &impl Fn() -> ClientStats,
        send: &mut impl FnMut(&[u8], usize),
    ) {
        self.message.buf().clear();
        let spans = &self.spans.buf()[start..end];
        let stats = stats();
        batch_message(&mut self.message, &self.process, spans, span_count, *next_seq_no, Some(&stats));
        *next_seq_no = next_seq_no.wrapping_add(1);
        send(self.message.buf(), span_count);
    }

    /// Appends `record` to `self.spans`, cut down until it fits the span
    /// budget; returns how much detail was kept, or `None` (and appends
    /// nothing) if even the barest form does not fit.
    fn encode_fitting(&mut self, record: &SpanRecord) -> Option<Detail> {
        let start = self.spans.buf().len();
        let mut detail = Detail::Full;
        loop {
            span(&mut self.spans, record, detail);
            if self.spans.buf().len() - start <= self.span_budget {
                return Some(detail);
            }
            self.spans.buf().truncate(start);
            detail = match detail {
                Detail::Full => Detail::Capped(self.span_budget / 2),
                Detail::Capped(bytes) if bytes > 64 => Detail::Capped(bytes / 8),
                Detail::Capped(_) => Detail::Bare,
                Detail::Bare => return None,
            };
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encodes `records` with `W` and returns each message.
    pub(crate) fn messages<W: Wire>(
        process: &Process,
        max_message: usize,
        records: &[SpanRecord],
    ) -> (Vec<(Vec<u8>, usize)>, EncodeOutcome) {
        let mut encoder = Encoder::<W>::new(process, max_message);
        let mut out = Vec::new();
        let mut seq = 1;
        let outcome =
            encoder.encode(records, &mut seq, ClientStats::default, |bytes, n| out.push((bytes.to_vec(), n)));
        (out, outcome)
    }

    /// The length of an empty message numbered `seq_no`.
    fn empty_message_len<W: Wire>(seq_no: i64) -> usize {
        let mut w = W::default();
        batch_message(&mut w, b"process", &[], 0, seq_no, Some(&ClientStats::default()));
        w.buf().len()
    }

    #[test]
    fn the_widest_seq_no_is_the_widest_in_both_encodings() {
        let widest =
            (empty_message_len::<Compact>(WIDEST_SEQ_NO), empty_message_len::<Binary>(WIDEST_SEQ_NO));
        for seq_no in
            [0, 1, -1, 1 << 28, i32::MIN as i64, i32::MAX as i64, u32::MAX as i64, i64::MAX, i64::MIN]
        {
            assert!(empty_message_len::<Compact>(seq_no) <= widest.0, "{seq_no}");
            assert!(empty_message_len::<Binary>(seq_no) <= widest.1, "{seq_no}");
        }
        // Both parts are at their widest: an i64 seqNo of 10 bytes and a
        // sequence id of 5, where `i64::MIN` gives 1.
        assert_eq!(widest.0, empty_message_len::<Compact>(i64::MIN) + 4);
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("hé", 10), "hé");
        assert_eq!(cut("日本", 0), "");
    }
}
