//! Inflating a block's payload and decoding its traces, within the
//! block's decoded-size budget.

use flate2::{Decompress, FlushDecompress, Status};

use super::*;

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
pub(super) struct Cursor<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) section: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn varint(&mut self) -> Result<u64, String> {
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
