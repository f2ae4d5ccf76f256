//! Test servers for minitrace's reporters, all on 127.0.0.1: an HTTP/1.1
//! server that answers from a script (plain or over TLS), certificates made
//! at test time (a CA and the certificates it issues, or self-signed ones),
//! and with the `grpc` feature an OTLP/gRPC server (plain or over TLS);
//! and the reporters' shared allocation check ([`allocations`]).
//!
//! Every server stops when dropped; a connection it holds open on purpose
//! ([`Answer::Silent`]) is let go then, or after 30 s at most.

pub mod allocations;
#[cfg(feature = "grpc")]
mod grpc;
mod tls;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[cfg(feature = "grpc")]
pub use crate::grpc::GrpcServer;
pub use crate::tls::{Identity, TestCa};

/// The longest a connection is held open, or a read waited for.
const MAX_HOLD: Duration = Duration::from_secs(30);

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Answer {
    /// A status line, headers and a body.
    Status(u16, Vec<(&'static str, String)>, Vec<u8>),
    /// Reads the request and never answers, holding the connection open.
    Silent,
    /// Reads the request and closes the connection without an answer.
    Close,
}

impl Answer {
    /// A status with no headers and no body.
    pub fn status(code: u16) -> Answer {
        Answer::Status(code, Vec::new(), Vec::new())
    }

    /// A redirect with `code` to `location`.
    pub fn redirect(code: u16, location: &str) -> Answer {
        Answer::Status(code, vec![("location", location.to_owned())], Vec::new())
    }
}

/// A request as the server read it.
#[derive(Clone, Debug)]
pub struct Received {
    /// When it was read.
    pub at: Instant,
    /// The request line, e.g. `POST /v1/traces HTTP/1.1`.
    pub line: String,
    /// Headers, their names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, un-gzipped if it was gzipped.
    pub body: Vec<u8>,
}

impl Received {
    /// The value of the header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    answers: Mutex<Vec<Answer>>,
    connections: AtomicUsize,
    handshake_failures: AtomicUsize,
    stop: AtomicBool,
}

/// An HTTP/1.1 server on 127.0.0.1 that gives its scripted answers in turn,
/// then the default answer (`200 OK`, no body) to every later request.
pub struct Server {
    addr: SocketAddr,
    tls: bool,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).field("tls", &self.tls).finish()
    }
}

impl Server {
    /// A plain HTTP server.
    pub fn start(answers: Vec<Answer>) -> Server {
        Server::spawn(answers, None)
    }

    /// An HTTPS server presenting `identity`'s certificate.
    pub fn start_tls(answers: Vec<Answer>, identity: &Identity) -> Server {
        Server::spawn(answers, Some(identity.server_config()))
    }

    fn spawn(answers: Vec<Answer>, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared { answers: Mutex::new(answers), ..Shared::default() });
        let server = Server { addr, tls: tls.is_some(), shared: shared.clone() };
        thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let (shared, tls) = (shared.clone(), tls.clone());
                thread::spawn(move || connection(stream, tls, &shared));
            }
        });
        server
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, e.g. `http://127.0.0.1:40123`, or `https://`.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Every request read so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// TLS handshakes that failed so far.
    pub fn handshake_failures(&self) -> usize {
        self.shared.handshake_failures.load(Ordering::Relaxed)
    }

    /// TLS handshakes that failed, once there are `expected` of them or
    /// 10 s have passed: the server learns of a failure after the client.
    pub fn handshake_failures_reaching(&self, expected: usize) -> usize {
        let start = Instant::now();
        while self.handshake_failures() < expected && start.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(10));
        }
        self.handshake_failures()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// Serves one connection: the TLS handshake if any, then requests until
/// the client closes it or an answer ends it.
fn connection(stream: TcpStream, tls: Option<Arc<rustls::ServerConfig>>, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(MAX_HOLD));
    let _ = stream.set_nodelay(true);
    match tls {
        None => serve(stream, shared),
        Some(config) => {
            let mut stream = stream;
            let Ok(mut tls) = rustls::ServerConnection::new(config) else { return };
            while tls.is_handshaking() {
                if tls.complete_io(&mut stream).is_err() {
                    shared.handshake_failures.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            serve(rustls::StreamOwned::new(tls, stream), shared);
        }
    }
}

fn serve(stream: impl Read + Write, shared: &Shared) {
    let mut stream = BufReader::new(stream);
    while let Some(request) = read_request(&mut stream) {
        shared.received.lock().unwrap().push(request);
        let answer = {
            let mut answers = shared.answers.lock().unwrap();
            if answers.is_empty() {
                Answer::status(200)
            } else {
                answers.remove(0)
            }
        };
        match answer {
            Answer::Silent => {
                let start = Instant::now();
                while !shared.stop.load(Ordering::Relaxed) && start.elapsed() < MAX_HOLD {
                    thread::sleep(Duration::from_millis(20));
                }
                return;
            }
            Answer::Close => return,
            Answer::Status(code, headers, body) => {
                let mut head = format!("HTTP/1.1 {code} Scripted\r\ncontent-length: {}\r\n", body.len());
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                let writer = stream.get_mut();
                let written = writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(&body));
                if written.and_then(|()| writer.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

/// One request with a `content-length` body, or `None` at the end of the
/// connection.
fn read_request(reader: &mut impl BufRead) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers.iter().find(|(n, _)| n == "content-length")?.1.parse().ok()?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    if headers.iter().any(|(n, v)| n == "content-encoding" && v == "gzip") {
        body = gunzip(&body).ok()?;
    }
    Some(Received { at: Instant::now(), line: line.trim_end().to_owned(), headers, body })
}

fn gunzip(body: &[u8]) -> io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(body).read_to_end(&mut plain)?;
    Ok(plain)
}

/// A local TCP port that nothing listens on.
pub fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}
