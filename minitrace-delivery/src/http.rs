//! The HTTP client of both reporters: one `POST` of a ready body through
//! ureq, and what its answer means for the retry policy.

use std::fmt;
use std::io::{self, Read};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, SystemTime};

use ureq::http::{HeaderName, HeaderValue, Response, Uri};
use ureq::unversioned::transport::DefaultConnector;
use ureq::Body;

use crate::delivery::{retry_after, Attempt};
use crate::endpoint::{redact_url, Endpoint};
use crate::resolve::CachingResolver;

/// The most of an answer's body read (and kept, cut, for error messages).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// The most of an error answer's text quoted in a message.
const MAX_QUOTED_CHARS: usize = 200;

/// What the body of a 2xx answer says about the spans: how many the
/// endpoint rejected, and its message (an OTLP partial success).
///
/// ```
/// let partial = minitrace_delivery::PartialSuccess::default();
/// assert_eq!((partial.rejected, partial.message.as_str()), (0, ""));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartialSuccess {
    /// Spans rejected.
    pub rejected: u64,
    /// The endpoint's message, empty when none.
    pub message: String,
}

impl PartialSuccess {
    /// `rejected` spans refused, saying `message`.
    ///
    /// ```
    /// let partial = minitrace_delivery::PartialSuccess::new(2, "too old");
    /// assert_eq!(partial.rejected, 2);
    /// ```
    pub fn new(rejected: u64, message: impl Into<String>) -> PartialSuccess {
        PartialSuccess { rejected, message: message.into() }
    }
}

/// Reads a 2xx answer's body (and its `Content-Type`, if any).
pub type AnswerReader = fn(body: &[u8], content_type: Option<&str>) -> PartialSuccess;

/// An answer whose body says nothing about the spans: all were taken.
fn all_taken(_body: &[u8], _content_type: Option<&str>) -> PartialSuccess {
    PartialSuccess::default()
}

/// The root certificates that an `https://` endpoint's certificate must
/// chain to, instead of the webpki roots (Mozilla's): a private CA's.
///
/// ```
/// # #[cfg(feature = "tls")] {
/// let error = minitrace_delivery::RootCertificates::from_pem(b"not a certificate").unwrap_err();
/// assert!(error.to_string().contains("no certificate"));
/// # }
/// ```
#[cfg(feature = "tls")]
#[derive(Clone)]
pub struct RootCertificates {
    certificates: std::sync::Arc<Vec<ureq::tls::Certificate<'static>>>,
    /// The certificates again, as PEM, for clients that take PEM (tonic).
    pem: Vec<u8>,
}

#[cfg(feature = "tls")]
impl RootCertificates {
    /// Every certificate of `pem` (one or more `CERTIFICATE` blocks; other
    /// blocks are ignored). Fails, saying why, if there is none or one is
    /// not an X.509 certificate a root store takes.
    ///
    /// ```
    /// let error = minitrace_delivery::RootCertificates::from_pem(
    ///     b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    /// )
    /// .unwrap_err();
    /// assert!(error.to_string().contains("certificate 1"));
    /// ```
    pub fn from_pem(pem: &[u8]) -> Result<RootCertificates, CertificateError> {
        let mut roots = RootCertificates { certificates: Default::default(), pem: Vec::new() };
        roots.add_pem(pem)?;
        Ok(roots)
    }

    /// Adds the certificates of `pem` to these, on the same terms as
    /// [`from_pem`](Self::from_pem).
    ///
    /// ```
    /// # fn roots(pem: &[u8], more: &[u8]) -> Result<(), minitrace_delivery::CertificateError> {
    /// let mut roots = minitrace_delivery::RootCertificates::from_pem(pem)?;
    /// roots.add_pem(more)?;
    /// # Ok(()) }
    /// ```
    pub fn add_pem(&mut self, pem: &[u8]) -> Result<(), CertificateError> {
        use ureq::tls::PemItem;
        let error = |reason: String| CertificateError { reason };
        let mut found = Vec::new();
        for item in ureq::tls::parse_pem(pem) {
            match item {
                Ok(PemItem::Certificate(certificate)) => found.push(certificate),
                Ok(_) => {}
                Err(parse) => return Err(error(format!("not PEM: {parse}"))),
            }
        }
        if found.is_empty() {
            return Err(error("no certificate in the PEM text".into()));
        }
        let mut store = rustls::RootCertStore::empty();
        for (index, certificate) in found.iter().enumerate() {
            let der = rustls::pki_types::CertificateDer::from(certificate.der().to_vec());
            store.add(der).map_err(|refused| {
                error(format!("certificate {} is no root certificate: {refused}", index + 1))
            })?;
        }
        std::sync::Arc::make_mut(&mut self.certificates).extend(found);
        self.pem.extend_from_slice(pem);
        if !self.pem.ends_with(b"\n") {
            self.pem.push(b'\n');
        }
        Ok(())
    }

    /// The certificates as PEM text, as given.
    ///
    /// ```
    /// # fn pem_of(roots: &minitrace_delivery::RootCertificates) -> &[u8] {
    /// roots.pem()
    /// # }
    /// ```
    pub fn pem(&self) -> &[u8] {
        &self.pem
    }

    /// How many certificates there are.
    ///
    /// ```
    /// # fn count(roots: &minitrace_delivery::RootCertificates) -> usize {
    /// roots.len()
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.certificates.len()
    }

    /// Never true: a `RootCertificates` holds at least one.
    ///
    /// ```
    /// # fn none(roots: &minitrace_delivery::RootCertificates) -> bool {
    /// roots.is_empty()
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.certificates.is_empty()
    }
}

#[cfg(feature = "tls")]
impl fmt::Debug for RootCertificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootCertificates").field("certificates", &self.certificates.len()).finish()
    }
}

/// Why root certificates were refused.
///
/// ```
/// # #[cfg(feature = "tls")] {
/// let error = minitrace_delivery::RootCertificates::from_pem(b"").unwrap_err();
/// println!("{error}");
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateError {
    reason: String,
}

impl CertificateError {
    /// An error saying `reason`.
    ///
    /// ```
    /// let error = minitrace_delivery::CertificateError::new("a UDP reporter uses no TLS");
    /// assert_eq!(error.to_string(), "invalid root certificate: a UDP reporter uses no TLS");
    /// ```
    pub fn new(reason: impl Into<String>) -> CertificateError {
        CertificateError { reason: reason.into() }
    }
}

impl fmt::Display for CertificateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid root certificate: {}", self.reason)
    }
}

impl std::error::Error for CertificateError {}

/// A client of one endpoint: `POST`s ready bodies to it, one try per call,
/// and tells what came of each as an [`Attempt`].
///
/// Built once for both reporters: connections kept alive (one, as one
/// thread sends one request at a time), redirects never followed (a `3xx`
/// is a failure, so a body and its headers never go to a host other than
/// the endpoint), statuses read as the OTLP spec says, header values
/// marked sensitive and never shown, and with the `tls` feature, `https://`
/// through rustls with the webpki roots or the `RootCertificates` given.
///
/// ```
/// use std::time::Duration;
/// use minitrace_delivery::{Attempt, Endpoint, HttpClient};
///
/// // Port 1 of 127.0.0.1: nothing listens there.
/// let mut client = HttpClient::new(Endpoint::parse("http://127.0.0.1:1/v1/traces").unwrap(), "application/x-protobuf");
/// client.add_header("authorization", "Bearer s3cret").unwrap();
/// assert!(!format!("{client:?}").contains("s3cret"));
/// assert!(matches!(client.post(b"body", Duration::from_secs(5)), Attempt::Unreachable(_)));
/// ```
pub struct HttpClient {
    /// Asserted unwind-safe: a request cut short by a panic leaves at worst
    /// a connection that the next request replaces.
    agent: AssertUnwindSafe<ureq::Agent>,
    endpoint: Endpoint,
    content_type: &'static str,
    content_encoding: Option<&'static str>,
    headers: Vec<(HeaderName, HeaderValue)>,
    user_agent: String,
    proxy_from_env: bool,
    read_answer: AnswerReader,
    /// The agent's resolver, shared (see `resolve`).
    pub(crate) resolver: CachingResolver,
    #[cfg(feature = "tls")]
    roots: Option<RootCertificates>,
}

/// A copy of the client, its settings and its connection pool shared: for
/// the sender thread of a [`Pipeline`](crate::Pipeline).
impl Clone for HttpClient {
    fn clone(&self) -> HttpClient {
        HttpClient {
            agent: AssertUnwindSafe(self.agent.0.clone()),
            endpoint: self.endpoint.clone(),
            content_type: self.content_type,
            content_encoding: self.content_encoding,
            headers: self.headers.clone(),
            user_agent: self.user_agent.clone(),
            proxy_from_env: self.proxy_from_env,
            read_answer: self.read_answer,
            resolver: self.resolver.clone(),
            #[cfg(feature = "tls")]
            roots: self.roots.clone(),
        }
    }
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("HttpClient");
        debug
            .field("endpoint", &self.endpoint)
            .field("content_type", &self.content_type)
            .field("content_encoding", &self.content_encoding)
            // Names only: values are often credentials.
            .field("headers", &self.header_names())
            .field("user_agent", &self.user_agent)
            .field("proxy_from_env", &self.proxy_from_env);
        #[cfg(feature = "tls")]
        debug.field("roots", &self.roots);
        debug.finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client that posts bodies of type `content_type` to `endpoint`.
    /// It connects on the first post.
    ///
    /// ```
    /// use minitrace_delivery::{Endpoint, HttpClient};
    ///
    /// let client = HttpClient::new(Endpoint::parse("http://jaeger:14268/api/traces").unwrap(), "application/x-thrift");
    /// assert_eq!(client.endpoint().to_string(), "http://jaeger:14268/api/traces");
    /// ```
    pub fn new(endpoint: Endpoint, content_type: &'static str) -> HttpClient {
        let mut client = HttpClient {
            agent: AssertUnwindSafe(ureq::Agent::new_with_defaults()),
            endpoint,
            content_type,
            content_encoding: None,
            headers: Vec::new(),
            user_agent: concat!("minitrace-delivery/", env!("CARGO_PKG_VERSION")).to_owned(),
            proxy_from_env: false,
            read_answer: all_taken,
            resolver: CachingResolver::default(),
            #[cfg(feature = "tls")]
            roots: None,
        };
        client.rebuild();
        client
    }

    /// The endpoint.
    ///
    /// ```
    /// # let client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://h").unwrap(), "a/b");
    /// assert!(!client.endpoint().is_https());
    /// ```
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The names of the headers added, in order.
    ///
    /// ```
    /// # let mut client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://h").unwrap(), "a/b");
    /// client.add_header("X-Tenant", "shop").unwrap();
    /// assert_eq!(client.header_names(), ["x-tenant"]);
    /// ```
    pub fn header_names(&self) -> Vec<&str> {
        self.headers.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// Sets the `User-Agent`.
    ///
    /// ```
    /// # let mut client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://h").unwrap(), "a/b");
    /// client.set_user_agent("minitrace-otlp/0.6.8");
    /// ```
    pub fn set_user_agent(&mut self, user_agent: impl Into<String>) {
        self.user_agent = user_agent.into();
        self.rebuild();
    }

    /// Sets the `Content-Encoding` of the bodies (e.g. `gzip`, for bodies
    /// compressed by the caller), or none.
    ///
    /// ```
    /// # let mut client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://h").unwrap(), "a/b");
    /// client.set_content_encoding(Some("gzip"));
    /// ```
    pub fn set_content_encoding(&mut self, encoding: Option<&'static str>) {
        self.content_encoding = encoding;
    }

    /// Whether to go through the proxy that `HTTPS_PROXY`, `HTTP_PROXY`
    /// and `ALL_PROXY` name (off by default: straight to the endpoint).
    ///
    /// ```
    /// # let mut client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://h").unwrap(), "a/b");
    /// client.set_proxy_from_env(true);
    /// ```
    pub fn set_proxy_from_env(&mut self, proxy_from_env: bool) {
        self.proxy_from_env = proxy_from_env;
        self.rebuild();
    }

    /// Sets what reads a 2xx answer's body (by default, nothing: all the
    /// spans were taken).
    ///
    /// ```
    /// use minitrace_delivery::PartialSuccess;
    /// # let mut client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://h").unwrap(), "a/b");
    /// client.set_answer_reader(|body, _content_type| {
    ///     if body == b"half" { PartialSuccess::new(1, "half") } else { PartialSuccess::default() }
    /// });
    /// ```
    pub fn set_answer_reader(&mut self, reader: AnswerReader) {
        self.read_answer = reader;
    }

    /// Adds a header to every request, its value marked sensitive (never
    /// shown by `Debug`); a later one replaces an earlier one of the same
    /// name. Fails if HTTP forbids the name or the value; the error does
    /// not quote the value.
    ///
    /// ```
    /// # let mut client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://h").unwrap(), "a/b");
    /// assert!(client.add_header("authorization", "Bearer 1234").is_ok());
    /// let error = client.add_header("x-key", "line\nbreak").unwrap_err();
    /// assert!(!error.contains("line"));
    /// ```
    pub fn add_header(&mut self, name: &str, value: &str) -> Result<(), String> {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|error| format!("invalid name: {error}"))?;
        let mut value = HeaderValue::from_str(value).map_err(|error| format!("invalid value: {error}"))?;
        value.set_sensitive(true);
        self.headers.retain(|(existing, _)| *existing != name);
        self.headers.push((name, value));
        Ok(())
    }

    /// Trusts only `roots` for `https://` (not the webpki roots).
    ///
    /// ```
    /// # fn trust(client: &mut minitrace_delivery::HttpClient, roots: minitrace_delivery::RootCertificates) {
    /// client.set_root_certificates(roots);
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub fn set_root_certificates(&mut self, roots: RootCertificates) {
        self.roots = Some(roots);
        self.rebuild();
    }

    fn rebuild(&mut self) {
        let config = ureq::Agent::config_builder()
            // Non-2xx answers come back as responses, so their body can be read.
            .http_status_as_error(false)
            // A redirect is an answer to report, never to follow: following
            // one would send the body and its headers (a vendor's key) to
            // another host, as a GET after a 301, 302 or 303.
            .max_redirects(0)
            .max_redirects_will_error(false)
            .proxy(if self.proxy_from_env { ureq::Proxy::try_from_env() } else { None })
            .user_agent(self.user_agent.as_str())
            // One thread sends one request at a time.
            .max_idle_connections(1)
            .max_idle_connections_per_host(1);
        #[cfg(feature = "tls")]
        let config = {
            use ureq::tls::{RootCerts, TlsConfig};
            let roots = match &self.roots {
                Some(roots) => RootCerts::Specific(roots.certificates.clone()),
                None => RootCerts::WebPki,
            };
            config.tls_config(TlsConfig::builder().root_certs(roots).build())
        };
        // ureq's own resolver, with a timeout, starts a thread per request:
        // see `resolve`.
        let resolver = self.resolver.clone();
        self.agent =
            AssertUnwindSafe(ureq::Agent::with_parts(config.build(), DefaultConnector::default(), resolver));
    }

    /// One try: `POST`s `body`, all of it (name resolution, connecting,
    /// sending, the answer) within `timeout`.
    ///
    /// A 2xx answer is [`Attempt::Delivered`], with what the answer reader
    /// makes of its body; 429, 502, 503 and 504 are [`Attempt::Retry`]
    /// after their `Retry-After`; a redirect and every other status is
    /// [`Attempt::Failed`], as is a TLS failure. A refused connection or an
    /// unknown host is [`Attempt::Unreachable`], a connection closed with
    /// no answer [`Attempt::Unanswered`], and no answer in time
    /// [`Attempt::TimedOut`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let client = minitrace_delivery::HttpClient::new(minitrace_delivery::Endpoint::parse("http://127.0.0.1:1").unwrap(), "a/b");
    /// let attempt = client.post(b"{}", Duration::from_secs(2));
    /// # assert!(matches!(attempt, minitrace_delivery::Attempt::Unreachable(_)));
    /// ```
    pub fn post(&self, body: &[u8], timeout: Duration) -> Attempt {
        let mut request = self.agent.post(self.endpoint.uri()).header("content-type", self.content_type);
        if let Some(encoding) = self.content_encoding {
            request = request.header("content-encoding", encoding);
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        // A zero timeout would mean none at all to ureq.
        let timeout = timeout.max(Duration::from_millis(1));
        match request.config().timeout_global(Some(timeout)).build().send(body) {
            Ok(response) => self.answer(response),
            Err(error) => transport_error(error),
        }
    }

    fn answer(&self, mut response: Response<Body>) -> Attempt {
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|value| value.to_str().ok());
        let after = header("retry-after").and_then(|value| retry_after(value, SystemTime::now()));
        let location = header("location").map(describe_location);
        let content_type = header("content-type").map(str::to_owned);
        // Read to its end (at most 64 KiB), so the connection can carry the
        // next request; a longer body is cut, and its connection closed.
        let mut body = Vec::new();
        let read = response.body_mut().as_reader().take(MAX_ANSWER_BYTES).read_to_end(&mut body);
        match status {
            200..=299 => {
                // Taken: a body that failed to arrive cannot take that back.
                let partial = match read {
                    Ok(_) => (self.read_answer)(&body, content_type.as_deref()),
                    Err(_) => PartialSuccess::default(),
                };
                Attempt::Delivered { rejected: partial.rejected, message: partial.message }
            }
            300..=399 => {
                let to = location.map(|location| format!(" to {location}")).unwrap_or_default();
                Attempt::Failed(format!(
                    "HTTP {status}: a redirect{to}, not followed: spans go only to the endpoint configured"
                ))
            }
            429 | 502 | 503 | 504 => Attempt::Retry { error: describe(status, &body), after },
            _ => Attempt::Failed(describe(status, &body)),
        }
    }
}

/// `HTTP 400` and the printable start of the answer's text.
fn describe(status: u16, body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control() && *c != char::REPLACEMENT_CHARACTER)
        .take(MAX_QUOTED_CHARS)
        .collect();
    match text.trim() {
        "" => format!("HTTP {status}"),
        text => format!("HTTP {status}: {text}"),
    }
}

/// Where a redirect pointed, for a message: its scheme, host, port and
/// path, without user information or query.
fn describe_location(location: &str) -> String {
    match location.parse::<Uri>() {
        Ok(uri) => {
            let origin = match (uri.scheme_str(), uri.host()) {
                (Some(scheme), Some(host)) => match uri.port_u16() {
                    Some(port) => format!("{scheme}://{host}:{port}"),
                    None => format!("{scheme}://{host}"),
                },
                _ => String::new(),
            };
            format!("{origin}{}", uri.path())
        }
        Err(_) => redact_url(location).chars().filter(|c| !c.is_control()).take(MAX_QUOTED_CHARS).collect(),
    }
}

fn transport_error(error: ureq::Error) -> Attempt {
    use io::ErrorKind::{
        BrokenPipe, ConnectionAborted, ConnectionRefused, ConnectionReset, TimedOut, UnexpectedEof,
    };
    match error {
        ureq::Error::Timeout(what) => Attempt::TimedOut(format!("no answer in time ({what})")),
        ureq::Error::HostNotFound => Attempt::Unreachable("host not found".into()),
        ureq::Error::ConnectionFailed => Attempt::Unreachable("connection failed".into()),
        ureq::Error::Io(io) => match io.kind() {
            ConnectionRefused => Attempt::Unreachable(format!("connection refused ({io})")),
            TimedOut => Attempt::TimedOut(format!("no answer in time ({io})")),
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => {
                Attempt::Unanswered(format!("the connection closed with no answer ({io})"))
            }
            _ if is_tls(&io) => Attempt::Failed(format!("TLS: {io}")),
            _ => Attempt::Failed(io.to_string()),
        },
        #[cfg(feature = "tls")]
        ureq::Error::Rustls(tls) => Attempt::Failed(format!("TLS: {tls}")),
        ureq::Error::Tls(tls) => Attempt::Failed(format!("TLS: {tls}")),
        other => Attempt::Failed(other.to_string()),
    }
}

/// Whether an I/O error came from TLS (rustls reports a bad certificate as
/// `InvalidData` wrapping its own error).
fn is_tls(error: &io::Error) -> bool {
    #[cfg(feature = "tls")]
    if error.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        return true;
    }
    let _ = error;
    false
}
