//! The streaming reader: one block in memory at a time.

use std::fmt;
use std::io::{self, Read};

use crate::codec;
use crate::writer::{checksum, BLOCK, END, MAX_COMPRESSED_BYTES};
use minitrace::recorder::RecordedTrace;

use crate::{FormatError, MAGIC, MAX_BLOCK_BYTES, VERSION};

/// One block of a dump, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The block's index, counted from 0.
    pub index: u64,
    /// Its traces, decoded.
    pub traces: Vec<RecordedTrace>,
    /// Its payload as stored: zlib-compressed, checksum verified. Tools that
    /// ship blocks elsewhere (the viewer's page inflates them in the
    /// browser) use it as is; FORMAT.md describes its contents.
    pub compressed: Vec<u8>,
}

/// Streams the traces of a dump out of any [`Read`], each a
/// [`RecordedTrace`] as it was written.
///
/// Iterating yields each trace in file order. An error is yielded once,
/// after every trace of the blocks before it, and iteration then ends:
/// a truncated dump yields its whole blocks and then
/// [`FormatError::Truncated`]. Wrap a file in a [`std::io::BufReader`].
///
/// # Memory
///
/// The reader holds one block at a time, and no input can make that block
/// large: its compressed payload is read only as far as the input really
/// holds bytes, and at most [`MAX_BLOCK_BYTES`] plus 1 MiB; it inflates as
/// its bytes arrive, to at most [`MAX_BLOCK_BYTES`]; and its traces are
/// decoded only while their decoded size (FORMAT.md, "Limits": an upper
/// bound on their memory, each string counted at every reference) stays
/// within [`MAX_BLOCK_BYTES`]. A block past any of these limits, such as a
/// long string referenced by every span, is [`FormatError::Corrupt`]. So
/// reading any dump takes at most about three times [`MAX_BLOCK_BYTES`]
/// (some 200 MiB), and a dump of ordinary blocks of 4096 traces a few
/// megabytes, beside what the caller keeps of the traces.
pub struct Reader<R: Read> {
    inner: R,
    offset: u64,
    blocks: u64,
    traces: u64,
    spans: u64,
    done: bool,
    pending: std::vec::IntoIter<RecordedTrace>,
}

impl<R: Read> fmt::Debug for Reader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("offset", &self.offset)
            .field("blocks", &self.blocks)
            .field("traces", &self.traces)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// The first allocation for a block's compressed payload; it then doubles
/// as the payload's bytes arrive, up to the length the block declares.
const FIRST_READ_BYTES: usize = 64 << 10;

/// Reads up to `len` bytes, fewer if the input ends first. Memory grows
/// with the bytes that really arrive, never past `len`, so a forged length
/// costs no more than the input holds.
fn read_up_to(inner: &mut impl Read, len: usize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    while bytes.len() < len {
        let filled = bytes.len();
        let step = filled.max(FIRST_READ_BYTES).min(len - filled);
        bytes.resize(filled + step, 0);
        let read = read_full(inner, &mut bytes[filled..])?;
        bytes.truncate(filled + read);
        if read < step {
            break;
        }
    }
    Ok(bytes)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(inner: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match inner.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

impl<R: Read> Reader<R> {
    /// Reads and checks the dump's header.
    ///
    /// Fails with [`FormatError::Empty`] on an empty input,
    /// [`FormatError::NotADump`] when the magic bytes are missing,
    /// [`FormatError::NewerVersion`] for a version newer than [`VERSION`],
    /// [`FormatError::OldVersion`] for an older one (FORMAT.md, "Versions"),
    /// and [`FormatError::Truncated`] when the input ends inside the header.
    pub fn new(mut inner: R) -> Result<Reader<R>, FormatError> {
        let mut header = [0u8; 10];
        let read = read_full(&mut inner, &mut header)?;
        if read == 0 {
            return Err(FormatError::Empty);
        }
        let magic_len = read.min(MAGIC.len());
        if header[..magic_len] != MAGIC[..magic_len] {
            return Err(FormatError::NotADump);
        }
        if read < header.len() {
            return Err(FormatError::Truncated { traces_read: 0, offset: read as u64 });
        }
        let version = u16::from_le_bytes([header[8], header[9]]);
        if version == 0 {
            return Err(FormatError::NotADump);
        }
        if version > VERSION {
            return Err(FormatError::NewerVersion { found: version, supported: VERSION });
        }
        if version < VERSION {
            return Err(FormatError::OldVersion { found: version, supported: VERSION });
        }
        Ok(Reader {
            inner,
            offset: header.len() as u64,
            blocks: 0,
            traces: 0,
            spans: 0,
            done: false,
            pending: Vec::new().into_iter(),
        })
    }

    /// Traces in the blocks read so far.
    pub fn traces_read(&self) -> u64 {
        self.traces
    }

    /// Reads the next block whole. `None` after the end marker, or after
    /// an error has been returned.
    pub fn next_block(&mut self) -> Option<Result<Block, FormatError>> {
        if self.done {
            return None;
        }
        let result = self.read_block();
        match &result {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => self.done = true,
        }
        result.transpose()
    }

    fn truncated(&self, offset: u64) -> FormatError {
        FormatError::Truncated { traces_read: self.traces, offset }
    }

    fn corrupt(&self, offset: u64, detail: impl Into<String>) -> FormatError {
        FormatError::Corrupt { block: self.blocks, offset, detail: detail.into() }
    }

    /// Reads `buf` whole; a short read is the dump's truncation.
    fn read_exact_or_truncated(&mut self, buf: &mut [u8]) -> Result<(), FormatError> {
        let read = read_full(&mut self.inner, buf)?;
        self.offset += read as u64;
        if read < buf.len() {
            return Err(self.truncated(self.offset));
        }
        Ok(())
    }

    fn read_block(&mut self) -> Result<Option<Block>, FormatError> {
        let start = self.offset;
        let mut kind = [0u8; 1];
        self.read_exact_or_truncated(&mut kind)?;
        match kind[0] {
            BLOCK => self.read_traces(start).map(Some),
            END => {
                let mut fields = [0u8; 20];
                self.read_exact_or_truncated(&mut fields)?;
                let stored = u32::from_le_bytes([fields[0], fields[1], fields[2], fields[3]]);
                if stored != checksum(&kind, &fields[4..], &[]) {
                    return Err(self.corrupt(start, "the end marker's checksum does not match"));
                }
                let traces = u64::from_le_bytes(fields[4..12].try_into().unwrap_or_default());
                let spans = u64::from_le_bytes(fields[12..20].try_into().unwrap_or_default());
                if (traces, spans) != (self.traces, self.spans) {
                    return Err(self.corrupt(
                        start,
                        format!(
                            "the end marker counts {traces} traces and {spans} spans, \
                             the blocks hold {} and {}",
                            self.traces, self.spans
                        ),
                    ));
                }
                let mut extra = [0u8; 1];
                if read_full(&mut self.inner, &mut extra)? > 0 {
                    return Err(FormatError::TrailingData { offset: self.offset });
                }
                Ok(None)
            }
            other => Err(self.corrupt(start, format!("unknown block kind 0x{other:02x}"))),
        }
    }

    fn read_traces(&mut self, start: u64) -> Result<Block, FormatError> {
        let mut fields = [0u8; 16];
        self.read_exact_or_truncated(&mut fields)?;
        let field =
            |at: usize| u32::from_le_bytes([fields[at], fields[at + 1], fields[at + 2], fields[at + 3]]);
        let (stored, compressed_len, raw_len, count) = (field(0), field(4), field(8), field(12));
        if compressed_len as usize > MAX_COMPRESSED_BYTES {
            return Err(self.corrupt(
                start,
                format!(
                    "the block declares a payload of {compressed_len} bytes, beyond the format's \
                     limit of {MAX_COMPRESSED_BYTES}"
                ),
            ));
        }
        if raw_len as usize > MAX_BLOCK_BYTES {
            return Err(self.corrupt(
                start,
                format!(
                    "the block declares that its payload inflates to {raw_len} bytes, beyond the \
                     format's limit of {MAX_BLOCK_BYTES}"
                ),
            ));
        }
        let compressed = read_up_to(&mut self.inner, compressed_len as usize)?;
        self.offset += compressed.len() as u64;
        if compressed.len() < compressed_len as usize {
            return Err(self.truncated(self.offset));
        }
        if stored != checksum(&[BLOCK], &fields[4..], &compressed) {
            return Err(self.corrupt(start, "checksum mismatch: the block's bytes were altered"));
        }
        let traces = codec::inflate(&compressed, raw_len as usize)
            .and_then(|raw| codec::decode(&raw, count))
            .map_err(|detail| self.corrupt(start, detail))?;
        let block = Block { index: self.blocks, traces, compressed };
        self.blocks += 1;
        self.traces += block.traces.len() as u64;
        self.spans += block.traces.iter().map(|trace| trace.spans.len() as u64).sum::<u64>();
        Ok(block)
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<RecordedTrace, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(trace) = self.pending.next() {
                return Some(Ok(trace));
            }
            // Let the spent block's buffer go before the next one is read.
            self.pending = Vec::new().into_iter();
            match self.next_block()? {
                Ok(block) => self.pending = block.traces.into_iter(),
                Err(error) => return Some(Err(error)),
            }
        }
    }
}
