//! 1 000 traces of 10 spans through minitrace and the HTTP collector endpoint into a real
//! Jaeger: every one must arrive, right in every detail.

mod common;

use minitrace::collector::Config;
use minitrace_jaeger::JaegerReporter;

#[test]
fn thousand_traces_over_http_all_arrive() {
    let Some(jaeger) = common::jaeger("thousand_traces_over_http_all_arrive") else {
        return;
    };
    let service = common::unique_service("minitrace-jaeger-http");
    let reporter = JaegerReporter::http(jaeger.collector, service.clone());
    let stats = reporter.stats();
    minitrace::set_reporter(reporter, Config::default());

    let mut traces = Vec::new();
    // No pacing: HTTP has flow control.
    for i in 0..1000 {
        traces.push(common::traced_request(i));
    }
    minitrace::flush();
    // flush() returned: every request is answered, the counts are final.
    let sent = stats.get();
    println!("sent over HTTP: {sent:?}");
    common::assert_all_delivered(&jaeger, sent, &traces, &service);
}
