//! The dump format of minitrace's flight recorder: every recent request, in a
//! compact, versioned, checksummed file that is written and read as a stream.
//!
//! A dump is a sequence of [`Request`]s, each with its spans. [`Writer`]
//! streams them into any [`std::io::Write`], [`Reader`] streams them back
//! from any [`std::io::Read`]. The byte layout, and what it keeps and
//! drops, is in the crate's `FORMAT.md`; `minitrace-view` draws and
//! summarises dumps.
//!
//! ```
//! use minitrace_flight::{Reader, Request, SpanEntry, Writer};
//!
//! let request = Request {
//!     trace_id: 0x5eed,
//!     name: "kv::get".into(),
//!     thread: 1,
//!     begin_unix_ns: 1_700_000_000_000_000_000,
//!     duration_ns: 12_000,
//!     properties: vec![("key".into(), "42".into())],
//!     spans: vec![
//!         SpanEntry { name: "parse".into(), parent: None, begin_unix_ns: 1_700_000_000_000_000_100, duration_ns: 2_000 },
//!         SpanEntry { name: "read".into(), parent: Some(0), begin_unix_ns: 1_700_000_000_000_000_500, duration_ns: 1_000 },
//!     ],
//! };
//!
//! let mut writer = Writer::new(Vec::new());
//! writer.write(&request)?;
//! let written = writer.finish()?;
//! assert_eq!((written.requests, written.spans), (1, 2));
//!
//! let file = written.into_inner();
//! let read: Vec<Request> = Reader::new(&file[..])?.collect::<Result<_, _>>()?;
//! assert_eq!(read, vec![request]);

//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![deny(missing_debug_implementations)]

mod codec;
mod error;
mod reader;
mod recorded;
mod writer;

pub mod synthetic;

pub use error::FormatError;
pub use reader::{Block, Reader};
pub use recorded::{dump_recorder, dump_window, DumpOnExit};
pub use writer::{write_file_atomically, Writer, Written};

/// The magic bytes a dump starts with.
pub const MAGIC: [u8; 8] = *b"MTFLIGHT";

/// The format version this crate writes, and the newest it reads.
pub const VERSION: u16 = 1;

/// The most a block may hold, in bytes (64 MiB): both its inflated payload
/// and its *decoded size*, an upper bound on the memory its requests take
/// once read, which counts every string at each reference to it (FORMAT.md,
/// "Limits", gives the sum).
///
/// [`Reader`] refuses a block past either as [`FormatError::Corrupt`]
/// before allocating it, so reading any input, however forged, holds at most
/// a few times this much; [`Writer`] closes its blocks before they reach it,
/// and refuses a request that could not fit in a block of its own.
pub const MAX_BLOCK_BYTES: usize = 1 << 26;

/// One request: its root span and every span recorded under it.
///
/// Times are nanoseconds since the Unix epoch. The root is the request
/// itself; `spans` holds the rest of its trace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The trace's id.
    pub trace_id: u128,
    /// The root span's name.
    pub name: String,
    /// The thread that started the request, as the recorder numbers threads.
    pub thread: u32,
    /// When the root began.
    pub begin_unix_ns: u64,
    /// How long the root took.
    pub duration_ns: u64,
    /// The root's properties worth keeping, in order.
    pub properties: Vec<(String, String)>,
    /// The request's other spans, each parent listed before its children
    /// (start order does that); the writer rejects any other order.
    pub spans: Vec<SpanEntry>,
}

/// A span of a [`Request`], other than its root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpanEntry {
    /// The span's name.
    pub name: String,
    /// Its parent: an index into the request's `spans`, lower than this
    /// span's own, or `None` when its parent is the request's root.
    pub parent: Option<u32>,
    /// When it began, in nanoseconds since the Unix epoch.
    pub begin_unix_ns: u64,
    /// How long it took.
    pub duration_ns: u64,
}

impl Request {
    /// When the request ended: its begin plus its duration (saturating).
    pub fn end_unix_ns(&self) -> u64 {
        self.begin_unix_ns.saturating_add(self.duration_ns)
    }

    /// The nesting depth of each span: 1 for a child of the root, 2 for its
    /// children, and so on (the root itself is depth 0).
    pub fn span_depths(&self) -> Vec<u32> {
        let mut depths: Vec<u32> = Vec::with_capacity(self.spans.len());
        for span in &self.spans {
            // Parents come first, so a valid parent's depth is already known;
            // a forward or self reference (invalid) counts as the root's.
            let depth = match span.parent {
                Some(parent) => depths.get(parent as usize).map_or(1, |depth| depth + 1),
                None => 1,
            };
            depths.push(depth);
        }
        depths
    }
}
