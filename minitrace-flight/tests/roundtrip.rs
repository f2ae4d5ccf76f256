//! What is written is read back unchanged, across blocks, extremes and the
//! atomic file helper.

use minitrace_flight::{synthetic, write_file_atomically, Block, Reader, Request, SpanEntry, Writer};

fn write(requests: &[Request], block_requests: usize) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new()).with_block_requests(block_requests);
    for request in requests {
        writer.write(request).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn read(dump: &[u8]) -> Vec<Request> {
    Reader::new(dump).unwrap().collect::<Result<_, _>>().unwrap()
}

#[test]
fn synthetic_requests_round_trip_in_blocks_of_any_size() {
    let requests: Vec<Request> = synthetic::requests(10_000, 3).collect();
    for block_requests in [1, 7, 4096, 100_000] {
        assert_eq!(read(&write(&requests, block_requests)), requests, "blocks of {block_requests}");
    }
}

#[test]
fn extremes_round_trip() {
    let span = |name: &str, parent, begin_unix_ns, duration_ns| SpanEntry {
        name: name.into(),
        parent,
        begin_unix_ns,
        duration_ns,
    };
    let requests = vec![
        // Times at both ends of u64, spans before their root and out of order.
        Request {
            trace_id: u128::MAX,
            name: "ünïcødé ⏱".into(),
            thread: u32::MAX,
            begin_unix_ns: u64::MAX,
            duration_ns: u64::MAX,
            properties: vec![("".into(), "".into()), ("k".into(), "v\0with nul".into())],
            spans: vec![
                span("a", None, 0, u64::MAX),
                span("b", Some(0), u64::MAX, 0),
                span("a", Some(1), 5, 1),
                span("c", Some(0), 4, 2),
            ],
        },
        Request::default(),
        Request { begin_unix_ns: 1, name: "x".repeat(100_000), ..Request::default() },
    ];
    assert_eq!(read(&write(&requests, 2)), requests);
}

#[test]
fn an_empty_dump_reads_as_no_requests() {
    let written = Writer::new(Vec::new()).finish().unwrap();
    assert_eq!((written.requests, written.blocks, written.bytes), (0, 0, 31));
    assert!(read(&written.into_inner()).is_empty());
}

#[test]
fn blocks_carry_their_requests_and_payload() {
    let requests: Vec<Request> = synthetic::requests(25, 5).collect();
    let dump = write(&requests, 10);
    let mut reader = Reader::new(&dump[..]).unwrap();
    let blocks: Vec<Block> = std::iter::from_fn(|| reader.next_block()).collect::<Result<_, _>>().unwrap();
    assert_eq!(blocks.iter().map(|block| block.requests.len()).collect::<Vec<_>>(), [10, 10, 5]);
    assert_eq!(blocks.iter().map(|block| block.index).collect::<Vec<_>>(), [0, 1, 2]);
    // zlib framing: the payload is what a browser's DecompressionStream("deflate") takes.
    assert!(blocks.iter().all(|block| block.compressed[0] == 0x78));
    assert_eq!(reader.requests_read(), 25);
}

#[test]
fn a_request_with_a_forward_parent_is_refused_and_the_writer_goes_on() {
    let bad = Request {
        spans: vec![SpanEntry { parent: Some(1), ..SpanEntry::default() }, SpanEntry::default()],
        ..Request::default()
    };
    let mut writer = Writer::new(Vec::new());
    let error = writer.write(&bad).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    assert!(error.to_string().contains("a parent must be listed before its children"), "{error}");
    writer.write(&Request::default()).unwrap();
    assert_eq!(read(&writer.finish().unwrap().into_inner()), vec![Request::default()]);
}

#[test]
fn write_file_atomically_replaces_the_file_whole() {
    let dir = std::env::temp_dir().join(format!("mtf-atomic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.mtf");
    std::fs::write(&path, b"an older dump").unwrap();
    let requests: Vec<Request> = synthetic::requests(100, 9).collect();
    let written = write_file_atomically(&path, &requests).unwrap();
    assert_eq!(written.requests, 100);
    assert_eq!(read(&std::fs::read(&path).unwrap()), requests);
    // No temporary file is left beside it.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn span_depths_follow_the_parents() {
    let request = synthetic::requests(1, 1).next().unwrap();
    assert_eq!(request.span_depths(), [1, 1, 1, 1, 1, 2, 2, 3, 1, 1]);
}
