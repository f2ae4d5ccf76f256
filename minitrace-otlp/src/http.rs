//! OTLP/HTTP: a protobuf (or JSON) body, gzip-compressed if asked, posted
//! by minitrace-delivery's HTTP client; the answer's partial success read
//! here.

use std::io::Write;

use minitrace_delivery::{Endpoint, HttpClient, PartialSuccess};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use crate::config::{Compression, Error, Protocol, Settings};

#[derive(Debug)]
pub(crate) struct HttpExporter {
    pub(crate) client: HttpClient,
    gzip: bool,
    json: bool,
}

impl HttpExporter {
    pub(crate) fn new(settings: &Settings) -> Result<HttpExporter, Error> {
        let endpoint = Endpoint::parse(&settings.url).map_err(|error| Error::InvalidEndpoint {
            endpoint: error.url().to_owned(),
            reason: error.reason().to_owned(),
        })?;
        let json = settings.protocol == Protocol::HttpJson;
        let gzip = settings.compression == Compression::Gzip;
        let content_type = if json { "application/json" } else { "application/x-protobuf" };
        let mut client = HttpClient::new(endpoint, content_type);
        client.set_user_agent(concat!("minitrace-otlp/", env!("CARGO_PKG_VERSION")));
        // Vendors' endpoints are often reached through an egress proxy.
        client.set_proxy_from_env(true);
        client.set_content_encoding(gzip.then_some("gzip"));
        client.set_answer_reader(read_answer);
        for (name, value) in &settings.headers {
            let value = value.to_str().map_err(|_| Error::InvalidHeader {
                name: name.to_string(),
                reason: "not visible ASCII".into(),
            })?;
            client
                .add_header(name.as_str(), value)
                .map_err(|reason| Error::InvalidHeader { name: name.to_string(), reason })?;
        }
        #[cfg(feature = "tls")]
        if let Some(roots) = &settings.roots {
            client.set_root_certificates(roots.clone());
        }
        Ok(HttpExporter { client, gzip, json })
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
        let _ = self.json;
        request.encode_to_vec()
    }
}

/// The partial success in a 2xx answer's `ExportTraceServiceResponse`,
/// protobuf or (with `http-json`) JSON as its `Content-Type` says; none if
/// the body is empty or unreadable.
fn read_answer(body: &[u8], content_type: Option<&str>) -> PartialSuccess {
    let json = content_type.is_some_and(|value| value.starts_with("application/json"));
    let answer = decode_response(body, json).unwrap_or_default();
    let partial = answer.partial_success.unwrap_or_default();
    PartialSuccess::new(partial.rejected_spans.max(0) as u64, partial.error_message)
}

fn decode_response(body: &[u8], json: bool) -> Option<ExportTraceServiceResponse> {
    #[cfg(feature = "http-json")]
    if json {
        return serde_json::from_slice(body).ok();
    }
    let _ = json;
    ExportTraceServiceResponse::decode(body).ok()
}
