//! 100 traces of 10 spans through minitrace and OTLP/HTTP with JSON bodies
//! into a real Jaeger v2: Jaeger's OTLP/JSON decoder takes what
//! opentelemetry-proto's serde derives write, right in every detail.
#![cfg(feature = "http-json")]

mod common;

use minitrace_otlp::Protocol;

#[test]
fn traces_over_otlp_http_json_all_arrive() {
    common::deliver("traces_over_otlp_http_json_all_arrive", 100, |builder| {
        builder.protocol(Protocol::HttpJson)
    });
}
