//! Forged dumps, hostile or randomly damaged, checksums recomputed so that
//! they reach the decoder: each gets a clear error or a whole read, and the
//! reader's memory stays under a bound whatever the dump declares.
//!
//! Each case runs in a child process (this test binary run again, see
//! `forge::in_child`), so that its peak resident memory is the reader's
//! alone and not that of the tests running beside it, and under a 1 GiB
//! address-space limit, so that a reservation sized from the file fails
//! even if its pages are never touched. The writer's side: every block it
//! writes is one the reader accepts, up to the limit.

#![cfg(target_os = "linux")]

mod forge;

use std::io::ErrorKind;
use std::panic::{catch_unwind, AssertUnwindSafe};

use forge::{Rng, MIB, PEAK_RSS_BOUND};
use minitrace_flight::{
    FormatError, Reader, RecordedTrace, SpanId, SpanRecord, TraceId, Writer, MAX_BLOCK_BYTES,
};

#[test]
fn forged_dumps_get_clear_errors_in_bounded_memory() {
    const TEST: &str = "forged_dumps_get_clear_errors_in_bounded_memory";
    for (name, _, _) in forge::forgeries() {
        let report = forge::in_child(TEST, name, &[], |case| {
            let (_, make, expect) = forge::forgery(case);
            let bytes = make();
            forge::reset_peak_rss();
            let (read, error) = forge::read_all(&bytes);
            let outcome = forge::check(expect, read.len(), error.as_ref());
            vec![format!(
                "{} bytes: {}",
                bytes.len(),
                error.map_or("read whole".into(), |error| error.to_string())
            )]
            .into_iter()
            .chain(outcome.err().map(|wrong| format!("WRONG {wrong}")))
            .collect()
        });
        let Some(report) = report else { return };
        eprintln!(
            "{name}: {}; peak RSS {:.1} MiB",
            report.lines.join("; "),
            report.peak_rss as f64 / MIB as f64
        );
        assert!(!report.lines.iter().any(|line| line.starts_with("WRONG")), "{name}: {:?}", report.lines);
        assert!(
            report.peak_rss < PEAK_RSS_BOUND,
            "{name}: peak RSS {} MiB, over the bound of {} MiB",
            report.peak_rss / MIB,
            PEAK_RSS_BOUND / MIB
        );
    }
}

/// Where the outcomes of the random cases fell, to show that they reached
/// the decoder and not only the checksum.
#[derive(Debug, Default)]
struct Tally {
    read_whole: u64,
    checksum: u64,
    framing: u64,
    inflate: u64,
    decode: u64,
    truncated: u64,
    other: u64,
}

impl Tally {
    fn add(&mut self, error: Option<&FormatError>) {
        let slot = match error {
            None => &mut self.read_whole,
            Some(FormatError::Truncated { .. }) => &mut self.truncated,
            Some(FormatError::Corrupt { detail, .. }) if detail.contains("checksum") => &mut self.checksum,
            Some(FormatError::Corrupt { detail, .. })
                if detail.contains("declares")
                    || detail.contains("block kind")
                    || detail.contains("end marker") =>
            {
                &mut self.framing
            }
            Some(FormatError::Corrupt { detail, .. })
                if detail.contains("inflat") || detail.contains("deflate") =>
            {
                &mut self.inflate
            }
            Some(FormatError::Corrupt { .. }) => &mut self.decode,
            Some(_) => &mut self.other,
        };
        *slot += 1;
    }
}

/// One random case: a clear error, or a read whose traces the writer takes
/// and gives back unchanged (nothing invalid passes as data).
fn one_case(seed: u64, case: usize, seeds: &[Vec<u8>], tally: &mut Tally) {
    let mut rng = Rng::new(seed ^ (case as u64).wrapping_mul(0xa076_1d64_78bd_642f));
    let bytes = forge::mutate(&mut rng, seeds);
    let (read, error) = forge::read_all(&bytes);
    match &error {
        Some(FormatError::Io(error)) => panic!("an I/O error from a slice: {error}"),
        Some(error) => assert!(!error.to_string().is_empty()),
        None => {
            let mut writer = Writer::new(Vec::new());
            for trace in &read {
                writer.write(trace).expect("what the reader accepts, the writer takes");
            }
            let (again, error) = forge::read_all(&writer.finish().unwrap().into_inner());
            assert!(error.is_none(), "{error:?}");
            assert_eq!(again, read, "what the reader accepts reads back unchanged");
        }
    }
    tally.add(error.as_ref());
}

#[test]
fn random_mutations_of_valid_dumps_get_clear_errors_or_read_whole() {
    const TEST: &str = "random_mutations_of_valid_dumps_get_clear_errors_or_read_whole";
    let seed = forge::fuzz_seed();
    let cases = forge::fuzz_cases();
    let env = [("FLIGHT_FUZZ_SEED", seed.to_string()), ("FLIGHT_FUZZ_CASES", cases.to_string())];
    let report = forge::in_child(TEST, "mutations", &env, |_| {
        let seeds = forge::seed_dumps();
        let mut tally = Tally::default();
        forge::reset_peak_rss();
        for case in 0..cases {
            if catch_unwind(AssertUnwindSafe(|| one_case(seed, case, &seeds, &mut tally))).is_err() {
                panic!("case {case} failed: rerun with FLIGHT_FUZZ_SEED={seed}");
            }
        }
        vec![format!("{tally:?}"), format!("{}", tally.decode + tally.read_whole)]
    });
    let Some(report) = report else { return };
    let (tally, deep) = (&report.lines[0], &report.lines[1]);
    eprintln!(
        "FLIGHT_FUZZ_SEED={seed}: {cases} cases: {tally}; peak RSS {:.1} MiB",
        report.peak_rss as f64 / MIB as f64
    );
    assert!(
        report.peak_rss < PEAK_RSS_BOUND,
        "FLIGHT_FUZZ_SEED={seed}: peak RSS {} MiB, over the bound of {} MiB",
        report.peak_rss / MIB,
        PEAK_RSS_BOUND / MIB
    );
    // Most damage must reach the decoder, past the checksums and framing:
    // decoding errors, and reads whole.
    let deep: usize = deep.parse().unwrap();
    assert!(
        deep * 4 >= cases,
        "FLIGHT_FUZZ_SEED={seed}: only {deep} of {cases} reached the decoder: {tally}"
    );
}

// ---- the writer's side: every block it writes, the reader takes ----

fn write(traces: &[RecordedTrace]) -> std::io::Result<minitrace_flight::Written<Vec<u8>>> {
    let mut writer = Writer::new(Vec::new()).with_block_traces(usize::MAX);
    for trace in traces {
        writer.write(trace)?;
    }
    writer.finish()
}

fn read(dump: &[u8]) -> Vec<RecordedTrace> {
    Reader::new(dump).unwrap().collect::<Result<_, _>>().unwrap()
}

/// A trace of one span whose decoded size (FORMAT.md, "Limits") is `size`:
/// its one property's value makes up the difference. Its three strings,
/// each counted as a new table entry (16), the name's 3 bytes, the trace
/// (96), the span (160), its list of properties (32) and the property (112).
fn trace_of_size(size: usize) -> RecordedTrace {
    let value = "v".repeat(size - 16 * 3 - 3 - 96 - 160 - 32 - 112);
    let span = SpanRecord {
        name: "big".into(),
        properties: vec![("".into(), value.into())],
        ..SpanRecord::default()
    };
    RecordedTrace { spans: vec![span], ..RecordedTrace::default() }
}

fn small() -> RecordedTrace {
    let span = SpanRecord {
        trace_id: TraceId(7),
        span_id: SpanId(1),
        name: "small".into(),
        ..SpanRecord::default()
    };
    RecordedTrace { trace_id: TraceId(7), thread: 1, spans: vec![span], complete: true }
}

#[test]
fn a_trace_as_large_as_a_block_may_be_is_written_and_read_one_byte_more_is_refused() {
    let largest = trace_of_size(MAX_BLOCK_BYTES);
    let written = write(&[small(), largest.clone(), small()]).unwrap();
    // Each beside the other would pass the limit: three blocks.
    assert_eq!(written.blocks, 3);
    assert_eq!(read(&written.into_inner()), [small(), largest, small()]);

    let mut writer = Writer::new(Vec::new());
    let error = writer.write(&trace_of_size(MAX_BLOCK_BYTES + 1)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("more than a block may hold"), "{error}");
    // Refused, not written, and the writer goes on.
    writer.write(&small()).unwrap();
    let written = writer.finish().unwrap();
    assert_eq!((written.traces, written.refused), (1, 1));
    assert_eq!(read(&written.into_inner()), [small()]);
}

#[test]
fn a_dump_leaves_out_and_counts_a_trace_too_large_for_the_format() {
    let dir = std::env::temp_dir().join(format!("flight-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.mtf");
    let traces = [small(), trace_of_size(MAX_BLOCK_BYTES + 1), small()];
    let written = minitrace_flight::write_file_atomically(&path, &traces).unwrap();
    assert_eq!((written.traces, written.refused), (2, 1));
    let bytes = std::fs::read(written.into_inner()).unwrap();
    assert_eq!(read(&bytes), [small(), small()]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_most_spans_a_block_holds_with_the_longest_numbers_are_written_and_read() {
    // A trace costs 96, a span with no name 160 + 16.
    let most = (MAX_BLOCK_BYTES - 96) / 176;
    // Numbers whose varints are as long as they get, ids that take 8 bytes
    // each, parents that are not in the trace.
    let span = |index: usize| SpanRecord {
        trace_id: TraceId(if index % 2 == 0 { u128::MAX } else { 1 }),
        span_id: SpanId(u64::MAX.wrapping_sub((index as u64).wrapping_mul(0x0123_4567_89ab_cdef))),
        parent_id: SpanId(u64::MAX / 3 + index as u64),
        begin_time_unix_ns: if index % 2 == 0 { 0 } else { 1 << 62 },
        duration_ns: u64::MAX,
        ..SpanRecord::default()
    };
    let trace = RecordedTrace {
        trace_id: TraceId(u128::MAX),
        thread: u32::MAX,
        spans: (0..most).map(span).collect(),
        complete: true,
    };
    let written = write(std::slice::from_ref(&trace)).unwrap();
    assert_eq!((written.blocks, written.spans), (1, most as u64));
    assert_eq!(read(&written.into_inner()), std::slice::from_ref(&trace));

    let mut one_more = trace;
    one_more.spans.push(span(most));
    let error = write(&[one_more]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
}

#[test]
fn the_writer_closes_a_block_before_it_passes_the_limit() {
    // 8.85 MB each in decoded size: seven fit in a block (61.9 MB of the
    // 67.1), the eighth opens the next, whatever the traces per block.
    let trace = |trace_id: u128| RecordedTrace {
        trace_id: TraceId(trace_id),
        spans: vec![SpanRecord { name: "s".into(), ..SpanRecord::default() }; 50_000],
        ..RecordedTrace::default()
    };
    let traces: Vec<RecordedTrace> = (0..10).map(trace).collect();
    let written = write(&traces).unwrap();
    assert_eq!(written.blocks, 2);
    let dump = written.into_inner();
    let mut reader = Reader::new(&dump[..]).unwrap();
    let sizes: Vec<usize> =
        std::iter::from_fn(|| reader.next_block()).map(|block| block.unwrap().traces.len()).collect();
    assert_eq!(sizes, [7, 3]);
    assert_eq!(read(&dump), traces);
}
