//! OTLP/gRPC: `TraceService/Export` through tonic, on a current-thread
//! tokio runtime of the reporter's own, driven from minitrace's collector
//! thread, which calls `report` synchronously.

use std::error::Error as _;
use std::io;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use crate::config::{Compression, Error, Settings};
use crate::retry::Attempt;

pub(crate) struct GrpcExporter {
    runtime: tokio::runtime::Runtime,
    client: TraceServiceClient<Channel>,
    metadata: MetadataMap,
}

impl std::fmt::Debug for GrpcExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcExporter").finish_non_exhaustive()
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
            let tls = tonic::transport::ClientTlsConfig::new().with_webpki_roots();
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
        let mut client = TraceServiceClient::new(channel).accept_compressed(CompressionEncoding::Gzip);
        if settings.compression == Compression::Gzip {
            client = client.send_compressed(CompressionEncoding::Gzip);
        }
        let mut metadata = MetadataMap::new();
        for (name, value) in &settings.headers {
            let header =
                || Error::InvalidHeader { name: name.to_string(), reason: "not valid gRPC metadata".into() };
            let key = MetadataKey::from_bytes(name.as_str().as_bytes()).map_err(|_| header())?;
            let value = MetadataValue::try_from(value.as_bytes()).map_err(|_| header())?;
            metadata.insert(key, value);
        }
        Ok(GrpcExporter { runtime, client, metadata })
    }

    /// One try: exports `request`, waiting at most `timeout`.
    pub(crate) fn send(&mut self, request: &ExportTraceServiceRequest, timeout: Duration) -> Attempt {
        let mut call = tonic::Request::new(request.clone());
        *call.metadata_mut() = self.metadata.clone();
        call.set_timeout(timeout);
        let client = &mut self.client;
        let result =
            self.runtime.block_on(async { tokio::time::timeout(timeout, client.export(call)).await });
        let status = match result {
            Err(_elapsed) => return Attempt::Failed(format!("timed out after {timeout:?}")),
            Ok(Ok(response)) => {
                let partial = response.into_inner().partial_success.unwrap_or_default();
                let rejected = partial.rejected_spans.max(0) as u64;
                return Attempt::Delivered { rejected, message: partial.error_message };
            }
            Ok(Err(status)) => status,
        };
        let error = format!("gRPC {:?}: {}", status.code(), status.message());
        if refused(&status) {
            // Down: nothing to wait for within one report; the next report tries again.
            return Attempt::Failed(error);
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

/// Whether the connection was refused, somewhere down the error's sources.
fn refused(status: &tonic::Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if error.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused) {
            return true;
        }
        source = error.source();
    }
    false
}
