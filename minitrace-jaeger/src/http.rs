//! The collector transport: `POST /api/traces` with a Thrift Binary `Batch`.
//!
//! A minimal blocking HTTP/1.1 client on [`std::net::TcpStream`]: one
//! keep-alive connection, a `Content-Length` body, and a response read only
//! as far as the status line, headers and a short body. Plain `http://` to a
//! known address is all the Jaeger collector endpoint needs; a general client
//! crate would bring TLS, DNS, redirects, pools and tens of dependencies to the
//! collector thread for none of them.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The longest response head (status line and headers) accepted.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The longest response body read (and kept for error messages).
const MAX_BODY_BYTES: usize = 64 * 1024;
/// How long to stop trying after a timeout, so that an unresponsive
/// collector does not stall every report.
const TIMEOUT_BACKOFF: Duration = Duration::from_secs(5);

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum HttpError {
    /// Connecting, writing or reading failed.
    Io(io::Error),
    /// The connection was found closed (end of stream, reset, aborted or a
    /// broken pipe) before any byte of an answer: the collector closed a
    /// kept-alive connection, so the request was not processed, and `post`
    /// sends it once more on a new connection. Never a timeout: a slow
    /// collector may still be processing the request.
    Stale(io::Error),
    /// The collector answered with a status other than 2xx.
    Status { code: u16, body: String },
    /// The answer was not HTTP/1.x.
    Malformed(&'static str),
    /// Not tried: an earlier request timed out moments ago.
    BackingOff,
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Io(error) | HttpError::Stale(error) => write!(f, "{error}"),
            HttpError::Status { code, body } => write!(f, "HTTP status {code}: {}", body.trim()),
            HttpError::Malformed(what) => write!(f, "malformed HTTP response: {what}"),
            HttpError::BackingOff => write!(f, "not sent: the collector timed out moments ago"),
        }
    }
}

impl From<io::Error> for HttpError {
    fn from(error: io::Error) -> HttpError {
        HttpError::Io(error)
    }
}

/// A client of one collector.
pub(crate) struct Collector {
    addr: SocketAddr,
    /// The request line and headers up to `Content-Length: `.
    head: String,
    timeout: Duration,
    connection: Option<TcpStream>,
    backoff_until: Option<Instant>,
}

impl Collector {
    pub(crate) fn new(addr: SocketAddr, path: &str, timeout: Duration) -> Collector {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: minitrace-jaeger/{}\r\n\
             Content-Type: application/x-thrift\r\nContent-Length: ",
            env!("CARGO_PKG_VERSION")
        );
        Collector {
            addr,
            head,
            timeout: timeout.max(Duration::from_millis(1)),
            connection: None,
            backoff_until: None,
        }
    }

    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(Duration::from_millis(1));
        self.connection = None;
    }

    /// Posts `body`; Ok on a 2xx answer.
    pub(crate) fn post(&mut self, body: &[u8]) -> Result<(), HttpError> {
        if let Some(until) = self.backoff_until {
            if Instant::now() < until {
                return Err(HttpError::BackingOff);
            }
            self.backoff_until = None;
        }
        let result = match self.connection.take() {
            // A kept-alive connection may have been closed by the server
            // since: if it is found closed before any byte of an answer, the
            // request was not processed and is sent again on a new
            // connection. A timeout is not retried: the collector may be
            // slow, and may still process the request.
            Some(stream) => match self.exchange(stream, body) {
                Err(HttpError::Stale(_)) => self.connect().and_then(|s| self.exchange(s, body)),
                other => other,
            },
            None => self.connect().and_then(|s| self.exchange(s, body)),
        };
        match result {
            Ok(()) => Ok(()),
            Err(error) => {
                if let HttpError::Io(io) = &error {
                    if matches!(io.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) {
                        self.backoff_until = Some(Instant::now() + TIMEOUT_BACKOFF);
                    }
                }
                Err(error)
            }
        }
    }

    fn connect(&self) -> Result<TcpStream, HttpError> {
        let stream = TcpStream::connect_timeout(&self.addr, self.timeout)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// One request and its answer.
    fn exchange(&mut self, mut stream: TcpStream, body: &[u8]) -> Result<(), HttpError> {
        let mut head = String::with_capacity(self.head.len() + 24);
        head.push_str(&self.head);
        head.push_str(&body.len().to_string());
        head.push_str("\r\n\r\n");
        let sent = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
        // Nothing of an answer was read yet.
        sent.map_err(unanswered)?;

        let response = read_response(&mut stream)?;
        if response.keep_alive {
            self.connection = Some(stream);
        }
        if (200..300).contains(&response.status) {
            Ok(())
        } else {
            Err(HttpError::Status { code: response.status, body: response.body })
        }
    }
}

/// The error for `error` when no byte of an answer was read: [`HttpError::Stale`]
/// if it tells that the connection was closed, else [`HttpError::Io`].
fn unanswered(error: io::Error) -> HttpError {
    use io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    if matches!(error.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe) {
        HttpError::Stale(error)
    } else {
        HttpError::Io(error)
    }
}

struct Response {
    status: u16,
    body: String,
    /// Whether the connection can carry another request.
    keep_alive: bool,
}

/// Reads a response: its head, and its body when it is short and its length
/// is known.
fn read_response(stream: &mut TcpStream) -> Result<Response, HttpError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(HttpError::Malformed("head too long"));
        }
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => {
                let closed =
                    io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before an answer");
                return Err(unanswered(closed));
            }
            Ok(0) => return Err(HttpError::Malformed("connection closed in the head")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) if buf.is_empty() => return Err(unanswered(error)),
            Err(error) => return Err(HttpError::Io(error)),
        }
    };

    let head = String::from_utf8_lossy(&buf[..head_end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Malformed("not HTTP/1.x"));
    }
    let status = parts
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or(HttpError::Malformed("bad status code"))?;

    let mut content_length = None;
    let mut keep_alive = version != "HTTP/1.0";
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = value.parse::<usize>().ok();
        } else if name.eq_ignore_ascii_case("connection") {
            keep_alive = !value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked bodies are not parsed: the connection is not reused.
            keep_alive = false;
        }
    }

    let mut body = buf.split_off(head_end);
    match content_length {
        Some(length) if length <= MAX_BODY_BYTES => {
            while body.len() < length {
                match stream.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => body.extend_from_slice(&chunk[..n]),
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            keep_alive &= body.len() == length;
        }
        // A long or unknown-length body is not waited for.
        _ => keep_alive = false,
    }
    body.truncate(MAX_BODY_BYTES);
    Ok(Response { status, body: String::from_utf8_lossy(&body).into_owned(), keep_alive })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[cfg(test)]
#[path = "../tests/common/http_server.rs"]
mod http_server;

#[cfg(test)]
mod tests {
    use super::http_server::{pending_connections, read_request};
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;
    use std::thread;

    const ACCEPTED: &str = "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";

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
        let mut collector = Collector::new(addr, "/api/traces", Duration::from_secs(5));
        collector.post(b"first").unwrap();
        collector.post(b"second").unwrap();
        let requests = server.join().unwrap();
        let first = String::from_utf8(requests[0].clone()).unwrap();
        assert!(first.starts_with("POST /api/traces HTTP/1.1\r\n"), "{first}");
        assert!(first.contains("Content-Type: application/x-thrift\r\n"));
        assert!(first.ends_with("Content-Length: 5\r\n\r\nfirst"), "{first}");
        assert!(requests[1].ends_with(b"\r\n\r\nsecond"));
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
        let mut collector = Collector::new(addr, "/api/traces", Duration::from_secs(5));
        collector.post(b"first").unwrap();
        collector.post(b"second").unwrap();
        let (first, second) = server.join().unwrap();
        assert!(first.ends_with(b"\r\n\r\nfirst"));
        assert!(second.ends_with(b"\r\n\r\nsecond"));
        // Two connections in all.
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
        let mut collector = Collector::new(addr, "/api/traces", Duration::from_millis(200));
        collector.post(b"first").unwrap();
        match collector.post(b"second") {
            Err(HttpError::Io(error)) => {
                assert!(matches!(error.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock))
            }
            other => panic!("{other:?}"),
        }
        // No second connection was made to send the request again.
        assert_eq!(pending_connections(&listener), 0);
        done.send(()).unwrap();
        let (first, second) = server.join().unwrap();
        assert!(first.ends_with(b"\r\n\r\nfirst"));
        assert!(second.ends_with(b"\r\n\r\nsecond"));
    }

    #[test]
    fn non_2xx_is_an_error_with_the_body() {
        let (addr, server) = serve(vec!["HTTP/1.1 400 Bad Request\r\nContent-Length: 7\r\n\r\nbad tag"]);
        let mut collector = Collector::new(addr, "/api/traces", Duration::from_secs(5));
        match collector.post(b"x") {
            Err(HttpError::Status { code: 400, body }) => assert_eq!(body, "bad tag"),
            other => panic!("{other:?}"),
        }
        server.join().unwrap();
    }

    #[test]
    fn a_closed_port_is_refused_without_back_off() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let mut collector = Collector::new(port, "/api/traces", Duration::from_secs(5));
        // Refused at once, not timed out: no waiting, and no back-off either.
        for _ in 0..2 {
            match collector.post(b"x") {
                Err(HttpError::Io(error)) => assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_silent_server_times_out_then_backs_off() {
        // The kernel accepts the connection; nothing ever answers.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut collector = Collector::new(addr, "/api/traces", Duration::from_millis(200));
        match collector.post(b"x") {
            Err(HttpError::Io(error)) => {
                assert!(matches!(error.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock))
            }
            other => panic!("{other:?}"),
        }
        // Backing off: the next post fails without connecting.
        assert!(matches!(collector.post(b"x"), Err(HttpError::BackingOff)));
        assert_eq!(pending_connections(&listener), 1);
    }
}
