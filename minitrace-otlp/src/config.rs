//! The builder: what the user sets, else the standard `OTEL_*` environment
//! variables, else the OTLP defaults; and the errors of bad settings.

use std::fmt;
use std::time::Duration;

use minitrace_delivery::{redact_url, Endpoint};
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use ureq::http::{HeaderName, HeaderValue};

use crate::encode::{key_value, Encoder};

/// How many spans one export request carries at most, by default.
///
/// ```
/// let reporter = minitrace_otlp::OtlpReporter::builder()
///     .max_spans_per_request(minitrace_otlp::DEFAULT_MAX_SPANS_PER_REQUEST / 2)
///     .build()
///     .unwrap();
/// ```
pub const DEFAULT_MAX_SPANS_PER_REQUEST: usize = 2048;
/// About how many bytes (uncompressed) one export request carries at most,
/// by default: well under the 4 MiB a gRPC server takes by default.
///
/// ```
/// let reporter = minitrace_otlp::OtlpReporter::builder()
///     .max_request_bytes(4 * minitrace_otlp::DEFAULT_MAX_REQUEST_BYTES)
///     .build()
///     .unwrap();
/// ```
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// The default bound on the time one report takes, retries included (the
/// OTLP exporters' default).
///
/// ```
/// assert_eq!(minitrace_otlp::DEFAULT_TIMEOUT.as_secs(), 10);
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default shortest time between two error messages on standard error.
///
/// ```
/// let reporter = minitrace_otlp::OtlpReporter::builder()
///     .error_interval(minitrace_otlp::DEFAULT_ERROR_INTERVAL * 6)
///     .build()
///     .unwrap();
/// ```
pub const DEFAULT_ERROR_INTERVAL: Duration = Duration::from_secs(10);

/// The OTLP transport.
///
/// ```
/// use minitrace_otlp::Protocol;
/// assert_eq!(Protocol::default(), Protocol::HttpProtobuf);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// `POST /v1/traces` with a protobuf body (`http/protobuf`), port 4318.
    #[default]
    HttpProtobuf,
    /// `POST /v1/traces` with a JSON body (`http/json`); needs the
    /// `http-json` feature.
    HttpJson,
    /// `TraceService/Export` over gRPC (`grpc`), port 4317; needs the
    /// `grpc` feature.
    Grpc,
}

/// How request bodies are compressed.
///
/// ```
/// use minitrace_otlp::Compression;
/// assert_eq!(Compression::default(), Compression::None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Sent as is.
    #[default]
    None,
    /// gzip (`Content-Encoding: gzip`, or gRPC's `grpc-encoding: gzip`).
    Gzip,
}

/// Why an [`OtlpReporter`](crate::OtlpReporter) could not be built.
///
/// No error shows a secret: never a header's value (from the builder or
/// `OTEL_EXPORTER_OTLP_HEADERS`), and an endpoint only with its user
/// information replaced by `***`.
///
/// ```
/// let error = minitrace_otlp::OtlpReporter::builder().endpoint("not a url").build().unwrap_err();
/// assert!(matches!(error, minitrace_otlp::Error::InvalidEndpoint { .. }));
/// println!("{error}");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The endpoint is not an `http://` or `https://` URL with a host, or
    /// holds user information (`user:password@`), which is refused:
    /// credentials go in a [header](OtlpReporterBuilder::header).
    InvalidEndpoint {
        /// The endpoint as given, with any user information replaced by `***`.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value that HTTP does not allow.
    InvalidHeader {
        /// The header's name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An `OTEL_*` environment variable whose value cannot be used.
    InvalidEnv {
        /// The variable.
        variable: String,
        /// Its value, as far as it can be shown: empty for
        /// `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, whose values are often
        /// credentials (the reason says which item is wrong, not what it
        /// holds).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A zero timeout, which would fail every request.
    ZeroTimeout,
    /// The setting needs a cargo feature of this crate that is off.
    FeatureNotEnabled {
        /// What needs it.
        what: String,
        /// The feature.
        feature: &'static str,
    },
    /// The gRPC transport's runtime could not be started.
    Runtime(std::io::Error),
    /// A root certificate given to
    /// `OtlpReporterBuilder::tls_root_certificate_pem` (with the `tls`
    /// feature) cannot be used.
    InvalidCertificate {
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidEndpoint { endpoint, reason } => {
                write!(f, "invalid OTLP endpoint {endpoint:?}: {reason}")
            }
            Error::InvalidHeader { name, reason } => write!(f, "invalid header {name:?}: {reason}"),
            Error::InvalidEnv { variable, value, reason } if value.is_empty() => {
                write!(f, "invalid {variable} (its value not shown: it may hold credentials): {reason}")
            }
            Error::InvalidEnv { variable, value, reason } => {
                write!(f, "invalid {variable}={value:?}: {reason}")
            }
            Error::ZeroTimeout => write!(f, "the timeout must be more than zero"),
            Error::FeatureNotEnabled { what, feature } => {
                write!(f, "{what} needs minitrace-otlp's `{feature}` feature")
            }
            Error::Runtime(error) => write!(f, "cannot start the gRPC runtime: {error}"),
            Error::InvalidCertificate { reason } => write!(f, "invalid root certificate: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Runtime(error) => Some(error),
            _ => None,
        }
    }
}

/// Reads an environment variable.
type EnvLookup = Box<dyn Fn(&str) -> Option<String> + Send>;

/// Builds an [`OtlpReporter`](crate::OtlpReporter); see
/// [`OtlpReporter::builder`](crate::OtlpReporter::builder).
///
/// What is not set here is read from the standard environment variables
/// (see the [crate docs](crate#configuration)), else the OTLP defaults.
///
/// ```
/// use std::time::Duration;
///
/// use minitrace_otlp::{Compression, OtlpReporter};
///
/// let reporter = OtlpReporter::builder()
///     .endpoint("http://127.0.0.1:4318")
///     .service_name("checkout")
///     .header("authorization", "Bearer 1234")
///     .timeout(Duration::from_secs(5))
///     .compression(Compression::Gzip)
///     .resource_attribute("deployment.environment.name", "staging")
///     .build()
///     .unwrap();
/// ```
pub struct OtlpReporterBuilder {
    endpoint: Option<String>,
    traces_endpoint: Option<String>,
    protocol: Option<Protocol>,
    headers: Vec<(String, String)>,
    timeout: Option<Duration>,
    compression: Option<Compression>,
    service_name: Option<String>,
    service_version: Option<String>,
    resource_attributes: Vec<(String, String)>,
    max_spans: usize,
    max_bytes: usize,
    error_interval: Duration,
    env: EnvLookup,
    /// PEM texts of the root certificates to trust instead of the webpki roots.
    #[cfg(feature = "tls")]
    roots: Vec<Vec<u8>>,
}

impl fmt::Debug for OtlpReporterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |url: &Option<String>| url.as_deref().map(redact_url);
        let mut debug = f.debug_struct("OtlpReporterBuilder");
        debug
            .field("endpoint", &redacted(&self.endpoint))
            .field("traces_endpoint", &redacted(&self.traces_endpoint))
            .field("protocol", &self.protocol)
            // Header values are often credentials: names only.
            .field("headers", &self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("compression", &self.compression)
            .field("service_name", &self.service_name)
            .field("service_version", &self.service_version)
            .field("resource_attributes", &self.resource_attributes)
            .field("max_spans_per_request", &self.max_spans)
            .field("max_request_bytes", &self.max_bytes)
            .field("error_interval", &self.error_interval);
        #[cfg(feature = "tls")]
        debug.field("tls_root_certificates", &self.roots.len());
        debug.finish_non_exhaustive()
    }
}

/// The settings a reporter is built from, resolved.
pub(crate) struct Settings {
    pub(crate) protocol: Protocol,
    pub(crate) url: String,
    /// Values marked sensitive.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    pub(crate) timeout: Duration,
    pub(crate) compression: Compression,
    pub(crate) encoder: Encoder,
    pub(crate) error_interval: Duration,
    #[cfg(feature = "tls")]
    pub(crate) roots: Option<minitrace_delivery::RootCertificates>,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("protocol", &self.protocol)
            .field("url", &self.url)
            // Names only: values are often credentials.
            .field("headers", &self.headers.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("compression", &self.compression)
            .finish_non_exhaustive()
    }
}

impl Default for OtlpReporterBuilder {
    fn default() -> OtlpReporterBuilder {
        OtlpReporterBuilder {
            endpoint: None,
            traces_endpoint: None,
            protocol: None,
            headers: Vec::new(),
            timeout: None,
            compression: None,
            service_name: None,
            service_version: None,
            resource_attributes: Vec::new(),
            max_spans: DEFAULT_MAX_SPANS_PER_REQUEST,
            max_bytes: DEFAULT_MAX_REQUEST_BYTES,
            error_interval: DEFAULT_ERROR_INTERVAL,
            env: Box::new(|name| std::env::var(name).ok()),
            #[cfg(feature = "tls")]
            roots: Vec::new(),
        }
    }
}

impl OtlpReporterBuilder {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318`: over HTTP,
    /// spans go to `{endpoint}/v1/traces`; over gRPC, to the endpoint itself.
    /// Default: `OTEL_EXPORTER_OTLP_ENDPOINT`, else `http://localhost:4318`
    /// (`http://localhost:4317` for gRPC).
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// The full URL spans go to, used as is, e.g.
    /// `https://otlp.example.com/api/v1/traces`; takes precedence over
    /// [`endpoint`](Self::endpoint). Default: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
    pub fn traces_endpoint(mut self, url: impl Into<String>) -> Self {
        self.traces_endpoint = Some(url.into());
        self
    }

    /// The transport. Default: `OTEL_EXPORTER_OTLP_PROTOCOL`, else
    /// [`Protocol::HttpProtobuf`].
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = Some(protocol);
        self
    }

    /// Adds a header to every request (a gRPC metadata entry over gRPC),
    /// e.g. a vendor's API key; replaces one of the same name from the
    /// environment. Its value is never shown: not by `Debug`, not in an
    /// error, a log line or [`last_error`](crate::ReporterStats::last_error),
    /// even when the endpoint's answer quotes it.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The longest one report may take, every request and retry included,
    /// so that minitrace's collector thread is never held longer. Default:
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` (ms), else [`DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Request compression. Default: `OTEL_EXPORTER_OTLP_COMPRESSION`, else none.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// The resource's `service.name`. Default: `OTEL_SERVICE_NAME`, else
    /// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else
    /// `unknown_service:{executable}`.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// The resource's `service.version`; none by default.
    pub fn service_version(mut self, version: impl Into<String>) -> Self {
        self.service_version = Some(version.into());
        self
    }

    /// Adds a resource attribute, replacing one of the same key from the
    /// environment or the defaults.
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.resource_attributes.push((key.into(), value.into()));
        self
    }

    /// The most spans one request carries; larger reports are split.
    /// Default: [`DEFAULT_MAX_SPANS_PER_REQUEST`]; at least 1.
    pub fn max_spans_per_request(mut self, spans: usize) -> Self {
        self.max_spans = spans.max(1);
        self
    }

    /// About the most bytes (uncompressed) one request carries; larger
    /// reports are split, and a span larger than that goes alone. Default:
    /// [`DEFAULT_MAX_REQUEST_BYTES`].
    pub fn max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The shortest time between two error messages on standard error.
    /// Default: [`DEFAULT_ERROR_INTERVAL`].
    pub fn error_interval(mut self, interval: Duration) -> Self {
        self.error_interval = interval;
        self
    }

    /// Trusts the root certificates of `pem` (one or more PEM `CERTIFICATE`
    /// blocks, e.g. a private CA's) for an `https://` endpoint, over HTTP
    /// and gRPC, instead of the webpki roots (Mozilla's), which are trusted
    /// when none is given. May be called more than once; a PEM text with no
    /// certificate, or one a root store refuses, makes
    /// [`build`](Self::build) fail with [`Error::InvalidCertificate`].
    ///
    /// ```no_run
    /// let ca = std::fs::read("/etc/ssl/private-ca.pem").unwrap();
    /// let reporter = minitrace_otlp::OtlpReporter::builder()
    ///     .endpoint("https://otel-collector.internal:4318")
    ///     .tls_root_certificate_pem(ca)
    ///     .build()
    ///     .unwrap();
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_root_certificate_pem(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.roots.push(pem.as_ref().to_vec());
        self
    }

    /// Reads the `OTEL_*` variables through `lookup` instead of the
    /// process environment: for configuration from elsewhere, for tests
    /// that must not change the environment of the whole process, or
    /// `|_| None` to ignore it.
    ///
    /// ```
    /// use minitrace_otlp::OtlpReporter;
    ///
    /// let reporter = OtlpReporter::builder()
    ///     .env(|name| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://collector:4318".to_string()))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(reporter.url(), "http://collector:4318/v1/traces");
    /// ```
    pub fn env(mut self, lookup: impl Fn(&str) -> Option<String> + Send + 'static) -> Self {
        self.env = Box::new(lookup);
        self
    }

    /// Builds the reporter. Fails on a malformed endpoint, header or
    /// `OTEL_*` value, or a protocol or `https://` whose feature is off;
    /// never panics.
    pub fn build(self) -> Result<crate::OtlpReporter, Error> {
        crate::OtlpReporter::from_settings(self.settings()?)
    }

    fn var(&self, name: &str) -> Option<(String, String)> {
        (self.env)(name)
            .map(|value| (name.to_owned(), value.trim().to_owned()))
            .filter(|(_, v)| !v.is_empty())
    }

    /// The signal-specific variable if set, else the general one.
    fn var_either(&self, suffix: &str) -> Option<(String, String)> {
        self.var(&format!("OTEL_EXPORTER_OTLP_TRACES_{suffix}"))
            .or_else(|| self.var(&format!("OTEL_EXPORTER_OTLP_{suffix}")))
    }

    pub(crate) fn settings(self) -> Result<Settings, Error> {
        let protocol = match (self.protocol, self.var_either("PROTOCOL")) {
            (Some(protocol), _) => protocol,
            (None, Some((variable, value))) => match value.as_str() {
                "http/protobuf" => Protocol::HttpProtobuf,
                "http/json" => Protocol::HttpJson,
                "grpc" => Protocol::Grpc,
                _ => return Err(invalid_env(variable, value, "not http/protobuf, http/json or grpc")),
            },
            (None, None) => Protocol::HttpProtobuf,
        };
        match protocol {
            Protocol::Grpc if !cfg!(feature = "grpc") => return Err(not_enabled("OTLP/gRPC", "grpc")),
            Protocol::HttpJson if !cfg!(feature = "http-json") => {
                return Err(not_enabled("OTLP/HTTP JSON", "http-json"))
            }
            _ => {}
        }
        let url = self.url(protocol)?;
        let timeout = match (self.timeout, self.var_either("TIMEOUT")) {
            (Some(timeout), _) => timeout,
            (None, Some((variable, value))) => match value.parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms),
                Err(error) => {
                    return Err(invalid_env(variable, value, &format!("not milliseconds: {error}")))
                }
            },
            (None, None) => DEFAULT_TIMEOUT,
        };
        if timeout.is_zero() {
            return Err(Error::ZeroTimeout);
        }
        let compression = match (self.compression, self.var_either("COMPRESSION")) {
            (Some(compression), _) => compression,
            (None, Some((variable, value))) => match value.as_str() {
                "gzip" => Compression::Gzip,
                "none" => Compression::None,
                _ => return Err(invalid_env(variable, value, "not gzip or none")),
            },
            (None, None) => Compression::None,
        };
        let mut headers = Vec::new();
        if let Some((variable, value)) = self.var_either("HEADERS") {
            // Never the value in the error: it holds keys and tokens.
            headers = pairs(&value).map_err(|reason| invalid_env(variable, String::new(), &reason))?;
        }
        headers.extend(self.headers.iter().cloned());
        let headers = checked_headers(headers)?;
        let resource = self.resource()?;
        let scope = InstrumentationScope {
            name: "minitrace".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            ..InstrumentationScope::default()
        };
        let encoder = Encoder { resource, scope, max_spans: self.max_spans, max_bytes: self.max_bytes };
        #[cfg(feature = "tls")]
        let roots = self.roots()?;
        Ok(Settings {
            protocol,
            url,
            headers,
            timeout,
            compression,
            encoder,
            error_interval: self.error_interval,
            #[cfg(feature = "tls")]
            roots,
        })
    }

    #[cfg(feature = "tls")]
    fn roots(&self) -> Result<Option<minitrace_delivery::RootCertificates>, Error> {
        let invalid = |error: minitrace_delivery::CertificateError| {
            let reason = error.to_string();
            let reason = reason.strip_prefix("invalid root certificate: ").unwrap_or(&reason).to_owned();
            Error::InvalidCertificate { reason }
        };
        let mut roots: Option<minitrace_delivery::RootCertificates> = None;
        for pem in &self.roots {
            match &mut roots {
                Some(roots) => roots.add_pem(pem).map_err(invalid)?,
                None => roots = Some(minitrace_delivery::RootCertificates::from_pem(pem).map_err(invalid)?),
            }
        }
        Ok(roots)
    }

    fn url(&self, protocol: Protocol) -> Result<String, Error> {
        let grpc = protocol == Protocol::Grpc;
        // The URL, whether it is used as is, and the variable it came from.
        let (url, exact, variable) = if let Some(url) = &self.traces_endpoint {
            (url.clone(), true, None)
        } else if let Some(url) = &self.endpoint {
            (url.clone(), grpc, None)
        } else if let Some((variable, url)) = self.var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            (url, true, Some(variable))
        } else if let Some((variable, url)) = self.var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            (url, grpc, Some(variable))
        } else if grpc {
            ("http://localhost:4317".to_owned(), true, None)
        } else {
            ("http://localhost:4318".to_owned(), false, None)
        };
        check_url(&url).map_err(|error| match (error, variable) {
            (Error::InvalidEndpoint { endpoint, reason }, Some(variable)) => {
                Error::InvalidEndpoint { endpoint, reason: format!("{reason} (in {variable})") }
            }
            (error, _) => error,
        })?;
        Ok(if exact { url } else { format!("{}/v1/traces", url.trim_end_matches('/')) })
    }

    fn resource(&self) -> Result<Resource, Error> {
        let executable = std::env::current_exe()
            .ok()
            .and_then(|path| Some(path.file_name()?.to_string_lossy().into_owned()));
        let mut attributes = vec![(
            "service.name".to_owned(),
            format!("unknown_service:{}", executable.as_deref().unwrap_or("minitrace")),
        )];
        if let Some(host) = gethostname::gethostname().to_str() {
            attributes.push(("host.name".to_owned(), host.to_owned()));
        }
        attributes.push(("telemetry.sdk.name".to_owned(), "minitrace".to_owned()));
        attributes.push(("telemetry.sdk.language".to_owned(), "rust".to_owned()));
        attributes.push(("telemetry.sdk.version".to_owned(), env!("CARGO_PKG_VERSION").to_owned()));
        let mut set = |key: &str, value: &str| match attributes.iter_mut().find(|(k, _)| k == key) {
            Some(attribute) => attribute.1 = value.to_owned(),
            None => attributes.push((key.to_owned(), value.to_owned())),
        };
        if let Some((variable, value)) = self.var("OTEL_RESOURCE_ATTRIBUTES") {
            let pairs = pairs(&value).map_err(|reason| invalid_env(variable, value.clone(), &reason))?;
            pairs.iter().for_each(|(key, value)| set(key, value));
        }
        if let Some((_, name)) = self.var("OTEL_SERVICE_NAME") {
            set("service.name", &name);
        }
        self.resource_attributes.iter().for_each(|(key, value)| set(key, value));
        if let Some(name) = &self.service_name {
            set("service.name", name);
        }
        if let Some(version) = &self.service_version {
            set("service.version", version);
        }
        let attributes: Vec<KeyValue> =
            attributes.into_iter().map(|(key, value)| key_value(key, value)).collect();
        Ok(Resource { attributes, ..Resource::default() })
    }
}

fn invalid_env(variable: String, value: String, reason: &str) -> Error {
    Error::InvalidEnv { variable, value, reason: reason.to_owned() }
}

fn not_enabled(what: &str, feature: &'static str) -> Error {
    Error::FeatureNotEnabled { what: what.to_owned(), feature }
}

/// Checks that `url` is an `http://` (or, with `tls`, `https://`) URL with a
/// host and no user information; the error shows it without the latter.
fn check_url(url: &str) -> Result<(), Error> {
    let endpoint = Endpoint::parse(url).map_err(|error| Error::InvalidEndpoint {
        endpoint: error.url().to_owned(),
        reason: error.reason().to_owned(),
    })?;
    if endpoint.is_https() && !cfg!(feature = "tls") {
        return Err(not_enabled(&format!("the https:// endpoint {endpoint}"), "tls"));
    }
    Ok(())
}

/// `key=value,key=value`, each part trimmed and URL-decoded (the format of
/// `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES`). An error
/// says which item is wrong, never what it holds: a header's value is
/// often a credential, and a malformed list may have cut one in two.
fn pairs(list: &str) -> Result<Vec<(String, String)>, String> {
    let items: Vec<&str> = list.split(',').filter(|item| !item.trim().is_empty()).collect();
    let count = items.len();
    let decode = |part: &str, which: &str, number: usize| {
        percent_encoding::percent_decode_str(part.trim())
            .decode_utf8()
            .map(|decoded| decoded.into_owned())
            .map_err(|_| format!("the {which} of item {number} of {count} is not UTF-8 once URL-decoded"))
    };
    let mut pairs = Vec::new();
    for (index, item) in items.into_iter().enumerate() {
        let number = index + 1;
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("item {number} of {count} is not key=value"));
        };
        let key = decode(key, "key", number)?;
        if key.is_empty() {
            return Err(format!("item {number} of {count} has no key"));
        }
        pairs.push((key, decode(value, "value", number)?));
    }
    Ok(pairs)
}

/// Valid HTTP headers; a later one replaces an earlier one of the same name.
/// An error names the header, never its value.
fn checked_headers(headers: Vec<(String, String)>) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
    let mut checked: Vec<(HeaderName, HeaderValue)> = Vec::new();
    for (name, value) in headers {
        let invalid = |reason: String| Error::InvalidHeader { name: name.clone(), reason };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|error| invalid(error.to_string()))?;
        let mut value = HeaderValue::from_str(&value).map_err(|error| invalid(error.to_string()))?;
        // Auth tokens travel here: never shown by `Debug`.
        value.set_sensitive(true);
        checked.retain(|(existing, _)| existing != header);
        checked.push((header, value));
    }
    Ok(checked)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
