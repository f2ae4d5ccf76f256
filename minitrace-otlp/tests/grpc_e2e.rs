//! 1 000 traces of 10 spans, then one trace of 20 000 spans, through
//! minitrace and OTLP/gRPC (gzip) into a real Jaeger v2: every one must
//! arrive, right in every detail.
#![cfg(feature = "grpc")]

mod common;

use minitrace::collector::Config;
use minitrace_otlp::{Compression, OtlpReporter, Protocol};

#[test]
fn thousand_traces_and_a_large_one_over_otlp_grpc_all_arrive() {
    if !common::jaeger_available("thousand_traces_and_a_large_one_over_otlp_grpc_all_arrive") {
        return;
    }
    let service = common::unique_service("minitrace-otlp-grpc");
    let reporter = OtlpReporter::builder()
        .env(|_| None)
        .protocol(Protocol::Grpc)
        .endpoint(common::OTLP_GRPC)
        .service_name(service.clone())
        .compression(Compression::Gzip)
        .build()
        .unwrap();
    let stats = reporter.stats();
    minitrace::set_reporter(reporter, Config::default().wait_when_queue_full(true));

    let traces: Vec<_> = (0..1000).map(common::traced_request).collect();
    minitrace::flush();
    let sent = stats.get();
    println!("sent over OTLP/gRPC: {sent:?}");
    common::assert_delivered(sent, &traces, &service);

    let trace_id = common::big_trace();
    minitrace::flush();
    let sent = stats.get();
    assert_eq!(sent.spans_sent, (traces.len() * common::SPANS_PER_REQUEST + common::BIG_TRACE_SPANS) as u64);
    assert_eq!(sent.spans_failed, 0, "{sent:?}");
    common::assert_big_trace_arrived(trace_id);
}
