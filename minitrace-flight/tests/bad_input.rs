//! Bad input gets a clear error and never a panic; a dump whose writer
//! stopped midway never reads as complete.

use std::io::{self, Read, Write};

use minitrace_flight::{synthetic, FormatError, Reader, RecordedTrace, Writer};

/// 30 traces in blocks of 10.
fn dump() -> (Vec<RecordedTrace>, Vec<u8>) {
    let traces: Vec<RecordedTrace> = synthetic::traces(30, 11).collect();
    let mut writer = Writer::new(Vec::new()).with_block_traces(10);
    for trace in &traces {
        writer.write(trace).unwrap();
    }
    (traces, writer.finish().unwrap().into_inner())
}

/// Reads a whole dump: the traces before the error, and the error.
fn read_all(bytes: &[u8]) -> (Vec<RecordedTrace>, Option<FormatError>) {
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

#[test]
fn an_empty_file_is_reported_as_empty() {
    let error = Reader::new(&b""[..]).unwrap_err();
    assert!(matches!(error, FormatError::Empty));
    assert_eq!(error.to_string(), "the file is empty: not a minitrace flight dump");
}

#[test]
fn other_files_are_not_dumps() {
    for bytes in [&b"{\"traceEvents\": []}"[..], b"\x89PNG\r\n\x1a\n\0\0", b"MTFLIGHX\x01\0", b"MTFLIGHT\0\0"]
    {
        let error = Reader::new(bytes).unwrap_err();
        assert!(matches!(error, FormatError::NotADump), "{bytes:?}: {error:?}");
        assert!(error.to_string().starts_with("not a minitrace flight dump"), "{error}");
    }
}

#[test]
fn a_newer_version_names_both_versions() {
    let (_, mut bytes) = dump();
    bytes[8..10].copy_from_slice(&7u16.to_le_bytes());
    let error = Reader::new(&bytes[..]).unwrap_err();
    assert!(matches!(error, FormatError::NewerVersion { found: 7, supported: 2 }));
    assert_eq!(
        error.to_string(),
        "the dump was written by a newer version of the format (7); \
         this reader reads up to version 2: upgrade minitrace-flight"
    );
}

#[test]
fn a_version_1_dump_is_refused_by_name() {
    // Version 1's header, and a block of version 1 after it: the header
    // alone decides.
    let mut bytes = b"MTFLIGHT\x01\x00".to_vec();
    bytes.extend_from_slice(&dump().1[10..]);
    let error = Reader::new(&bytes[..]).unwrap_err();
    assert!(matches!(error, FormatError::OldVersion { found: 1, supported: 2 }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the dump was written in version 1 of the format, which this reader no longer reads \
         (it reads version 2, which keeps every span's ids, properties and events): \
         read it with a minitrace-view from before version 2"
    );
}

#[test]
fn a_cut_at_any_byte_is_truncation_after_the_whole_blocks() {
    let (traces, bytes) = dump();
    for cut in 1..bytes.len() {
        let (read, error) = read_all(&bytes[..cut]);
        match error {
            Some(FormatError::Truncated { traces_read, offset }) => {
                assert_eq!(traces_read as usize, read.len(), "cut at {cut}");
                assert_eq!(offset as usize, cut, "cut at {cut}");
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
        assert_eq!(read.len() % 10, 0, "cut at {cut}: only whole blocks");
        assert_eq!(read, traces[..read.len()], "cut at {cut}");
    }
    let (_, error) = read_all(&bytes[..bytes.len() - 1]);
    let message = error.unwrap().to_string();
    assert!(message.contains("truncated") && message.contains("30 traces were read"), "{message}");
}

#[test]
fn a_flipped_bit_anywhere_after_the_header_is_caught() {
    let (traces, bytes) = dump();
    for at in 10..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let (read, error) = read_all(&damaged);
        // A length field can grow past the end of the file: that reads as a cut.
        assert!(
            matches!(error, Some(FormatError::Corrupt { .. } | FormatError::Truncated { .. })),
            "flip at {at}: {error:?}"
        );
        assert_eq!(read, traces[..read.len()], "flip at {at}: what was read is intact");
    }
    let mut damaged = bytes.clone();
    damaged[40] ^= 1;
    let message = read_all(&damaged).1.unwrap().to_string();
    assert_eq!(
        message,
        "the dump is corrupted: block 0 at byte 10: checksum mismatch: the block's bytes were altered"
    );
}

#[test]
fn bytes_after_the_end_marker_are_reported() {
    let (traces, mut bytes) = dump();
    bytes.push(0);
    let (read, error) = read_all(&bytes);
    assert_eq!(read, traces);
    assert!(matches!(error, Some(FormatError::TrailingData { .. })), "{error:?}");
}

/// An output that fails after `left` bytes, as a full disk does.
struct FailingAfter {
    written: Vec<u8>,
    left: usize,
}

impl Write for FailingAfter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("disk full"));
        }
        let len = buf.len().min(self.left);
        self.written.extend_from_slice(&buf[..len]);
        self.left -= len;
        Ok(len)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_writer_that_fails_midway_leaves_a_truncated_dump() {
    let (traces, complete) = dump();
    for left in [0, 5, 10, 11, 200, complete.len() / 2, complete.len() - 1] {
        let mut output = FailingAfter { written: Vec::new(), left };
        let mut writer = Writer::new(&mut output).with_block_traces(10);
        let failed = traces.iter().map(|trace| writer.write(trace)).find(Result::is_err);
        let finished = writer.finish();
        assert!(failed.is_some() || finished.is_err(), "{left} bytes");
        let (_, error) = read_all(&output.written);
        assert!(
            matches!(error, Some(FormatError::Truncated { .. } | FormatError::Empty)),
            "{left} bytes: {error:?}"
        );
    }
    // After a failure the writer refuses further work instead of going on.
    let mut output = FailingAfter { written: Vec::new(), left: 100 };
    let mut writer = Writer::new(&mut output).with_block_traces(1);
    assert!(writer.write(&traces[0]).is_err());
    let error = writer.write(&traces[1]).unwrap_err();
    assert!(error.to_string().contains("an earlier write to this dump failed"), "{error}");
}

#[test]
fn a_writer_dropped_before_finish_leaves_a_truncated_dump() {
    let (traces, _) = dump();
    let mut output = Vec::new();
    {
        let mut writer = Writer::new(&mut output).with_block_traces(10);
        traces.iter().for_each(|trace| writer.write(trace).unwrap());
    }
    let (read, error) = read_all(&output);
    assert_eq!(read, traces);
    assert!(matches!(error, Some(FormatError::Truncated { traces_read: 30, .. })), "{error:?}");
}

/// Rewrites block 0 of `bytes` with `raw` as its payload, its checksum
/// valid: damage that only the decoder can catch.
fn with_payload(bytes: &[u8], raw: &[u8]) -> Vec<u8> {
    let compressed_len = u32::from_le_bytes(bytes[15..19].try_into().unwrap()) as usize;
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(raw).unwrap();
    let payload = encoder.finish().unwrap();
    let mut block = vec![1u8, 0, 0, 0, 0];
    block.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    block.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    block.extend_from_slice(&bytes[23..27]);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&block[..1]);
    hasher.update(&block[5..]);
    hasher.update(&payload);
    block[1..5].copy_from_slice(&hasher.finalize().to_le_bytes());
    let mut out = bytes[..10].to_vec();
    out.extend_from_slice(&block);
    out.extend_from_slice(&payload);
    out.extend_from_slice(&bytes[27 + compressed_len..]);
    out
}

#[test]
fn a_payload_damaged_before_its_checksum_was_taken_is_reported_not_panicked_on() {
    let (traces, bytes) = dump();
    let compressed_len = u32::from_le_bytes(bytes[15..19].try_into().unwrap()) as usize;
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&bytes[27..27 + compressed_len]).read_to_end(&mut raw).unwrap();
    assert_eq!(read_all(&with_payload(&bytes, &raw)).0, traces, "the rewrite itself is faithful");

    let mut state = 0x2545_f491_4f6c_dd1du64;
    for round in 0..3_000 {
        let mut damaged = raw.clone();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        match round % 3 {
            0 => damaged[state as usize % raw.len()] = (state >> 32) as u8,
            1 => damaged.truncate(state as usize % raw.len()),
            _ => damaged[state as usize % raw.len()] ^= 0x80,
        }
        let (_, error) = read_all(&with_payload(&bytes, &damaged));
        if let Some(error) = error {
            assert!(matches!(error, FormatError::Corrupt { block: 0, .. }), "round {round}: {error:?}");
        }
    }
}
