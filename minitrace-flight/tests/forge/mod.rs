//! Forged dumps for the hostile-input tests, this crate's and
//! minitrace-view's (which includes this file by path): payloads built
//! section by section, blocks framed with checksums that hold, seeded
//! random mutations of small valid dumps, and the child processes in which
//! the tests measure peak memory.
//!
//! A checksum stops nothing here: anyone can compute it, and these forgeries
//! do, so that the damage reaches the decoder.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::Command;

use flate2::write::ZlibEncoder;
use flate2::Compression;
use minitrace_flight::{
    synthetic, EventRecord, FormatError, Reader, RecordedTrace, SpanId, SpanRecord, TraceId, Writer,
    MAX_BLOCK_BYTES,
};

pub const MIB: u64 = 1 << 20;

/// The peak resident memory any one case may take, whole process included.
///
/// The forged files are small (their compressed payloads are at most a few
/// MiB), so what a reader holds is one block's inflated payload, at most
/// `MAX_BLOCK_BYTES` (64 MiB), and its decoded traces, whose decoded size
/// is at most `MAX_BLOCK_BYTES` too and which that size is weighed to cover
/// (struct sizes, the allocator's overhead on short strings). The test
/// harness, the forged input and the viewer's page add a few MiB; 32 MiB
/// leaves room. Before the limits, the string bomb alone asked for ~200 GiB.
pub const PEAK_RSS_BOUND: u64 = 2 * MAX_BLOCK_BYTES as u64 + 32 * MIB;

/// The address space a child may map: 1 GiB, the limit under which the
/// review saw the reader abort on a block declaring 1 GiB. An allocation
/// sized from the file fails here even if its pages are never touched (and
/// so never counted in the resident peak).
pub const ADDRESS_SPACE_LIMIT: u64 = 1 << 30;

// ---- payloads, section by section (FORMAT.md, "The payload") ----

pub const STRINGS: usize = 0;
pub const TRACE_IDS: usize = 1;
pub const THREADS: usize = 2;
pub const FLAGS: usize = 3;
pub const BEGINS: usize = 4;
pub const SPAN_COUNTS: usize = 5;
pub const SPAN_TRACE_IDS: usize = 6;
pub const SPAN_IDS: usize = 7;
pub const ID_LITERALS: usize = 8;
pub const PARENTS: usize = 9;
pub const PARENT_LITERALS: usize = 10;
pub const NAMES: usize = 11;
pub const SPAN_BEGINS: usize = 12;
pub const SPAN_DURATIONS: usize = 13;
pub const PROPERTY_COUNTS: usize = 14;
pub const PROPERTIES: usize = 15;
pub const EVENT_COUNTS: usize = 16;
pub const EVENT_NAMES: usize = 17;
pub const EVENT_TIMES: usize = 18;
pub const EVENT_PROPERTY_COUNTS: usize = 19;
pub const SECTIONS: usize = 20;

/// The sections every span takes a number of (FORMAT.md: a span's id code,
/// parent code, name, begin, duration, property and event counts).
pub const SPAN_SECTIONS: [usize; 7] =
    [SPAN_IDS, PARENTS, NAMES, SPAN_BEGINS, SPAN_DURATIONS, PROPERTY_COUNTS, EVENT_COUNTS];

pub fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A block's payload before compression, written section by section.
#[derive(Debug, Default, Clone)]
pub struct Payload {
    pub sections: [Vec<u8>; SECTIONS],
}

impl Payload {
    pub fn num(&mut self, section: usize, value: u64) -> &mut Payload {
        varint(&mut self.sections[section], value);
        self
    }

    pub fn bytes(&mut self, section: usize, bytes: &[u8]) -> &mut Payload {
        self.sections[section].extend_from_slice(bytes);
        self
    }

    /// The same number `times` times: a column of a claimed population.
    pub fn repeat(&mut self, section: usize, value: u64, times: usize) -> &mut Payload {
        let mut one = Vec::new();
        varint(&mut one, value);
        for _ in 0..times {
            self.sections[section].extend_from_slice(&one);
        }
        self
    }

    /// One trace's fixed fields: trace id, thread, flags (complete),
    /// begin, and its count of spans.
    pub fn trace(&mut self, spans: u64) -> &mut Payload {
        self.bytes(TRACE_IDS, &[0x5e; 16])
            .num(THREADS, 1)
            .bytes(FLAGS, &[1])
            .num(BEGINS, 1_000)
            .num(SPAN_COUNTS, spans)
    }

    /// One span named by string `name`: the id after the one before, no
    /// parent, no properties or events.
    pub fn span(&mut self, name: u64) -> &mut Payload {
        self.num(SPAN_IDS, 1)
            .num(PARENTS, 0)
            .num(NAMES, name)
            .num(SPAN_BEGINS, 0)
            .num(SPAN_DURATIONS, 9)
            .num(PROPERTY_COUNTS, 0)
            .num(EVENT_COUNTS, 0)
    }

    /// `times` spans named by string `name`, as [`Payload::span`]: a column
    /// at a time.
    pub fn spans(&mut self, name: u64, times: usize) -> &mut Payload {
        for section in SPAN_SECTIONS {
            let value = match section {
                SPAN_IDS => 1,
                NAMES => name,
                SPAN_DURATIONS => 9,
                _ => 0,
            };
            self.repeat(section, value, times);
        }
        self
    }

    /// The payload: the sections' lengths, then the sections.
    pub fn raw(&self) -> Vec<u8> {
        let mut raw = Vec::new();
        for section in &self.sections {
            varint(&mut raw, section.len() as u64);
        }
        for section in &self.sections {
            raw.extend_from_slice(section);
        }
        raw
    }

    /// The block of `traces` traces that holds this payload.
    pub fn block(&self, traces: u32) -> Vec<u8> {
        let raw = self.raw();
        block(&zlib(&raw), raw.len() as u32, traces)
    }
}

pub fn zlib(raw: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(raw).unwrap();
    encoder.finish().unwrap()
}

/// Inflates at most `limit` bytes of `compressed`; `None` if it is not zlib.
pub fn unzlib(compressed: &[u8], limit: u64) -> Option<Vec<u8>> {
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(compressed).take(limit).read_to_end(&mut raw).ok()?;
    Some(raw)
}

fn crc(kind: u8, fields: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(fields);
    hasher.update(payload);
    hasher.finalize()
}

/// A block framed around `compressed`, declaring `raw_len` and `traces`,
/// its checksum valid whatever it declares.
pub fn block(compressed: &[u8], raw_len: u32, traces: u32) -> Vec<u8> {
    block_declaring(compressed, compressed.len() as u32, raw_len, traces)
}

/// A block that declares `compressed_len` whatever `compressed` holds.
pub fn block_declaring(compressed: &[u8], compressed_len: u32, raw_len: u32, traces: u32) -> Vec<u8> {
    let mut fields = Vec::with_capacity(12);
    fields.extend_from_slice(&compressed_len.to_le_bytes());
    fields.extend_from_slice(&raw_len.to_le_bytes());
    fields.extend_from_slice(&traces.to_le_bytes());
    let mut out = vec![1u8];
    out.extend_from_slice(&crc(1, &fields, compressed).to_le_bytes());
    out.extend_from_slice(&fields);
    out.extend_from_slice(compressed);
    out
}

/// A whole dump: the header, `blocks`, and an end marker that counts
/// `traces` and `spans` (`None`: no end marker, a cut dump).
pub fn dump(blocks: &[Vec<u8>], end: Option<(u64, u64)>) -> Vec<u8> {
    let mut out = b"MTFLIGHT\x02\x00".to_vec();
    for block in blocks {
        out.extend_from_slice(block);
    }
    if let Some((traces, spans)) = end {
        let mut fields = traces.to_le_bytes().to_vec();
        fields.extend_from_slice(&spans.to_le_bytes());
        out.push(2);
        out.extend_from_slice(&crc(2, &fields, &[]).to_le_bytes());
        out.extend_from_slice(&fields);
    }
    out
}

/// Where a dump's records are: `(offset, kind)`, as far as they parse.
fn records(bytes: &[u8]) -> Vec<(usize, u8)> {
    let mut found = Vec::new();
    let mut at = 10;
    while at < bytes.len() {
        let kind = bytes[at];
        found.push((at, kind));
        match kind {
            1 if at + 17 <= bytes.len() => {
                let len = u32::from_le_bytes(bytes[at + 5..at + 9].try_into().unwrap()) as usize;
                at = at.saturating_add(17).saturating_add(len);
            }
            _ => break,
        }
    }
    found
}

/// Recomputes the checksum of every block and end marker that is whole, as
/// a forger would.
pub fn fix_checksums(bytes: &mut [u8]) {
    for (at, kind) in records(bytes) {
        let (fields, payload_len) = match kind {
            1 if at + 17 <= bytes.len() => {
                (at + 5..at + 17, u32::from_le_bytes(bytes[at + 5..at + 9].try_into().unwrap()) as usize)
            }
            2 if at + 21 <= bytes.len() => (at + 5..at + 21, 0),
            _ => continue,
        };
        let Some(payload) = bytes.get(fields.end..fields.end.saturating_add(payload_len)) else { continue };
        let sum = crc(kind, &bytes[fields.clone()], payload);
        bytes[at + 1..at + 5].copy_from_slice(&sum.to_le_bytes());
    }
}

// ---- the hostile dumps the review named, and their kin ----

/// What reading a forged dump must give.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// The dump reads whole: this many traces.
    Reads(usize),
    /// `FormatError::Corrupt` whose message holds this text.
    Corrupt(&'static str),
    /// `FormatError::Truncated`.
    Truncated,
}

const OVER_THE_LIMIT: &str = "decodes to more than 64 MiB, the format's limit for a block";

/// A payload whose string table holds one string of `len` bytes of 'x'.
fn with_string(len: usize) -> Payload {
    let mut payload = Payload::default();
    payload.num(STRINGS, 1).num(STRINGS, len as u64).bytes(STRINGS, &vec![b'x'; len]);
    payload
}

/// One 1 MiB string naming the 200 000 spans of one trace: a few KiB
/// compressed, ~200 GiB had every reference been cloned.
pub fn string_bomb() -> Vec<u8> {
    const SPANS: usize = 200_000;
    let mut payload = with_string(1 << 20);
    payload.trace(SPANS as u64).spans(0, SPANS);
    dump(&[payload.block(1)], Some((1, SPANS as u64)))
}

/// The same string as the key and value of 100 000 properties, spread
/// over the spans of 1 000 traces.
pub fn property_bomb() -> Vec<u8> {
    let mut payload = with_string(1 << 20);
    for _ in 0..1_000 {
        payload.trace(1).span(0);
        payload.sections[PROPERTY_COUNTS].pop();
        payload.num(PROPERTY_COUNTS, 100).repeat(PROPERTIES, 0, 200);
    }
    dump(&[payload.block(1_000)], Some((1_000, 1_000)))
}

/// The same string as the name of 100 000 events of one span, and the
/// value of a property of each.
pub fn event_bomb() -> Vec<u8> {
    const EVENTS: usize = 100_000;
    let mut payload = with_string(1 << 20);
    payload.trace(1).span(0);
    payload.sections[EVENT_COUNTS].clear();
    payload.num(EVENT_COUNTS, EVENTS as u64);
    payload.repeat(EVENT_NAMES, 0, EVENTS).repeat(EVENT_TIMES, 0, EVENTS);
    payload.repeat(EVENT_PROPERTY_COUNTS, 1, EVENTS).repeat(PROPERTIES, 0, 2 * EVENTS);
    dump(&[payload.block(1)], Some((1, 1)))
}

/// A small valid payload of one trace of one span.
fn one_trace() -> Payload {
    let mut payload = Payload::default();
    payload.num(STRINGS, 1).num(STRINGS, 3).bytes(STRINGS, b"get");
    payload.trace(1).span(0);
    payload
}

/// A block declaring that its payload inflates to 1 GiB, its checksum valid.
pub fn declares_a_gib() -> Vec<u8> {
    let compressed = zlib(&one_trace().raw());
    dump(&[block(&compressed, 1 << 30, 1)], Some((1, 1)))
}

/// A block declaring a compressed payload of 1 GiB, of which the file holds
/// a few bytes.
pub fn declares_a_gib_compressed() -> Vec<u8> {
    let raw = one_trace().raw();
    dump(&[block_declaring(&zlib(&raw), 1 << 30, raw.len() as u32, 1)], None)
}

/// A block declaring the largest payloads allowed, compressed and not, of
/// which the file holds a few bytes: a cut dump, read without reserving
/// what it declares.
pub fn declares_the_limit_and_is_cut() -> Vec<u8> {
    let raw = one_trace().raw();
    dump(&[block_declaring(&zlib(&raw), MAX_BLOCK_BYTES as u32, MAX_BLOCK_BYTES as u32, 1)], None)
}

/// A block declaring the largest payload allowed that inflates to a few
/// bytes.
pub fn declares_the_limit_inflates_to_little() -> Vec<u8> {
    let compressed = zlib(&one_trace().raw());
    dump(&[block(&compressed, MAX_BLOCK_BYTES as u32, 1)], Some((1, 1)))
}

/// A block whose header claims 4 294 967 295 traces.
pub fn claims_billions_of_traces() -> Vec<u8> {
    dump(&[one_trace().block(u32::MAX)], Some((u64::from(u32::MAX), 1)))
}

/// A trace whose span count claims 5 000 000 spans, its span sections
/// holding one.
pub fn claims_millions_of_spans() -> Vec<u8> {
    let mut payload = one_trace();
    payload.sections[SPAN_COUNTS].clear();
    payload.num(SPAN_COUNTS, 5_000_000);
    dump(&[payload.block(1)], Some((1, 5_000_000)))
}

/// A trace whose span count claims 300 000 spans, within the limit, its
/// span sections holding ten: refused without reserving the 300 000.
pub fn claims_spans_it_lacks() -> Vec<u8> {
    let mut payload = one_trace();
    payload.sections[SPAN_COUNTS].clear();
    payload.num(SPAN_COUNTS, 300_000).spans(0, 9);
    dump(&[payload.block(1)], Some((1, 300_000)))
}

/// 2 000 000 spans that are really there (14 MB of small numbers,
/// compressed to a few KiB): more than the limit, at 160 bytes a span.
pub fn millions_of_real_spans() -> Vec<u8> {
    const SPANS: usize = 2_000_000;
    let mut payload = Payload::default();
    payload.num(STRINGS, 1).num(STRINGS, 3).bytes(STRINGS, b"get");
    payload.trace(SPANS as u64).spans(0, SPANS);
    dump(&[payload.block(1)], Some((1, SPANS as u64)))
}

/// A string table that claims 2^40 strings.
pub fn claims_a_trillion_strings() -> Vec<u8> {
    let mut payload = one_trace();
    payload.sections[STRINGS].clear();
    payload.num(STRINGS, 1 << 40).num(STRINGS, 3).bytes(STRINGS, b"get");
    dump(&[payload.block(1)], Some((1, 1)))
}

/// A span whose property count claims 2^62 properties.
pub fn claims_endless_properties() -> Vec<u8> {
    let mut payload = one_trace();
    payload.sections[PROPERTY_COUNTS].clear();
    payload.num(PROPERTY_COUNTS, 1 << 62).num(PROPERTIES, 0).num(PROPERTIES, 0);
    dump(&[payload.block(1)], Some((1, 1)))
}

/// A span whose event count claims 2^62 events.
pub fn claims_endless_events() -> Vec<u8> {
    let mut payload = one_trace();
    payload.sections[EVENT_COUNTS].clear();
    payload.num(EVENT_COUNTS, 1 << 62).num(EVENT_NAMES, 0).num(EVENT_TIMES, 0).num(EVENT_PROPERTY_COUNTS, 0);
    dump(&[payload.block(1)], Some((1, 1)))
}

/// A span whose parent is named by a place 1 000 spans before the first.
pub fn a_parent_outside_the_trace() -> Vec<u8> {
    let mut payload = one_trace();
    payload.sections[PARENTS].clear();
    // 3 + zigzag(1 000): the span 1 001 places before this one.
    payload.num(PARENTS, 3 + 2_000);
    dump(&[payload.block(1)], Some((1, 1)))
}

/// A trace whose flags set a bit no version defines.
pub fn unknown_flags() -> Vec<u8> {
    let mut payload = one_trace();
    payload.sections[FLAGS] = vec![0x81];
    dump(&[payload.block(1)], Some((1, 1)))
}

/// Size of the string in [`largest_block`]: its trace's decoded size
/// (FORMAT.md, "Limits") is then exactly the limit: two table entries (16
/// each), the trace (96), its span (160), the span's list of properties
/// (32) and its one property (112).
pub const LARGEST_STRING: usize = MAX_BLOCK_BYTES - 16 * 2 - 96 - 160 - 32 - 112;

/// A valid block at the limit: one trace of one span whose property value
/// is a string of almost 64 MiB (one letter repeated, so 300 KiB
/// compressed). It reads.
pub fn largest_block() -> Vec<u8> {
    let len = LARGEST_STRING;
    // The string table: "" and the long string, each once.
    let mut strings = Vec::new();
    varint(&mut strings, 2);
    varint(&mut strings, 0);
    varint(&mut strings, len as u64);
    let mut payload = Payload::default();
    payload.trace(1).span(0);
    payload.sections[PROPERTY_COUNTS].clear();
    payload.num(PROPERTY_COUNTS, 1).num(PROPERTIES, 0).num(PROPERTIES, 1);
    let mut head = Vec::new();
    varint(&mut head, (strings.len() + len) as u64);
    for section in &payload.sections[1..] {
        varint(&mut head, section.len() as u64);
    }
    // Streamed, so that the forger never holds the 64 MiB itself.
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(&head).unwrap();
    encoder.write_all(&strings).unwrap();
    let letters = vec![b'x'; 1 << 16];
    let mut left = len;
    while left > 0 {
        let step = left.min(letters.len());
        encoder.write_all(&letters[..step]).unwrap();
        left -= step;
    }
    for section in &payload.sections[1..] {
        encoder.write_all(section).unwrap();
    }
    let raw_len =
        head.len() + strings.len() + len + payload.sections[1..].iter().map(Vec::len).sum::<usize>();
    dump(&[block(&encoder.finish().unwrap(), raw_len as u32, 1)], Some((1, 1)))
}

/// Distinct names of a MiB each: 48 span names in one block's trace (its
/// root named "r"), then a root name in each of 40 blocks more. A valid
/// dump, whose names a viewer must not keep whole (its legends keep
/// hundreds of names).
pub fn long_distinct_names() -> Vec<u8> {
    let name = |index: usize| {
        let mut name = format!("{index:04}").into_bytes();
        name.resize(1 << 20, b'x');
        name
    };
    let mut first = Payload::default();
    first.num(STRINGS, 49).num(STRINGS, 1).bytes(STRINGS, b"r");
    first.trace(49);
    for index in 0..48 {
        first.num(STRINGS, 1 << 20).bytes(STRINGS, &name(index));
        first.span(1 + index as u64);
    }
    first.span(0);
    let mut blocks = vec![first.block(1)];
    drop(first);
    for index in 0..40 {
        let mut payload = Payload::default();
        payload.num(STRINGS, 1).num(STRINGS, 1 << 20).bytes(STRINGS, &name(1_000 + index));
        payload.trace(1).span(0);
        blocks.push(payload.block(1));
    }
    dump(&blocks, Some((41, 49 + 40)))
}

/// A forged dump: its name, how to make it, and what reading it must give.
pub type Forgery = (&'static str, fn() -> Vec<u8>, Expect);

/// Every forged dump above, with what reading it must give. Each is made
/// only when asked for, so that a child measuring one case makes only it.
pub fn forgeries() -> Vec<Forgery> {
    const BEYOND: &str = "beyond the format's limit";
    vec![
        ("string bomb", string_bomb, Expect::Corrupt(OVER_THE_LIMIT)),
        ("property bomb", property_bomb, Expect::Corrupt(OVER_THE_LIMIT)),
        ("event bomb", event_bomb, Expect::Corrupt(OVER_THE_LIMIT)),
        ("declares a GiB", declares_a_gib, Expect::Corrupt(BEYOND)),
        ("declares a GiB compressed", declares_a_gib_compressed, Expect::Corrupt(BEYOND)),
        ("declares the limit, cut", declares_the_limit_and_is_cut, Expect::Truncated),
        (
            "declares the limit, inflates to little",
            declares_the_limit_inflates_to_little,
            Expect::Corrupt("inflates to"),
        ),
        ("claims billions of traces", claims_billions_of_traces, Expect::Corrupt(OVER_THE_LIMIT)),
        ("claims millions of spans", claims_millions_of_spans, Expect::Corrupt(OVER_THE_LIMIT)),
        ("claims spans it lacks", claims_spans_it_lacks, Expect::Corrupt("section")),
        ("millions of real spans", millions_of_real_spans, Expect::Corrupt(OVER_THE_LIMIT)),
        ("claims a trillion strings", claims_a_trillion_strings, Expect::Corrupt(OVER_THE_LIMIT)),
        ("claims endless properties", claims_endless_properties, Expect::Corrupt(OVER_THE_LIMIT)),
        ("claims endless events", claims_endless_events, Expect::Corrupt(OVER_THE_LIMIT)),
        ("a parent outside the trace", a_parent_outside_the_trace, Expect::Corrupt("names a parent outside")),
        ("unknown flags", unknown_flags, Expect::Corrupt("unknown flags 0x81")),
        ("largest block", largest_block, Expect::Reads(1)),
        ("long distinct names", long_distinct_names, Expect::Reads(41)),
    ]
}

/// The forgery named `name`.
pub fn forgery(name: &str) -> Forgery {
    forgeries().into_iter().find(|forgery| forgery.0 == name).unwrap_or_else(|| panic!("no forgery {name:?}"))
}

/// Resets this process's peak resident memory to what it holds now, so that
/// a child's peak is its reading alone and not the making of its input.
/// Where the kernel does not allow it, the peak keeps both: a larger figure,
/// never a smaller one.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Reads a whole dump: the traces before the error, and the error.
pub fn read_all(bytes: &[u8]) -> (Vec<RecordedTrace>, Option<FormatError>) {
    let reader = match Reader::new(bytes) {
        Ok(reader) => reader,
        Err(error) => return (Vec::new(), Some(error)),
    };
    let mut traces = Vec::new();
    for result in reader {
        match result {
            Ok(trace) => traces.push(trace),
            Err(error) => return (traces, Some(error)),
        }
    }
    (traces, None)
}

/// Whether `outcome` is what `expect` asks for; `Err` says what differs.
pub fn check(expect: Expect, read: usize, error: Option<&FormatError>) -> Result<(), String> {
    match (expect, error) {
        (Expect::Reads(count), None) if read == count => Ok(()),
        (Expect::Corrupt(text), Some(error @ FormatError::Corrupt { .. }))
            if error.to_string().contains(text) =>
        {
            Ok(())
        }
        (Expect::Truncated, Some(FormatError::Truncated { .. })) => Ok(()),
        _ => Err(format!("expected {expect:?}, read {read} traces, then {error:?}")),
    }
}

// ---- seeded mutations of small valid dumps ----

/// splitmix64: small, fast, and reproducible from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    pub fn one_in(&mut self, n: u64) -> bool {
        self.next_u64() % n == 0
    }

    /// A number for a length or count field: mostly small, sometimes at an
    /// edge of its width or the format's limits.
    pub fn interesting(&mut self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            1,
            2,
            0x7f,
            0x80,
            0xffff,
            1 << 20,
            MAX_BLOCK_BYTES as u64 - 1,
            MAX_BLOCK_BYTES as u64,
            MAX_BLOCK_BYTES as u64 + 1,
            u32::MAX as u64,
            u64::MAX,
        ];
        match self.below(3) {
            0 => EDGES[self.below(EDGES.len())],
            1 => self.next_u64() % 300,
            _ => self.next_u64() >> self.below(64),
        }
    }
}

/// The seed of a randomised test: `FLIGHT_FUZZ_SEED` if set, else a new one
/// each run. Tests print it on failure.
pub fn fuzz_seed() -> u64 {
    match std::env::var("FLIGHT_FUZZ_SEED") {
        Ok(seed) => seed.trim().parse().unwrap_or_else(|_| panic!("FLIGHT_FUZZ_SEED={seed:?} is not a u64")),
        Err(_) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            (now.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(32)
        }
    }
}

/// How many mutations a randomised run tries: `FLIGHT_FUZZ_CASES`, else
/// 100 000.
pub fn fuzz_cases() -> usize {
    std::env::var("FLIGHT_FUZZ_CASES").ok().and_then(|cases| cases.trim().parse().ok()).unwrap_or(100_000)
}

/// Traces of every shape the format must keep: extreme numbers, names
/// and properties; events; ids out of order, repeated or zero; parents
/// before, after, missing or the span itself; spans of other traces; a
/// trace cut short, one without its root, one with no span.
pub fn odd_traces() -> Vec<RecordedTrace> {
    let span = |id: u64, parent: u64, name: &'static str, begin: u64, duration: u64| SpanRecord {
        trace_id: TraceId(u128::MAX),
        span_id: SpanId(id),
        parent_id: SpanId(parent),
        begin_time_unix_ns: begin,
        duration_ns: duration,
        name: name.into(),
        ..SpanRecord::default()
    };
    let mut root = span(u64::MAX, 0x00f0_67a5_11d0_0001, "ünï ⏱", u64::MAX, u64::MAX);
    root.properties = vec![
        ("".into(), "".into()),
        ("key".into(), "v\0".repeat(40).into()),
        ("otel.link".into(), "00-1-2-01".into()),
    ];
    let mut child = span(7, u64::MAX, "a", 0, u64::MAX);
    child.events = vec![
        EventRecord {
            name: "e".into(),
            timestamp_unix_ns: u64::MAX,
            properties: vec![("k".into(), "v".into())],
        },
        EventRecord { name: "".into(), timestamp_unix_ns: 0, properties: Vec::new() },
    ];
    let mut elsewhere = span(7, 9, "b", u64::MAX, 0);
    elsewhere.trace_id = TraceId(3);
    let odd = RecordedTrace {
        trace_id: TraceId(u128::MAX),
        thread: u32::MAX,
        spans: vec![
            child,
            span(9, 7, "a", 5, 1),
            elsewhere,
            span(0, 0, "", 1 << 63, 3),
            span(11, 11, "self", 4, 4),
            root,
        ],
        complete: false,
    };
    let rootless = RecordedTrace {
        trace_id: TraceId(1),
        thread: 0,
        spans: vec![span(5, 4, "orphan", 10, 2), span(4, 99, "a", 1, 20)],
        complete: false,
    };
    vec![odd, RecordedTrace::default(), rootless]
}

/// Small valid dumps, of several shapes, for the mutations to start from.
pub fn seed_dumps() -> Vec<Vec<u8>> {
    let write = |traces: &[RecordedTrace], block_traces: usize| {
        let mut writer = Writer::new(Vec::new()).with_block_traces(block_traces);
        for trace in traces {
            writer.write(trace).unwrap();
        }
        writer.finish().unwrap().into_inner()
    };
    let odd = odd_traces();
    let synthetic: Vec<RecordedTrace> = synthetic::traces(9, 17).collect();
    vec![write(&synthetic, 4), write(&synthetic[..2], 8), write(&odd, 2), write(&odd[1..2], 1), write(&[], 1)]
}

/// One mutation of a seed dump, its checksums mostly recomputed so that it
/// reaches the decoder: a few rounds of bit flips, byte changes, cuts,
/// splices, header fields set to edge values, and damage to one block's
/// inflated payload (its sections or its raw bytes), recompressed.
pub fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(3) {
        match rng.below(12) {
            0 => damage_bytes(rng, &mut bytes, seeds),
            1 | 2 => {
                // A field of a block's header, or of the end marker.
                let found = records(&bytes);
                if let Some(&(at, _)) = found.get(rng.below(found.len())) {
                    let field = at + 5 + 4 * rng.below(4);
                    let value = (rng.interesting() as u32).to_le_bytes();
                    if let Some(slot) = bytes.get_mut(field..field + 4) {
                        slot.copy_from_slice(&value);
                    }
                }
            }
            _ => damage_payload(rng, &mut bytes, seeds),
        }
    }
    if !rng.one_in(16) {
        fix_checksums(&mut bytes);
    }
    bytes
}

/// A byte-level change: a flipped bit, a byte set, a cut, a range deleted,
/// duplicated, or spliced in from another seed.
fn damage_bytes(rng: &mut Rng, bytes: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    if bytes.is_empty() {
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(6) {
        0 => bytes[at] ^= 1 << rng.below(8),
        1 => bytes[at] = [0, 0xff, 0x7f, 0x80, rng.next_u64() as u8][rng.below(5)],
        2 => bytes.truncate(at),
        3 => {
            let end = (at + 1 + rng.below(64)).min(bytes.len());
            bytes.drain(at..end);
        }
        4 => {
            let end = (at + 1 + rng.below(256)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            let to = rng.below(bytes.len() + 1);
            bytes.splice(to..to, copy);
        }
        _ => {
            let other = &seeds[rng.below(seeds.len())];
            let from = rng.below(other.len());
            let end = (from + 1 + rng.below(256)).min(other.len());
            let replaced = (at + rng.below(64)).min(bytes.len());
            bytes.splice(at..replaced, other[from..end].iter().copied());
        }
    }
}

/// Damage to the inflated payload of one block, recompressed and framed
/// again (its declared lengths usually true, sometimes not).
fn damage_payload(rng: &mut Rng, bytes: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    let blocks: Vec<usize> = records(bytes)
        .into_iter()
        .filter(|&(at, kind)| kind == 1 && at + 17 <= bytes.len())
        .map(|r| r.0)
        .collect();
    let Some(&at) = blocks.get(rng.below(blocks.len())) else {
        return damage_bytes(rng, bytes, seeds);
    };
    let len = u32::from_le_bytes(bytes[at + 5..at + 9].try_into().unwrap()) as usize;
    let end = at.saturating_add(17).saturating_add(len).min(bytes.len());
    let Some(mut raw) = unzlib(&bytes[at + 17..end], 1 << 20) else {
        return damage_bytes(rng, bytes, seeds);
    };
    let mut count = u32::from_le_bytes(bytes[at + 13..at + 17].try_into().unwrap());
    match split_sections(&raw) {
        Some(mut sections) if !rng.one_in(4) => {
            let section = rng.below(SECTIONS);
            let column = &mut sections[section];
            match rng.below(4) {
                // A number: a count, a length, a reference, a parent.
                0 | 1 => {
                    let at = rng.below(column.len() + 1);
                    let mut number = Vec::new();
                    varint(&mut number, rng.interesting());
                    let replaced = if rng.one_in(2) { next_varint_end(column, at) } else { at };
                    column.splice(at..replaced, number);
                }
                _ => damage_bytes(rng, column, seeds),
            }
            raw = join_sections(&sections);
        }
        _ => damage_bytes(rng, &mut raw, seeds),
    }
    let mut raw_len = raw.len() as u32;
    if rng.one_in(8) {
        raw_len = rng.interesting() as u32;
    }
    if rng.one_in(8) {
        count = rng.interesting() as u32;
    }
    let framed = block(&zlib(&raw), raw_len, count);
    bytes.splice(at..end, framed);
}

/// Where the varint that starts at `at` ends (`at` if none starts there).
fn next_varint_end(bytes: &[u8], at: usize) -> usize {
    let mut end = at;
    while end < bytes.len() {
        end += 1;
        if bytes[end - 1] & 0x80 == 0 {
            break;
        }
    }
    end
}

fn split_sections(raw: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut at = 0;
    let mut lengths = Vec::with_capacity(SECTIONS);
    for _ in 0..SECTIONS {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let byte = *raw.get(at)?;
            at += 1;
            value |= u64::from(byte & 0x7f).checked_shl(shift)?;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        lengths.push(usize::try_from(value).ok()?);
    }
    let mut sections = Vec::with_capacity(SECTIONS);
    for len in lengths {
        sections.push(raw.get(at..at.checked_add(len)?)?.to_vec());
        at += len;
    }
    Some(sections)
}

fn join_sections(sections: &[Vec<u8>]) -> Vec<u8> {
    let mut raw = Vec::new();
    for section in sections {
        varint(&mut raw, section.len() as u64);
    }
    for section in sections {
        raw.extend_from_slice(section);
    }
    raw
}

// ---- child processes, for a peak memory of one case alone ----

/// The environment variable that makes a test binary, run again, do one
/// test's work as a child instead of spawning one.
pub const CHILD: &str = "MINITRACE_FLIGHT_HOSTILE_CHILD";
/// The prefix of the lines a child reports to its parent.
const REPORT: &str = "hostile-report: ";

/// The peak resident memory of this process so far, in bytes (`VmHWM`).
pub fn peak_rss_of_self() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux only)");
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).expect("VmHWM in /proc/self/status");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("VmHWM in kB");
    kib * 1024
}

/// What a child reported: its lines, and its peak resident memory.
#[derive(Debug)]
pub struct ChildReport {
    pub lines: Vec<String>,
    pub peak_rss: u64,
}

/// Runs `work` in a child: this test binary again, running only the test
/// named `test` (the caller), with [`CHILD`] set to `case`, under
/// [`ADDRESS_SPACE_LIMIT`]. In the child, `work` runs and its lines are
/// reported with the child's peak memory, and this returns `None`; in the
/// parent, this returns what the child reported, or panics with its output
/// if it failed. `env` is passed on to the child.
pub fn in_child(
    test: &str,
    case: &str,
    env: &[(&str, String)],
    work: impl FnOnce(&str) -> Vec<String>,
) -> Option<ChildReport> {
    if let Ok(selected) = std::env::var(CHILD) {
        let lines = work(&selected);
        for line in lines {
            println!("{REPORT}{line}");
        }
        println!("{REPORT}peak-rss {}", peak_rss_of_self());
        return None;
    }
    let exe = std::env::current_exe().unwrap();
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", ADDRESS_SPACE_LIMIT / 1024))
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .envs(env.iter().map(|(key, value)| (key, value)))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the child for {case:?} (with {env:?}) failed: {}\n{stdout}\n{stderr}",
        output.status
    );
    let mut lines: Vec<String> =
        stdout.lines().filter_map(|line| line.split_once(REPORT)).map(|(_, line)| line.to_string()).collect();
    let peak = lines.pop().and_then(|line| line.strip_prefix("peak-rss ").and_then(|peak| peak.parse().ok()));
    let peak_rss =
        peak.unwrap_or_else(|| panic!("the child for {case:?} ran no test named {test:?}:\n{stdout}"));
    Some(ChildReport { lines, peak_rss })
}
