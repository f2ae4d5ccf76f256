//! A block's uncompressed payload: a string table and twelve columns of
//! varints (see FORMAT.md), encoded a request at a time and decoded whole.

use std::collections::HashMap;
use std::io::{self, Read, Write};

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;

use crate::{Request, SpanEntry};

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

    /// Checks what the format cannot hold, before anything is encoded.
    pub(crate) fn validate(request: &Request) -> io::Result<()> {
        let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
        if u32::try_from(request.spans.len()).is_err() {
            return Err(invalid(format!("request {:032x} has too many spans", request.trace_id)));
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
        }
        Ok(())
    }

    /// Appends a request that [`Self::validate`] accepted.
    pub(crate) fn push(&mut self, request: &Request) {
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
        Ok((compressed, raw_len))
    }
}

/// Inflates a payload that must be exactly `raw_len` bytes long.
pub(crate) fn inflate(compressed: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let mut raw = Vec::with_capacity(raw_len);
    ZlibDecoder::new(compressed)
        .take(raw_len as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|error| format!("cannot inflate the payload: {error}"))?;
    if raw.len() != raw_len {
        return Err(format!("the payload inflates to {} bytes, not the {raw_len} declared", raw.len()));
    }
    Ok(raw)
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

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        if self.bytes.len() < len {
            return Err(format!("the {} section is shorter than its contents", SECTION_NAMES[self.section]));
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(taken)
    }

    fn string(&mut self, strings: &[String]) -> Result<String, String> {
        let index = self.varint()?;
        strings.get(index as usize).cloned().ok_or_else(|| {
            format!(
                "the {} section refers to string {index} of {}",
                SECTION_NAMES[self.section],
                strings.len()
            )
        })
    }
}

/// Decodes a block's inflated payload into its `count` requests.
pub(crate) fn decode(raw: &[u8], count: u32) -> Result<Vec<Request>, String> {
    let mut head = Cursor { bytes: raw, section: STRINGS };
    let mut lengths = [0usize; SECTIONS];
    for length in &mut lengths {
        *length = usize::try_from(head.varint()?).map_err(|_| "a section length is too large".to_string())?;
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

    let string_count = columns[STRINGS].varint()?;
    // Every string costs at least its length byte: a bound that keeps a
    // forged count from reserving memory the payload cannot fill.
    let mut strings = Vec::with_capacity((string_count as usize).min(columns[STRINGS].bytes.len()));
    for _ in 0..string_count {
        let len = columns[STRINGS].varint()? as usize;
        let bytes = columns[STRINGS].take(len)?;
        strings.push(String::from_utf8(bytes.to_vec()).map_err(|_| "a string is not UTF-8".to_string())?);
    }

    let mut requests = Vec::with_capacity((count as usize).min(columns[TRACE_IDS].bytes.len() / 16));
    let mut previous_begin = 0u64;
    for index in 0..count {
        let id = columns[TRACE_IDS].take(16)?;
        let trace_id = u128::from_be_bytes(id.try_into().map_err(|_| "internal: trace id".to_string())?);
        let name = columns[NAMES].string(&strings)?;
        let thread = u32::try_from(columns[THREADS].varint()?).map_err(|_| "a thread number is too large")?;
        let begin = columns[BEGINS].varint()?;
        let begin_unix_ns =
            if index == 0 { begin } else { previous_begin.wrapping_add(unzigzag(begin) as u64) };
        previous_begin = begin_unix_ns;
        let duration_ns = columns[DURATIONS].varint()?;
        let property_count = columns[PROPERTY_COUNTS].varint()?;
        let mut properties =
            Vec::with_capacity((property_count as usize).min(columns[PROPERTIES].bytes.len()));
        for _ in 0..property_count {
            let key = columns[PROPERTIES].string(&strings)?;
            properties.push((key, columns[PROPERTIES].string(&strings)?));
        }
        let span_count = columns[SPAN_COUNTS].varint()?;
        let mut spans = Vec::with_capacity((span_count as usize).min(columns[SPAN_NAMES].bytes.len()));
        let mut previous = begin_unix_ns;
        for span_index in 0..span_count {
            let name = columns[SPAN_NAMES].string(&strings)?;
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
}
