use crate::data::id::{SpanId, TraceId};
use crate::util::recording::ENABLED;

/// Where a span sits: its trace and its own id. Pass it across process
/// boundaries (e.g. as a W3C `traceparent` header) to continue a trace.
///
/// ```
/// use minitrace::prelude::*;
///
/// let context = SpanContext { trace_id: TraceId::random(), span_id: SpanId::random() };
/// let header = context.encode_w3c_traceparent();
/// assert_eq!(SpanContext::decode_w3c_traceparent(&header), Some(context));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SpanContext {
    /// The trace.
    pub trace_id: TraceId,
    /// The span within it: for a context used as a parent, the parent span.
    pub span_id: SpanId,
}

impl SpanContext {
    /// A context with the given ids.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let context = SpanContext::new(TraceId(12), SpanId(34));
    /// assert_eq!(context.span_id, SpanId(34));
    /// ```
    pub fn new(trace_id: TraceId, span_id: SpanId) -> SpanContext {
        SpanContext { trace_id, span_id }
    }

    /// A new random trace id with no parent span: the context for a fresh
    /// root. (Without the `enable` feature, where no span records anything,
    /// the trace id is zero.)
    ///
    /// ```
    /// let context = minitrace::prelude::SpanContext::random();
    /// assert_eq!(context.span_id.0, 0);
    /// ```
    #[inline]
    pub fn random() -> SpanContext {
        // Without `enable` no span uses it: skip the generator.
        let trace_id = if ENABLED { TraceId::random() } else { TraceId(0) };
        SpanContext::new(trace_id, SpanId(0))
    }

    /// Parses a W3C `traceparent` header: `00-<32 hex trace id>-<16 hex
    /// parent id>-<2 hex flags>`, lowercase. `None` for anything malformed:
    /// wrong lengths or separators, uppercase or non-hex digits, version
    /// `ff`, all-zero ids, or extra fields on version `00`. Later versions
    /// may append fields, which are ignored. The sampled flag is ignored
    /// here; [`decode_w3c_traceparent_with_sampled`](SpanContext::decode_w3c_traceparent_with_sampled)
    /// returns it.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    /// let context = SpanContext::decode_w3c_traceparent(header).unwrap();
    /// assert_eq!(context.span_id, SpanId(0xb7ad6b7169203331));
    /// assert_eq!(SpanContext::decode_w3c_traceparent("00-xyz-b7ad6b7169203331-01"), None);
    /// ```
    pub fn decode_w3c_traceparent(traceparent: &str) -> Option<SpanContext> {
        SpanContext::decode_w3c_traceparent_with_sampled(traceparent).map(|(context, _)| context)
    }

    /// Parses a W3C `traceparent` header as
    /// [`decode_w3c_traceparent`](SpanContext::decode_w3c_traceparent) does,
    /// and also returns its sampled flag: the caller's decision whether this
    /// trace is recorded. To honour it, start the root only when it is set:
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    /// let (context, sampled) = SpanContext::decode_w3c_traceparent_with_sampled(header).unwrap();
    /// assert!(!sampled);
    /// let root = if sampled { Span::root("request", context) } else { Span::noop() };
    /// assert!(root.elapsed().is_none());
    /// ```
    pub fn decode_w3c_traceparent_with_sampled(traceparent: &str) -> Option<(SpanContext, bool)> {
        let bytes = traceparent.as_bytes();
        // ASCII only: every offset below is then a character boundary.
        if !traceparent.is_ascii()
            || bytes.len() < 55
            || bytes[2] != b'-'
            || bytes[35] != b'-'
            || bytes[52] != b'-'
        {
            return None;
        }
        let version = parse_hex(&traceparent[0..2])? as u8;
        let trace_id = parse_hex(&traceparent[3..35])?;
        let span_id = parse_hex(&traceparent[36..52])? as u64;
        let flags = parse_hex(&traceparent[53..55])? as u8;
        let rest = &traceparent[55..];
        let valid_tail =
            if version == 0 { rest.is_empty() } else { rest.is_empty() || rest.starts_with('-') };
        if version == 0xff || !valid_tail || trace_id == 0 || span_id == 0 {
            return None;
        }
        Some((SpanContext::new(TraceId(trace_id), SpanId(span_id)), flags & 1 == 1))
    }

    /// Encodes the context as a W3C `traceparent` header, with the sampled
    /// flag set.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let context = SpanContext::new(TraceId(1), SpanId(2));
    /// assert_eq!(
    ///     context.encode_w3c_traceparent(),
    ///     "00-00000000000000000000000000000001-0000000000000002-01"
    /// );
    /// ```
    pub fn encode_w3c_traceparent(&self) -> String {
        self.encode_w3c_traceparent_with_sampled(true)
    }

    /// Encodes the context as a W3C `traceparent` header with the given
    /// sampled flag.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let header = SpanContext::random().encode_w3c_traceparent_with_sampled(false);
    /// assert!(header.ends_with("-00"));
    /// ```
    pub fn encode_w3c_traceparent_with_sampled(&self, sampled: bool) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.span_id, u8::from(sampled))
    }
}

/// Lowercase hex only, as the W3C format requires (`from_str_radix` would
/// also take uppercase digits and a leading `+`, and is several times
/// slower: a server reads a `traceparent` per request). At most 32 digits.
fn parse_hex(digits: &str) -> Option<u128> {
    debug_assert!(digits.len() <= 32);
    digits.bytes().try_fold(0u128, |value, byte| {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            _ => return None,
        };
        Some(value << 4 | u128::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_malformed_traceparents() {
        let good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert!(SpanContext::decode_w3c_traceparent(good).is_some());
        for bad in [
            "",
            "00",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-+af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333g-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x",
            "00-0af7651916cd43dd8448eb211c80319é-b7ad6b7169203331-01",
            // A multi-byte character across the end of the flags.
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0é",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-é",
        ] {
            assert_eq!(SpanContext::decode_w3c_traceparent(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn honours_the_sampled_flag_and_future_versions() {
        let sampled = |header| SpanContext::decode_w3c_traceparent_with_sampled(header).unwrap().1;
        assert!(!sampled("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"));
        assert!(sampled("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03-more"));
    }

    #[test]
    fn round_trips_extreme_ids() {
        let context = SpanContext::new(TraceId(u128::MAX), SpanId(u64::MAX));
        let header = context.encode_w3c_traceparent();
        assert_eq!(SpanContext::decode_w3c_traceparent(&header), Some(context));
    }
}
