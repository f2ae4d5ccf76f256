//! A block's uncompressed payload: a string table and twelve columns of
//! varints (see FORMAT.md), encoded a request at a time and decoded whole.
//!
//! Decoding is bounded: the payload inflates into memory only as its bytes
//! arrive, never past the length the block declares, and every allocation of
//! the decoded requests is charged against the block's decoded-size limit
//! before it is made (FORMAT.md, "Limits").

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::ZlibEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};

use crate::{Request, SpanEntry, MAX_BLOCK_BYTES};

/// The payload's sections, in file order.
const STRINGS: usize = 0;
const TRACE_IDS: usize = 1;
const NAMES: usize = 2;
const THREADS: usize = 3;
const BEGINS: usize = 4;
const DURATIONS: usize = 5;
const PROPERTY_COUNTS: usize = 6;
const PROPERTIES: usize = 7;
const SPAN_COUNTS: usize = 8;
const SPAN_NAMES: usize = 9;
const SPAN_PARENTS: usize = 10;
const SPAN_BEGINS: usize = 11;
const SPAN_DURATIONS: usize = 12;
pub(crate) const SECTIONS: usize = 13;

const SECTION_NAMES: [&str; SECTIONS] = [
    "strings",
    "trace ids",
    "names",
    "threads",
    "begins",
    "durations",
    "property counts",
    "properties",
    "span counts",
    "span names",
    "span parents",
    "span begins",
    "span durations",
];

/// What each entry of a block's string table counts toward the block's
/// decoded size (FORMAT.md, "Limits"): a reader's index of the table.
///
/// The weights cover what a reader holds on a 64-bit target: a request is
/// 112 bytes and each of its strings and lists an allocation (some 32 bytes
/// of allocator overhead at most), a span or a property 48 bytes and one or
/// two strings. So a block's decoded size bounds its requests' memory.
pub(crate) const STRING_COST: u64 = 16;
/// What each request counts, beside its name's bytes.
pub(crate) const REQUEST_COST: u64 = 192;
/// What each property counts, beside its key's and value's bytes.
pub(crate) const PROPERTY_COST: u64 = 112;
/// What each span counts, beside its name's bytes.
pub(crate) const SPAN_COST: u64 = 80;

/// The deflate level: the columns are mostly timing noise, which higher
/// levels hardly shrink further at several times the cost (FORMAT.md).
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

/// Where span `index` most likely begins, from the span listed before it:
/// inside it when that is its parent, else after it (stages run in turn).
fn predict(before: &SpanEntry, index: usize, parent: Option<u32>) -> u64 {
    if parent.is_some_and(|parent| parent as usize + 1 == index) {
        before.begin_unix_ns
    } else {
        before.begin_unix_ns.wrapping_add(before.duration_ns)
    }
}

/// Encodes requests into one block's columns, interning their strings.
#[derive(Debug, Default)]
pub(crate) struct BlockEncoder {
    strings: HashMap<Box<str>, u32>,
    string_count: u64,
    sections: [Vec<u8>; SECTIONS],
    pub(crate) requests: u32,
    pub(crate) spans: u64,
    previous_begin: u64,
    /// A bound on the block's decoded size: the sum of its requests'
    /// [`BlockEncoder::validate`] costs, which count every string as new.
    decoded: u64,
}

impl BlockEncoder {
    /// The bytes encoded so far, before compression.
    pub(crate) fn raw_len(&self) -> usize {
        self.sections.iter().map(Vec::len).sum()
    }

    fn intern(&mut self, text: &str) -> u64 {
        if let Some(&index) = self.strings.get(text) {
            return u64::from(index);
        }
        let index = self.string_count;
        self.string_count += 1;
        self.strings.insert(text.into(), index as u32);
        let table = &mut self.sections[STRINGS];
        put_varint(table, text.len() as u64);
        table.extend_from_slice(text.as_bytes());
        index
    }

    /// Checks what the format cannot hold, before anything is encoded, and
    /// returns the most the request adds to a block's decoded size (see
    /// FORMAT.md, "Limits"): its items and bytes, each string counted as a
    /// new entry of the block's table, so never less than what it adds.
    pub(crate) fn validate(request: &Request) -> io::Result<u64> {
        let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
        if u32::try_from(request.spans.len()).is_err() {
            return Err(invalid(format!("request {:032x} has too many spans", request.trace_id)));
        }
        let text = |text: &str| STRING_COST.saturating_add(text.len() as u64);
        let mut cost = REQUEST_COST.saturating_add(text(&request.name));
        for (key, value) in &request.properties {
            cost = cost.saturating_add(PROPERTY_COST).saturating_add(text(key)).saturating_add(text(value));
        }
        for (index, span) in request.spans.iter().enumerate() {
            if let Some(parent) = span.parent {
                if parent as usize >= index {
                    return Err(invalid(format!(
                        "request {:032x}: span {index} ({:?}) names span {parent} as its parent; \
                         a parent must be listed before its children",
                        request.trace_id, span.name
                    )));
                }
            }
            cost = cost.saturating_add(SPAN_COST).saturating_add(text(&span.name));
        }
        if cost > MAX_BLOCK_BYTES as u64 {
            return Err(invalid(format!(
                "request {:032x} decodes to up to {cost} bytes, more than a block may hold \
                 ({MAX_BLOCK_BYTES} bytes: see FORMAT.md, \"Limits\"); it was not written",
                request.trace_id
            )));
        }
        Ok(cost)
    }

    /// Whether a request of this [`Self::validate`] cost still fits in the
    /// block: the reader refuses a block that decodes to more than the limit.
    pub(crate) fn fits(&self, cost: u64) -> bool {
        self.decoded + cost <= MAX_BLOCK_BYTES as u64
    }

    /// Appends a request that [`Self::validate`] accepted, at that cost.
    pub(crate) fn push(&mut self, request: &Request, cost: u64) {
        let name = self.intern(&request.name);
        let properties: Vec<(u64, u64)> =
            request.properties.iter().map(|(key, value)| (self.intern(key), self.intern(value))).collect();
        let span_names: Vec<u64> = request.spans.iter().map(|span| self.intern(&span.name)).collect();

        let sections = &mut self.sections;
        sections[TRACE_IDS].extend_from_slice(&request.trace_id.to_be_bytes());
        put_varint(&mut sections[NAMES], name);
        put_varint(&mut sections[THREADS], u64::from(request.thread));
        // The first begin in full, then each one against the one before: the
        // recorder writes requests roughly in start order, so deltas are small.
        let begin = if self.requests == 0 {
            request.begin_unix_ns
        } else {
            zigzag(request.begin_unix_ns.wrapping_sub(self.previous_begin) as i64)
        };
        put_varint(&mut sections[BEGINS], begin);
        self.previous_begin = request.begin_unix_ns;
        put_varint(&mut sections[DURATIONS], request.duration_ns);
        put_varint(&mut sections[PROPERTY_COUNTS], properties.len() as u64);
        for (key, value) in properties {
            put_varint(&mut sections[PROPERTIES], key);
            put_varint(&mut sections[PROPERTIES], value);
        }
        put_varint(&mut sections[SPAN_COUNTS], request.spans.len() as u64);
        let mut previous = request.begin_unix_ns;
        for (index, (span, name)) in request.spans.iter().zip(span_names).enumerate() {
            if index > 0 {
                previous = predict(&request.spans[index - 1], index, span.parent);
            }
            put_varint(&mut sections[SPAN_NAMES], name);
            // The distance back to the parent (0: the root), mostly 1 or 2.
            let parent = span.parent.map_or(0, |parent| index as u64 - u64::from(parent));
            put_varint(&mut sections[SPAN_PARENTS], parent);
            put_varint(&mut sections[SPAN_BEGINS], zigzag(span.begin_unix_ns.wrapping_sub(previous) as i64));
            put_varint(&mut sections[SPAN_DURATIONS], span.duration_ns);
        }
        self.requests += 1;
        self.spans += request.spans.len() as u64;
        self.decoded += cost;
    }

    /// The block's payload, compressed; the encoder is then empty again.
    pub(crate) fn finish(&mut self) -> io::Result<(Vec<u8>, usize)> {
        let mut head = Vec::with_capacity(4 * SECTIONS);
        put_varint(&mut head, self.string_count);
        let mut lengths = Vec::with_capacity(4 * SECTIONS);
        for (index, section) in self.sections.iter().enumerate() {
            let len = section.len() + if index == STRINGS { head.len() } else { 0 };
            put_varint(&mut lengths, len as u64);
        }
        let raw_len = lengths.len() + head.len() + self.raw_len();
        // Each item's cost in the decoded size exceeds the most bytes its
        // varints take, so the payload is never longer than the block's
        // decoded size, which `fits` kept within the limit.
        debug_assert!(raw_len as u64 <= self.decoded, "{raw_len} raw bytes, {} decoded", self.decoded);
        let mut encoder = ZlibEncoder::new(Vec::with_capacity(raw_len / 4), Compression::new(LEVEL));
        encoder.write_all(&lengths)?;
        encoder.write_all(&head)?;
        for section in &self.sections {
            encoder.write_all(section)?;
        }
        let compressed = encoder.finish()?;
        self.strings.clear();
        self.string_count = 0;
        self.sections.iter_mut().for_each(Vec::clear);
        self.requests = 0;
        self.spans = 0;
        self.decoded = 0;
        Ok((compressed, raw_len))
    }
}

/// The first allocation of an inflating payload; it then doubles as the
/// payload's bytes arrive, up to the length its block declares.
const FIRST_INFLATE_BYTES: usize = 64 << 10;

/// Inflates a payload that must be exactly `raw_len` bytes long, a length
/// the reader has checked against [`MAX_BLOCK_BYTES`].
///
/// Memory grows with the bytes the stream really yields, so a forged
/// `raw_len` costs nothing until data backs it; a stream that yields more
/// or less, is cut short, or is followed by other bytes is refused.
pub(crate) fn inflate(compressed: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let failed = |error: flate2::DecompressError| format!("cannot inflate the payload: {error}");
    let mut inflater = Decompress::new(true);
    let mut raw: Vec<u8> = Vec::new();
    loop {
        let input = compressed.get(inflater.total_in() as usize..).unwrap_or_default();
        let before = (inflater.total_in(), inflater.total_out());
        let status = if raw.len() < raw_len {
            if raw.len() == raw.capacity() {
                raw.reserve_exact(raw.len().max(FIRST_INFLATE_BYTES).min(raw_len - raw.len()));
            }
            inflater.decompress_vec(input, &mut raw, FlushDecompress::None).map_err(failed)?
        } else {
            // Every declared byte is there: only the stream's end may follow.
            let mut extra = Vec::with_capacity(1);
            let status = inflater.decompress_vec(input, &mut extra, FlushDecompress::None).map_err(failed)?;
            if !extra.is_empty() {
                return Err(format!("the payload inflates to more than the {raw_len} bytes declared"));
            }
            status
        };
        if status == Status::StreamEnd {
            break;
        }
        if (inflater.total_in(), inflater.total_out()) == before {
            // No progress: the input is spent before the stream's end.
            if raw.len() < raw_len {
                return Err(format!(
                    "the payload inflates to {} bytes, not the {raw_len} declared (its deflate stream is cut short)",
                    raw.len()
                ));
            }
            return Err("the payload's deflate stream is cut short".to_string());
        }
    }
    if raw.len() != raw_len {
        return Err(format!("the payload inflates to {} bytes, not the {raw_len} declared", raw.len()));
    }
    let trailing = compressed.len() as u64 - inflater.total_in();
    if trailing > 0 {
        let bytes = if trailing == 1 { "byte follows" } else { "bytes follow" };
        return Err(format!("{trailing} {bytes} the payload's deflate stream"));
    }
    Ok(raw)
}

/// What a block's decoding may still allocate, in the units of its decoded
/// size (FORMAT.md, "Limits"): each allocation is charged before it is made,
/// so that no input, however forged, decodes to more than the limit.
struct Budget {
    left: u64,
}

impl Budget {
    fn new() -> Budget {
        Budget { left: MAX_BLOCK_BYTES as u64 }
    }

    /// Takes `count` items of `each` bytes from what is left, or fails.
    fn charge(&mut self, count: u64, each: u64) -> Result<(), String> {
        match count.checked_mul(each).filter(|&cost| cost <= self.left) {
            Some(cost) => {
                self.left -= cost;
                Ok(())
            }
            None => Err(format!(
                "the block decodes to more than {} MiB, the format's limit for a block \
                 (FORMAT.md, \"Limits\")",
                MAX_BLOCK_BYTES >> 20
            )),
        }
    }
}

/// A count read from a payload, as the capacity to reserve for it: no more
/// items than `room`, what the rest of their section can hold.
fn capacity(count: u64, room: usize) -> usize {
    usize::try_from(count).map_or(room, |count| count.min(room))
}

/// A section being read, naming itself in errors.
struct Cursor<'a> {
    bytes: &'a [u8],
    section: usize,
}

impl<'a> Cursor<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for (index, &byte) in self.bytes.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                self.bytes = &self.bytes[index + 1..];
                return Ok(value);
            }
        }
        Err(format!(
            "the {} section ends inside a number, or holds one too long",
            SECTION_NAMES[self.section]
        ))
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], String> {
        match usize::try_from(len) {
            Ok(len) if len <= self.bytes.len() => {
                let (taken, rest) = self.bytes.split_at(len);
                self.bytes = rest;
                Ok(taken)
            }
            _ => Err(format!("the {} section is shorter than its contents", SECTION_NAMES[self.section])),
        }
    }

    /// The bytes left in the section.
    fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The string the next reference names, copied out, its bytes charged.
    fn string(&mut self, strings: &[&str], budget: &mut Budget) -> Result<String, String> {
        let index = self.varint()?;
        let text = usize::try_from(index).ok().and_then(|index| strings.get(index)).ok_or_else(|| {
            format!(
                "the {} section refers to string {index} of {}",
                SECTION_NAMES[self.section],
                strings.len()
            )
        })?;
        budget.charge(text.len() as u64, 1)?;
        Ok((*text).to_owned())
    }
}

/// Decodes a block's inflated payload into its `count` requests, within
/// the format's limit on a block's decoded size.
pub(crate) fn decode(raw: &[u8], count: u32) -> Result<Vec<Request>, String> {
    let mut head = Cursor { bytes: raw, section: STRINGS };
    let mut lengths = [0u64; SECTIONS];
    for length in &mut lengths {
        *length = head.varint()?;
    }
    let mut sections: Vec<Cursor> = Vec::with_capacity(SECTIONS);
    for (section, &length) in lengths.iter().enumerate() {
        let bytes = head.take(length).map_err(|_| "the section lengths exceed the payload".to_string())?;
        sections.push(Cursor { bytes, section });
    }
    if !head.bytes.is_empty() {
        return Err(format!("{} bytes follow the last section", head.bytes.len()));
    }
    let mut columns: [Cursor; SECTIONS] =
        sections.try_into().map_err(|_| "internal: section count".to_string())?;
    let mut budget = Budget::new();

    // The table's entries point into the payload: its strings are copied
    // only where they are referenced, and each copy is charged.
    let string_count = columns[STRINGS].varint()?;
    budget.charge(string_count, STRING_COST)?;
    // Every string takes at least its length byte.
    let mut strings: Vec<&str> = Vec::with_capacity(capacity(string_count, columns[STRINGS].remaining()));
    for _ in 0..string_count {
        let len = columns[STRINGS].varint()?;
        let bytes = columns[STRINGS].take(len)?;
        strings.push(std::str::from_utf8(bytes).map_err(|_| "a string is not UTF-8".to_string())?);
    }

    budget.charge(u64::from(count), REQUEST_COST)?;
    let mut requests = Vec::with_capacity(capacity(u64::from(count), columns[TRACE_IDS].remaining() / 16));
    let mut previous_begin = 0u64;
    for index in 0..count {
        let id = columns[TRACE_IDS].take(16)?;
        let trace_id = u128::from_be_bytes(id.try_into().map_err(|_| "internal: trace id".to_string())?);
        let name = columns[NAMES].string(&strings, &mut budget)?;
        let thread = u32::try_from(columns[THREADS].varint()?).map_err(|_| "a thread number is too large")?;
        let begin = columns[BEGINS].varint()?;
        let begin_unix_ns =
            if index == 0 { begin } else { previous_begin.wrapping_add(unzigzag(begin) as u64) };
        previous_begin = begin_unix_ns;
        let duration_ns = columns[DURATIONS].varint()?;

        let property_count = columns[PROPERTY_COUNTS].varint()?;
        budget.charge(property_count, PROPERTY_COST)?;
        // A property takes at least two bytes: its key and its value.
        let mut properties =
            Vec::with_capacity(capacity(property_count, columns[PROPERTIES].remaining() / 2));
        for _ in 0..property_count {
            let key = columns[PROPERTIES].string(&strings, &mut budget)?;
            properties.push((key, columns[PROPERTIES].string(&strings, &mut budget)?));
        }

        let span_count = columns[SPAN_COUNTS].varint()?;
        budget.charge(span_count, SPAN_COST)?;
        // A span takes at least a byte of each of its four sections.
        let room = [SPAN_NAMES, SPAN_PARENTS, SPAN_BEGINS, SPAN_DURATIONS]
            .iter()
            .map(|&section| columns[section].remaining())
            .min()
            .unwrap_or(0);
        let mut spans = Vec::with_capacity(capacity(span_count, room));
        let mut previous = begin_unix_ns;
        for span_index in 0..span_count {
            let name = columns[SPAN_NAMES].string(&strings, &mut budget)?;
            let back = columns[SPAN_PARENTS].varint()?;
            let parent = match back {
                0 => None,
                back if back <= span_index => Some((span_index - back) as u32),
                _ => {
                    return Err(format!("span {span_index} of request {index} has a parent before the first"))
                }
            };
            if let Some(before) = spans.last() {
                previous = predict(before, span_index as usize, parent);
            }
            let begin_unix_ns = previous.wrapping_add(unzigzag(columns[SPAN_BEGINS].varint()?) as u64);
            let duration_ns = columns[SPAN_DURATIONS].varint()?;
            spans.push(SpanEntry { name, parent, begin_unix_ns, duration_ns });
        }
        requests.push(Request { trace_id, name, thread, begin_unix_ns, duration_ns, properties, spans });
    }
    if let Some(column) = columns.iter().find(|column| !column.bytes.is_empty()) {
        return Err(format!("the {} section holds more than its requests", SECTION_NAMES[column.section]));
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips_the_extremes() {
        for delta in [0, 1, -1, i64::MAX, i64::MIN, 12_345, -67_890] {
            assert_eq!(unzigzag(zigzag(delta)), delta);
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

    /// Requests whose every number takes the longest varint it can, with
    /// many short or repeated strings: the payload's worst bytes per item.
    fn extreme_requests() -> Vec<Request> {
        let span = |index: usize, name: String| SpanEntry {
            name,
            parent: index.checked_sub(1).map(|parent| parent as u32),
            begin_unix_ns: if index % 2 == 0 { 0 } else { 1 << 62 },
            duration_ns: u64::MAX,
        };
        let request = |trace_id: u128, begin_unix_ns: u64, strings: usize, spans: usize| Request {
            trace_id,
            name: format!("{trace_id}"),
            thread: u32::MAX,
            begin_unix_ns,
            duration_ns: u64::MAX,
            properties: (0..strings).map(|i| (format!("k{i}"), String::new())).collect(),
            spans: (0..spans)
                .map(|i| span(i, if i % 3 == 0 { format!("{i}") } else { String::new() }))
                .collect(),
        };
        vec![
            request(u128::MAX, u64::MAX, 0, 0),
            request(1, 0, 3, 1),
            request(2, u64::MAX, 1_000, 20_000),
            request(3, 1 << 63, 0, 1),
            Request::default(),
        ]
    }

    #[test]
    fn a_payload_is_never_longer_than_its_decoded_size() {
        // So that a block kept within the limit's decoded size is within it
        // in raw bytes too, which the reader also checks.
        for take in 1..=extreme_requests().len() {
            let mut encoder = BlockEncoder::default();
            for request in extreme_requests().iter().take(take) {
                let cost = BlockEncoder::validate(request).unwrap();
                encoder.push(request, cost);
            }
            let decoded = encoder.decoded;
            let (compressed, raw_len) = encoder.finish().unwrap();
            assert!(raw_len as u64 <= decoded, "{take} requests: {raw_len} raw bytes, {decoded} decoded");
            let raw = inflate(&compressed, raw_len).unwrap();
            assert_eq!(decode(&raw, take as u32).unwrap(), extreme_requests()[..take]);
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
