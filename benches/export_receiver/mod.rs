use super::*;

static SPANS: AtomicU64 = AtomicU64::new(0);
static MALFORMED: AtomicU64 = AtomicU64::new(0);

pub fn run() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    // Ends with its parent: stdin closes.
    std::thread::spawn(|| {
        let mut rest = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut rest);
        std::process::exit(0);
    });
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || serve(stream));
    }
}

fn serve(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::with_capacity(1 << 16, stream);
    let mut body = Vec::new();
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        let mut content_type = String::new();
        let mut gzip = false;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "content-type" => content_type = value.trim().to_owned(),
                "content-encoding" => gzip = value.trim() == "gzip",
                _ => {}
            }
        }
        body.resize(length, 0);
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if gzip {
            let mut plain = Vec::new();
            if flate2::read::GzDecoder::new(body.as_slice()).read_to_end(&mut plain).is_err() {
                MALFORMED.fetch_add(1, Ordering::SeqCst);
            }
            body = plain;
        }
        let answer: Cow<str> = if request_line.starts_with("GET /count") {
            let text = format!("{} {}", SPANS.load(Ordering::SeqCst), MALFORMED.load(Ordering::SeqCst));
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{text}",
                text.len()
            )
            .into()
        } else {
            let spans = if content_type.contains("thrift") { thrift_spans(&body) } else { otlp_spans(&body) };
            match spans {
                Some(spans) => SPANS.fetch_add(spans, Ordering::SeqCst),
                None => MALFORMED.fetch_add(1, Ordering::SeqCst),
            };
            if content_type.contains("thrift") {
                "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".into()
            } else {
                "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n".into()
            }
        };
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// The receiver's span count, and the malformed bodies it saw.
pub fn count(port: u16) -> u64 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(b"GET /count HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n").unwrap();
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
    }
    let mut text = vec![0; length];
    reader.read_exact(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let mut parts = text.split(' ');
    let spans = parts.next().unwrap().parse().unwrap();
    let malformed: u64 = parts.next().unwrap().parse().unwrap();
    assert_eq!(malformed, 0, "the receiver could not decode some bodies");
    spans
}

/// The spans that arrived since `before`, once the count stops moving.
pub fn settle(port: u16, before: u64) -> u64 {
    let mut last = count(port);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = count(port);
        if now == last {
            return now - before;
        }
        last = now;
    }
}

/// A protobuf reader: each field's number, wire type and value.
struct Fields<'a>(&'a [u8]);

enum Value<'a> {
    Number,
    Bytes(&'a [u8]),
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

impl<'a> Iterator for Fields<'a> {
    type Item = Option<(u64, Value<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = || -> Option<(u64, Value<'a>)> {
            let key = varint(&mut self.0)?;
            let value = match key & 7 {
                0 => {
                    varint(&mut self.0)?;
                    Value::Number
                }
                1 | 5 => {
                    let n = if key & 7 == 1 { 8 } else { 4 };
                    self.0 = self.0.get(n..)?;
                    Value::Number
                }
                2 => {
                    let len = varint(&mut self.0)? as usize;
                    let bytes = self.0.get(..len)?;
                    self.0 = &self.0[len..];
                    Value::Bytes(bytes)
                }
                _ => return None,
            };
            Some((key >> 3, value))
        }();
        if field.is_none() {
            self.0 = &[];
        }
        Some(field)
    }
}

/// The spans of an `ExportTraceServiceRequest`, each walked field by
/// field (its ids checked); `None` if malformed.
pub fn otlp_spans(body: &[u8]) -> Option<u64> {
    let mut spans = 0;
    for field in Fields(body) {
        let (1, Value::Bytes(resource_spans)) = field? else { continue };
        for field in Fields(resource_spans) {
            let (2, Value::Bytes(scope_spans)) = field? else { continue };
            for field in Fields(scope_spans) {
                let (2, Value::Bytes(span)) = field? else { continue };
                let mut ids = 0;
                for field in Fields(span) {
                    match field? {
                        (1, Value::Bytes(id)) if id.len() == 16 => ids += 1,
                        (2, Value::Bytes(id)) if id.len() == 8 => ids += 1,
                        _ => {}
                    }
                }
                if ids != 2 {
                    return None;
                }
                spans += 1;
            }
        }
    }
    Some(spans)
}

/// The spans of a Thrift Binary `Batch`, each walked whole; `None` if
/// malformed.
pub fn thrift_spans(body: &[u8]) -> Option<u64> {
    let mut bytes = body;
    let mut spans = None;
    loop {
        let (&ty, rest) = bytes.split_first()?;
        bytes = rest;
        if ty == 0 {
            break;
        }
        let id = i16::from_be_bytes(bytes.get(..2)?.try_into().ok()?);
        bytes = &bytes[2..];
        if id == 2 && ty == 15 {
            let (&elem, rest) = bytes.split_first()?;
            let count = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
            bytes = &rest[4..];
            for _ in 0..count {
                skip(&mut bytes, elem)?;
            }
            spans = Some(count as u64);
        } else {
            skip(&mut bytes, ty)?;
        }
    }
    spans
}

fn skip(bytes: &mut &[u8], ty: u8) -> Option<()> {
    let take = |bytes: &mut &[u8], n: usize| -> Option<()> {
        *bytes = bytes.get(n..)?;
        Some(())
    };
    let int = |bytes: &mut &[u8]| -> Option<i32> {
        let value = i32::from_be_bytes(bytes.get(..4)?.try_into().ok()?);
        *bytes = &bytes[4..];
        Some(value)
    };
    match ty {
        2 | 3 => take(bytes, 1),
        4 | 10 => take(bytes, 8),
        6 => take(bytes, 2),
        8 => take(bytes, 4),
        11 => {
            let len = int(bytes)?;
            take(bytes, usize::try_from(len).ok()?)
        }
        12 => loop {
            let (&field, rest) = bytes.split_first()?;
            *bytes = rest;
            if field == 0 {
                return Some(());
            }
            take(bytes, 2)?;
            skip(bytes, field)?;
        },
        13 => {
            let (&key, rest) = bytes.split_first()?;
            let (&value, rest) = rest.split_first()?;
            *bytes = rest;
            for _ in 0..int(bytes)? {
                skip(bytes, key)?;
                skip(bytes, value)?;
            }
            Some(())
        }
        14 | 15 => {
            let (&elem, rest) = bytes.split_first()?;
            *bytes = rest;
            for _ in 0..int(bytes)? {
                skip(bytes, elem)?;
            }
            Some(())
        }
        _ => None,
    }
}
