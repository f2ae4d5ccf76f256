//! 1 000 traces of 10 spans through minitrace and OTLP/HTTP (protobuf)
//! into a real Jaeger v2: every one must arrive, right in every detail.

mod common;

#[test]
fn thousand_traces_over_otlp_http_all_arrive() {
    common::deliver("thousand_traces_over_otlp_http_all_arrive", 1000, |builder| builder);
}
