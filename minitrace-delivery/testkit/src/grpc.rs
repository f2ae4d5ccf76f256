//! An OTLP/gRPC server (tonic's, on a tokio runtime of its own) that keeps
//! every export request it is sent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Server, ServerTlsConfig};

use crate::tls::Identity;

type Requests = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

struct Collector {
    requests: Requests,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.requests.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

/// An OTLP/gRPC `TraceService` on 127.0.0.1, over TLS if given an
/// identity; it stops when dropped.
pub struct GrpcServer {
    addr: SocketAddr,
    tls: bool,
    requests: Requests,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl std::fmt::Debug for GrpcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcServer").field("addr", &self.addr).field("tls", &self.tls).finish()
    }
}

impl GrpcServer {
    /// Starts a server, presenting `tls`'s certificate if given.
    pub fn start(tls: Option<&Identity>) -> GrpcServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Requests::default();
        let collector = Collector { requests: requests.clone() };
        let identity = tls.map(|identity| {
            tonic::transport::Identity::from_pem(identity.certificate_pem(), identity.key_pem())
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let mut server = Server::builder();
                if let Some(identity) = identity {
                    server = server.tls_config(ServerTlsConfig::new().identity(identity)).unwrap();
                }
                let service = TraceServiceServer::new(collector)
                    .accept_compressed(CompressionEncoding::Gzip)
                    .send_compressed(CompressionEncoding::Gzip);
                let _ = server
                    .add_service(service)
                    .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                        let _ = stopped.await;
                    })
                    .await;
            });
            // Connections still open are not waited for.
            runtime.shutdown_background();
        });
        GrpcServer { addr, tls: tls.is_some(), requests, stop: Some(stop) }
    }

    /// The URL, e.g. `https://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Every export request received so far.
    pub fn requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// The spans in them.
    pub fn spans(&self) -> usize {
        let requests = self.requests.lock().unwrap();
        requests
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum()
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
