//! The streaming writer, and a helper that writes a whole file atomically.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec::BlockEncoder;
use minitrace::recorder::RecordedTrace;

use crate::{MAGIC, MAX_BLOCK_BYTES, VERSION};

/// The kind byte of a block of traces.
pub(crate) const BLOCK: u8 = 0x01;
/// The kind byte of the end marker.
pub(crate) const END: u8 = 0x02;
/// The longest compressed payload a block may declare: the longest raw one
/// ([`MAX_BLOCK_BYTES`]) and room for deflate's growth of bytes it cannot
/// compress (5 bytes per stored block of 64 KiB, 6 of zlib framing).
pub(crate) const MAX_COMPRESSED_BYTES: usize = MAX_BLOCK_BYTES + (1 << 20);

/// Traces per block: enough for deflate to find the repeats, few enough
/// that a reader holds one block in a few megabytes.
const DEFAULT_BLOCK_TRACES: usize = 4096;
/// A block is also closed at this many encoded bytes, for large properties.
const BLOCK_SOFT_BYTES: usize = 16 << 20;

/// Streams [`RecordedTrace`]s into a dump.
///
/// Traces are gathered into blocks of [`Writer::DEFAULT_BLOCK_TRACES`],
/// each compressed and written once full; [`Writer::finish`] writes the last
/// block and the end marker. A writer dropped before `finish`, or one whose
/// output failed, leaves a dump that readers report as truncated, never one
/// that reads as complete.
pub struct Writer<W: Write> {
    inner: W,
    encoder: BlockEncoder,
    block_traces: usize,
    header_written: bool,
    failed: bool,
    traces: u64,
    spans: u64,
    blocks: u64,
    bytes: u64,
    refused: u64,
}

impl<W: Write> fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("block_traces", &self.block_traces)
            .field("traces", &self.traces)
            .field("blocks", &self.blocks)
            .field("bytes", &self.bytes)
            .field("refused", &self.refused)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// What [`Writer::finish`] wrote, and the output it wrote to.
pub struct Written<W> {
    /// Traces written.
    pub traces: u64,
    /// Spans written, roots included.
    pub spans: u64,
    /// Blocks of traces written.
    pub blocks: u64,
    /// Bytes written, header and end marker included.
    pub bytes: u64,
    /// Traces refused as too large for the format (see [`Writer::write`]),
    /// left out of the dump.
    pub refused: u64,
    inner: W,
}

impl<W> fmt::Debug for Written<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Written")
            .field("traces", &self.traces)
            .field("spans", &self.spans)
            .field("blocks", &self.blocks)
            .field("bytes", &self.bytes)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl<W> Written<W> {
    /// The output the dump was written to.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Bytes per span, roots included (0 for a dump of no span).
    pub fn bytes_per_span(&self) -> f64 {
        if self.spans == 0 {
            0.0
        } else {
            self.bytes as f64 / self.spans as f64
        }
    }
}

impl<W: Write> Writer<W> {
    /// Traces per block unless [`Writer::with_block_traces`] says otherwise.
    pub const DEFAULT_BLOCK_TRACES: usize = DEFAULT_BLOCK_TRACES;

    /// A writer to `inner`. Nothing is written until the first trace or
    /// [`Writer::finish`]; wrap a file in a [`BufWriter`] (or use
    /// [`write_file_atomically`]).
    pub fn new(inner: W) -> Writer<W> {
        Writer {
            inner,
            encoder: BlockEncoder::default(),
            block_traces: DEFAULT_BLOCK_TRACES,
            header_written: false,
            failed: false,
            traces: 0,
            spans: 0,
            blocks: 0,
            bytes: 0,
            refused: 0,
        }
    }

    /// Sets how many traces go into a block (at least 1). Smaller blocks
    /// lose less to a cut or a corrupted byte, and compress worse.
    pub fn with_block_traces(mut self, traces: usize) -> Writer<W> {
        self.block_traces = traces.max(1);
        self
    }

    /// Adds a trace, as it is: every span, in its order, with its ids,
    /// times, name, properties and events. It is written when its block is
    /// full.
    ///
    /// A trace the format cannot hold is refused with
    /// [`io::ErrorKind::InvalidInput`], and the writer goes on: one too
    /// large for a block of its own (one that could decode to more than
    /// [`MAX_BLOCK_BYTES`]: some 380 000 spans, or 64 MiB of names,
    /// properties and events). A block is closed early rather than grow
    /// past that limit, so that every block written is one a reader
    /// accepts. After an error of the output itself, every later call
    /// fails, and the dump stays without its end marker.
    pub fn write(&mut self, trace: &RecordedTrace) -> io::Result<()> {
        self.check()?;
        let cost = BlockEncoder::validate(trace).inspect_err(|error| {
            if error.kind() == io::ErrorKind::InvalidInput {
                self.refused += 1;
            }
        })?;
        if !self.encoder.fits(cost) {
            self.guard(Self::flush_block)?;
        }
        self.encoder.push(trace, cost);
        if self.encoder.traces as usize >= self.block_traces || self.encoder.raw_len() >= BLOCK_SOFT_BYTES {
            self.guard(Self::flush_block)?;
        }
        Ok(())
    }

    /// Writes the last block and the end marker, flushes the output, and
    /// returns what was written with the output.
    pub fn finish(mut self) -> io::Result<Written<W>> {
        self.check()?;
        self.guard(|writer| {
            writer.flush_block()?;
            let mut end = Vec::with_capacity(21);
            end.push(END);
            end.extend_from_slice(&[0; 4]);
            end.extend_from_slice(&writer.traces.to_le_bytes());
            end.extend_from_slice(&writer.spans.to_le_bytes());
            let crc = checksum(&end[..1], &end[5..], &[]);
            end[1..5].copy_from_slice(&crc.to_le_bytes());
            writer.emit(&end)?;
            writer.inner.flush()
        })?;
        Ok(Written {
            traces: self.traces,
            spans: self.spans,
            blocks: self.blocks,
            bytes: self.bytes,
            refused: self.refused,
            inner: self.inner,
        })
    }

    fn check(&self) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other("an earlier write to this dump failed; it stays truncated"));
        }
        Ok(())
    }

    /// Runs an output step, poisoning the writer if it fails.
    fn guard(&mut self, step: impl FnOnce(&mut Self) -> io::Result<()>) -> io::Result<()> {
        let result = step(self);
        self.failed = result.is_err();
        result
    }

    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        if !self.header_written {
            let mut header = [0; 10];
            header[..8].copy_from_slice(&MAGIC);
            header[8..].copy_from_slice(&VERSION.to_le_bytes());
            self.inner.write_all(&header)?;
            self.bytes += header.len() as u64;
            self.header_written = true;
        }
        self.inner.write_all(bytes)?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    fn flush_block(&mut self) -> io::Result<()> {
        if self.encoder.traces == 0 {
            // Still the header, so that an empty dump is header and end marker.
            return self.emit(&[]);
        }
        let (traces, spans) = (self.encoder.traces, self.encoder.spans);
        let (payload, raw_len) = self.encoder.finish()?;
        // `write` kept the block within the limits; were they passed all the
        // same, the dump stays truncated rather than hold a block a reader
        // refuses.
        if payload.len() > MAX_COMPRESSED_BYTES || raw_len > MAX_BLOCK_BYTES {
            return Err(io::Error::other(format!(
                "internal: a block of {raw_len} bytes ({} compressed) passes the format's limits",
                payload.len()
            )));
        }
        let mut head = [0u8; 17];
        head[0] = BLOCK;
        head[5..9].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        head[9..13].copy_from_slice(&(raw_len as u32).to_le_bytes());
        head[13..17].copy_from_slice(&traces.to_le_bytes());
        let crc = checksum(&head[..1], &head[5..], &payload);
        head[1..5].copy_from_slice(&crc.to_le_bytes());
        self.emit(&head)?;
        self.emit(&payload)?;
        self.traces += u64::from(traces);
        self.spans += spans;
        self.blocks += 1;
        Ok(())
    }
}

/// The CRC-32 of a block: its kind byte, the fields after the checksum, and
/// its payload.
pub(crate) fn checksum(kind: &[u8], fields: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(kind);
    hasher.update(fields);
    hasher.update(payload);
    hasher.finalize()
}

/// Writes `traces` to a dump at `path`, all or nothing: into a temporary
/// file beside it, synced and then renamed over `path`. On error the
/// temporary file is removed and `path` is left as it was.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("mtf-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("dump.mtf");
/// let written = minitrace_flight::write_file_atomically(&path, &[minitrace_flight::RecordedTrace::default()])?;
/// assert_eq!(written.traces, 1);
/// assert_eq!(written.into_inner(), path);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_file_atomically<'a>(
    path: impl AsRef<Path>,
    traces: impl IntoIterator<Item = &'a RecordedTrace>,
) -> io::Result<Written<PathBuf>> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = path.as_ref();
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the dump's path names no file"))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(file_name);
    temporary_name.push(format!(".{}-{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    let temporary = path.with_file_name(temporary_name);

    let result = (|| {
        let file = File::options().write(true).create_new(true).open(&temporary)?;
        let mut writer = Writer::new(BufWriter::new(file));
        for trace in traces {
            match writer.write(trace) {
                // Too large for the format: left out, counted in `refused`.
                Err(error) if error.kind() == io::ErrorKind::InvalidInput => {}
                other => other?,
            }
        }
        let written = writer.finish()?;
        let file = written.inner.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        Ok(Written {
            traces: written.traces,
            spans: written.spans,
            blocks: written.blocks,
            bytes: written.bytes,
            refused: written.refused,
            inner: path.to_path_buf(),
        })
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}
