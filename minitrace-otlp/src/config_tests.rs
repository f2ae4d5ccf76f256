use std::collections::HashMap;

use opentelemetry_proto::tonic::common::v1::any_value::Value;

use super::*;

/// A builder that sees only `vars` as its environment.
fn with_env(vars: &[(&str, &str)]) -> OtlpReporterBuilder {
    let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    OtlpReporterBuilder::default().env(move |name| vars.get(name).cloned())
}

fn resource(settings: &Settings) -> HashMap<String, String> {
    let attributes = &settings.encoder.resource.attributes;
    attributes
        .iter()
        .map(|kv| match &kv.value.as_ref().unwrap().value {
            Some(Value::StringValue(value)) => (kv.key.clone(), value.clone()),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn defaults_without_environment() {
    let settings = with_env(&[]).settings().unwrap();
    assert_eq!(settings.url, "http://localhost:4318/v1/traces");
    assert_eq!(settings.protocol, Protocol::HttpProtobuf);
    assert_eq!(settings.timeout, DEFAULT_TIMEOUT);
    assert_eq!(settings.compression, Compression::None);
    assert!(settings.headers.is_empty());
    let resource = resource(&settings);
    assert!(resource["service.name"].starts_with("unknown_service:"), "{resource:?}");
    assert_eq!(resource["telemetry.sdk.name"], "minitrace");
    assert_eq!(resource["telemetry.sdk.language"], "rust");
    assert_eq!(resource["telemetry.sdk.version"], env!("CARGO_PKG_VERSION"));
    assert!(resource.contains_key("host.name"));
    assert!(!resource.contains_key("service.version"));
    assert_eq!(settings.encoder.scope.name, "minitrace");
}

#[test]
fn environment_is_read_with_traces_variables_first() {
    let settings = with_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=general,x-team=a%20b"),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", " api-key = tr%3Dces "),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip"),
        ("OTEL_SERVICE_NAME", "from-env"),
        ("OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored,region=eu%2Cwest,team=core"),
    ])
    .settings()
    .unwrap();
    assert_eq!(settings.url, "http://collector:4318/v1/traces");
    // The traces variable replaces the general one whole.
    assert_eq!(settings.headers.len(), 1);
    assert_eq!(settings.headers[0].0, "api-key");
    assert_eq!(settings.headers[0].1, "tr=ces");
    assert_eq!(settings.timeout, Duration::from_millis(2500));
    assert_eq!(settings.compression, Compression::Gzip);
    let resource = resource(&settings);
    assert_eq!(resource["service.name"], "from-env");
    assert_eq!(resource["region"], "eu,west");
    assert_eq!(resource["team"], "core");
}

#[test]
fn a_traces_endpoint_is_used_as_is() {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/custom"),
    ];
    assert_eq!(with_env(&env).settings().unwrap().url, "http://traces:4318/custom");
    let builder = with_env(&env).traces_endpoint("http://code:1/x");
    assert_eq!(builder.settings().unwrap().url, "http://code:1/x");
}

#[test]
fn the_builder_wins_over_the_environment() {
    let settings = with_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=env,x-env=1"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "100"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ("OTEL_SERVICE_NAME", "env"),
        ("OTEL_RESOURCE_ATTRIBUTES", "team=env"),
    ])
    .endpoint("http://127.0.0.1:4318")
    .header("Authorization", "code")
    .timeout(Duration::from_secs(3))
    .compression(Compression::None)
    .service_name("code")
    .service_version("1.2.3")
    .resource_attribute("team", "code")
    .settings()
    .unwrap();
    assert_eq!(settings.url, "http://127.0.0.1:4318/v1/traces");
    let headers: Vec<(String, String)> =
        settings.headers.iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string())).collect();
    assert_eq!(headers, [("x-env".into(), "1".into()), ("authorization".into(), "code".into())]);
    assert_eq!(settings.timeout, Duration::from_secs(3));
    assert_eq!(settings.compression, Compression::None);
    let resource = resource(&settings);
    assert_eq!(resource["service.name"], "code");
    assert_eq!(resource["service.version"], "1.2.3");
    assert_eq!(resource["team"], "code");
}

#[test]
fn malformed_endpoints_are_errors() {
    for endpoint in ["not a url", "127.0.0.1:4318", "ftp://host:21", "http://", "http://[::1", ""] {
        match with_env(&[]).endpoint(endpoint).settings() {
            Err(Error::InvalidEndpoint { endpoint: got, .. }) => assert_eq!(got, endpoint),
            other => panic!("{endpoint:?}: {other:?}"),
        }
    }
    let error = with_env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "localhost")]).settings().unwrap_err();
    assert!(matches!(error, Error::InvalidEndpoint { .. }), "{error}");
}

#[test]
fn malformed_settings_are_errors_naming_them() {
    let cases = [
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "ten"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"),
        ("OTEL_RESOURCE_ATTRIBUTES", "=value"),
    ];
    for (variable, value) in cases {
        match with_env(&[(variable, value)]).settings() {
            Err(Error::InvalidEnv { variable: got, .. }) => assert_eq!(got, variable),
            other => panic!("{variable}={value}: {other:?}"),
        }
    }
    let error = with_env(&[]).header("bad header", "x").settings().unwrap_err();
    assert!(matches!(error, Error::InvalidHeader { .. }), "{error}");
    let error = with_env(&[]).header("x-ok", "line\nbreak").settings().unwrap_err();
    assert!(matches!(error, Error::InvalidHeader { .. }), "{error}");
    let error = with_env(&[]).timeout(Duration::ZERO).settings().unwrap_err();
    assert!(matches!(error, Error::ZeroTimeout), "{error}");
}

#[test]
fn a_protocol_or_scheme_whose_feature_is_off_is_an_error() {
    let grpc = with_env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).settings();
    assert_eq!(grpc.is_ok(), cfg!(feature = "grpc"), "{grpc:?}");
    if let Ok(settings) = grpc {
        assert_eq!(settings.url, "http://localhost:4317");
    }
    let json = with_env(&[]).protocol(Protocol::HttpJson).settings();
    assert_eq!(json.is_ok(), cfg!(feature = "http-json"), "{json:?}");
    let https = with_env(&[]).endpoint("https://otlp.example.com").settings();
    assert_eq!(https.is_ok(), cfg!(feature = "tls"), "{https:?}");
    if let Err(error) = https {
        assert!(matches!(error, Error::FeatureNotEnabled { feature: "tls", .. }), "{error}");
    }
}

#[test]
fn header_values_never_show_in_debug_output() {
    let secret = "Bearer s3cr3t-token";
    let reporter = with_env(&[("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=env-s3cr3t")])
        .header("authorization", secret)
        .build()
        .unwrap();
    let shown = format!("{reporter:?}");
    assert!(shown.contains("authorization"), "{shown}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
}
