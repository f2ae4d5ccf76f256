//! 100 traces of 10 spans through minitrace and OTLP/HTTP with JSON bodies
//! into a real Jaeger v2: Jaeger's OTLP/JSON decoder takes what
//! opentelemetry-proto's serde derives write, right in every detail.
#![cfg(feature = "http-json")]

mod common;

use minitrace::collector::Config;
use minitrace_otlp::{OtlpReporter, Protocol};

#[test]
fn traces_over_otlp_http_json_all_arrive() {
    if !common::jaeger_available("traces_over_otlp_http_json_all_arrive") {
        return;
    }
    let service = common::unique_service("minitrace-otlp-json");
    let reporter = OtlpReporter::builder()
        .env(|_| None)
        .protocol(Protocol::HttpJson)
        .endpoint(common::OTLP_HTTP)
        .service_name(service.clone())
        .build()
        .unwrap();
    let stats = reporter.stats();
    minitrace::set_reporter(reporter, Config::default().wait_when_queue_full(true));

    let traces: Vec<_> = (0..100).map(common::traced_request).collect();
    minitrace::flush();
    let sent = stats.get();
    println!("sent over OTLP/HTTP JSON: {sent:?}");
    common::assert_delivered(sent, &traces, &service);
}
