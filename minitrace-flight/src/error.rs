//! What can be wrong with a dump, as the reader reports it.

use std::fmt;
use std::io;

/// Why a dump could not be read, or could be read only in part.
///
/// Every kind of damage maps to one variant with a message that says what
/// was found and where; the reader never panics on bad input.
#[derive(Debug)]
#[non_exhaustive]
pub enum FormatError {
    /// Reading the underlying file or stream failed.
    Io(io::Error),
    /// The input holds no byte at all.
    Empty,
    /// The input does not start with the dump's magic bytes.
    NotADump,
    /// The dump was written in a format version this reader does not know.
    NewerVersion {
        /// The version the file declares.
        found: u16,
        /// The newest version this reader reads.
        supported: u16,
    },
    /// The dump was written in an older version of the format, which this
    /// reader no longer reads (FORMAT.md, "Versions").
    OldVersion {
        /// The version the file declares.
        found: u16,
        /// The only version this reader reads.
        supported: u16,
    },
    /// The input ends before the dump's end marker: the writer stopped
    /// midway, or the file was cut. Every trace before this point has
    /// already been returned.
    Truncated {
        /// How many traces were read in full before the cut.
        traces_read: u64,
        /// Where the input ended.
        offset: u64,
    },
    /// A block's checksum, length or contents are wrong.
    Corrupt {
        /// The block's index, counted from 0.
        block: u64,
        /// The block's offset in the input.
        offset: u64,
        /// What was wrong with it.
        detail: String,
    },
    /// Bytes follow the end marker.
    TrailingData {
        /// Where the extra bytes start.
        offset: u64,
    },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Io(error) => write!(f, "cannot read the dump: {error}"),
            FormatError::Empty => f.write_str("the file is empty: not a minitrace flight dump"),
            FormatError::NotADump => {
                f.write_str("not a minitrace flight dump (it does not start with \"MTFLIGHT\")")
            }
            FormatError::NewerVersion { found, supported } => write!(
                f,
                "the dump was written by a newer version of the format ({found}); \
                 this reader reads up to version {supported}: upgrade minitrace-flight"
            ),
            FormatError::OldVersion { found, supported } => write!(
                f,
                "the dump was written in version {found} of the format, which this reader no \
                 longer reads (it reads version {supported}, which keeps every span's ids, \
                 properties and events): read it with a minitrace-view from before version {supported}"
            ),
            FormatError::Truncated { traces_read, offset } => write!(
                f,
                "the dump is truncated at byte {offset}: it ends without its end marker \
                 ({traces_read} traces were read before the cut)"
            ),
            FormatError::Corrupt { block, offset, detail } => {
                write!(f, "the dump is corrupted: block {block} at byte {offset}: {detail}")
            }
            FormatError::TrailingData { offset } => {
                write!(f, "the dump has unexpected bytes after its end marker, at byte {offset}")
            }
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for FormatError {
    fn from(error: io::Error) -> Self {
        FormatError::Io(error)
    }
}
