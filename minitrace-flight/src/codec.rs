//! A block's uncompressed payload: a string table and nineteen columns of
//! varints and fixed-width ids (see FORMAT.md), encoded a trace at a time
//! and decoded whole.
//!
//! Decoding is bounded: the payload inflates into memory only as its bytes
//! arrive, never past the length the block declares, and every allocation of
//! the decoded traces is charged against the block's decoded-size limit
//! before it is made (FORMAT.md, "Limits").

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::ZlibEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};
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

/// A block's string table: each distinct string once, numbered in order of
/// first use.
#[derive(Debug, Default)]
struct Table {
    index: HashMap<Box<str>, u32>,
    count: u64,
    bytes: Vec<u8>,
}

impl Table {
    fn intern(&mut self, text: &str) -> u64 {
        if let Some(&index) = self.index.get(text) {
            return u64::from(index);
        }
        let index = self.count;
        self.count += 1;
        self.index.insert(text.into(), index as u32);
        put_varint(&mut self.bytes, text.len() as u64);
        self.bytes.extend_from_slice(text.as_bytes());
        index
    }
}

type Property = (Cow<'static, str>, Cow<'static, str>);

/// Encodes traces into one block's columns, interning their strings.
#[derive(Debug, Default)]
pub(crate) struct BlockEncoder {
    table: Table,
    sections: [Vec<u8>; SECTIONS],
    pub(crate) traces: u32,
    pub(crate) spans: u64,
    previous_begin: u64,
    /// A bound on the block's decoded size: the sum of its traces'
    /// [`BlockEncoder::validate`] costs, which count every string as new.
    decoded: u64,
}

impl BlockEncoder {
    /// The bytes encoded so far, before compression.
    pub(crate) fn raw_len(&self) -> usize {
        self.table.bytes.len() + self.sections.iter().map(Vec::len).sum::<usize>()
    }

    /// Checks what the format cannot hold, before anything is encoded, and
    /// returns the most the trace adds to a block's decoded size (see
    /// FORMAT.md, "Limits"): its items and bytes, each string counted as a
    /// new entry of the block's table, so never less than what it adds.
    pub(crate) fn validate(trace: &RecordedTrace) -> io::Result<u64> {
        let text = |text: &str| STRING_COST.saturating_add(text.len() as u64);
        let properties = |properties: &[Property]| -> u64 {
            if properties.is_empty() {
                return 0;
            }
            properties.iter().fold(LIST_COST, |cost, (key, value)| {
                cost.saturating_add(PROPERTY_COST).saturating_add(text(key)).saturating_add(text(value))
            })
        };
        let events = |events: &[EventRecord]| -> u64 {
            if events.is_empty() {
                return 0;
            }
            events.iter().fold(LIST_COST, |cost, event| {
                cost.saturating_add(EVENT_COST)
                    .saturating_add(text(&event.name))
                    .saturating_add(properties(&event.properties))
            })
        };
        let cost = trace.spans.iter().fold(TRACE_COST, |cost, span| {
            cost.saturating_add(SPAN_COST)
                .saturating_add(text(&span.name))
                .saturating_add(properties(&span.properties))
                .saturating_add(events(&span.events))
        });
        if cost > MAX_BLOCK_BYTES as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "trace {} ({} spans) decodes to up to {cost} bytes, more than a block may hold \
                     ({MAX_BLOCK_BYTES} bytes: see FORMAT.md, \"Limits\"); it was not written",
                    trace.trace_id,
                    trace.spans.len()
                ),
            ));
        }
        Ok(cost)
    }

    /// Whether a trace of this [`Self::validate`] cost still fits in the
    /// block: the reader refuses a block that decodes to more than the limit.
    pub(crate) fn fits(&self, cost: u64) -> bool {
        self.decoded + cost <= MAX_BLOCK_BYTES as u64
    }

    /// Appends a trace that [`Self::validate`] accepted, at that cost.
    pub(crate) fn push(&mut self, trace: &RecordedTrace, cost: u64) {
        let Self { table, sections: columns, .. } = self;
        let spans = &trace.spans[..];
        let count = spans.len();
        let own_ids = spans.iter().any(|span| span.trace_id != trace.trace_id);
        columns[TRACE_IDS].extend_from_slice(&trace.trace_id.0.to_be_bytes());
        put_varint(&mut columns[THREADS], u64::from(trace.thread));
        let complete = if trace.complete { COMPLETE } else { 0 };
        columns[FLAGS].push(complete | if own_ids { OWN_TRACE_IDS } else { 0 });
        let reference = trace.begin_unix_ns();
        if self.traces == 0 {
            put_varint(&mut columns[BEGINS], reference);
        } else {
            put_varint(&mut columns[BEGINS], delta(reference, self.previous_begin));
        }
        self.previous_begin = reference;
        put_varint(&mut columns[SPAN_COUNTS], count as u64);

        let by_id: HashMap<SpanId, usize> = if count > SCAN_LIMIT {
            let mut by_id = HashMap::with_capacity(count);
            for (at, span) in spans.iter().enumerate() {
                by_id.entry(span.span_id).or_insert(at);
            }
            by_id
        } else {
            HashMap::new()
        };
        let find = |parent: SpanId, index: usize| -> Option<usize> {
            if index > 0 && spans[index - 1].span_id == parent {
                return Some(index - 1);
            }
            if count > SCAN_LIMIT {
                return by_id.get(&parent).copied();
            }
            spans.iter().position(|span| span.span_id == parent)
        };

        let mut previous_id = 0u64;
        let mut latest_end = 0u64;
        for (index, span) in spans.iter().enumerate() {
            if own_ids {
                columns[SPAN_TRACE_IDS].extend_from_slice(&span.trace_id.0.to_be_bytes());
            }
            let id = span.span_id.0;
            let id_delta = delta(id, previous_id.wrapping_add(1));
            if id_delta < ID_DELTA_LIMIT {
                put_varint(&mut columns[SPAN_IDS], id_delta + 1);
            } else {
                put_varint(&mut columns[SPAN_IDS], 0);
                columns[ID_LITERALS].extend_from_slice(&id.to_le_bytes());
            }
            previous_id = id;

            let parent = span.parent_id;
            let code = if parent.0 == 0 {
                0
            } else if spans[count - 1].span_id == parent {
                2
            } else if let Some(at) = find(parent, index) {
                3 + zigzag(index as i64 - at as i64 - 1)
            } else {
                columns[PARENT_LITERALS].extend_from_slice(&parent.0.to_le_bytes());
                1
            };
            put_varint(&mut columns[PARENTS], code);

            put_varint(&mut columns[NAMES], table.intern(&span.name));
            let predicted = predict_begin(spans, index, count, reference);
            put_varint(&mut columns[SPAN_BEGINS], delta(span.begin_time_unix_ns, predicted));
            let end = end_of(span);
            if stores_end(index, count) {
                put_varint(&mut columns[SPAN_DURATIONS], delta(end, latest_end));
            } else {
                put_varint(&mut columns[SPAN_DURATIONS], span.duration_ns);
            }
            latest_end = if index == 0 { end } else { latest_end.max(end) };

            put_properties(table, columns, PROPERTY_COUNTS, &span.properties);
            put_varint(&mut columns[EVENT_COUNTS], span.events.len() as u64);
            for event in &span.events {
                put_varint(&mut columns[EVENT_NAMES], table.intern(&event.name));
                put_varint(
                    &mut columns[EVENT_TIMES],
                    delta(event.timestamp_unix_ns, span.begin_time_unix_ns),
                );
                put_properties(table, columns, EVENT_PROPERTY_COUNTS, &event.properties);
            }
        }
        self.traces += 1;
        self.spans += count as u64;
        self.decoded += cost;
    }

    /// Compresses the block's payload and empties the encoder for the next
    /// block. Returns the compressed payload and its raw length.
    pub(crate) fn finish(&mut self) -> io::Result<(Vec<u8>, usize)> {
        let mut count = Vec::with_capacity(10);
        put_varint(&mut count, self.table.count);
        let mut lengths = Vec::with_capacity(SECTIONS * 3);
        put_varint(&mut lengths, (count.len() + self.table.bytes.len()) as u64);
        for section in &self.sections[STRINGS + 1..] {
            put_varint(&mut lengths, section.len() as u64);
        }
        let raw_len = lengths.len() + count.len() + self.raw_len();
        // Every item weighs more than its bytes in the payload (FORMAT.md,
        // "Limits"), so a block within the decoded limit is within the raw
        // one: the writer's check on `decoded` kept both.
        debug_assert!(raw_len as u64 <= self.decoded, "{raw_len} raw bytes, {} decoded", self.decoded);
        let mut encoder = ZlibEncoder::new(Vec::with_capacity(raw_len / 4), Compression::new(LEVEL));
        encoder.write_all(&lengths)?;
        encoder.write_all(&count)?;
        encoder.write_all(&self.table.bytes)?;
        for section in &self.sections[STRINGS + 1..] {
            encoder.write_all(section)?;
        }
        let compressed = encoder.finish()?;
        self.table = Table::default();
        self.sections.iter_mut().for_each(Vec::clear);
        self.traces = 0;
        self.spans = 0;
        self.decoded = 0;
        Ok((compressed, raw_len))
    }
}

/// Appends a list of properties: its count to `counts`, its strings'
/// references to the properties section.
fn put_properties(table: &mut Table, columns: &mut [Vec<u8>; SECTIONS], counts: usize, list: &[Property]) {
    put_varint(&mut columns[counts], list.len() as u64);
    for (key, value) in list {
        let (key, value) = (table.intern(key), table.intern(value));
        put_varint(&mut columns[PROPERTIES], key);
        put_varint(&mut columns[PROPERTIES], value);
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

    /// Charges a list of `count` items of `each` bytes, and its allocation
    /// if it is not empty.
    fn charge_list(&mut self, count: u64, each: u64) -> Result<(), String> {
        if count > 0 {
            self.charge(1, LIST_COST)?;
        }
        self.charge(count, each)
    }
}

/// A count read from a payload, as the capacity to reserve for it: no more
/// items than `room`, what the rest of their sections can hold.
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

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let bytes = self.take(N as u64)?;
        bytes.try_into().map_err(|_| "internal: a fixed-width field".to_string())
    }

    /// The bytes left in the section.
    fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The string the next reference names, copied out, its bytes charged.
    fn string(&mut self, strings: &[&str], budget: &mut Budget) -> Result<Cow<'static, str>, String> {
        let index = self.varint()?;
        let text = usize::try_from(index).ok().and_then(|index| strings.get(index)).ok_or_else(|| {
            format!(
                "the {} section refers to string {index} of {}",
                SECTION_NAMES[self.section],
                strings.len()
            )
        })?;
        budget.charge(text.len() as u64, 1)?;
        Ok(Cow::Owned((*text).to_owned()))
    }
}

/// The sections of a payload being decoded, the table, and the budget.
struct Decoder<'a> {
    columns: [Cursor<'a>; SECTIONS],
    strings: Vec<&'a str>,
    budget: Budget,
}

impl<'a> Decoder<'a> {
    fn new(raw: &'a [u8]) -> Result<Decoder<'a>, String> {
        let mut head = Cursor { bytes: raw, section: STRINGS };
        let mut lengths = [0u64; SECTIONS];
        for length in &mut lengths {
            *length = head.varint()?;
        }
        let mut sections: Vec<Cursor> = Vec::with_capacity(SECTIONS);
        for (section, &length) in lengths.iter().enumerate() {
            let bytes =
                head.take(length).map_err(|_| "the section lengths exceed the payload".to_string())?;
            sections.push(Cursor { bytes, section });
        }
        if !head.bytes.is_empty() {
            return Err(format!("{} bytes follow the last section", head.bytes.len()));
        }
        let mut columns: [Cursor; SECTIONS] =
            sections.try_into().map_err(|_| "internal: section count".to_string())?;
        let mut budget = Budget::new();

        // The table's entries point into the payload: its strings are
        // copied only where they are referenced, and each copy is charged.
        let string_count = columns[STRINGS].varint()?;
        budget.charge(string_count, STRING_COST)?;
        // Every string takes at least its length byte.
        let mut strings: Vec<&str> = Vec::with_capacity(capacity(string_count, columns[STRINGS].remaining()));
        for _ in 0..string_count {
            let len = columns[STRINGS].varint()?;
            let bytes = columns[STRINGS].take(len)?;
            strings.push(std::str::from_utf8(bytes).map_err(|_| "a string is not UTF-8".to_string())?);
        }
        Ok(Decoder { columns, strings, budget })
    }

    fn string(&mut self, section: usize) -> Result<Cow<'static, str>, String> {
        self.columns[section].string(&self.strings, &mut self.budget)
    }

    /// The room for items that take at least a byte of each of `sections`.
    fn room(&self, sections: &[usize]) -> usize {
        sections.iter().map(|&section| self.columns[section].remaining()).min().unwrap_or(0)
    }

    /// A list of properties: its count from `counts`, its pairs from the
    /// properties section.
    fn properties(&mut self, counts: usize) -> Result<Vec<Property>, String> {
        let count = self.columns[counts].varint()?;
        self.budget.charge_list(count, PROPERTY_COST)?;
        // A property takes at least two bytes: its key and its value.
        let mut properties = Vec::with_capacity(capacity(count, self.columns[PROPERTIES].remaining() / 2));
        for _ in 0..count {
            let key = self.string(PROPERTIES)?;
            properties.push((key, self.string(PROPERTIES)?));
        }
        Ok(properties)
    }

    fn events(&mut self, span_begin: u64) -> Result<Vec<EventRecord>, String> {
        let count = self.columns[EVENT_COUNTS].varint()?;
        self.budget.charge_list(count, EVENT_COST)?;
        let room = self.room(&[EVENT_NAMES, EVENT_TIMES, EVENT_PROPERTY_COUNTS]);
        let mut events = Vec::with_capacity(capacity(count, room));
        for _ in 0..count {
            let name = self.string(EVENT_NAMES)?;
            let timestamp_unix_ns = undelta(span_begin, self.columns[EVENT_TIMES].varint()?);
            let properties = self.properties(EVENT_PROPERTY_COUNTS)?;
            events.push(EventRecord { name, timestamp_unix_ns, properties });
        }
        Ok(events)
    }

    /// The next 8-byte id of a literals section.
    fn literal(&mut self, section: usize) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.columns[section].array()?))
    }

    fn trace(&mut self, index: u32, reference: u64) -> Result<RecordedTrace, String> {
        let trace_id = TraceId(u128::from_be_bytes(self.columns[TRACE_IDS].array()?));
        let thread =
            u32::try_from(self.columns[THREADS].varint()?).map_err(|_| "a thread number is too large")?;
        let [flags] = self.columns[FLAGS].array()?;
        if flags & !(COMPLETE | OWN_TRACE_IDS) != 0 {
            return Err(format!("trace {index} has unknown flags 0x{flags:02x}"));
        }
        let count = self.columns[SPAN_COUNTS].varint()?;
        self.budget.charge(count, SPAN_COST)?;
        // A span takes at least a byte of each of these sections.
        let room = self.room(&[
            SPAN_IDS,
            PARENTS,
            NAMES,
            SPAN_BEGINS,
            SPAN_DURATIONS,
            PROPERTY_COUNTS,
            EVENT_COUNTS,
        ]);
        let mut spans: Vec<SpanRecord> = Vec::with_capacity(capacity(count, room));
        // The ids first: a parent may be named by its place, before or
        // after its child.
        let mut previous_id = 0u64;
        for _ in 0..count {
            let trace_id = if flags & OWN_TRACE_IDS != 0 {
                TraceId(u128::from_be_bytes(self.columns[SPAN_TRACE_IDS].array()?))
            } else {
                trace_id
            };
            let id = match self.columns[SPAN_IDS].varint()? {
                0 => self.literal(ID_LITERALS)?,
                code => undelta(previous_id.wrapping_add(1), code - 1),
            };
            previous_id = id;
            spans.push(SpanRecord { trace_id, span_id: SpanId(id), ..SpanRecord::default() });
        }
        let count = spans.len();
        let mut latest_end = 0u64;
        for at in 0..count {
            let parent = match self.columns[PARENTS].varint()? {
                0 => SpanId(0),
                1 => SpanId(self.literal(PARENT_LITERALS)?),
                2 => spans[count - 1].span_id,
                code => {
                    let back = unzigzag(code - 3);
                    let place = (at as i64).checked_sub(1).and_then(|at| at.checked_sub(back));
                    match place.and_then(|place| usize::try_from(place).ok()).filter(|&place| place < count) {
                        Some(place) => spans[place].span_id,
                        None => {
                            return Err(format!(
                                "span {at} of trace {index} names a parent outside its {count} spans"
                            ))
                        }
                    }
                }
            };
            spans[at].parent_id = parent;
            let name = self.string(NAMES)?;
            let predicted = predict_begin(&spans, at, count, reference);
            let begin = undelta(predicted, self.columns[SPAN_BEGINS].varint()?);
            let stored = self.columns[SPAN_DURATIONS].varint()?;
            let duration =
                if stores_end(at, count) { undelta(latest_end, stored).wrapping_sub(begin) } else { stored };
            let properties = self.properties(PROPERTY_COUNTS)?;
            let events = self.events(begin)?;
            let span = &mut spans[at];
            span.name = name;
            span.begin_time_unix_ns = begin;
            span.duration_ns = duration;
            span.properties = properties;
            span.events = events;
            let end = end_of(span);
            latest_end = if at == 0 { end } else { latest_end.max(end) };
        }
        Ok(RecordedTrace { trace_id, thread, spans, complete: flags & COMPLETE != 0 })
    }
}

/// Decodes a block's inflated payload into its `count` traces, within the
/// format's limit on a block's decoded size.
pub(crate) fn decode(raw: &[u8], count: u32) -> Result<Vec<RecordedTrace>, String> {
    let mut decoder = Decoder::new(raw)?;
    decoder.budget.charge(u64::from(count), TRACE_COST)?;
    let room =
        decoder.room(&[THREADS, FLAGS, BEGINS, SPAN_COUNTS]).min(decoder.columns[TRACE_IDS].remaining() / 16);
    let mut traces = Vec::with_capacity(capacity(u64::from(count), room));
    let mut reference = 0u64;
    for index in 0..count {
        let begin = decoder.columns[BEGINS].varint()?;
        reference = if index == 0 { begin } else { undelta(reference, begin) };
        traces.push(decoder.trace(index, reference)?);
    }
    if let Some(column) = decoder.columns.iter().find(|column| !column.bytes.is_empty()) {
        return Err(format!("the {} section holds more than its traces", SECTION_NAMES[column.section]));
    }
    Ok(traces)
}

#[cfg(test)]
mod tests {
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
