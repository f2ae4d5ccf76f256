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
    common::assert_all_delivered(&jaeger, sent, &traces, &service);
}
