//! 1 000 traces of 10 spans through minitrace and a UDP agent into a real
//! Jaeger: every one must arrive, right in every detail.

mod common;

use std::time::Duration;

use minitrace::collector::Config;
use minitrace_jaeger::JaegerReporter;

#[test]
fn thousand_traces_over_udp_all_arrive() {
    let Some(jaeger) = common::jaeger("thousand_traces_over_udp_all_arrive") else {
        return;
    };
    let service = common::unique_service("minitrace-jaeger-udp");
    let reporter = JaegerReporter::new(jaeger.agent, service.clone()).unwrap();
    let stats = reporter.stats();
    minitrace::set_reporter(reporter, Config::default());

    let mut traces = Vec::new();
    for i in 0..1000 {
        traces.push(common::traced_request(i));
        // Paced, as UDP needs: the agent's socket buffer holds only a few
        // datagrams, so each flush sends one datagram of 20 traces.
        if i % 20 == 19 {
            minitrace::flush();
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    minitrace::flush();
    let sent = stats.get();
    println!("sent over UDP: {sent:?}");
    assert_eq!(sent.spans_sent, 10_000);
    assert_eq!(sent.spans_failed + sent.spans_too_large + sent.spans_truncated, 0);

    let found = jaeger.wait_for(&service, 1000, 10_000, Duration::from_secs(60));
    common::check_all(&jaeger, &found, &traces, &service);
    assert_eq!(found.len(), 1000);
}
