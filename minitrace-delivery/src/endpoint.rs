//! Endpoints: what a reporter may send to, checked once when it is built.

use std::fmt;

use ureq::http::uri::{PathAndQuery, Uri};

/// Why user information is refused in an endpoint.
const USERINFO: &str = "user information (user:password@) in an endpoint is refused: it would not be \
     sent, and would show wherever the endpoint is printed; send credentials as a header";

/// An `http://` or `https://` URL with a host and no user information,
/// which is what [`HttpClient`](crate::HttpClient) posts to.
///
/// Whether `https://` can be spoken depends on the `tls` feature of the
/// reporter; [`is_https`](Endpoint::is_https) lets it say so.
///
/// ```
/// use minitrace_delivery::Endpoint;
///
/// let endpoint = Endpoint::parse("http://collector:4318/v1/traces").unwrap();
/// assert_eq!(endpoint.to_string(), "http://collector:4318/v1/traces");
///
/// let error = Endpoint::parse("http://user:SECRET@collector:4318").unwrap_err();
/// assert!(!error.to_string().contains("SECRET"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    uri: Uri,
}

impl Endpoint {
    /// Checks `url` (trimmed): a scheme of `http` or `https`, a host, and no
    /// `user:password@`. The error names what is wrong, and shows the URL
    /// with any user information replaced by `***`.
    ///
    /// ```
    /// use minitrace_delivery::Endpoint;
    ///
    /// for (url, why) in [
    ///     ("collector:4318", "no scheme"),
    ///     ("ftp://collector", "neither http:// nor https://"),
    ///     ("http://", "not a URL"),
    ///     ("http://token@collector", "user information"),
    /// ] {
    ///     assert!(Endpoint::parse(url).unwrap_err().reason().contains(why), "{url}");
    /// }
    /// ```
    pub fn parse(url: &str) -> Result<Endpoint, EndpointError> {
        let error = |reason: String| EndpointError { url: redact_url(url), reason };
        let trimmed = url.trim();
        // Said before parsing: "host:port" alone parses, as a scheme and a path.
        if !trimmed.contains("://") {
            return Err(error("no scheme: write it as http://host:port/path".into()));
        }
        let uri: Uri = trimmed.parse().map_err(|parse| error(format!("not a URL: {parse}")))?;
        match uri.scheme_str() {
            Some("http" | "https") => {}
            Some(other) => {
                return Err(error(format!("the scheme {other}:// is neither http:// nor https://")))
            }
            None => return Err(error("no scheme: write it as http://host:port/path".into())),
        }
        let Some(authority) = uri.authority() else { return Err(error("no host".into())) };
        if authority.as_str().contains('@') {
            return Err(error(USERINFO.into()));
        }
        if authority.host().is_empty() {
            return Err(error("no host".into()));
        }
        // `http` takes "host:anything" as an authority, leaving the port to the client.
        if authority.as_str() != authority.host() && authority.port_u16().is_none() {
            return Err(error("not a URL: the port is not a number".into()));
        }
        Ok(Endpoint { uri })
    }

    /// The endpoint with `path` when it has none (`/` and no query), e.g.
    /// `/api/traces` for a Jaeger collector given as `http://host:14268`.
    ///
    /// ```
    /// use minitrace_delivery::Endpoint;
    ///
    /// let endpoint = Endpoint::parse("http://jaeger:14268").unwrap().or_path("/api/traces");
    /// assert_eq!(endpoint.to_string(), "http://jaeger:14268/api/traces");
    /// let endpoint = Endpoint::parse("http://jaeger:14268/x").unwrap().or_path("/api/traces");
    /// assert_eq!(endpoint.to_string(), "http://jaeger:14268/x");
    /// ```
    pub fn or_path(self, path: &'static str) -> Endpoint {
        if self.uri.path() != "/" || self.uri.query().is_some() {
            return self;
        }
        let mut parts = self.uri.clone().into_parts();
        parts.path_and_query = Some(PathAndQuery::from_static(path));
        match Uri::from_parts(parts) {
            Ok(uri) => Endpoint { uri },
            Err(_) => self,
        }
    }

    /// The URL.
    ///
    /// ```
    /// let endpoint = minitrace_delivery::Endpoint::parse("http://127.0.0.1:4318/v1/traces").unwrap();
    /// assert_eq!(endpoint.uri().port_u16(), Some(4318));
    /// ```
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// Whether the scheme is `https`.
    ///
    /// ```
    /// let endpoint = minitrace_delivery::Endpoint::parse("https://otlp.example.com").unwrap();
    /// assert!(endpoint.is_https());
    /// ```
    pub fn is_https(&self) -> bool {
        self.uri.scheme_str() == Some("https")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.uri)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Endpoint").field(&self.uri.to_string()).finish()
    }
}

/// Why [`Endpoint::parse`] refused a URL. Neither its `Display` nor its
/// `Debug` shows user information that the URL held.
///
/// ```
/// let error = minitrace_delivery::Endpoint::parse("http://me:SECRET@host/").unwrap_err();
/// assert_eq!(error.url(), "http://***@host/");
/// assert!(!format!("{error} {error:?}").contains("SECRET"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointError {
    url: String,
    reason: String,
}

impl EndpointError {
    /// The URL refused, with any user information replaced by `***`.
    ///
    /// ```
    /// let error = minitrace_delivery::Endpoint::parse("jaeger:14268").unwrap_err();
    /// assert_eq!(error.url(), "jaeger:14268");
    /// ```
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What is wrong with it.
    ///
    /// ```
    /// let error = minitrace_delivery::Endpoint::parse("jaeger:14268").unwrap_err();
    /// assert!(error.reason().starts_with("no scheme"));
    /// ```
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid endpoint {:?}: {}", self.url, self.reason)
    }
}

impl std::error::Error for EndpointError {}

/// `url` as it may be printed: whatever stands between `://` and the last
/// `@` before the query is replaced by `***`. Works on text that is not a
/// URL at all, so that the error about a malformed URL cannot leak the
/// credentials in it either; a path with an `@` is redacted too, which
/// costs only a less helpful message.
///
/// ```
/// use minitrace_delivery::redact_url;
///
/// assert_eq!(redact_url("https://u:p@host:1/x?q=1"), "https://***@host:1/x?q=1");
/// assert_eq!(redact_url("http://host/"), "http://host/");
/// assert_eq!(redact_url("http://u:p/w@bad"), "http://***@bad");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_owned() };
    let rest = &url[scheme_end + 3..];
    let before_query = rest.find(['?', '#']).unwrap_or(rest.len());
    match rest[..before_query].rfind('@') {
        Some(at) => format!("{}://***{}", &url[..scheme_end], &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        let parsed = |url: &str| Endpoint::parse(url).map(|endpoint| endpoint.to_string());
        assert_eq!(parsed(" http://127.0.0.1:14268 ").unwrap(), "http://127.0.0.1:14268/");
        assert_eq!(parsed("http://[::1]:80/v1/x?a=b").unwrap(), "http://[::1]:80/v1/x?a=b");
        assert_eq!(
            parsed("https://otlp.example.com/v1/traces").unwrap(),
            "https://otlp.example.com/v1/traces"
        );
        for (url, why) in [
            ("", "no scheme"),
            ("http://", "not a URL"),
            ("127.0.0.1:14268", "no scheme"),
            ("jaeger/api/traces", "no scheme"),
            ("ftp://jaeger/", "neither http:// nor https://"),
            ("http://user:pw@jaeger/", "user information"),
            ("http://token@jaeger/", "user information"),
            ("http:// spaced/", "not a URL"),
            ("http://[::1", "not a URL"),
            ("http://host:port/", "not a URL"),
        ] {
            let error = Endpoint::parse(url).unwrap_err();
            assert!(error.reason().contains(why), "{url:?}: {error}");
            assert!(error.to_string().contains(why), "{url:?}: {error}");
        }
    }

    #[test]
    fn credentials_never_show_in_an_error() {
        for url in [
            "http://user:SECRET@127.0.0.1:4318/v1/traces",
            "https://SECRET@collector",
            "http://user:SECRET@[::1",
            "http://user:SEC/RET@host/",
            " http://user:SECRET@host ",
        ] {
            let error = Endpoint::parse(url).unwrap_err();
            let shown = format!("{error} {error:?} {}", error.url());
            assert!(!shown.contains("SECRET") && !shown.contains("RET@"), "{shown}");
        }
        let error = Endpoint::parse("http://user:SECRET@127.0.0.1:4318/v1/traces").unwrap_err();
        assert_eq!(error.url(), "http://***@127.0.0.1:4318/v1/traces");
        assert!(error.reason().contains("user information"), "{error}");
    }

    #[test]
    fn a_default_path_fills_only_an_empty_one() {
        let with = |url: &str| Endpoint::parse(url).unwrap().or_path("/api/traces").to_string();
        assert_eq!(with("http://jaeger:14268"), "http://jaeger:14268/api/traces");
        assert_eq!(with("http://jaeger:14268/"), "http://jaeger:14268/api/traces");
        assert_eq!(with("http://jaeger:14268/?a=b"), "http://jaeger:14268/?a=b");
        assert_eq!(with("http://jaeger:14268/t/api"), "http://jaeger:14268/t/api");
    }
}
