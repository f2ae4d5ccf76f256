//! The HTTP client and the delivery around it, against scripted servers on
//! 127.0.0.1: what each answer comes to, what is sent again and what never
//! leaves for another host.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use minitrace_delivery::{Attempt, Delivery, Endpoint, HttpClient, Outcome, Report};
use minitrace_delivery_testkit::{closed_port, Answer, Server};

fn client(url: &str) -> HttpClient {
    HttpClient::new(Endpoint::parse(url).unwrap().or_path("/api/traces"), "application/x-thrift")
}

fn delivered() -> Attempt {
    Attempt::Delivered { rejected: 0, message: String::new() }
}

#[test]
fn posts_the_body_with_its_headers_on_one_kept_alive_connection() {
    let server = Server::start(Vec::new());
    let mut client = client(&server.url());
    client.set_content_encoding(Some("gzip"));
    client.add_header("Authorization", "Bearer first").unwrap();
    client.add_header("x-tenant", "shop").unwrap();
    // A later header of the same name replaces the earlier one.
    client.add_header("authorization", "Bearer t0k").unwrap();
    client.set_user_agent("tests/1");
    let gzip = |text: &[u8]| {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text).unwrap();
        encoder.finish().unwrap()
    };
    assert_eq!(client.post(&gzip(b"first"), Duration::from_secs(10)), delivered());
    assert_eq!(client.post(&gzip(b"second"), Duration::from_secs(10)), delivered());
    let received = server.received();
    assert_eq!(received.len(), 2);
    for (request, body) in received.iter().zip([&b"first"[..], b"second"]) {
        assert_eq!(request.line, "POST /api/traces HTTP/1.1");
        assert_eq!(request.body, body);
        assert_eq!(request.header("content-type"), Some("application/x-thrift"));
        assert_eq!(request.header("authorization"), Some("Bearer t0k"));
        assert_eq!(request.header("x-tenant"), Some("shop"));
        assert_eq!(request.header("user-agent"), Some("tests/1"));
        assert_eq!(request.headers.iter().filter(|(name, _)| name == "authorization").count(), 1);
    }
    assert_eq!(server.connections(), 1);
    assert_eq!(client.header_names(), ["x-tenant", "authorization"]);
}

#[test]
fn statuses_are_read_as_the_otlp_spec_says() {
    for code in [429, 502, 503, 504] {
        let server =
            Server::start(vec![Answer::Status(code, vec![("retry-after", "7".into())], b"busy".to_vec())]);
        let attempt = client(&server.url()).post(b"x", Duration::from_secs(10));
        let error = format!("HTTP {code}: busy");
        assert_eq!(attempt, Attempt::Retry { error, after: Some(Duration::from_secs(7)) });
    }
    for code in [400, 401, 404, 413, 500, 501] {
        let server = Server::start(vec![Answer::Status(code, Vec::new(), b"no\x00 thanks\n".to_vec())]);
        let attempt = client(&server.url()).post(b"x", Duration::from_secs(10));
        assert_eq!(attempt, Attempt::Failed(format!("HTTP {code}: no thanks")));
    }
    let server = Server::start(vec![Answer::status(202), Answer::status(204)]);
    let client = client(&server.url());
    assert_eq!(client.post(b"x", Duration::from_secs(10)), delivered());
    assert_eq!(client.post(b"x", Duration::from_secs(10)), delivered());
}

#[test]
fn the_answer_reader_reads_a_2xx_body() {
    let server =
        Server::start(vec![Answer::Status(200, vec![("content-type", "text/x-test".into())], b"2".to_vec())]);
    let mut client = client(&server.url());
    client.set_answer_reader(|body, content_type| {
        assert_eq!(content_type, Some("text/x-test"));
        let rejected = std::str::from_utf8(body).unwrap().parse().unwrap();
        minitrace_delivery::PartialSuccess::new(rejected, "two too old")
    });
    let attempt = client.post(b"x", Duration::from_secs(10));
    assert_eq!(attempt, Attempt::Delivered { rejected: 2, message: "two too old".into() });
}

#[test]
fn a_redirect_is_a_failure_and_nothing_goes_where_it_points() {
    let elsewhere = Server::start(Vec::new());
    for code in [301, 302, 303, 307, 308] {
        let location = format!("http://user:pw@{}/stolen?key=1", elsewhere.addr());
        let server = Server::start(vec![Answer::redirect(code, &location)]);
        let mut client = client(&server.url());
        client.add_header("x-api-key", "SECRET").unwrap();
        match client.post(b"spans", Duration::from_secs(10)) {
            Attempt::Failed(error) => {
                let to = format!("to http://{}/stolen", elsewhere.addr());
                assert!(error.starts_with(&format!("HTTP {code}: a redirect {to}, not followed")), "{error}");
                assert!(!error.contains("pw") && !error.contains("key=1"), "{error}");
            }
            other => panic!("{code}: {other:?}"),
        }
        assert_eq!(server.received().len(), 1, "{code}");
    }
    assert_eq!(elsewhere.connections(), 0);
}

#[test]
fn a_request_closed_unanswered_is_sent_again_on_a_new_connection() {
    // The second request finds its kept-alive connection closed unanswered,
    // as when a collector closes an idle connection just as it is used.
    let server = Server::start(vec![Answer::status(202), Answer::Close]);
    let client = client(&server.url());
    let mut delivery = Delivery::new("test", server.url());
    let mut report = Report::new(Duration::from_secs(10));
    for body in [&b"first"[..], b"second"] {
        let outcome = delivery.deliver(&mut report, 1, body.len() as u64, |left| client.post(body, left));
        assert_eq!(outcome, Outcome::Sent { rejected: 0 });
    }
    let bodies: Vec<Vec<u8>> = server.received().into_iter().map(|request| request.body).collect();
    assert_eq!(bodies, [&b"first"[..], b"second", b"second"]);
    assert_eq!(server.connections(), 2);
    let stats = delivery.counters().get();
    assert_eq!((stats.spans_sent, stats.requests, stats.retries, stats.messages_sent), (2, 3, 1, 2));
}

#[test]
fn a_timeout_is_not_resent_and_pauses_the_endpoint() {
    let server = Server::start(vec![Answer::Silent]);
    let client = client(&server.url());
    let mut delivery = Delivery::new("test", server.url());
    let deliver = |delivery: &mut Delivery| {
        let mut report = Report::new(Duration::from_millis(300));
        delivery.deliver(&mut report, 3, 1, |left| client.post(b"x", left))
    };
    assert_eq!(deliver(&mut delivery), Outcome::Failed);
    assert!(delivery.counters().last_error().unwrap().contains("no answer in time"));
    // Paused: the next one fails without a connection.
    assert_eq!(deliver(&mut delivery), Outcome::Failed);
    assert!(delivery.counters().last_error().unwrap().contains("timed out less than"));
    assert_eq!(server.received().len(), 1);
    assert_eq!(server.connections(), 1);
    let stats = delivery.counters().get();
    assert_eq!((stats.spans_failed, stats.requests, stats.retries), (6, 1, 0));
}

#[test]
fn a_trickling_answer_is_cut_at_the_timeout() {
    // Each byte would reset a timeout per read; the timeout covers the whole.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = [0; 1024];
        let _ = stream.read(&mut request).unwrap();
        stream.write_all(b"HTTP/1.1 202 Accepted\r\n").unwrap();
        // Bounded: stops once the client has hung up, or after 100 s.
        for _ in 0..2000 {
            if stream.write_all(b"x").is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
    });
    let client = client(&format!("http://{addr}"));
    let start = Instant::now();
    assert!(matches!(client.post(b"x", Duration::from_millis(300)), Attempt::TimedOut(_)));
    // A sanity bound, not a timing figure.
    assert!(start.elapsed() < Duration::from_secs(30));
    drop(client);
    server.join().unwrap();
}

#[test]
fn a_closed_port_is_unreachable() {
    let client = client(&format!("http://{}", closed_port()));
    match client.post(b"x", Duration::from_secs(10)) {
        Attempt::Unreachable(error) => assert!(error.contains("refused"), "{error}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn debug_shows_header_names_only() {
    let mut client = client("http://127.0.0.1:14268");
    client.add_header("authorization", "Bearer SECRET").unwrap();
    let shown = format!("{client:?}");
    assert!(shown.contains("authorization") && !shown.contains("SECRET"), "{shown}");
    let error = client.add_header("x-key", "SECRET\n").unwrap_err();
    assert!(!error.contains("SECRET"), "{error}");
}

#[cfg(feature = "tls")]
mod tls {
    use minitrace_delivery::RootCertificates;
    use minitrace_delivery_testkit::{Identity, TestCa};

    use super::*;

    fn https_client(server: &Server, roots: Option<&str>) -> HttpClient {
        let mut client = client(&server.url());
        if let Some(pem) = roots {
            client.set_root_certificates(RootCertificates::from_pem(pem.as_bytes()).unwrap());
        }
        client
    }

    #[test]
    fn a_certificate_from_a_trusted_ca_is_accepted() {
        let ca = TestCa::new();
        let server = Server::start_tls(Vec::new(), &ca.issue(&["127.0.0.1", "localhost"]));
        let client = https_client(&server, Some(ca.pem()));
        assert_eq!(client.post(b"over tls", Duration::from_secs(10)), delivered());
        assert_eq!(server.received()[0].body, b"over tls");
        assert_eq!(server.handshake_failures(), 0);
    }

    #[test]
    fn an_untrusted_or_misnamed_certificate_is_refused() {
        let ca = TestCa::new();
        let cases = [
            ("self-signed", Identity::self_signed(&["127.0.0.1"]), Some(ca.pem())),
            ("self-signed, webpki roots", Identity::self_signed(&["127.0.0.1"]), None),
            ("another name", ca.issue(&["example.test"]), Some(ca.pem())),
        ];
        for (case, identity, roots) in cases {
            let server = Server::start_tls(Vec::new(), &identity);
            let client = https_client(&server, roots);
            match client.post(b"x", Duration::from_secs(10)) {
                Attempt::Failed(error) => assert!(error.starts_with("TLS: "), "{case}: {error}"),
                other => panic!("{case}: {other:?}"),
            }
            assert!(server.received().is_empty(), "{case}");
        }
    }

    #[test]
    fn root_certificates_are_checked() {
        let ca = TestCa::new();
        let roots = RootCertificates::from_pem(format!("{}\n{}", ca.pem(), TestCa::new().pem()).as_bytes());
        assert_eq!(roots.unwrap().len(), 2);
        // A key alone, or a certificate that is not one.
        let key = Identity::self_signed(&["x"]).key_pem().to_owned();
        assert!(RootCertificates::from_pem(key.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("no certificate"));
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(RootCertificates::from_pem(garbage.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("certificate 1"));
    }
}
