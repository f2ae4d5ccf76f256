//! The server side of HTTP tests that need no Jaeger, shared by the
//! reporter's unit tests (`src/http.rs`) and the tests that need no Jaeger.
#![allow(dead_code)] // each user takes a part

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};

/// Reads one request, head and `Content-Length` body.
pub fn read_request(stream: &mut TcpStream) -> Vec<u8> {
    let mut request = Vec::new();
    let mut byte = [0u8; 1];
    while !request.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        request.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&request).to_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().trim().parse().unwrap();
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    request.extend_from_slice(&body);
    request
}

/// How many connections wait to be accepted on `listener`. Every `connect`
/// that returned has completed, so none is still on its way.
pub fn pending_connections(listener: &TcpListener) -> usize {
    listener.set_nonblocking(true).unwrap();
    let mut count = 0;
    loop {
        match listener.accept() {
            Ok(_) => count += 1,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return count,
            Err(error) => panic!("{error}"),
        }
    }
}
