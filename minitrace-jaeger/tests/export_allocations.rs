//! No allocation per span on the export path: a counting global allocator
//! over 100 000 spans, encoded alone and then reported through the sender
//! thread to a receiver on 127.0.0.1. Allocations are counted on every
//! thread but the receiver's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::cell::Cell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};
use minitrace_jaeger::JaegerReporter;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the receiver's threads: their allocations are not the exporter's.
    static IGNORED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if !IGNORED.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SPANS: usize = 100_000;
/// About what minitrace's collector hands a reporter in one call.
const BATCH: usize = 4_090;

/// The spans: 1 root + 9 children with 2 string attributes each,
/// names and keys `&'static str` (as `#[trace]` and `with_properties`
/// record them), as minitrace's collector hands them over.
fn records() -> Vec<SpanRecord> {
    (0..SPANS as u64)
        .map(|i| {
            let request = i / 10;
            SpanRecord {
                trace_id: TraceId(u128::from(request + 1) << 64 | 0xabc),
                span_id: SpanId(i + 1),
                parent_id: SpanId(if i % 10 == 0 { 0 } else { request * 10 + 1 }),
                begin_time_unix_ns: 1_700_000_000_000_000_000 + i * 1_000,
                duration_ns: 1_000,
                name: Cow::Borrowed(if i % 10 == 0 { "request" } else { "step" }),
                properties: vec![
                    (Cow::Borrowed("http.route"), Cow::Borrowed("/api/v1/checkout")),
                    (Cow::Borrowed("step.kind"), Cow::Borrowed("validate")),
                ],
                events: Vec::new(),
            }
        })
        .collect()
}

/// A receiver that answers every request at once; returns its port.
fn receiver() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        IGNORED.with(|ignored| ignored.set(true));
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                IGNORED.with(|ignored| ignored.set(true));
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                let mut body = Vec::new();
                loop {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end().to_ascii_lowercase();
                        if line.is_empty() {
                            break;
                        }
                        if let Some(value) = line.strip_prefix("content-length:") {
                            length = value.trim().parse().unwrap();
                        }
                    }
                    body.resize(length, 0);
                    reader.read_exact(&mut body).unwrap();
                    writer.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n").unwrap();
                }
            });
        }
    });
    port
}

/// Allocations made by `f`, on every thread but the receiver's.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    f();
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

#[test]
fn no_allocation_per_span() {
    let records = records();
    let port = receiver();
    let mut reporter = JaegerReporter::http(format!("127.0.0.1:{port}").parse().unwrap(), "allocations");
    let stats = reporter.stats();

    // Encoding alone, into the reporter's reused buffer.
    let mut bodies = 0;
    reporter.encode_each(&records[..BATCH], |_, _| {});
    let encoding = allocations(|| {
        for batch in records.chunks(BATCH) {
            reporter.encode_each(batch, |body, _| {
                assert!(!body.is_empty());
                bodies += 1;
            });
        }
    });
    println!("encoding: {encoding} allocations for {SPANS} spans in {bodies} bodies");
    assert!(encoding <= bodies, "{encoding} allocations for {bodies} bodies");

    // Reported: encoded, handed to the sender thread, posted, answered.
    reporter.report(&records[..BATCH]);
    reporter.wait_for_delivery();
    let requests_before = stats.get().messages_sent;
    let reporting = allocations(|| {
        for batch in records.chunks(BATCH) {
            reporter.report(batch);
        }
        reporter.wait_for_delivery();
    });
    let sent = stats.get();
    let requests = sent.messages_sent - requests_before;
    println!("reporting: {reporting} allocations for {SPANS} spans in {requests} requests: {sent:?}");
    assert_eq!(sent.spans_sent, (SPANS + BATCH) as u64, "{sent:?}");
    // The HTTP client's own per request (headers, the answer), never per span.
    assert!(reporting <= 128 * requests, "{reporting} allocations for {requests} requests");
    assert!((reporting as f64) / (SPANS as f64) < 0.1, "{reporting} allocations for {SPANS} spans");
}
