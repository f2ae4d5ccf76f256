//! The least a tracer of this workspace's design does for the 1 µs
//! request: a reference row, not a library.
//!
//! It keeps only what the design cannot do without: the same clock reads
//! as this workspace (two per span); each child recorded through a
//! thread-local at both ends, as a local span finds where to record itself
//! there; a per-thread ring to a collector thread; and there each span
//! turned into a [`SpanRecord`] with unix timestamps and handed on in
//! batches. It has nothing else: no `Span` object for the root, no nesting
//! (every child's parent is the root), no span lines, no bounds or loss
//! accounting, no events or properties, and one message per trace, where
//! the minitrace API needs two (a root may end later than its local spans,
//! or on another thread) and a collector that joins them. So this row's
//! cost is the design's; what this workspace's row costs on top is what
//! its API and guarantees add, and its implementation.
//!
//! For the group of thread-safe spans ended on another thread,
//! [`SharedSpan`] is the same floor: the state a span begun on one thread
//! and ended on another carries (ids, name, start), the ordered clock
//! reading at its end, one push into the ending thread's ring, and a
//! record made of it by the collector.
//!
//! A second row, [`request_recording_here`], moves the one piece of work
//! the design could place elsewhere: it makes the records on the traced
//! thread, so that the collector hands them on without reading them.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::LocalKey;
use std::time::Duration;

use minitrace::collector::{SpanId, SpanRecord, TraceId};
use minitrace_suite::Step;
use minstant::{Anchor, Instant};

/// The row name in the request groups, and of [`SharedSpan`] in the group
/// of spans ended on another thread.
pub const ROW: &str = "design floor (a minimal tracer of this design)";
/// The row of [`request_recording_here`].
pub const RECORDING_HERE_ROW: &str = "design floor, records made on the traced thread";

/// Messages a thread's ring holds: ~85 ms of requests, for a collector that
/// drains it every 10 ms. Far roomier than this workspace's bound, so that
/// this row loses no spans where ours would not either.
const RING_CAPACITY: usize = 1 << 16;
/// A fresh span buffer's capacity, as this workspace's.
const FRESH_CAPACITY: usize = 16;
/// `flush` gives up after this long (a collector that died).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);
/// Records handed on at a time, as this workspace's collector does.
const REPORT_BATCH: usize = 4096;
/// Records a thread's ring of records holds: as many span slots as this
/// workspace's per-thread bound, ~20 ms of requests.
const RECORD_RING_CAPACITY: usize = 1 << 17;

struct LocalSpan {
    begin: Instant,
    end: Instant,
    name: &'static str,
}

/// A whole trace: the root and its children, which share its trace id and
/// have it as their parent.
struct Trace {
    trace_id: TraceId,
    root_id: SpanId,
    /// The children's ids are `first_child_id + index`.
    first_child_id: u64,
    begin: Instant,
    end: Instant,
    children: Vec<LocalSpan>,
}

thread_local! {
    /// The spans of the trace open on this thread.
    static LINE: RefCell<Vec<LocalSpan>> = const { RefCell::new(Vec::new()) };
    static RING: RefCell<Option<rtrb::Producer<Trace>>> = const { RefCell::new(None) };
    static SPARE_BUFFERS: RefCell<Vec<Vec<LocalSpan>>> = const { RefCell::new(Vec::new()) };
    /// [`request_recording_here`]'s span buffer, which never leaves the thread.
    static KEPT_BUFFER: Cell<Vec<LocalSpan>> = const { Cell::new(Vec::new()) };
    static RECORD_RING: RefCell<Option<rtrb::Producer<Record>>> = const { RefCell::new(None) };
    static ENDED_RING: RefCell<Option<rtrb::Producer<Ended>>> = const { RefCell::new(None) };
    /// Made once: a real tracer would renew it now and then.
    static ANCHOR: Anchor = Anchor::new();
}

/// A record that owns nothing (a borrowed name, no properties, no events):
/// freed without being read.
type Record = ManuallyDrop<SpanRecord>;

static RECORD_RINGS: Mutex<Vec<rtrb::Consumer<Record>>> = Mutex::new(Vec::new());

static RINGS: Mutex<Vec<rtrb::Consumer<Trace>>> = Mutex::new(Vec::new());
static ENDED_RINGS: Mutex<Vec<rtrb::Consumer<Ended>>> = Mutex::new(Vec::new());
/// Emptied span buffers, given back by the collector once per cycle, and
/// whether there are any: so that an empty pool costs a load, not the lock.
static RETURNED_BUFFERS: Mutex<Vec<Vec<LocalSpan>>> = Mutex::new(Vec::new());
static BUFFERS_RETURNED: AtomicBool = AtomicBool::new(false);
static REPORTED: AtomicU64 = AtomicU64::new(0);
/// Flushes asked for, and the last one a finished cycle covered: a flush
/// waits for a cycle that began after it asked, so that the cycle drains
/// every trace submitted before.
static FLUSHES: Mutex<(u64, u64)> = Mutex::new((0, 0));
static FLUSH_ASKED: Condvar = Condvar::new();
static FLUSH_DONE: Condvar = Condvar::new();

/// The request of the request groups: a root and `steps` children, each
/// around one run of `step`. Returns the last step's result.
pub fn request(steps: usize, step: Step) -> u64 {
    let (last, trace) = traced_request(steps, step, take_buffer());
    submit(trace);
    last
}

/// The same request, its records made here, on the traced thread, and
/// published per trace into a ring of records that the collector hands to
/// the reporter in place, without reading them (they own nothing, so
/// freeing them reads nothing either). It trades the collector's reads of
/// spans written on another core for more work on the traced thread; a
/// reporter that reads its records (any real one) then reads them across
/// cores, and a record is four times the size of a raw span.
pub fn request_recording_here(steps: usize, step: Step) -> u64 {
    let buffer = KEPT_BUFFER.take();
    let (last, mut trace) = traced_request(steps, step, buffer);
    let anchor = ANCHOR.with(|anchor| *anchor);
    with_producer(&RECORD_RING, &RECORD_RINGS, RECORD_RING_CAPACITY, |producer| {
        // A full ring loses the trace, which the ledger notices.
        if let Ok(chunk) = producer.write_chunk_uninit(trace.children.len() + 1) {
            chunk.fill_from_iter(records(&mut trace, &anchor).map(ManuallyDrop::new));
        }
    });
    trace.children.clear();
    KEPT_BUFFER.set(trace.children);
    last
}

/// Runs the request's steps, each in a child span recorded into `buffer`.
fn traced_request(steps: usize, step: Step, buffer: Vec<LocalSpan>) -> (u64, Trace) {
    let begin = Instant::now_unordered();
    LINE.with(|line| *line.borrow_mut() = buffer);
    let last = (0..steps).fold(0, |previous, _| {
        let _span = StepSpan::enter("step");
        step.run(previous)
    });
    let trace = Trace {
        trace_id: TraceId::random(),
        root_id: SpanId::random(),
        first_child_id: (SpanId::random().0 >> 1).max(1),
        begin,
        end: Instant::now_unordered(),
        children: LINE.with(|line| std::mem::take(&mut *line.borrow_mut())),
    };
    (last, trace)
}

/// A child span: like a local span of the minitrace API, it finds where
/// to record itself in a thread-local at both ends, since the code that
/// opens it does not know its trace.
struct StepSpan {
    index: usize,
}

impl StepSpan {
    fn enter(name: &'static str) -> StepSpan {
        LINE.with(|line| {
            let mut line = line.borrow_mut();
            line.push(LocalSpan { begin: Instant::now_unordered(), end: Instant::ZERO, name });
            StepSpan { index: line.len() - 1 }
        })
    }
}

impl Drop for StepSpan {
    fn drop(&mut self) {
        LINE.with(|line| {
            if let Some(span) = line.borrow_mut().get_mut(self.index) {
                span.end = Instant::now_unordered();
            }
        })
    }
}

/// A thread-safe span of the floor: what it must carry from the thread that
/// begins it to the one that ends it.
#[derive(Debug)]
pub struct SharedSpan {
    trace_id: TraceId,
    id: SpanId,
    parent_id: SpanId,
    begin: Instant,
    name: &'static str,
}

/// A [`SharedSpan`] ended: what the collector reads.
struct Ended {
    trace_id: TraceId,
    id: SpanId,
    parent_id: SpanId,
    begin: Instant,
    end: Instant,
    name: &'static str,
}

/// Ended spans a thread's ring holds: as many as [`RING_CAPACITY`] traces
/// of 8 spans would.
const ENDED_RING_CAPACITY: usize = RING_CAPACITY * 8;

impl SharedSpan {
    /// A root of a new trace.
    pub fn root(name: &'static str) -> SharedSpan {
        let begin = Instant::now_unordered();
        SharedSpan { trace_id: TraceId::random(), id: SpanId::random(), parent_id: SpanId(0), begin, name }
    }

    /// A child of `self`, which may end on any thread.
    pub fn child(&self, name: &'static str) -> SharedSpan {
        let begin = Instant::now_unordered();
        SharedSpan { trace_id: self.trace_id, id: SpanId::random(), parent_id: self.id, begin, name }
    }
}

impl Drop for SharedSpan {
    fn drop(&mut self) {
        // Ordered: it is compared with a start read on another thread.
        let end = Instant::now();
        let SharedSpan { trace_id, id, parent_id, begin, name } = *self;
        with_producer(&ENDED_RING, &ENDED_RINGS, ENDED_RING_CAPACITY, |producer| {
            // A full ring loses the span, which the ledger notices.
            let _ = producer.push(Ended { trace_id, id, parent_id, begin, end, name });
        })
    }
}

/// Records the collector has reported so far: what the ledger checks
/// against the spans made, as it does every contender's sink.
pub fn delivered() -> u64 {
    REPORTED.load(Ordering::Relaxed)
}

fn take_buffer() -> Vec<LocalSpan> {
    SPARE_BUFFERS.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.is_empty() && BUFFERS_RETURNED.swap(false, Ordering::Relaxed) {
            spare.append(&mut RETURNED_BUFFERS.lock().unwrap());
        }
        spare.pop().unwrap_or_else(|| Vec::with_capacity(FRESH_CAPACITY))
    })
}

fn submit(trace: Trace) {
    with_producer(&RING, &RINGS, RING_CAPACITY, |producer| {
        // A full ring loses the trace, which the ledger notices.
        let _ = producer.push(trace);
    })
}

/// Runs `f` on this thread's end of a ring of `capacity`, the ring made on
/// first use and its other end given to the collector in `rings`.
fn with_producer<T>(
    ring: &'static LocalKey<RefCell<Option<rtrb::Producer<T>>>>,
    rings: &Mutex<Vec<rtrb::Consumer<T>>>,
    capacity: usize,
    f: impl FnOnce(&mut rtrb::Producer<T>),
) {
    ring.with(|ring| {
        let mut ring = ring.borrow_mut();
        let producer = ring.get_or_insert_with(|| {
            // Started with the first ring, not checked on every request.
            start_collector();
            let (producer, consumer) = rtrb::RingBuffer::new(capacity);
            rings.lock().unwrap().push(consumer);
            producer
        });
        f(producer)
    })
}

/// Waits until the collector has reported every trace submitted so far,
/// for at most [`FLUSH_TIMEOUT`].
pub fn flush() {
    start_collector();
    let deadline = std::time::Instant::now() + FLUSH_TIMEOUT;
    let mut flushes = FLUSHES.lock().unwrap();
    flushes.0 += 1;
    let wanted = flushes.0;
    FLUSH_ASKED.notify_one();
    while flushes.1 < wanted {
        let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
            eprintln!("WARNING: the design floor's collector did not answer a flush");
            return;
        };
        flushes = FLUSH_DONE.wait_timeout(flushes, left).unwrap().0;
    }
}

fn start_collector() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("design-floor-collector".into())
            .spawn(run_collector)
            .expect("cannot start the design floor's collector");
    });
}

/// Sleeps 10 ms between cycles, as this workspace's collector does by
/// default, unless a flush asks for one. A cycle takes what each ring held
/// when its turn came, so that it ends while producers keep pushing.
fn run_collector() {
    let mut outbox: Vec<SpanRecord> = Vec::with_capacity(REPORT_BATCH);
    let mut emptied = Vec::new();
    let mut flushes = FLUSHES.lock().unwrap();
    loop {
        if flushes.0 == flushes.1 {
            flushes = FLUSH_ASKED.wait_timeout(flushes, Duration::from_millis(10)).unwrap().0;
        }
        // Every trace of a flush asked for by now was submitted before it
        // asked: this cycle reports it.
        let asked = flushes.0;
        drop(flushes);
        let anchor = Anchor::new();
        for ring in RINGS.lock().unwrap().iter_mut() {
            for _ in 0..ring.slots() {
                let Ok(trace) = ring.pop() else { break };
                emptied.push(add_records(trace, &anchor, &mut outbox));
                if outbox.len() >= REPORT_BATCH {
                    report(&mut outbox);
                }
            }
        }
        for ring in ENDED_RINGS.lock().unwrap().iter_mut() {
            let Ok(chunk) = ring.read_chunk(ring.slots()) else { continue };
            for ended in chunk {
                outbox.push(shared_record(ended, &anchor));
                if outbox.len() >= REPORT_BATCH {
                    report(&mut outbox);
                }
            }
        }
        report(&mut outbox);
        for ring in RECORD_RINGS.lock().unwrap().iter_mut() {
            let Ok(chunk) = ring.read_chunk(ring.slots()) else { continue };
            let (first, second) = chunk.as_slices();
            first.chunks(REPORT_BATCH).chain(second.chunks(REPORT_BATCH)).for_each(report_in_place);
            chunk.commit_all();
        }
        if !emptied.is_empty() {
            RETURNED_BUFFERS.lock().unwrap().append(&mut emptied);
            BUFFERS_RETURNED.store(true, Ordering::Relaxed);
        }
        flushes = FLUSHES.lock().unwrap();
        flushes.1 = asked;
        FLUSH_DONE.notify_all();
    }
}

/// Appends a trace's records, its root last; returns its emptied buffer.
fn add_records(mut trace: Trace, anchor: &Anchor, outbox: &mut Vec<SpanRecord>) -> Vec<LocalSpan> {
    prefetch(&trace.children);
    outbox.extend(records(&mut trace, anchor));
    trace.children
}

/// The record of an ended [`SharedSpan`].
fn shared_record(ended: Ended, anchor: &Anchor) -> SpanRecord {
    let begin_ns = ended.begin.as_unix_nanos(anchor);
    SpanRecord {
        trace_id: ended.trace_id,
        span_id: ended.id,
        parent_id: ended.parent_id,
        begin_time_unix_ns: begin_ns,
        duration_ns: ended.end.as_unix_nanos(anchor).saturating_sub(begin_ns),
        name: Cow::Borrowed(ended.name),
        properties: Vec::new(),
        events: Vec::new(),
    }
}

/// A trace's records, its root last, draining its children.
fn records<'t>(trace: &'t mut Trace, anchor: &'t Anchor) -> impl Iterator<Item = SpanRecord> + 't {
    let (trace_id, root_id, first_child_id) = (trace.trace_id, trace.root_id, trace.first_child_id);
    let record = move |id: u64, parent: SpanId, begin: Instant, end: Instant, name: &'static str| {
        let begin_ns = begin.as_unix_nanos(anchor);
        SpanRecord {
            trace_id,
            span_id: SpanId(id),
            parent_id: parent,
            begin_time_unix_ns: begin_ns,
            duration_ns: end.as_unix_nanos(anchor).saturating_sub(begin_ns),
            name: Cow::Borrowed(name),
            properties: Vec::new(),
            events: Vec::new(),
        }
    };
    let root = record(root_id.0, SpanId(0), trace.begin, trace.end, "request");
    trace
        .children
        .drain(..)
        .enumerate()
        .map(move |(index, span)| {
            record(first_child_id + index as u64, root_id, span.begin, span.end, span.name)
        })
        .chain(std::iter::once(root))
}

/// Asks for a buffer written on another core all at once, as this
/// workspace's collector does, so that the misses overlap (measured in a
/// harness: ~25 ns less of this floor's collector CPU per request).
fn prefetch(spans: &[LocalSpan]) {
    #[cfg(target_arch = "x86_64")]
    for line in spans.iter().step_by(64 / std::mem::size_of::<LocalSpan>()) {
        // SAFETY: a prefetch is only a hint: it never faults and changes no
        // program state; the address is that of a live span.
        #[allow(unused_unsafe)] // a safe function in newer compilers
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (line as *const LocalSpan).cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = spans;
}

/// Hands the records on to a reporter that discards them.
fn report(outbox: &mut Vec<SpanRecord>) {
    report_in_place(outbox);
    outbox.clear();
}

/// Hands records on to a reporter that discards them, where they lie.
fn report_in_place<R>(records: &[R]) {
    std::hint::black_box(records);
    REPORTED.fetch_add(records.len() as u64, Ordering::Relaxed);
}
