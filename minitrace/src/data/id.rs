use std::fmt;
use std::str::FromStr;

use crate::util::rand;

/// The 128-bit id that every span of one trace shares.
///
/// Displayed (and parsed) as 32 lowercase hex digits, as in W3C trace context.
///
/// ```
/// use minitrace::collector::TraceId;
///
/// let id: TraceId = "0af7651916cd43dd8448eb211c80319c".parse().unwrap();
/// assert_eq!(id.to_string(), "0af7651916cd43dd8448eb211c80319c");
/// ```
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash, Default, PartialOrd, Ord)]
pub struct TraceId(pub u128);

impl TraceId {
    /// A random, non-zero trace id (from a fast per-thread generator; not
    /// suitable for cryptography).
    ///
    /// ```
    /// assert_ne!(minitrace::collector::TraceId::random().0, 0);
    /// ```
    pub fn random() -> TraceId {
        TraceId((u128::from(rand::next_u64()) << 64) | u128::from(rand::next_nonzero_u64()))
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl FromStr for TraceId {
    type Err = std::num::ParseIntError;

    fn from_str(hex: &str) -> Result<TraceId, Self::Err> {
        u128::from_str_radix(hex, 16).map(TraceId)
    }
}

/// The 64-bit id of one span, unique within its trace. `SpanId(0)` means
/// "none", e.g. the parent of a root span.
///
/// ```
/// use minitrace::collector::SpanId;
///
/// let id: SpanId = "b7ad6b7169203331".parse().unwrap();
/// assert_eq!(id.to_string(), "b7ad6b7169203331");
/// ```
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash, Default, PartialOrd, Ord)]
pub struct SpanId(pub u64);

impl SpanId {
    /// A random, non-zero span id.
    ///
    /// ```
    /// assert_ne!(minitrace::collector::SpanId::random().0, 0);
    /// ```
    pub fn random() -> SpanId {
        SpanId(rand::next_nonzero_u64())
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl FromStr for SpanId {
    type Err = std::num::ParseIntError;

    fn from_str(hex: &str) -> Result<SpanId, Self::Err> {
        u64::from_str_radix(hex, 16).map(SpanId)
    }
}

/// Collect ids are handed to each thread in blocks of this many (see
/// `data::collect_id`).
pub(crate) const ID_BLOCK: u64 = 1 << 12;
