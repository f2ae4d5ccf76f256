//! HTTPS to a collector on 127.0.0.1 with certificates made at test time:
//! delivered when the collector's CA is trusted (and the batch decoded on
//! the other side), refused and counted when its certificate is
//! self-signed or names another host.
#![cfg(feature = "tls")]

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{Identity, Server, TestCa};
use minitrace_jaeger::JaegerReporter;
use thrift::protocol::{TBinaryInputProtocol, TInputProtocol, TType};

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

/// The number of spans in a Thrift Binary `Batch` (its field 2, a list).
fn spans_in_batch(body: &[u8]) -> i32 {
    let mut input = TBinaryInputProtocol::new(body, true);
    input.read_struct_begin().unwrap();
    let mut spans = None;
    loop {
        let field = input.read_field_begin().unwrap();
        match (field.field_type, field.id) {
            (TType::Stop, _) => break,
            (TType::List, Some(2)) => {
                let list = input.read_list_begin().unwrap();
                for _ in 0..list.size {
                    input.skip(list.element_type).unwrap();
                }
                input.read_list_end().unwrap();
                spans = Some(list.size);
            }
            (kind, _) => input.skip(kind).unwrap(),
        }
        input.read_field_end().unwrap();
    }
    spans.expect("a batch with spans")
}

#[test]
fn a_collector_whose_ca_is_trusted_gets_the_spans() {
    let ca = TestCa::new();
    let server = Server::start_tls(Vec::new(), &ca.issue(&["127.0.0.1"]));
    let mut reporter = JaegerReporter::http_endpoint(&server.url(), "over-tls")
        .unwrap()
        .with_tls_root_certificate_pem(ca.pem().as_bytes())
        .unwrap();
    let handle = reporter.stats();
    reporter.report(&records(6));
    reporter.wait_for_delivery();
    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_failed, got.requests), (6, 0, 1), "{got:?}");
    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].line, "POST /api/traces HTTP/1.1");
    assert_eq!(spans_in_batch(&received[0].body), 6);
}

#[test]
fn an_untrusted_or_misnamed_certificate_is_refused_and_counted() {
    let ca = TestCa::new();
    let cases = [
        // Self-signed: trusted by no one, the Mozilla roots or the CA given.
        ("self-signed", Identity::self_signed(&["127.0.0.1"]), None),
        ("self-signed, another CA trusted", Identity::self_signed(&["127.0.0.1"]), Some(ca.pem())),
        // From the trusted CA, but for another host than the one dialled.
        ("another host", ca.issue(&["example.test"]), Some(ca.pem())),
    ];
    for (case, identity, trusted) in cases {
        let server = Server::start_tls(Vec::new(), &identity);
        let mut reporter = JaegerReporter::http_endpoint(&server.url(), "over-tls").unwrap();
        if let Some(pem) = trusted {
            reporter = reporter.with_tls_root_certificate_pem(pem.as_bytes()).unwrap();
        }
        let handle = reporter.stats();
        reporter.report(&records(3));
        reporter.wait_for_delivery();
        let got = handle.get();
        assert_eq!(
            (got.spans_failed, got.spans_sent, got.requests, got.retries),
            (3, 0, 1, 0),
            "{case}: {got:?}"
        );
        let error = handle.last_error().unwrap();
        assert!(error.contains("TLS") && error.contains("certificate"), "{case}: {error}");
        assert!(server.received().is_empty(), "{case}");
        assert_eq!(server.handshake_failures_reaching(1), 1, "{case}");
    }
}

#[test]
fn a_bad_root_certificate_is_an_error() {
    let reporter = JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "over-tls");
    let error = reporter.with_tls_root_certificate_pem(b"no PEM here").unwrap_err();
    assert!(error.to_string().contains("no certificate"), "{error}");
    let udp = JaegerReporter::new("127.0.0.1:6831".parse().unwrap(), "over-tls").unwrap();
    let error = udp.with_tls_root_certificate_pem(TestCa::new().pem().as_bytes()).unwrap_err();
    assert!(error.to_string().contains("UDP"), "{error}");
}
