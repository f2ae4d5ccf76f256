//! The dump format of minitrace's flight recorder: every recent trace, in a
//! compact, versioned, checksummed file that is written and read as a stream.
//!
//! A dump is a sequence of the recorder's own records: each
//! [`RecordedTrace`] as [`minitrace::recorder`] hands it out, with every
//! [`SpanRecord`] (ids, parent, times, name, properties, events). [`Writer`]
//! streams them into any [`std::io::Write`], and [`Reader`] streams the same
//! values back from any [`std::io::Read`]. The byte layout, its limits and
//! what it keeps are in the crate's `FORMAT.md`.
//!
//! The format needs no tracing runtime: it depends on `minitrace` for the
//! data types only, without its `enable` feature. The glue that dumps a
//! running program's flight recorder (`dump_recorder`, `dump_window`,
//! `DumpOnExit`) is behind the `recorder` feature, on by default; tools
//! that only read dumps turn it off (`default-features = false`).
//!
//! ```
//! use minitrace_flight::{EventRecord, Reader, RecordedTrace, SpanId, SpanRecord, TraceId, Writer};
//!
//! let trace_id = TraceId(0x5eed);
//! let root = SpanRecord {
//!     trace_id,
//!     span_id: SpanId(1),
//!     name: "kv::get".into(),
//!     begin_time_unix_ns: 1_700_000_000_000_000_000,
//!     duration_ns: 12_000,
//!     properties: vec![("key".into(), "42".into())],
//!     ..SpanRecord::default()
//! };
//! let read = SpanRecord {
//!     span_id: SpanId(2),
//!     parent_id: SpanId(1),
//!     name: "read".into(),
//!     begin_time_unix_ns: 1_700_000_000_000_000_500,
//!     duration_ns: 1_000,
//!     events: vec![EventRecord { name: "cache miss".into(), timestamp_unix_ns: 1_700_000_000_000_000_600, ..EventRecord::default() }],
//!     ..root.clone()
//! };
//! let trace = RecordedTrace { trace_id, thread: 1, spans: vec![read, root], complete: true };
//!
//! let mut writer = Writer::new(Vec::new());
//! writer.write(&trace)?;
//! let written = writer.finish()?;
//! assert_eq!((written.traces, written.spans), (1, 2));
//!
//! let file = written.into_inner();
//! let traces: Vec<RecordedTrace> = Reader::new(&file[..])?.collect::<Result<_, _>>()?;
//! assert_eq!(traces, vec![trace]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![deny(missing_debug_implementations)]

mod codec;
mod error;
mod reader;
#[cfg(feature = "recorder")]
mod recorded;
mod writer;

pub mod synthetic;

pub use error::FormatError;
pub use reader::{Block, Reader};
#[cfg(feature = "recorder")]
pub use recorded::{dump_recorder, dump_window, DumpOnExit};
pub use writer::{write_file_atomically, Writer, Written};

/// The records a dump holds, re-exported from `minitrace`: a dump reads
/// back as these, whoever wrote it.
pub use minitrace::collector::{EventRecord, SpanId, SpanRecord, TraceId};
/// One trace as the flight recorder holds it, re-exported from `minitrace`.
pub use minitrace::recorder::RecordedTrace;

/// The magic bytes a dump starts with.
pub const MAGIC: [u8; 8] = *b"MTFLIGHT";

/// The format version this crate writes, and the only one it reads.
pub const VERSION: u16 = 2;

/// The most a block may hold, in bytes (64 MiB): both its inflated payload
/// and its *decoded size*, an upper bound on the memory its traces take
/// once read, which counts every string at each reference to it (FORMAT.md,
/// "Limits", gives the sum).
///
/// [`Reader`] refuses a block past either as [`FormatError::Corrupt`]
/// before allocating it, so reading any input, however forged, holds at most
/// a few times this much; [`Writer`] closes its blocks before they reach it,
/// and refuses a trace that could not fit in a block of its own.
pub const MAX_BLOCK_BYTES: usize = 1 << 26;
