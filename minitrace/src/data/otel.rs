//! What OpenTelemetry backends show beside a span's name and properties: its
//! kind, its status, and links to other spans.
//!
//! They travel as properties under reserved keys (the keys OpenTelemetry
//! uses when it maps these fields to tag-based formats), so that
//! [`SpanRecord`] keeps the fields of minitrace 0.6 and a reporter that does
//! not know them still shows them as tags. Setting one is adding a property;
//! a span without any costs nothing more. Reporters read them back typed:
//! [`SpanRecord::kind`], [`SpanRecord::status`], [`SpanRecord::links`], and
//! skip the keys with [`is_reserved_key`].
//!
//! ```
//! use minitrace::collector::{SpanKind, SpanRecord, SpanStatus};
//!
//! let record = SpanRecord {
//!     properties: vec![("span.kind".into(), "server".into())],
//!     ..SpanRecord::default()
//! };
//! assert_eq!(record.kind(), SpanKind::Server);
//! assert_eq!(record.status(), SpanStatus::Unset);
//! ```

use std::borrow::Cow;

use crate::data::context::SpanContext;
use crate::data::record::{Property, SpanRecord};

/// The property key of a span's [`SpanKind`].
pub const KIND_KEY: &str = "span.kind";
/// The property key of a span's status code (`OK` or `ERROR`).
pub const STATUS_CODE_KEY: &str = "otel.status_code";
/// The property key of an error status's message.
pub const STATUS_MESSAGE_KEY: &str = "otel.status_description";
/// The property key of a link, one property per link, valued as a W3C
/// `traceparent` of the linked span.
pub const LINK_KEY: &str = "otel.link";
/// The property key of a root's W3C `tracestate`, carried from the request
/// that started it (see [`Span::with_tracestate`](crate::Span::with_tracestate)).
pub const TRACESTATE_KEY: &str = "w3c.tracestate";

/// Whether `key` is one of the reserved keys above: a reporter that maps
/// them to fields of its own format leaves them out of the span's
/// attributes.
pub fn is_reserved_key(key: &str) -> bool {
    matches!(key, KIND_KEY | STATUS_CODE_KEY | STATUS_MESSAGE_KEY | LINK_KEY | TRACESTATE_KEY)
}

/// The role of a span in a request between services, as OpenTelemetry
/// defines it. A span has [`Internal`](SpanKind::Internal) unless set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpanKind {
    /// An operation inside one service.
    #[default]
    Internal,
    /// The handling of a request from another service.
    Server,
    /// A request to another service.
    Client,
    /// The sending of a message handled later, elsewhere.
    Producer,
    /// The handling of a message sent by a producer.
    Consumer,
}

impl SpanKind {
    /// The value stored under [`KIND_KEY`]: the lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Internal => "internal",
            SpanKind::Server => "server",
            SpanKind::Client => "client",
            SpanKind::Producer => "producer",
            SpanKind::Consumer => "consumer",
        }
    }

    fn parse(value: &str) -> SpanKind {
        match value {
            "server" => SpanKind::Server,
            "client" => SpanKind::Client,
            "producer" => SpanKind::Producer,
            "consumer" => SpanKind::Consumer,
            _ => SpanKind::Internal,
        }
    }
}

/// Whether a span's operation succeeded, as OpenTelemetry defines it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum SpanStatus {
    /// Nothing said: the default.
    #[default]
    Unset,
    /// Marked as successful.
    Ok,
    /// Failed, with a message for people.
    Error(Cow<'static, str>),
}

impl SpanStatus {
    /// An error status with `message`.
    ///
    /// ```
    /// let status = minitrace::collector::SpanStatus::error("timed out");
    /// assert_eq!(status, minitrace::collector::SpanStatus::Error("timed out".into()));
    /// ```
    pub fn error(message: impl Into<Cow<'static, str>>) -> SpanStatus {
        SpanStatus::Error(message.into())
    }

    /// The properties that carry this status (none for `Unset`).
    pub(crate) fn into_properties(self) -> Vec<Property> {
        match self {
            SpanStatus::Unset => Vec::new(),
            SpanStatus::Ok => vec![(STATUS_CODE_KEY.into(), "OK".into())],
            SpanStatus::Error(message) => {
                vec![(STATUS_CODE_KEY.into(), "ERROR".into()), (STATUS_MESSAGE_KEY.into(), message)]
            }
        }
    }
}

/// The property that carries a link to `context`.
pub(crate) fn link_property(context: SpanContext) -> Property {
    (LINK_KEY.into(), context.encode_w3c_traceparent().into())
}

/// The property that carries a span's kind.
pub(crate) fn kind_property(kind: SpanKind) -> Property {
    (KIND_KEY.into(), kind.as_str().into())
}

impl SpanRecord {
    /// The span's kind: [`SpanKind::Internal`] unless set (the last one
    /// set counts).
    pub fn kind(&self) -> SpanKind {
        self.reserved(KIND_KEY).last().map_or(SpanKind::Internal, SpanKind::parse)
    }

    /// The span's status: [`SpanStatus::Unset`] unless set (the last one
    /// set counts).
    pub fn status(&self) -> SpanStatus {
        match self.reserved(STATUS_CODE_KEY).last() {
            Some("OK") => SpanStatus::Ok,
            Some("ERROR") => {
                let message = self.reserved(STATUS_MESSAGE_KEY).last().unwrap_or_default();
                SpanStatus::Error(Cow::Owned(message.to_owned()))
            }
            _ => SpanStatus::Unset,
        }
    }

    /// The spans this one links to, in the order they were added; a
    /// malformed link property is skipped.
    pub fn links(&self) -> Vec<SpanContext> {
        self.reserved(LINK_KEY).filter_map(SpanContext::decode_w3c_traceparent).collect()
    }

    /// The W3C `tracestate` of the request the trace continues, set on its
    /// root.
    pub fn tracestate(&self) -> Option<&str> {
        self.reserved(TRACESTATE_KEY).last()
    }

    fn reserved<'a>(&'a self, key: &'a str) -> impl DoubleEndedIterator<Item = &'a str> + 'a {
        self.properties.iter().filter(move |(k, _)| k == key).map(|(_, value)| value.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::id::{SpanId, TraceId};

    fn record(properties: Vec<Property>) -> SpanRecord {
        SpanRecord { properties, ..SpanRecord::default() }
    }

    #[test]
    fn fields_read_back_as_set() {
        let linked = SpanContext::new(TraceId(7), SpanId(9));
        let mut properties = vec![kind_property(SpanKind::Client), link_property(linked)];
        properties.extend(SpanStatus::error("refused").into_properties());
        let record = record(properties);
        assert_eq!(record.kind(), SpanKind::Client);
        assert_eq!(record.status(), SpanStatus::error("refused"));
        assert_eq!(record.links(), vec![linked]);
        assert!(record.properties.iter().all(|(key, _)| is_reserved_key(key)));
    }

    #[test]
    fn unset_and_malformed_fields_read_as_defaults() {
        let record = record(vec![
            (KIND_KEY.into(), "sideways".into()),
            (STATUS_CODE_KEY.into(), "MAYBE".into()),
            (LINK_KEY.into(), "not a traceparent".into()),
        ]);
        assert_eq!(record.kind(), SpanKind::Internal);
        assert_eq!(record.status(), SpanStatus::Unset);
        assert!(record.links().is_empty());
        assert_eq!(record.tracestate(), None);
        assert!(!is_reserved_key("http.method"));
    }

    #[test]
    fn every_kind_round_trips() {
        for kind in
            [SpanKind::Internal, SpanKind::Server, SpanKind::Client, SpanKind::Producer, SpanKind::Consumer]
        {
            assert_eq!(record(vec![kind_property(kind)]).kind(), kind);
        }
    }
}

/// A root span as it ends, shown to a trigger of the flight recorder (see
/// [`FlightRecorder::report_if`](crate::recorder::FlightRecorder::report_if)),
/// which decides whether its trace is reported whatever its length.
///
/// ```
/// use minitrace::recorder::RootInfo;
///
/// let info = RootInfo { name: "GET /cart", properties: &[], duration: std::time::Duration::from_micros(80) };
/// assert!(!info.is_error());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RootInfo<'a> {
    /// The root's name.
    pub name: &'a str,
    /// Its properties (status, kind and links among them, under the keys
    /// of [`collector`](crate::collector)'s constants).
    pub properties: &'a [(Cow<'static, str>, Cow<'static, str>)],
    /// How long it lasted.
    pub duration: std::time::Duration,
}

impl RootInfo<'_> {
    /// Whether its status is an error (see [`SpanStatus`](crate::collector::SpanStatus)).
    pub fn is_error(&self) -> bool {
        self.properties
            .iter()
            .rev()
            .find(|(key, _)| key == STATUS_CODE_KEY)
            .is_some_and(|(_, code)| code == "ERROR")
    }
}
