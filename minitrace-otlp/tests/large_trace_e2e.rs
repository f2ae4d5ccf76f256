//! One trace of 20 000 spans through minitrace and OTLP/HTTP (gzip) into a
//! real Jaeger v2: split into bounded requests, it arrives whole.

mod common;

use minitrace::collector::Config;
use minitrace_otlp::{Compression, OtlpReporter};

#[test]
fn a_20_000_span_trace_arrives_whole_over_otlp_http() {
    if !common::jaeger_available("a_20_000_span_trace_arrives_whole_over_otlp_http") {
        return;
    }
    let reporter = OtlpReporter::builder()
        .env(|_| None)
        .endpoint(common::OTLP_HTTP)
        .service_name(common::unique_service("minitrace-otlp-large"))
        .compression(Compression::Gzip)
        .build()
        .unwrap();
    let stats = reporter.stats();
    minitrace::set_reporter(reporter, Config::default().wait_when_queue_full(true));

    let trace_id = common::big_trace();
    minitrace::flush();
    assert!(stats.wait_for_delivery(std::time::Duration::from_secs(60)));
    let sent = stats.get();
    println!("sent: {sent:?}");
    assert_eq!(sent.spans_sent, common::BIG_TRACE_SPANS as u64, "{sent:?}");
    // Bounded requests: more than one was needed.
    let least = common::BIG_TRACE_SPANS.div_ceil(minitrace_otlp::DEFAULT_MAX_SPANS_PER_REQUEST) as u64;
    assert!(sent.requests >= least, "{sent:?}");
    common::assert_big_trace_arrived(trace_id);
}
