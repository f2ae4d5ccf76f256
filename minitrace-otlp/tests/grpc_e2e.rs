//! 1 000 traces of 10 spans, then one trace of 20 000 spans, through
//! minitrace and OTLP/gRPC (gzip) into a real Jaeger v2: every one must
//! arrive, right in every detail.
#![cfg(feature = "grpc")]

mod common;

use minitrace_otlp::{Compression, Protocol};

#[test]
fn thousand_traces_and_a_large_one_over_otlp_grpc_all_arrive() {
    let test = "thousand_traces_and_a_large_one_over_otlp_grpc_all_arrive";
    let Some((stats, traces)) = common::deliver(test, 1000, |builder| {
        builder.protocol(Protocol::Grpc).endpoint(common::OTLP_GRPC).compression(Compression::Gzip)
    }) else {
        return;
    };
    let trace_id = common::big_trace();
    minitrace::flush();
    assert!(stats.wait_for_delivery(std::time::Duration::from_secs(60)));
    let sent = stats.get();
    assert_eq!(sent.spans_sent, (traces.len() * common::SPANS_PER_REQUEST + common::BIG_TRACE_SPANS) as u64);
    assert_eq!(sent.spans_failed, 0, "{sent:?}");
    common::assert_big_trace_arrived(trace_id);
}
