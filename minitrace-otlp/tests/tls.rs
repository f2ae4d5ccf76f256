//! HTTPS and gRPC over TLS to endpoints on 127.0.0.1 with certificates
//! made at test time: delivered when the endpoint's CA is trusted (and the
//! spans decoded on the other side), refused, not retried and counted when
//! its certificate is self-signed or names another host.
#![cfg(feature = "tls")]

use std::time::Duration;

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{Identity, Server, TestCa};
use minitrace_otlp::{Error, OtlpReporter, OtlpReporterBuilder};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

fn records(count: u64) -> Vec<SpanRecord> {
    (1..=count)
        .map(|i| SpanRecord {
            trace_id: TraceId(12),
            span_id: SpanId(i),
            name: "tls".into(),
            ..SpanRecord::default()
        })
        .collect()
}

fn builder(url: &str, trusted: Option<&str>) -> OtlpReporterBuilder {
    let builder = OtlpReporter::builder().env(|_| None).endpoint(url).timeout(Duration::from_secs(10));
    match trusted {
        Some(pem) => builder.tls_root_certificate_pem(pem),
        None => builder,
    }
}

/// The three ways a certificate is refused: self-signed (trusted by no
/// one: neither the webpki roots nor another CA), or from the trusted CA
/// but for another host than the one dialled.
fn refused_cases(ca: &TestCa) -> Vec<(&'static str, Identity, Option<&str>)> {
    vec![
        ("self-signed", Identity::self_signed(&["127.0.0.1"]), None),
        ("self-signed, another CA trusted", Identity::self_signed(&["127.0.0.1"]), Some(ca.pem())),
        ("another host", ca.issue(&["example.test"]), Some(ca.pem())),
    ]
}

#[test]
fn https_to_an_endpoint_whose_ca_is_trusted_delivers() {
    let ca = TestCa::new();
    let server = Server::start_tls(Vec::new(), &ca.issue(&["127.0.0.1", "localhost"]));
    let mut reporter = builder(&server.url(), Some(ca.pem())).build().unwrap();
    let handle = reporter.stats();
    reporter.report(&records(6));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_failed, got.requests), (6, 0, 1), "{got:?}");
    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].line, "POST /v1/traces HTTP/1.1");
    let request = ExportTraceServiceRequest::decode(received[0].body.as_slice()).unwrap();
    let spans: Vec<&[u8]> =
        request.resource_spans[0].scope_spans[0].spans.iter().map(|s| s.span_id.as_slice()).collect();
    assert_eq!(
        spans,
        (1..=6u64).map(u64::to_be_bytes).collect::<Vec<_>>().iter().map(|b| &b[..]).collect::<Vec<_>>()
    );
}

#[test]
fn https_with_an_untrusted_or_misnamed_certificate_is_refused_and_counted() {
    let ca = TestCa::new();
    for (case, identity, trusted) in refused_cases(&ca) {
        let server = Server::start_tls(Vec::new(), &identity);
        let mut reporter = builder(&server.url(), trusted).build().unwrap();
        let handle = reporter.stats();
        reporter.report(&records(3));
        reporter.wait_for_delivery();
        let got = handle.get();
        assert_eq!(
            (got.spans_failed, got.spans_sent, got.requests, got.retries),
            (3, 0, 1, 0),
            "{case}: {got:?}"
        );
        let error = got.last_error.unwrap();
        assert!(error.contains("TLS") && error.contains("certificate"), "{case}: {error}");
        assert!(server.received().is_empty(), "{case}");
        assert_eq!(server.handshake_failures_reaching(1), 1, "{case}");
    }
}

#[test]
fn a_bad_root_certificate_is_a_build_error() {
    let error = builder("https://127.0.0.1:4318", Some("no PEM here")).build().unwrap_err();
    assert!(
        matches!(&error, Error::InvalidCertificate { reason } if reason.contains("no certificate")),
        "{error}"
    );
}

#[cfg(feature = "grpc")]
mod grpc {
    use minitrace_delivery_testkit::GrpcServer;
    use minitrace_otlp::{Compression, Protocol};

    use super::*;

    #[test]
    fn grpc_to_an_endpoint_whose_ca_is_trusted_delivers() {
        let ca = TestCa::new();
        let server = GrpcServer::start(Some(&ca.issue(&["127.0.0.1"])));
        let mut reporter = builder(&server.url(), Some(ca.pem()))
            .protocol(Protocol::Grpc)
            .compression(Compression::Gzip)
            .build()
            .unwrap();
        let handle = reporter.stats();
        reporter.report(&records(5));
        reporter.wait_for_delivery();
        let got = handle.get();
        assert_eq!((got.spans_sent, got.spans_failed, got.requests), (5, 0, 1), "{got:?}");
        assert_eq!(server.spans(), 5);
        let requests = server.requests();
        let names: Vec<&str> =
            requests[0].resource_spans[0].scope_spans[0].spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["tls"; 5]);
    }

    #[test]
    fn grpc_with_an_untrusted_or_misnamed_certificate_is_refused_and_counted() {
        let ca = TestCa::new();
        for (case, identity, trusted) in refused_cases(&ca) {
            let server = GrpcServer::start(Some(&identity));
            let mut reporter = builder(&server.url(), trusted).protocol(Protocol::Grpc).build().unwrap();
            let handle = reporter.stats();
            reporter.report(&records(3));
            reporter.wait_for_delivery();
            let got = handle.get();
            // Refused once, not retried until the timeout.
            assert_eq!(
                (got.spans_failed, got.spans_sent, got.requests, got.retries),
                (3, 0, 1, 0),
                "{case}: {got:?}"
            );
            let error = got.last_error.unwrap();
            assert!(error.contains("TLS") && error.contains("certificate"), "{case}: {error}");
            assert_eq!(server.spans(), 0, "{case}");
        }
    }
}
