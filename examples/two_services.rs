//! One trace across two processes: a `frontend` that asks a `backend` for a
//! price over TCP, passing its span on in a W3C `traceparent` header, so
//! that Jaeger shows the backend's spans under the frontend's call.
//!
//! ```sh
//! bash scripts/jaeger.sh                                # a Jaeger on 127.0.0.1
//! cargo run --release --example two_services            # prints the trace id
//! ```
//!
//! The program is both services: run without arguments it is the frontend,
//! which starts this same binary again as `two_services backend`. The
//! backend listens on 127.0.0.1 at a port the kernel picks, tells the
//! frontend which on its first line of output, serves one request, and
//! exits. Each process has its own reporter and service name: the frontend
//! posts to the collector over HTTP (`JAEGER_COLLECTOR`, a URL, default
//! `http://127.0.0.1:14268`), the backend sends UDP datagrams to the agent
//! port (`JAEGER_AGENT`, host:port, default `127.0.0.1:6831`).
//!
//! The protocol is a sliver of HTTP/1.1 written here: a request line, header
//! lines, an empty line; an answer of a status line, header lines, an empty
//! line and a body of `content-length` bytes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use minitrace::collector::Config;
use minitrace::prelude::*;
use minitrace_jaeger::JaegerReporter;

/// How long either side waits for the other before giving up.
const PATIENCE: Duration = Duration::from_secs(30);

fn main() {
    match std::env::args().nth(1).as_deref() {
        None | Some("frontend") => frontend(),
        Some("backend") => backend(),
        Some(other) => {
            eprintln!("usage: two_services [frontend|backend], not {other:?}");
            std::process::exit(2);
        }
    }
}

// ---- the frontend -------------------------------------------------------

fn frontend() {
    let collector = std::env::var("JAEGER_COLLECTOR").unwrap_or_else(|_| "http://127.0.0.1:14268".into());
    let reporter =
        JaegerReporter::http_endpoint(&collector, "frontend").unwrap_or_else(|error| panic!("{error}"));
    let stats = reporter.stats();
    minitrace::set_reporter(reporter, Config::default());

    let (mut backend, backend_addr) = start_backend();

    let context = SpanContext::random();
    let page = {
        let root = Span::root("GET /checkout", context).with_property(|| ("user", "alice"));
        let _guard = root.set_local_parent();
        let cart = load_cart("alice");
        let price = fetch_price(backend_addr, &cart);
        render(&cart, &price)
    };

    // The backend flushes its own spans before it exits.
    let status = backend.wait().expect("the backend's exit status");
    assert!(status.success(), "the backend failed: {status}");
    minitrace::flush();
    // The reporter's sender thread may still be waiting for the answers.
    stats.wait_for_delivery(std::time::Duration::from_secs(10));

    println!("{page}");
    let sent = stats.get();
    println!("frontend sent {} spans ({} lost)", sent.spans_sent, sent.spans_failed);
    println!("trace id: {}", context.trace_id);
}

/// Starts this program again as the backend and reads the address it
/// listens on from its first line of output.
fn start_backend() -> (std::process::Child, SocketAddr) {
    let exe = std::env::current_exe().expect("this program's path");
    let mut child = Command::new(exe)
        .arg("backend")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the backend process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the backend's first line");
    let addr = line.trim().strip_prefix("listening on ").and_then(|addr| addr.parse().ok());
    let addr = addr.unwrap_or_else(|| panic!("the backend said {line:?}, not `listening on <address>`"));
    (child, addr)
}

#[trace(short_name = true, properties = { "user": "{user}" })]
fn load_cart(user: &str) -> Vec<String> {
    let _span = LocalSpan::enter_with_local_parent("read session");
    vec!["xylophone".to_string(), "mallets".to_string()]
}

/// The client span that makes the request: its context travels in the
/// `traceparent` header, so the backend's root span becomes its child.
#[trace(short_name = true)]
fn fetch_price(backend: SocketAddr, cart: &[String]) -> String {
    let traceparent = SpanContext::current_local_parent()
        .map(|context| context.encode_w3c_traceparent())
        .unwrap_or_default();
    let mut stream = {
        let _span = LocalSpan::enter_with_local_parent("connect");
        TcpStream::connect_timeout(&backend, PATIENCE).expect("a connection to the backend")
    };
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(stream, "GET /price?items={} HTTP/1.1\r\ntraceparent: {traceparent}\r\n\r\n", cart.join(","))
        .expect("the request sent");
    let _span = LocalSpan::enter_with_local_parent("read answer");
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    assert_eq!(status, "HTTP/1.1 200 OK", "the backend's answer");
    let length: usize = header(&headers, "content-length").and_then(|n| n.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("the answer's body");
    String::from_utf8_lossy(&body).into_owned()
}

#[trace(short_name = true)]
fn render(cart: &[String], price: &str) -> String {
    format!("checkout: {} for {price}", cart.join(" and "))
}

// ---- the backend --------------------------------------------------------

fn backend() {
    let agent = std::env::var("JAEGER_AGENT").unwrap_or_else(|_| "127.0.0.1:6831".into());
    let agent: SocketAddr =
        agent.parse().unwrap_or_else(|_| panic!("JAEGER_AGENT={agent:?} is not an ip:port"));
    let reporter = JaegerReporter::new(agent, "backend").expect("a UDP socket for the agent");
    minitrace::set_reporter(reporter, Config::default());

    let listener = TcpListener::bind("127.0.0.1:0").expect("a port on 127.0.0.1");
    println!("listening on {}", listener.local_addr().unwrap());
    std::io::stdout().flush().unwrap();

    let stream = accept_within(&listener, PATIENCE);
    serve(stream);
    minitrace::flush();
}

/// The one connection this backend serves; it gives up after `patience`,
/// so that it never outlives a frontend that died.
fn accept_within(listener: &TcpListener, patience: Duration) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + patience;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return stream;
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(error) => panic!("no frontend came: {error}"),
        }
    }
}

fn serve(stream: TcpStream) {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut reader = BufReader::new(stream);
    let (request_line, headers) = read_head(&mut reader);

    // The caller's span is the parent; its sampled flag says whether to record.
    let parent = header(&headers, "traceparent").and_then(SpanContext::decode_w3c_traceparent_with_sampled);
    let root = match parent {
        Some((context, true)) => Span::root("GET /price", context),
        Some((_, false)) => Span::noop(),
        None => Span::root("GET /price", SpanContext::random()),
    };
    let _guard = root.set_local_parent();

    let items = parse_request(&request_line);
    let total: u32 = items.iter().map(|item| lookup_price(item)).sum();
    let body = format!("{total} EUR");
    let _span = LocalSpan::enter_with_local_parent("write answer");
    let mut stream = reader.into_inner();
    write!(stream, "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len())
        .expect("the answer sent");
}

#[trace(short_name = true)]
fn parse_request(request_line: &str) -> Vec<String> {
    let target = request_line.split(' ').nth(1).unwrap_or("");
    let items = target.split_once("items=").map_or("", |(_, items)| items);
    items.split(',').filter(|item| !item.is_empty()).map(str::to_string).collect()
}

#[trace(short_name = true, properties = { "item": "{item}" })]
fn lookup_price(item: &str) -> u32 {
    let _span = LocalSpan::enter_with_local_parent("db query").with_property(|| ("table", "prices"));
    match item {
        "xylophone" => 120,
        _ => 15,
    }
}

// ---- the protocol -------------------------------------------------------

/// Reads a head: its first line, then `name: value` lines up to an empty one.
fn read_head(reader: &mut impl BufRead) -> (String, Vec<(String, String)>) {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line).expect("a line of the head");
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if read == 0 || line.is_empty() {
            break;
        }
        lines.push(line);
    }
    let mut lines = lines.into_iter();
    let first = lines.next().unwrap_or_default();
    let headers = lines
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect();
    (first, headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
}
