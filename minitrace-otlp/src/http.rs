//! OTLP/HTTP: a protobuf (or JSON) body, gzip-compressed if asked, posted
//! by minitrace-delivery's HTTP client; the answer's partial success read
//! here.

use minitrace_delivery::{Endpoint, HttpClient, PartialSuccess};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use crate::config::{Compression, Error, Protocol, Settings};

#[derive(Debug)]
pub(crate) struct HttpExporter {
    pub(crate) client: HttpClient,
    pub(crate) gzip: Option<Gzip>,
    pub(crate) json: bool,
}

/// gzip (RFC 1952) around raw deflate, its state reused from one body to
/// the next: a new `GzEncoder` per body would allocate its tables each time.
pub(crate) struct Gzip {
    deflate: flate2::Compress,
}

impl std::fmt::Debug for Gzip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gzip").finish_non_exhaustive()
    }
}

impl Gzip {
    pub(crate) fn new() -> Gzip {
        // The fastest level: the body is compressed on minitrace's collector thread.
        Gzip { deflate: flate2::Compress::new(flate2::Compression::fast(), false) }
    }

    /// `input`, gzip-compressed, appended to `out`.
    pub(crate) fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) {
        // Magic, deflate, no flags, no time, no extra flags, unknown OS.
        out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
        self.deflate.reset();
        out.reserve(input.len() / 2 + 64);
        loop {
            let consumed = self.deflate.total_in() as usize;
            let status = self
                .deflate
                .compress_vec(&input[consumed..], out, flate2::FlushCompress::Finish)
                .expect("deflating into a Vec cannot fail");
            if status == flate2::Status::StreamEnd {
                break;
            }
            out.reserve(out.capacity().max(1024));
        }
        let mut crc = flate2::Crc::new();
        crc.update(input);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(input.len() as u32).to_le_bytes());
    }
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
        Ok(HttpExporter { client, gzip: gzip.then(Gzip::new), json })
    }
}

/// `request` as a body: JSON (with `http-json`) or protobuf.
pub(crate) fn encode_request(json: bool, request: &ExportTraceServiceRequest) -> Vec<u8> {
    #[cfg(feature = "http-json")]
    if json {
        // Serializing these plain structs into a Vec cannot fail.
        return serde_json::to_vec(request).unwrap_or_default();
    }
    let _ = json;
    request.encode_to_vec()
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
