//! 1 000 traces of 10 spans through minitrace and OTLP/HTTP (protobuf)
//! into a real Jaeger v2: every one must arrive, right in every detail.

mod common;

use minitrace::collector::Config;
use minitrace_otlp::OtlpReporter;

#[test]
fn thousand_traces_over_otlp_http_all_arrive() {
    if !common::jaeger_available("thousand_traces_over_otlp_http_all_arrive") {
        return;
    }
    let service = common::unique_service("minitrace-otlp-http");
    let reporter = OtlpReporter::builder()
        .env(|_| None)
        .endpoint(common::OTLP_HTTP)
        .service_name(service.clone())
        .build()
        .unwrap();
    let stats = reporter.stats();
    // Waiting rather than dropping on a full queue: the test counts every span.
    minitrace::set_reporter(reporter, Config::default().wait_when_queue_full(true));

    let traces: Vec<_> = (0..1000).map(common::traced_request).collect();
    minitrace::flush();
    let sent = stats.get();
    println!("sent over OTLP/HTTP: {sent:?}");
    common::assert_delivered(sent, &traces, &service);
}
