//! OTLP/HTTP: `POST /v1/traces` through ureq, with a protobuf (or JSON)
//! body, gzip-compressed if asked.

use std::io::{self, Write};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use ureq::http::{HeaderName, HeaderValue, Response};
use ureq::Body;

use crate::config::{Compression, Protocol, Settings};
use crate::retry::Attempt;

/// The most of a response body read: OTLP answers are small.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024;

#[derive(Debug)]
pub(crate) struct HttpExporter {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    gzip: bool,
    json: bool,
}

impl HttpExporter {
    pub(crate) fn new(settings: &Settings) -> HttpExporter {
        let agent = ureq::Agent::config_builder()
            // Statuses are OTLP answers to read (retryable or not), not errors.
            .http_status_as_error(false)
            .timeout_global(Some(settings.timeout))
            .user_agent(concat!("minitrace-otlp/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        HttpExporter {
            agent,
            url: settings.url.clone(),
            headers: settings.headers.clone(),
            gzip: settings.compression == Compression::Gzip,
            json: settings.protocol == Protocol::HttpJson,
        }
    }

    /// The request body, encoded and compressed once for every try.
    pub(crate) fn body(&self, request: &ExportTraceServiceRequest) -> Vec<u8> {
        let encoded = self.encode(request);
        if !self.gzip {
            return encoded;
        }
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        // Writing to a Vec cannot fail.
        encoder.write_all(&encoded).and_then(|()| encoder.finish()).unwrap_or(encoded)
    }

    #[cfg(feature = "http-json")]
    fn encode(&self, request: &ExportTraceServiceRequest) -> Vec<u8> {
        if self.json {
            // Serializing these plain structs into a Vec cannot fail.
            return serde_json::to_vec(request).unwrap_or_default();
        }
        request.encode_to_vec()
    }

    #[cfg(not(feature = "http-json"))]
    fn encode(&self, request: &ExportTraceServiceRequest) -> Vec<u8> {
        request.encode_to_vec()
    }

    /// One try: POSTs `body`, waiting at most `timeout`.
    pub(crate) fn send(&self, body: &[u8], timeout: Duration) -> Attempt {
        let content_type = if self.json { "application/json" } else { "application/x-protobuf" };
        let mut request = self.agent.post(&self.url).header("content-type", content_type);
        if self.gzip {
            request = request.header("content-encoding", "gzip");
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let result = request.config().timeout_global(Some(timeout)).build().send(body);
        match result {
            Ok(response) => self.answer(response),
            Err(error) => transport_error(error),
        }
    }

    fn answer(&self, mut response: Response<Body>) -> Attempt {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let json = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        let body = response.body_mut().with_config().limit(MAX_RESPONSE_BYTES).read_to_vec();
        match status {
            200..=299 => {
                // The status says delivered; an unreadable body cannot take that back.
                let answer = body.ok().and_then(|body| decode_response(&body, json)).unwrap_or_default();
                let partial = answer.partial_success.unwrap_or_default();
                Attempt::Delivered {
                    rejected: partial.rejected_spans.max(0) as u64,
                    message: partial.error_message,
                }
            }
            429 | 502 | 503 | 504 => {
                Attempt::Retry { error: describe(status, body.ok()), after: retry_after }
            }
            _ => Attempt::Failed(describe(status, body.ok())),
        }
    }
}

fn decode_response(body: &[u8], json: bool) -> Option<ExportTraceServiceResponse> {
    #[cfg(feature = "http-json")]
    if json {
        return serde_json::from_slice(body).ok();
    }
    let _ = json;
    ExportTraceServiceResponse::decode(body).ok()
}

/// `HTTP 400` and the printable part of the body (a `google.rpc.Status`
/// whose message is text), for the error message.
fn describe(status: u16, body: Option<Vec<u8>>) -> String {
    let text: String = String::from_utf8_lossy(&body.unwrap_or_default())
        .chars()
        .filter(|c| !c.is_control() && *c != char::REPLACEMENT_CHARACTER)
        .take(200)
        .collect();
    let text = text.trim();
    if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }
}

fn transport_error(error: ureq::Error) -> Attempt {
    match error {
        ureq::Error::Timeout(what) => Attempt::Failed(format!("timed out ({what})")),
        // Down or unknown: nothing to wait for within one report; the next report tries again.
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => Attempt::Failed(error.to_string()),
        ureq::Error::Io(ref io) if io.kind() == io::ErrorKind::ConnectionRefused => {
            Attempt::Failed(format!("connection refused: {io}"))
        }
        ureq::Error::Io(ref io) if io.kind() == io::ErrorKind::TimedOut => Attempt::Failed(error.to_string()),
        // A connection dropped without an answer: the OTLP spec says to retry.
        ureq::Error::Io(_) | ureq::Error::Protocol(_) => {
            Attempt::Retry { error: error.to_string(), after: None }
        }
        other => Attempt::Failed(other.to_string()),
    }
}
