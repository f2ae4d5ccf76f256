//! OTLP/gRPC: `TraceService/Export` through tonic, on a current-thread
//! tokio runtime of the reporter's own, driven by the reporter's sender
//! thread (minitrace-delivery's `Pipeline`, as over HTTP).
//!
//! The request bodies are the ones OTLP/HTTP sends (`crate::wire`, written
//! straight from the records), handed to tonic as bytes by a codec of our
//! own: no message of `opentelemetry-proto`'s is built for a request, and
//! only the answer is decoded with prost.

use std::error::Error as _;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;
use tonic::client::Grpc;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::GrpcMethod;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use minitrace_delivery::Attempt;

use crate::config::{Compression, Error, Settings};

/// A client of one endpoint. Clones share the runtime: the sender
/// thread's is the one that drives it.
#[derive(Clone)]
pub(crate) struct GrpcExporter {
    runtime: Arc<tokio::runtime::Runtime>,
    client: Grpc<Channel>,
    metadata: MetadataMap,
}

/// The service and method every body goes to.
const SERVICE: &str = "opentelemetry.proto.collector.trace.v1.TraceService";
const METHOD: &str = "Export";
const PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

impl std::fmt::Debug for GrpcExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The metadata's keys only: its values are often credentials.
        let keys: Vec<&str> = self
            .metadata
            .keys()
            .map(|key| match key {
                tonic::metadata::KeyRef::Ascii(key) => key.as_str(),
                tonic::metadata::KeyRef::Binary(key) => key.as_str(),
            })
            .collect();
        f.debug_struct("GrpcExporter").field("metadata", &keys).finish_non_exhaustive()
    }
}

impl GrpcExporter {
    pub(crate) fn new(settings: &Settings) -> Result<GrpcExporter, Error> {
        let invalid = |reason: String| Error::InvalidEndpoint { endpoint: settings.url.clone(), reason };
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Error::Runtime)?;
        let endpoint = Endpoint::from_shared(settings.url.clone())
            .map_err(|error| invalid(error.to_string()))?
            .connect_timeout(settings.timeout);
        #[cfg(feature = "tls")]
        let endpoint = if settings.url.starts_with("https://") {
            let tls = tonic::transport::ClientTlsConfig::new();
            // The roots given, else the webpki roots: as over HTTP.
            let tls = match &settings.roots {
                Some(roots) => tls.ca_certificate(tonic::transport::Certificate::from_pem(roots.pem())),
                None => tls.with_webpki_roots(),
            };
            endpoint.tls_config(tls).map_err(|error| invalid(error.to_string()))?
        } else {
            endpoint
        };
        // The channel connects on first use (and again after a failure), inside the runtime.
        let channel = {
            let _context = runtime.enter();
            endpoint.connect_lazy()
        };
        // A server answers a gzip request in gzip (grpc-go does): accept it whatever we send.
        let mut client = Grpc::new(channel).accept_compressed(CompressionEncoding::Gzip);
        if settings.compression == Compression::Gzip {
            client = client.send_compressed(CompressionEncoding::Gzip);
        }
        let mut metadata = MetadataMap::new();
        for (name, value) in &settings.headers {
            let header =
                || Error::InvalidHeader { name: name.to_string(), reason: "not valid gRPC metadata".into() };
            let key = MetadataKey::from_bytes(name.as_str().as_bytes()).map_err(|_| header())?;
            let mut value = MetadataValue::try_from(value.as_bytes()).map_err(|_| header())?;
            value.set_sensitive(true);
            metadata.insert(key, value);
        }
        Ok(GrpcExporter { runtime: Arc::new(runtime), client, metadata })
    }

    /// One try: exports `body`, an encoded `ExportTraceServiceRequest`,
    /// waiting at most `timeout`.
    pub(crate) fn send(&mut self, body: &[u8], timeout: Duration) -> Attempt {
        // tonic takes the body by value: a copy, per try.
        let mut call = tonic::Request::new(Bytes::copy_from_slice(body));
        *call.metadata_mut() = self.metadata.clone();
        call.extensions_mut().insert(GrpcMethod::new(SERVICE, METHOD));
        call.set_timeout(timeout);
        let client = &mut self.client;
        let start = std::time::Instant::now();
        let export = async {
            // A channel that cannot get ready says why in its error's sources, kept.
            client.ready().await.map_err(|error| tonic::Status::from_error(error.into()))?;
            client.unary(call, PathAndQuery::from_static(PATH), Encoded).await
        };
        let result = self.runtime.block_on(async { tokio::time::timeout(timeout, export).await });
        let status = match result {
            Err(_elapsed) => return Attempt::TimedOut(format!("no answer in time ({timeout:?})")),
            Ok(Ok(response)) => {
                let response: ExportTraceServiceResponse = response.into_inner();
                let partial = response.partial_success.unwrap_or_default();
                let rejected = partial.rejected_spans.max(0) as u64;
                return Attempt::Delivered { rejected, message: partial.error_message };
            }
            Ok(Err(status)) => status,
        };
        let error = format!("gRPC {:?}: {}", status.code(), status.message());
        if refused(&status) {
            // Down: nothing to wait for within one report; the next report tries again.
            return Attempt::Unreachable(error);
        }
        if let Some(tls) = tls_failure(&status) {
            // A certificate refused is refused again: not retried.
            return Attempt::Failed(format!("gRPC {:?}: TLS: {tls}", status.code()));
        }
        if start.elapsed() >= timeout {
            // Cancelled by the deadline given to tonic: the time is up.
            return Attempt::TimedOut(format!("{error} ({timeout:?})"));
        }
        match status.code() {
            // The codes the OTLP spec lists as retryable.
            Code::Cancelled
            | Code::DeadlineExceeded
            | Code::ResourceExhausted
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unavailable
            | Code::DataLoss => Attempt::Retry { error, after: None },
            _ => Attempt::Failed(error),
        }
    }
}

/// Sends request bodies already encoded, and decodes the answer with prost.
#[derive(Debug, Clone, Copy, Default)]
struct Encoded;

impl Codec for Encoded {
    type Encode = Bytes;
    type Decode = ExportTraceServiceResponse;
    type Encoder = Encoded;
    type Decoder = Encoded;

    fn encoder(&mut self) -> Encoded {
        Encoded
    }

    fn decoder(&mut self) -> Encoded {
        Encoded
    }
}

impl Encoder for Encoded {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, body: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&body);
        Ok(())
    }
}

impl Decoder for Encoded {
    type Item = ExportTraceServiceResponse;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut DecodeBuf<'_>,
    ) -> Result<Option<ExportTraceServiceResponse>, tonic::Status> {
        ExportTraceServiceResponse::decode(src)
            .map(Some)
            .map_err(|error| tonic::Status::internal(format!("undecodable answer: {error}")))
    }
}

/// The errors under `status`, the outermost first.
fn sources(status: &tonic::Status) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(status.source(), |&error| error.source())
}

/// Whether the connection was refused, somewhere down the error's sources.
fn refused(status: &tonic::Status) -> bool {
    sources(status).any(|error| {
        error.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
    })
}

/// The TLS error under `status`, if the handshake failed: rustls reports a
/// refused certificate as an `InvalidData` I/O error around its own.
fn tls_failure(status: &tonic::Status) -> Option<String> {
    sources(status).find_map(|error| {
        let io = error.downcast_ref::<io::Error>()?;
        (io.kind() == io::ErrorKind::InvalidData).then(|| io.to_string())
    })
}
