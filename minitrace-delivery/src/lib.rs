//! The delivery layer of minitrace's reporters (`minitrace-jaeger` and
//! `minitrace-otlp`): what happens to a request body once it is encoded.
//! One HTTP client, one retry policy, one error log and one set of
//! counters, so that both reporters behave alike and are tested once.
//!
//! # Design
//!
//! A reporter encodes spans into request bodies (Thrift, OTLP protobuf or
//! JSON, gzip-compressed or not) and hands each body, with the number of
//! spans in it, to this layer; the layer never sees a span. That keeps it
//! body-oriented, so that bodies can later be encoded into reused buffers,
//! and sent from a thread of their own while the next ones are encoded.
//!
//! - [`Endpoint`]: a URL checked once, when the reporter is built: `http://`
//!   or `https://`, a host, and no `user:password@` (credentials in a URL
//!   are refused, so that no URL this layer prints can hold any; they go in
//!   a header). Its errors show the URL with user information replaced.
//! - [`HttpClient`]: one try of one `POST` through ureq, told as an
//!   [`Attempt`]. Redirects are never followed: a `3xx` is a failed
//!   delivery, so a body and its headers (a vendor's key) never go to
//!   another host, and a `2xx` answer to a redirected `GET` is never taken
//!   for a delivery. Header values are marked sensitive. With the `tls`
//!   feature, `https://` is spoken through rustls, with the webpki roots or
//!   the `RootCertificates` given.
//! - [`Delivery`]: the retry policy around the tries of any transport (the
//!   HTTP client here, or a reporter's own: gRPC, UDP), the counters, and
//!   the error log.
//! - [`Pipeline`]: a [`Delivery`] on a sender thread of its own, fed
//!   encoded bodies through a bounded queue, with their buffers handed back
//!   for reuse: minitrace's collector thread encodes the next body while
//!   the last one is on the wire.
//!
//! # The retry policy
//!
//! As the OTLP specification says, for HTTP and gRPC alike:
//!
//! | answer | what is done |
//! |---|---|
//! | 2xx (a partial success included) | delivered; rejected spans counted, never retried |
//! | 429, 502, 503, 504; gRPC's retryable codes | retried after `Retry-After` (seconds or an HTTP date), else an exponential backoff with jitter |
//! | a connection closed with no answer | sent again at once, then after a backoff |
//! | every other status (400, 413, 500, any 3xx), TLS failures | not retried |
//! | connection refused, unknown host | not retried, nor the rest of the report tried |
//! | no answer in time | not retried; the endpoint left alone for a pause (5 s) |
//!
//! A [`Report`] carries the deadline of one call of the reporter's
//! `report`: no request or retry goes past it, and a wait that would is not
//! made. Delivered through a [`Pipeline`], a report's requests are tried on
//! the sender thread, within that same deadline, and the reporter's
//! `report` returns once they are queued: minitrace's collector thread
//! waits only when the queue is full (the endpoint slower than the spans
//! come), and never longer than one request's delivery.
//!
//! # Counting
//!
//! Every span handed to a [`Delivery`] ends counted in exactly one of
//! sent, rejected and failed ([`Counters`], one per reporter); the last two
//! are also given to minitrace's
//! [`count_dropped_by_reporter`](minitrace::collector::count_dropped_by_reporter),
//! so that they show in `minitrace::collector::stats()`. Requests and
//! retries are counted too, and the last error kept.
//!
//! # Errors and secrets
//!
//! Errors are written to standard error by an [`ErrorLog`], at most one
//! line per interval per reporter, with the count of the lines held back.
//! No line, no last error and no `Debug` output shows a header value or
//! credentials: header values are never put into messages, and those a
//! reporter names with [`Delivery::hide`] are replaced by `***` wherever an
//! endpoint's answer quotes them.
//!
//! # Features
//!
//! - `tls`: `https://` endpoints, through rustls (ring) with the webpki
//!   roots, or the roots given.
//! - `testing`: `testing::capture_log`, for the reporters' tests.

#![forbid(unsafe_code)]

mod delivery;
mod endpoint;
mod http;
mod log;
mod pipeline;
mod read_ahead;
mod resolve;
mod stats;

pub use crate::delivery::{
    retry_after, Attempt, Delivery, Outcome, Report, RetryPolicy, DEFAULT_ERROR_INTERVAL,
};
pub use crate::endpoint::{redact_url, Endpoint, EndpointError};
#[cfg(feature = "tls")]
pub use crate::http::RootCertificates;
pub use crate::http::{AnswerReader, CertificateError, HttpClient, PartialSuccess};
#[cfg(feature = "testing")]
pub use crate::log::testing;
pub use crate::log::ErrorLog;
pub use crate::pipeline::{Pipeline, Transport, DEFAULT_PIPELINE_DEPTH};
pub use crate::read_ahead::ReadAhead;
pub use crate::stats::{Counters, DeliveryStats};
