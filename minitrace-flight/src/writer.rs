//! The streaming writer, and a helper that writes a whole file atomically.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec::BlockEncoder;
use crate::{Request, MAGIC, MAX_BLOCK_BYTES, VERSION};

/// The kind byte of a block of requests.
pub(crate) const BLOCK: u8 = 0x01;
/// The kind byte of the end marker.
pub(crate) const END: u8 = 0x02;
/// The longest compressed payload a block may declare: the longest raw one
/// ([`MAX_BLOCK_BYTES`]) and room for deflate's growth of bytes it cannot
/// compress (5 bytes per stored block of 64 KiB, 6 of zlib framing).
pub(crate) const MAX_COMPRESSED_BYTES: usize = MAX_BLOCK_BYTES + (1 << 20);

/// Requests per block: enough for deflate to find the repeats, few enough
/// that a reader holds one block in a few megabytes.
const DEFAULT_BLOCK_REQUESTS: usize = 4096;
/// A block is also closed at this many encoded bytes, for large properties.
const BLOCK_SOFT_BYTES: usize = 16 << 20;

/// Streams [`Request`]s into a dump.
///
/// Requests are gathered into blocks of [`Writer::DEFAULT_BLOCK_REQUESTS`],
/// each compressed and written once full; [`Writer::finish`] writes the last
/// block and the end marker. A writer dropped before `finish`, or one whose
/// output failed, leaves a dump that readers report as truncated, never one
/// that reads as complete.
pub struct Writer<W: Write> {
    inner: W,
    encoder: BlockEncoder,
    block_requests: usize,
    header_written: bool,
    failed: bool,
    requests: u64,
    spans: u64,
    blocks: u64,
    bytes: u64,
}

impl<W: Write> fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("block_requests", &self.block_requests)
            .field("requests", &self.requests)
            .field("blocks", &self.blocks)
            .field("bytes", &self.bytes)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// What [`Writer::finish`] wrote, and the output it wrote to.
pub struct Written<W> {
    /// Requests written.
    pub requests: u64,
    /// Spans written, roots not counted.
    pub spans: u64,
    /// Blocks of requests written.
    pub blocks: u64,
    /// Bytes written, header and end marker included.
    pub bytes: u64,
    inner: W,
}

impl<W> fmt::Debug for Written<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Written")
            .field("requests", &self.requests)
            .field("spans", &self.spans)
            .field("blocks", &self.blocks)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl<W> Written<W> {
    /// The output the dump was written to.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Bytes per span, roots counted as spans (0 for an empty dump).
    pub fn bytes_per_span(&self) -> f64 {
        let spans = self.spans + self.requests;
        if spans == 0 {
            0.0
        } else {
            self.bytes as f64 / spans as f64
        }
    }
}

impl<W: Write> Writer<W> {
    /// Requests per block unless [`Writer::with_block_requests`] says otherwise.
    pub const DEFAULT_BLOCK_REQUESTS: usize = DEFAULT_BLOCK_REQUESTS;

    /// A writer to `inner`. Nothing is written until the first request or
    /// [`Writer::finish`]; wrap a file in a [`BufWriter`] (or use
    /// [`write_file_atomically`]).
    pub fn new(inner: W) -> Writer<W> {
        Writer {
            inner,
            encoder: BlockEncoder::default(),
            block_requests: DEFAULT_BLOCK_REQUESTS,
            header_written: false,
            failed: false,
            requests: 0,
            spans: 0,
            blocks: 0,
            bytes: 0,
        }
    }

    /// Sets how many requests go into a block (at least 1). Smaller blocks
    /// lose less to a cut or a corrupted byte, and compress worse.
    pub fn with_block_requests(mut self, requests: usize) -> Writer<W> {
        self.block_requests = requests.max(1);
        self
    }

    /// Adds a request. It is written when its block is full.
    ///
    /// A request the format cannot hold is refused with
    /// [`io::ErrorKind::InvalidInput`], and the writer goes on: a span whose
    /// parent is not listed before it, or a request too large for a block
    /// of its own (one that could decode to more than [`MAX_BLOCK_BYTES`]:
    /// some 700 000 spans, or 64 MiB of names and properties). A block is
    /// closed early rather than grow past that limit, so that every block
    /// written is one a reader accepts. After an error of the output
    /// itself, every later call fails, and the dump stays without its end
    /// marker.
    pub fn write(&mut self, request: &Request) -> io::Result<()> {
        self.check()?;
        let cost = BlockEncoder::validate(request)?;
        if !self.encoder.fits(cost) {
            self.guard(Self::flush_block)?;
        }
        self.encoder.push(request, cost);
        if self.encoder.requests as usize >= self.block_requests || self.encoder.raw_len() >= BLOCK_SOFT_BYTES
        {
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
            end.extend_from_slice(&writer.requests.to_le_bytes());
            end.extend_from_slice(&writer.spans.to_le_bytes());
            let crc = checksum(&end[..1], &end[5..], &[]);
            end[1..5].copy_from_slice(&crc.to_le_bytes());
            writer.emit(&end)?;
            writer.inner.flush()
        })?;
        Ok(Written {
            requests: self.requests,
            spans: self.spans,
            blocks: self.blocks,
            bytes: self.bytes,
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
        if self.encoder.requests == 0 {
            // Still the header, so that an empty dump is header and end marker.
            return self.emit(&[]);
        }
        let (requests, spans) = (self.encoder.requests, self.encoder.spans);
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
        head[13..17].copy_from_slice(&requests.to_le_bytes());
        let crc = checksum(&head[..1], &head[5..], &payload);
        head[1..5].copy_from_slice(&crc.to_le_bytes());
        self.emit(&head)?;
        self.emit(&payload)?;
        self.requests += u64::from(requests);
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

/// Writes `requests` to a dump at `path`, all or nothing: into a temporary
/// file beside it, synced and then renamed over `path`. On error the
/// temporary file is removed and `path` is left as it was.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("mtf-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("dump.mtf");
/// let written = minitrace_flight::write_file_atomically(&path, &[minitrace_flight::Request::default()])?;
/// assert_eq!(written.requests, 1);
/// assert_eq!(written.into_inner(), path);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_file_atomically<'a>(
    path: impl AsRef<Path>,
    requests: impl IntoIterator<Item = &'a Request>,
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
        for request in requests {
            writer.write(request)?;
        }
        let written = writer.finish()?;
        let file = written.inner.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        Ok(Written {
            requests: written.requests,
            spans: written.spans,
            blocks: written.blocks,
            bytes: written.bytes,
            inner: path.to_path_buf(),
        })
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}
