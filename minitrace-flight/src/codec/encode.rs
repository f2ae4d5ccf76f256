//! Encoding traces into a block's columns and string table.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::ZlibEncoder;
use flate2::Compression;

use super::*;

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
    pub(super) decoded: u64,
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
