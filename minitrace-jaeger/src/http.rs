//! The collector transport: `POST` a Thrift Binary `Batch` to the
//! collector's endpoint (`/api/traces` by default), through ureq.
//!
//! ureq does the HTTP: connections kept alive, name resolution, `https://`
//! with the `tls` feature. What is here is the reporter's policy around it:
//! one deadline per report, one resend on a kept-alive connection found
//! closed, a pause after a timeout, and errors that carry the status and body.

use std::fmt;
use std::io::{self, Read};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use ureq::http::uri::{PathAndQuery, Uri};
use ureq::http::{HeaderName, HeaderValue};

/// The collector's path for Thrift over HTTP, used when an endpoint has none.
pub(crate) const DEFAULT_PATH: &str = "/api/traces";
/// The longest response body read (and kept for error messages).
const MAX_BODY_BYTES: u64 = 64 * 1024;
/// How long to stop trying after a timeout, so that an unresponsive
/// collector does not stall every report.
const TIMEOUT_BACKOFF: Duration = Duration::from_secs(5);

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum HttpError {
    /// Connecting, sending or receiving failed, or the deadline passed.
    Transport(ureq::Error),
    /// The collector answered with a status other than 2xx.
    Status { code: u16, body: String },
    /// Not tried: an earlier request timed out moments ago.
    BackingOff,
}

impl HttpError {
    fn is_timeout(&self) -> bool {
        matches!(self, HttpError::Transport(ureq::Error::Timeout(_)))
    }

    /// Whether the connection was found closed (end of stream, reset,
    /// aborted, broken pipe) with no answer: the collector closed a
    /// kept-alive connection, so the request was not processed. Never a
    /// timeout: a slow collector may still be processing the request.
    fn is_closed_connection(&self) -> bool {
        use io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
        match self {
            HttpError::Transport(ureq::Error::Io(error)) => {
                matches!(error.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe)
            }
            _ => false,
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Transport(error) => write!(f, "{error}"),
            HttpError::Status { code, body } => write!(f, "HTTP status {code}: {}", body.trim()),
            HttpError::BackingOff => write!(f, "not sent: the collector timed out moments ago"),
        }
    }
}

/// A client of one collector endpoint.
#[derive(Debug)]
pub(crate) struct Collector {
    /// Asserted unwind-safe, as the reporter was in 0.6: a request cut short
    /// by a panic leaves at worst a connection the next request replaces.
    agent: AssertUnwindSafe<ureq::Agent>,
    endpoint: Uri,
    /// Sent with every request, after `Content-Type`.
    headers: Vec<(HeaderName, HeaderValue)>,
    timeout: Duration,
    backoff_until: Option<Instant>,
}

impl Collector {
    pub(crate) fn new(endpoint: Uri, timeout: Duration) -> Collector {
        let agent = ureq::Agent::config_builder()
            // Non-2xx answers come back as responses, so their body can be read.
            .http_status_as_error(false)
            // A redirect of a POST is an answer to report, not to follow.
            .max_redirects(0)
            .max_redirects_will_error(false)
            // Straight to the collector, whatever HTTP_PROXY says, as before ureq.
            .proxy(None)
            .user_agent(concat!("minitrace-jaeger/", env!("CARGO_PKG_VERSION")))
            // One collector thread sends one request at a time.
            .max_idle_connections(1)
            .max_idle_connections_per_host(1)
            .build()
            .new_agent();
        let agent = AssertUnwindSafe(agent);
        Collector { agent, endpoint, headers: Vec::new(), timeout: clamp(timeout), backoff_until: None }
    }

    pub(crate) fn endpoint(&self) -> &Uri {
        &self.endpoint
    }

    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = clamp(timeout);
    }

    pub(crate) fn add_header(&mut self, name: HeaderName, value: HeaderValue) {
        self.headers.push((name, value));
    }

    /// Posts `body`; Ok on a 2xx answer. Takes at most the timeout in all.
    pub(crate) fn post(&mut self, body: &[u8]) -> Result<(), HttpError> {
        let start = Instant::now();
        if let Some(until) = self.backoff_until {
            if start < until {
                return Err(HttpError::BackingOff);
            }
            self.backoff_until = None;
        }
        let mut result = self.exchange(body, self.timeout);
        // A kept-alive connection may have been closed by the collector just
        // as the request went out: sent once more, on a new connection, within
        // what is left of the same deadline.
        if result.as_ref().is_err_and(HttpError::is_closed_connection) {
            let left = self.timeout.saturating_sub(start.elapsed());
            if !left.is_zero() {
                result = self.exchange(body, left);
            }
        }
        if result.as_ref().is_err_and(HttpError::is_timeout) {
            self.backoff_until = Some(Instant::now() + TIMEOUT_BACKOFF);
        }
        result
    }

    /// One request and its answer, all within `timeout`.
    fn exchange(&self, body: &[u8], timeout: Duration) -> Result<(), HttpError> {
        let mut request = self.agent.post(&self.endpoint).header("content-type", "application/x-thrift");
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let mut response = request
            .config()
            .timeout_global(Some(timeout))
            .build()
            .send(body)
            .map_err(HttpError::Transport)?;
        let status = response.status().as_u16();
        // Read to its end, so the connection can carry the next request; a
        // long body is cut, and its connection closed.
        let mut answer = Vec::new();
        let read = response.body_mut().as_reader().take(MAX_BODY_BYTES).read_to_end(&mut answer);
        if (200..300).contains(&status) {
            // Accepted already: a body that failed to arrive changes nothing.
            return Ok(());
        }
        let mut body = String::from_utf8_lossy(&answer).into_owned();
        if let Err(error) = read {
            body.push_str(&format!(" (body cut short: {error})"));
        }
        Err(HttpError::Status { code: status, body })
    }
}

/// A zero timeout would mean none at all to ureq.
fn clamp(timeout: Duration) -> Duration {
    timeout.max(Duration::from_millis(1))
}

/// The endpoint of a collector at `url`: `http://` or, with the `tls`
/// feature, `https://`, a host, an optional port, and a path that defaults to
/// [`DEFAULT_PATH`].
pub(crate) fn parse_endpoint(url: &str) -> Result<Uri, String> {
    let url = url.trim();
    // Said before parsing: "host:port" alone parses, as a scheme and a path.
    if !url.contains("://") {
        return Err("no scheme: write it as http://host:port/path".into());
    }
    let uri: Uri = url.parse().map_err(|error| format!("not a URL: {error}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") if cfg!(feature = "tls") => {}
        Some("https") => {
            return Err("https:// needs minitrace-jaeger's `tls` feature, which this build lacks".into())
        }
        Some(other) => return Err(format!("the scheme {other}:// is neither http:// nor https://")),
        None => return Err("no scheme: write it as http://host:port/path".into()),
    }
    let authority = uri.authority().ok_or("no host")?;
    if authority.host().is_empty() {
        return Err("no host".into());
    }
    if authority.as_str().contains('@') {
        // ureq would not send them: credentials go in a header (`with_header`).
        return Err("user information in the URL is not sent: use with_header(\"authorization\", ..)".into());
    }
    if uri.path() == "/" && uri.query().is_none() {
        let mut parts = uri.into_parts();
        parts.path_and_query = Some(PathAndQuery::from_static(DEFAULT_PATH));
        return Uri::from_parts(parts).map_err(|error| format!("not a URL: {error}"));
    }
    Ok(uri)
}

#[cfg(test)]
#[path = "../tests/common/http_server.rs"]
mod http_server;

#[cfg(test)]
mod tests {
    use super::http_server::{pending_connections, read_request};
    use super::*;
    use std::io::Write;
    use std::net::{SocketAddr, TcpListener};
    use std::sync::mpsc;
    use std::thread;

    const ACCEPTED: &str = "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";

    fn collector(addr: SocketAddr, timeout: Duration) -> Collector {
        Collector::new(parse_endpoint(&format!("http://{addr}")).unwrap(), timeout)
    }

    fn head_of(request: &[u8]) -> String {
        let request = String::from_utf8_lossy(request).to_lowercase();
        request.split("\r\n\r\n").next().unwrap().to_string()
    }

    /// A one-connection server that answers each request with the next of
    /// `answers`, and returns the requests it saw.
    fn serve(answers: Vec<&'static str>) -> (SocketAddr, thread::JoinHandle<Vec<Vec<u8>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = thread::spawn(move || {
            let mut requests = Vec::new();
            let (mut stream, _) = listener.accept().unwrap();
            for answer in answers {
                requests.push(read_request(&mut stream));
                stream.write_all(answer.as_bytes()).unwrap();
            }
            requests
        });
        (addr, handle)
    }

    #[test]
    fn posts_and_reuses_the_connection() {
        let (addr, server) = serve(vec![ACCEPTED, ACCEPTED]);
        let mut collector = collector(addr, Duration::from_secs(5));
        collector.post(b"first").unwrap();
        collector.post(b"second").unwrap();
        let requests = server.join().unwrap();
        let head = head_of(&requests[0]);
        assert!(head.starts_with("post /api/traces http/1.1\r\n"), "{head}");
        assert!(head.contains("\r\ncontent-type: application/x-thrift"), "{head}");
        assert!(head.contains("\r\ncontent-length: 5"), "{head}");
        assert!(requests[0].ends_with(b"\r\n\r\nfirst"));
        assert!(requests[1].ends_with(b"\r\n\r\nsecond"));
    }

    #[test]
    fn headers_are_sent_with_every_request() {
        let (addr, server) = serve(vec![ACCEPTED, ACCEPTED]);
        let mut collector = collector(addr, Duration::from_secs(5));
        collector
            .add_header(HeaderName::from_static("authorization"), HeaderValue::from_static("Bearer t0k"));
        collector.post(b"first").unwrap();
        collector.post(b"second").unwrap();
        for request in server.join().unwrap() {
            assert!(head_of(&request).contains("\r\nauthorization: bearer t0k"));
        }
    }

    #[test]
    fn a_connection_closed_by_the_server_is_replaced() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server_listener = listener.try_clone().unwrap();
        let server = thread::spawn(move || {
            // The first connection carries one request, then is closed...
            let (mut stream, _) = server_listener.accept().unwrap();
            let first = read_request(&mut stream);
            stream.write_all(ACCEPTED.as_bytes()).unwrap();
            drop(stream);
            // ...and the second request comes on a new one.
            let (mut stream, _) = server_listener.accept().unwrap();
            let second = read_request(&mut stream);
            stream.write_all(ACCEPTED.as_bytes()).unwrap();
            (first, second)
        });
        let mut collector = collector(addr, Duration::from_secs(5));
        collector.post(b"first").unwrap();
        collector.post(b"second").unwrap();
        let (first, second) = server.join().unwrap();
        assert!(first.ends_with(b"\r\n\r\nfirst"));
        assert!(second.ends_with(b"\r\n\r\nsecond"));
        // Two connections in all.
        assert_eq!(pending_connections(&listener), 0);
    }

    #[test]
    fn a_request_closed_unanswered_is_sent_once_more() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server_listener = listener.try_clone().unwrap();
        let server = thread::spawn(move || {
            let (mut stream, _) = server_listener.accept().unwrap();
            read_request(&mut stream);
            stream.write_all(ACCEPTED.as_bytes()).unwrap();
            // The kept-alive connection is closed with the second request
            // unanswered, as a collector closing an idle connection does...
            let unanswered = read_request(&mut stream);
            drop(stream);
            // ...which comes again on a new connection.
            let (mut stream, _) = server_listener.accept().unwrap();
            let again = read_request(&mut stream);
            stream.write_all(ACCEPTED.as_bytes()).unwrap();
            (unanswered, again)
        });
        let mut collector = collector(addr, Duration::from_secs(5));
        collector.post(b"first").unwrap();
        collector.post(b"second").unwrap();
        let (unanswered, again) = server.join().unwrap();
        assert!(unanswered.ends_with(b"\r\n\r\nsecond"));
        assert!(again.ends_with(b"\r\n\r\nsecond"));
        assert_eq!(pending_connections(&listener), 0);
    }

    #[test]
    fn a_timeout_on_a_kept_alive_connection_is_not_resent() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server_listener = listener.try_clone().unwrap();
        let (done, wait) = mpsc::channel::<()>();
        let server = thread::spawn(move || {
            let (mut stream, _) = server_listener.accept().unwrap();
            let first = read_request(&mut stream);
            stream.write_all(ACCEPTED.as_bytes()).unwrap();
            // Reads the second request and never answers it, keeping the
            // connection open until the test is done.
            let second = read_request(&mut stream);
            let _ = wait.recv();
            (first, second)
        });
        let mut collector = collector(addr, Duration::from_millis(200));
        collector.post(b"first").unwrap();
        match collector.post(b"second") {
            Err(error) => assert!(error.is_timeout(), "{error:?}"),
            Ok(()) => panic!("answered"),
        }
        // No second connection was made to send the request again.
        assert_eq!(pending_connections(&listener), 0);
        done.send(()).unwrap();
        let (first, second) = server.join().unwrap();
        assert!(first.ends_with(b"\r\n\r\nfirst"));
        assert!(second.ends_with(b"\r\n\r\nsecond"));
    }

    #[test]
    fn a_trickling_answer_is_cut_at_the_timeout() {
        // Each byte of the head would reset a per-read timeout; the deadline
        // covers the whole request.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            read_request(&mut stream);
            stream.write_all(b"HTTP/1.1 202 Accepted\r\n").unwrap();
            // Bounded: stops once the client has hung up, or after 100 s.
            for _ in 0..2000 {
                if stream.write_all(b"x").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
        });
        let mut collector = collector(addr, Duration::from_millis(300));
        match collector.post(b"x") {
            Err(error) => assert!(error.is_timeout(), "{error:?}"),
            Ok(()) => panic!("answered"),
        }
        drop(collector);
        server.join().unwrap();
    }

    #[test]
    fn non_2xx_is_an_error_with_the_status_and_body() {
        let (addr, server) = serve(vec!["HTTP/1.1 400 Bad Request\r\nContent-Length: 7\r\n\r\nbad tag"]);
        let mut collector = collector(addr, Duration::from_secs(5));
        match collector.post(b"x") {
            Err(error @ HttpError::Status { code: 400, .. }) => {
                assert_eq!(error.to_string(), "HTTP status 400: bad tag")
            }
            other => panic!("{other:?}"),
        }
        server.join().unwrap();
    }

    #[test]
    fn a_closed_port_is_refused_without_back_off() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let mut collector = collector(port, Duration::from_secs(5));
        // Refused at once, not timed out: no waiting, and no back-off either.
        for _ in 0..2 {
            match collector.post(b"x") {
                Err(HttpError::Transport(ureq::Error::Io(error))) => {
                    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_silent_server_times_out_then_backs_off() {
        // The kernel accepts the connection; nothing ever answers.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut collector = collector(addr, Duration::from_millis(200));
        match collector.post(b"x") {
            Err(error) => assert!(error.is_timeout(), "{error:?}"),
            Ok(()) => panic!("answered"),
        }
        // Backing off: the next post fails without connecting.
        assert!(matches!(collector.post(b"x"), Err(HttpError::BackingOff)));
        assert_eq!(pending_connections(&listener), 1);
    }

    #[test]
    fn endpoints_are_parsed() {
        let parsed = |url: &str| parse_endpoint(url).map(|uri| uri.to_string());
        assert_eq!(parsed("http://127.0.0.1:14268").unwrap(), "http://127.0.0.1:14268/api/traces");
        assert_eq!(parsed("http://jaeger:14268/").unwrap(), "http://jaeger:14268/api/traces");
        assert_eq!(parsed("http://[::1]:80/v1/x?a=b").unwrap(), "http://[::1]:80/v1/x?a=b");
        for (url, why) in [
            ("", "no scheme"),
            ("http://", "not a URL"),
            ("127.0.0.1:14268", "no scheme"),
            ("jaeger/api/traces", "no scheme"),
            ("ftp://jaeger/", "neither http:// nor https://"),
            ("http://user:pw@jaeger/", "with_header"),
            ("http:// spaced/", "not a URL"),
        ] {
            let error = parsed(url).unwrap_err();
            assert!(error.contains(why), "{url:?}: {error}");
        }
        let https = parsed("https://jaeger.example.com/api/traces");
        if cfg!(feature = "tls") {
            assert_eq!(https.unwrap(), "https://jaeger.example.com/api/traces");
        } else {
            assert!(https.unwrap_err().contains("`tls` feature"));
        }
    }
}
