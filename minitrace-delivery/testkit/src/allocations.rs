//! The reporters' allocation checks: a counting global allocator (which a
//! test binary installs), issue 35's spans, a receiver on 127.0.0.1 whose
//! own allocations are not counted, and the check itself: no allocation
//! per span, encoding alone and reporting through the sender thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::cell::Cell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};

use minitrace::collector::{Reporter, SpanId, SpanRecord, TraceId};

/// Spans the check makes.
pub const SPANS: usize = 100_000;
/// About what minitrace's collector hands a reporter in one call.
pub const BATCH: usize = 4_090;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the receiver's threads: their allocations are not the exporter's.
    static IGNORED: Cell<bool> = const { Cell::new(false) };
}

/// A global allocator that counts allocations (and reallocations) on
/// every thread but the receiver's; install it in a test binary with
/// `#[global_allocator] static GLOBAL: Counting = Counting;`.
#[derive(Debug)]
pub struct Counting;

fn count() {
    // `try_with`: the allocator may be called while thread-locals are torn down.
    if !IGNORED.try_with(Cell::get).unwrap_or(true) {
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

/// Allocations made by `f`, on every thread but the receiver's (counted
/// only where [`Counting`] is the global allocator).
pub fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    f();
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// Issue 35's spans: 1 root + 9 children with 2 string attributes each,
/// names and keys `&'static str` (as `#[trace]` and `with_properties`
/// record them), as minitrace's collector hands them over.
pub fn records() -> Vec<SpanRecord> {
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

/// A receiver on 127.0.0.1 that answers every request at once with
/// `status_line` (`b"HTTP/1.1 200 OK"`) and no body; its port. Its
/// threads' allocations are not counted.
pub fn receiver(status_line: &'static [u8]) -> u16 {
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
                    writer.write_all(status_line).unwrap();
                    writer.write_all(b"\r\ncontent-length: 0\r\n\r\n").unwrap();
                }
            });
        }
    });
    port
}

/// A reporter under the check: its encoder alone, and what it has sent.
pub trait Exporter: Reporter {
    /// Encodes `spans` into the reporter's reused buffer, calling `each`
    /// with each body.
    fn encode_each(&mut self, spans: &[SpanRecord], each: &mut dyn FnMut(&[u8]));
    /// Spans sent and requests made so far.
    fn sent(&self) -> (u64, u64);
}

/// The check, on a reporter sending to [`receiver`]: encoding
/// [`SPANS`] spans in batches of [`BATCH`] allocates at most once a body,
/// and reporting them (encoded, handed to the sender thread, posted,
/// answered) at most 128 times a request (the HTTP client's own) and
/// never once a span.
pub fn check_no_allocation_per_span(reporter: &mut impl Exporter) {
    let records = records();
    // Encoding alone, into the reporter's reused buffer.
    let mut bodies = 0;
    reporter.encode_each(&records[..BATCH], &mut |_| {});
    let encoding = allocations(|| {
        for batch in records.chunks(BATCH) {
            reporter.encode_each(batch, &mut |body| {
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
    let (_, requests_before) = reporter.sent();
    let reporting = allocations(|| {
        for batch in records.chunks(BATCH) {
            reporter.report(batch);
        }
        reporter.wait_for_delivery();
    });
    let (spans_sent, requests) = reporter.sent();
    let requests = requests - requests_before;
    println!("reporting: {reporting} allocations for {SPANS} spans in {requests} requests");
    assert_eq!(spans_sent, (SPANS + BATCH) as u64);
    // The HTTP client's own per request (headers, the answer), never per span.
    assert!(reporting <= 128 * requests, "{reporting} allocations for {requests} requests");
    assert!((reporting as f64) / (SPANS as f64) < 0.1, "{reporting} allocations for {SPANS} spans");
}
