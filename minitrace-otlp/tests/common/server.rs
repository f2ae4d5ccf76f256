//! A tiny HTTP/1.1 server on 127.0.0.1 that answers from a script, for the
//! tests that need a misbehaving OTLP endpoint rather than Jaeger.
#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One scripted answer.
pub enum Answer {
    /// A status line, headers and a body.
    Status(u16, Vec<(&'static str, String)>, Vec<u8>),
    /// Reads the request and never answers.
    Silent,
}

impl Answer {
    /// A status with no headers and no body.
    pub fn status(code: u16) -> Answer {
        Answer::Status(code, Vec::new(), Vec::new())
    }
}

/// A request as the server read it.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    /// The request line, e.g. `POST /v1/traces HTTP/1.1`.
    pub line: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, un-gzipped if it was gzipped.
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

pub struct Server {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    /// Starts a server that gives `answers` in turn, then `200 OK` to
    /// every later request.
    pub fn start(answers: Vec<Answer>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        let log = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, answers) = (log.clone(), answers.clone());
                std::thread::spawn(move || serve(stream, &log, &answers));
            }
        });
        Server { addr, received }
    }

    /// The base URL, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Answers the requests of one connection until the client closes it.
fn serve(stream: TcpStream, log: &Mutex<Vec<Received>>, answers: &Mutex<std::vec::IntoIter<Answer>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader) {
        log.lock().unwrap().push(request);
        let answer = answers.lock().unwrap().next().unwrap_or(Answer::status(200));
        match answer {
            Answer::Silent => {
                // Holds the connection open past any timeout of the tests.
                std::thread::sleep(Duration::from_secs(60));
                return;
            }
            Answer::Status(code, headers, body) => {
                let mut head = format!("HTTP/1.1 {code} Scripted\r\ncontent-length: {}\r\n", body.len());
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                if writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(&body)).is_err() {
                    return;
                }
            }
        }
    }
}

/// One request with a `content-length` body, or `None` at the end of the
/// connection.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Received> {
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
        headers.push((name.trim().to_lowercase(), value.trim().to_string()));
    }
    let length: usize = headers.iter().find(|(n, _)| n == "content-length")?.1.parse().ok()?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    if headers.iter().any(|(n, v)| n == "content-encoding" && v == "gzip") {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(body.as_slice()).read_to_end(&mut plain).unwrap();
        body = plain;
    }
    Some(Received { at: Instant::now(), line: line.trim_end().to_string(), headers, body })
}
