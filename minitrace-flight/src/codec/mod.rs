//! A block's uncompressed payload: a string table and nineteen columns of
//! varints and fixed-width ids (see FORMAT.md), encoded a trace at a time
//! and decoded whole.
//!
//! Decoding is bounded: the payload inflates into memory only as its bytes
//! arrive, never past the length the block declares, and every allocation of
//! the decoded traces is charged against the block's decoded-size limit
//! before it is made (FORMAT.md, "Limits").

use std::borrow::Cow;

use minitrace::collector::{EventRecord, SpanId, SpanRecord, TraceId};
use minitrace::recorder::RecordedTrace;

use crate::MAX_BLOCK_BYTES;

/// The payload's sections, in file order.
const STRINGS: usize = 0;
const TRACE_IDS: usize = 1;
const THREADS: usize = 2;
const FLAGS: usize = 3;
const BEGINS: usize = 4;
const SPAN_COUNTS: usize = 5;
const SPAN_TRACE_IDS: usize = 6;
const SPAN_IDS: usize = 7;
const ID_LITERALS: usize = 8;
const PARENTS: usize = 9;
const PARENT_LITERALS: usize = 10;
const NAMES: usize = 11;
const SPAN_BEGINS: usize = 12;
const SPAN_DURATIONS: usize = 13;
const PROPERTY_COUNTS: usize = 14;
const PROPERTIES: usize = 15;
const EVENT_COUNTS: usize = 16;
const EVENT_NAMES: usize = 17;
const EVENT_TIMES: usize = 18;
const EVENT_PROPERTY_COUNTS: usize = 19;
pub(crate) const SECTIONS: usize = 20;

const SECTION_NAMES: [&str; SECTIONS] = [
    "strings",
    "trace ids",
    "threads",
    "flags",
    "begins",
    "span counts",
    "span trace ids",
    "span ids",
    "id literals",
    "parents",
    "parent literals",
    "names",
    "span begins",
    "span durations",
    "property counts",
    "properties",
    "event counts",
    "event names",
    "event times",
    "event property counts",
];

/// A trace's flag: it is whole ([`RecordedTrace::complete`]).
const COMPLETE: u8 = 1;
/// A trace's flag: its spans carry trace ids of their own, in the span
/// trace ids section; without it, every span has the trace's id.
const OWN_TRACE_IDS: u8 = 2;

/// A span id whose delta from the one before (zigzagged) reaches this is
/// stored whole, as 8 bytes: a varint of it would take 6 bytes or more.
const ID_DELTA_LIMIT: u64 = 1 << 35;

/// Spans in a trace past which the writer looks parents up in a map
/// rather than by scanning the trace.
const SCAN_LIMIT: usize = 32;

/// What each entry of a block's string table counts toward the block's
/// decoded size (FORMAT.md, "Limits"): a reader's index of the table.
///
/// The weights cover what a reader holds on a 64-bit target (see the test
/// `the_weights_cover_the_records`): a trace is 48 bytes, a span 128, an
/// event 56, a property 48, and each string and list an allocation (some
/// 32 bytes of allocator overhead at most). So a block's decoded size
/// bounds its traces' memory.
pub(crate) const STRING_COST: u64 = 16;
/// What each trace counts: the record and its list of spans.
pub(crate) const TRACE_COST: u64 = 96;
/// What each span counts, beside its name's bytes.
pub(crate) const SPAN_COST: u64 = 160;
/// What each property counts, beside its key's and value's bytes.
pub(crate) const PROPERTY_COST: u64 = 112;
/// What each event counts, beside its name's bytes.
pub(crate) const EVENT_COST: u64 = 96;
/// What each list of properties or events that is not empty counts, beside
/// its items: its allocation.
pub(crate) const LIST_COST: u64 = 32;

/// The deflate level: the columns are mostly timing noise and random ids,
/// which higher levels hardly shrink further at several times the cost
/// (FORMAT.md).
const LEVEL: u32 = 1;

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn zigzag(delta: i64) -> u64 {
    ((delta << 1) ^ (delta >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    (value >> 1) as i64 ^ -((value & 1) as i64)
}

/// The difference `value - base` as a stored number: wrapping, zigzagged.
fn delta(value: u64, base: u64) -> u64 {
    zigzag(value.wrapping_sub(base) as i64)
}

/// The value a stored [`delta`] from `base` stands for.
fn undelta(base: u64, stored: u64) -> u64 {
    base.wrapping_add(unzigzag(stored) as u64)
}

/// Where span `index` of `spans` (of a trace of `count`) most likely
/// begins: the trace's begin for the first span and for the last (the
/// root's place); else inside the span before it when that is its parent,
/// or after it (stages run in turn). Needs only span `index`'s parent and
/// the spans before it.
fn predict_begin(spans: &[SpanRecord], index: usize, count: usize, reference: u64) -> u64 {
    if index == 0 || index + 1 == count {
        return reference;
    }
    let before = &spans[index - 1];
    if spans[index].parent_id == before.span_id {
        before.begin_time_unix_ns
    } else {
        before.begin_time_unix_ns.wrapping_add(before.duration_ns)
    }
}

/// Whether span `index` of a trace of `count` stores its end (as a delta
/// from the latest end before it) rather than its duration: the last span,
/// the root's place, which ends after its children.
fn stores_end(index: usize, count: usize) -> bool {
    index > 0 && index + 1 == count
}

fn end_of(span: &SpanRecord) -> u64 {
    span.begin_time_unix_ns.wrapping_add(span.duration_ns)
}

type Property = (Cow<'static, str>, Cow<'static, str>);

mod decode;
mod encode;

pub(crate) use decode::{decode, inflate};
pub(crate) use encode::BlockEncoder;

#[cfg(test)]
mod tests {
    use flate2::write::ZlibEncoder;
    use flate2::Compression;
    use std::io::Write;

    use super::decode::Cursor;
    use super::*;

    #[test]
    fn zigzag_round_trips_the_extremes() {
        for delta in [0, 1, -1, i64::MAX, i64::MIN, 12_345, -67_890] {
            assert_eq!(unzigzag(zigzag(delta)), delta);
        }
        for (value, base) in [(0, u64::MAX), (u64::MAX, 0), (5, 7), (1 << 63, 1)] {
            assert_eq!(undelta(base, delta(value, base)), value);
        }
    }

    #[test]
    fn varints_round_trip_the_extremes() {
        for value in [0, 127, 128, 16_383, 16_384, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut cursor = Cursor { bytes: &out, section: 0 };
            assert_eq!(cursor.varint(), Ok(value));
            assert!(cursor.bytes.is_empty());
        }
    }

    #[test]
    fn the_weights_cover_the_records() {
        // A record, and the allocator's overhead on its name (32 bytes).
        use std::mem::size_of;
        const ALLOCATION: u64 = 32;
        let size = |bytes: usize| bytes as u64;
        assert!(size(size_of::<RecordedTrace>()) + ALLOCATION <= TRACE_COST);
        assert!(size(size_of::<SpanRecord>()) + ALLOCATION <= SPAN_COST);
        assert!(size(size_of::<EventRecord>()) + ALLOCATION <= EVENT_COST);
        assert!(size(size_of::<Property>()) + 2 * ALLOCATION <= PROPERTY_COST);
        assert!(size(size_of::<&str>()) <= STRING_COST);
        assert_eq!(LIST_COST, ALLOCATION);
    }

    /// Traces whose every number takes the longest varint it can, with many
    /// short or repeated strings, ids that are not in order, parents
    /// anywhere: the payload's worst bytes per item.
    fn extreme_traces() -> Vec<RecordedTrace> {
        let span = |index: u64, name: String| SpanRecord {
            trace_id: TraceId(if index % 5 == 4 { u128::MAX - u128::from(index) } else { u128::MAX }),
            span_id: SpanId(u64::MAX - index * 0x0123_4567_89ab_cdef),
            // The first span, the next one, or one not in the trace: a
            // parent stored whole between span ids stored whole.
            parent_id: SpanId(match index % 3 {
                0 => u64::MAX,
                1 => u64::MAX - (index + 1) * 0x0123_4567_89ab_cdef,
                _ => 0x5555_0000 + index,
            }),
            begin_time_unix_ns: if index % 2 == 0 { 0 } else { 1 << 62 },
            duration_ns: u64::MAX,
            name: name.into(),
            properties: (0..index % 3).map(|i| (format!("k{i}").into(), "".into())).collect(),
            events: (0..index % 4)
                .map(|i| EventRecord {
                    name: format!("{i}").into(),
                    timestamp_unix_ns: u64::MAX - i,
                    properties: vec![("".into(), format!("{index}").into())],
                })
                .collect(),
        };
        let trace = |trace_id: u128, spans: u64| RecordedTrace {
            trace_id: TraceId(trace_id),
            thread: u32::MAX,
            spans: (0..spans)
                .map(|i| span(i, if i % 3 == 0 { format!("{i}") } else { String::new() }))
                .collect(),
            complete: trace_id % 2 == 0,
        };
        vec![trace(u128::MAX, 0), trace(1, 1), trace(2, 20_000), trace(3, 2), RecordedTrace::default()]
    }

    #[test]
    fn a_payload_is_never_longer_than_its_decoded_size() {
        // So that a block kept within the limit's decoded size is within it
        // in raw bytes too, which the reader also checks.
        for take in 1..=extreme_traces().len() {
            let mut encoder = BlockEncoder::default();
            for trace in extreme_traces().iter().take(take) {
                let cost = BlockEncoder::validate(trace).unwrap();
                encoder.push(trace, cost);
            }
            let decoded = encoder.decoded;
            let (compressed, raw_len) = encoder.finish().unwrap();
            assert!(raw_len as u64 <= decoded, "{take} traces: {raw_len} raw bytes, {decoded} decoded");
            let raw = inflate(&compressed, raw_len).unwrap();
            assert_eq!(decode(&raw, take as u32).unwrap(), extreme_traces()[..take]);
        }
    }

    #[test]
    fn a_payload_must_inflate_to_exactly_its_length_and_nothing_after() {
        let mut encoder = ZlibEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(&[7; 100_000]).unwrap();
        let compressed = encoder.finish().unwrap();
        assert_eq!(inflate(&compressed, 100_000).unwrap(), [7; 100_000]);
        let error = |compressed: &[u8], raw_len| inflate(compressed, raw_len).unwrap_err();
        assert!(error(&compressed, 99_999).contains("more than the 99999 bytes declared"));
        assert!(error(&compressed, 100_001).contains("inflates to 100000 bytes, not the 100001"));
        assert!(error(&compressed[..compressed.len() - 1], 100_000).contains("cut short"));
        assert!(error(&compressed[..compressed.len() / 2], 100_000).contains("cut short"));
        let mut trailing = compressed.clone();
        trailing.push(0);
        assert_eq!(error(&trailing, 100_000), "1 byte follows the payload's deflate stream");
        let mut bad_sum = compressed.clone();
        *bad_sum.last_mut().unwrap() ^= 1;
        assert!(
            error(&bad_sum, 100_000).starts_with("cannot inflate the payload"),
            "{}",
            error(&bad_sum, 100_000)
        );
        assert!(error(b"not zlib", 10).starts_with("cannot inflate the payload"));
        assert!(error(b"", 0).contains("cut short"));
    }
}
