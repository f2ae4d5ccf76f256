//! Each traced thread's ring of recent requests: written by its thread at
//! each root's end, read by [`snapshot`](super::snapshot) from any thread.
//!
//! The thread holds its ring's lock only while it appends one request, and
//! never waits for it: when a snapshot is copying the ring, the request goes
//! to the ring's side buffer, behind a lock of its own that a snapshot takes
//! only after it has let go of the ring, and joins the ring at the thread's
//! next request. So a snapshot never pauses a traced thread, and sees every
//! request recorded before it began, those in the side buffer included.
//! Only when two snapshots read the same thread's ring and side buffer at
//! the very same moment does a request wait in the thread's own memory for
//! its next request.
//!
//! The memory bound counts every byte a request holds: its entries, and
//! the names, properties and keys it owns.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use minstant::Instant;

use crate::data::id::{SpanId, TraceId};
use crate::data::raw_span::RawSpan;
use crate::data::record::Property;
use crate::util::lock;

static ON: AtomicBool = AtomicBool::new(false);
/// The memory bound of each thread's ring, in bytes.
static BYTES_PER_THREAD: AtomicUsize = AtomicUsize::new(0);
/// Every thread's ring, kept for a while after the thread exits.
static RINGS: Mutex<Vec<Arc<Shared>>> = Mutex::new(Vec::new());
/// Requests made room for (or never kept, being larger than the bound).
static OVERWRITTEN: AtomicU64 = AtomicU64::new(0);

/// A span of a recorded request, as its thread kept it.
pub(crate) struct SpanEntry {
    pub(crate) id: SpanId,
    /// `LINE_PARENT` for a child of the root.
    pub(crate) parent_id: SpanId,
    pub(crate) begin: Instant,
    pub(crate) end: Instant,
    pub(crate) name: Cow<'static, str>,
}

/// A recorded request: its root, and how many of the ring's spans after the
/// previous request's are its own.
pub(crate) struct RequestEntry {
    pub(crate) trace_id: TraceId,
    pub(crate) begin: Instant,
    pub(crate) end: Instant,
    pub(crate) name: Cow<'static, str>,
    /// Boxed: most roots have none.
    #[allow(clippy::box_collection)]
    pub(crate) properties: Option<Box<Vec<Property>>>,
    pub(crate) spans: usize,
    /// What the request holds in all, its spans included.
    bytes: usize,
}

/// The heap bytes a name or a property's key or value owns.
// A `Cow`, not a `&str`: whether the text is owned is the question.
#[allow(clippy::ptr_arg)]
fn owned_bytes(text: &Cow<'static, str>) -> usize {
    match text {
        Cow::Borrowed(_) => 0,
        Cow::Owned(text) => text.capacity(),
    }
}

/// What a span takes in a ring: its entry and the name it owns.
fn span_bytes(span: &SpanEntry) -> usize {
    std::mem::size_of::<SpanEntry>() + owned_bytes(&span.name)
}

/// What a request's root takes in a ring: its entry, and the name and
/// properties it owns.
fn root_bytes(request: &RequestEntry) -> usize {
    let properties = request.properties.as_deref().map_or(0, |properties| {
        std::mem::size_of::<Vec<Property>>()
            + properties.capacity() * std::mem::size_of::<Property>()
            + properties.iter().map(|(key, value)| owned_bytes(key) + owned_bytes(value)).sum::<usize>()
    });
    std::mem::size_of::<RequestEntry>() + owned_bytes(&request.name) + properties
}

/// A request and its spans, on their way into a ring.
pub(crate) struct Recorded {
    request: RequestEntry,
    spans: Vec<SpanEntry>,
}

impl Recorded {
    fn new(mut request: RequestEntry, spans: Vec<SpanEntry>) -> Recorded {
        request.spans = spans.len();
        request.bytes = root_bytes(&request) + spans.iter().map(span_bytes).sum::<usize>();
        Recorded { request, spans }
    }
}

/// One thread's recent requests, oldest first, their spans in the same order.
pub(crate) struct Ring {
    pub(crate) thread: u32,
    pub(crate) requests: VecDeque<RequestEntry>,
    pub(crate) spans: VecDeque<SpanEntry>,
    bytes: usize,
    /// The thread exited: the ring may be forgotten (see [`MAX_CLOSED_RINGS`]).
    pub(crate) closed: bool,
}

impl Ring {
    fn push(&mut self, recorded: Recorded, limit: usize) {
        self.bytes += recorded.request.bytes;
        self.spans.extend(recorded.spans);
        self.requests.push_back(recorded.request);
        // The oldest requests make room; a request larger than the bound is
        // not kept at all.
        while self.bytes > limit {
            let Some(oldest) = self.requests.pop_front() else { break };
            self.spans.drain(..oldest.spans);
            self.bytes -= oldest.bytes;
            OVERWRITTEN.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every request, with its spans.
    pub(crate) fn requests(&self) -> impl Iterator<Item = (&RequestEntry, impl Iterator<Item = &SpanEntry>)> {
        let mut first = 0;
        self.requests.iter().map(move |request| {
            let spans = self.spans.range(first..first + request.spans);
            first += request.spans;
            (request, spans)
        })
    }
}

/// A thread's ring, and the side buffer that takes its requests while a
/// snapshot reads the ring.
pub(crate) struct Shared {
    ring: Mutex<Ring>,
    side: Mutex<VecDeque<Recorded>>,
}

/// A thread's handle on its ring, and what waits in the thread's own memory
/// when both the ring and its side buffer are being read.
struct Local {
    shared: Arc<Shared>,
    pending: Vec<Recorded>,
}

impl Local {
    /// Keeps a request, never waiting for a lock.
    fn keep(&mut self, recorded: Recorded, limit: usize) {
        let shared = &self.shared;
        if let Ok(mut ring) = shared.ring.try_lock() {
            if let Ok(mut side) = shared.side.try_lock() {
                for earlier in side.drain(..) {
                    ring.push(earlier, limit);
                }
            }
            for earlier in self.pending.drain(..) {
                ring.push(earlier, limit);
            }
            return ring.push(recorded, limit);
        }
        // A snapshot is reading the ring: the side buffer takes it, within
        // the same bound.
        if let Ok(mut side) = shared.side.try_lock() {
            side.extend(self.pending.drain(..));
            side.push_back(recorded);
            let mut bytes: usize = side.iter().map(|recorded| recorded.request.bytes).sum();
            while bytes > limit {
                let Some(oldest) = side.pop_front() else { break };
                bytes -= oldest.request.bytes;
                OVERWRITTEN.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        self.pending.push(recorded);
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let limit = BYTES_PER_THREAD.load(Ordering::Relaxed);
        let mut ring = lock(&self.shared.ring);
        for earlier in lock(&self.shared.side).drain(..).chain(self.pending.drain(..)) {
            ring.push(earlier, limit);
        }
        ring.closed = true;
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// Whether roots are recorded.
#[inline]
pub(crate) fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

pub(crate) fn switch(on: bool, bytes_per_thread: usize) {
    BYTES_PER_THREAD.store(bytes_per_thread, Ordering::Relaxed);
    ON.store(on, Ordering::Relaxed);
}

/// Records a request that ended on this thread: its root and the local
/// spans that waited for it (still owned by the caller, which may report
/// them); `take_names` when the spans are thrown away after this, so that
/// owned names move rather than being copied.
#[inline(never)]
pub(crate) fn record(
    trace_id: TraceId,
    root: (Cow<'static, str>, &[Property], Instant, Instant),
    spans: &mut [RawSpan],
    take_names: bool,
) {
    let (name, properties, begin, end) = root;
    let properties = (!properties.is_empty()).then(|| Box::new(properties.to_vec()));
    let request = RequestEntry { trace_id, begin, end, name, properties, spans: 0, bytes: 0 };
    let entries = spans
        .iter_mut()
        .filter(|raw| !raw.is_event())
        .map(|raw| SpanEntry {
            id: raw.id,
            parent_id: raw.parent_id,
            begin: raw.begin,
            end: raw.end,
            name: if take_names { std::mem::take(&mut raw.name) } else { raw.name.clone() },
        })
        .collect();
    let recorded = Recorded::new(request, entries);
    let limit = BYTES_PER_THREAD.load(Ordering::Relaxed);
    let _ = LOCAL.try_with(|local| {
        let Ok(mut local) = local.try_borrow_mut() else { return };
        local.get_or_insert_with(register).keep(recorded, limit);
    });
}

fn register() -> Local {
    static NEXT_THREAD: AtomicUsize = AtomicUsize::new(1);
    let thread = NEXT_THREAD.fetch_add(1, Ordering::Relaxed) as u32;
    let ring = Ring { thread, requests: VecDeque::new(), spans: VecDeque::new(), bytes: 0, closed: false };
    let shared = Arc::new(Shared { ring: Mutex::new(ring), side: Mutex::new(VecDeque::new()) });
    let mut rings = lock(&RINGS);
    forget_old_closed_rings(&mut rings);
    rings.push(shared.clone());
    Local { shared, pending: Vec::new() }
}

/// Runs `read` on every thread's requests (with the thread's number and
/// the request's spans), oldest first: its ring's, then those in its side
/// buffer; each locked only while it is read.
pub(crate) fn read_rings(mut read: impl FnMut(u32, &RequestEntry, &mut dyn Iterator<Item = &SpanEntry>)) {
    let rings: Vec<Arc<Shared>> = lock(&RINGS).clone();
    for shared in &rings {
        let thread = {
            let ring = lock(&shared.ring);
            for (request, mut spans) in ring.requests() {
                read(ring.thread, request, &mut spans);
            }
            ring.thread
        };
        for recorded in lock(&shared.side).iter() {
            read(thread, &recorded.request, &mut recorded.spans.iter());
        }
    }
}

/// Requests made room for since the process started (or never kept, being
/// larger than the bound).
pub(crate) fn overwritten() -> u64 {
    OVERWRITTEN.load(Ordering::Relaxed)
}

/// Rings of exited threads kept for snapshots, the newest; older ones are
/// forgotten, so that threads coming and going cannot grow memory.
const MAX_CLOSED_RINGS: usize = 16;

/// Forgets the oldest rings of exited threads beyond [`MAX_CLOSED_RINGS`].
fn forget_old_closed_rings(rings: &mut Vec<Arc<Shared>>) {
    let closed = rings.iter().filter(|shared| lock(&shared.ring).closed).count();
    let mut excess = closed.saturating_sub(MAX_CLOSED_RINGS);
    rings.retain(|shared| {
        let forget = excess > 0 && lock(&shared.ring).closed;
        excess -= usize::from(forget);
        !forget
    });
}

/// Empties every ring (for `FlightRecorder::disable`, and tests).
pub(crate) fn clear() {
    for shared in lock(&RINGS).iter() {
        let mut ring = lock(&shared.ring);
        ring.requests.clear();
        ring.spans.clear();
        ring.bytes = 0;
        lock(&shared.side).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(name: &'static str, property: String) -> Recorded {
        let request = RequestEntry {
            trace_id: TraceId(1),
            begin: Instant::ZERO,
            end: Instant::ZERO,
            name: name.into(),
            properties: Some(Box::new(vec![("key".into(), property.into())])),
            spans: 0,
            bytes: 0,
        };
        let span = SpanEntry {
            id: SpanId(1),
            parent_id: SpanId(0),
            begin: Instant::ZERO,
            end: Instant::ZERO,
            name: String::from("owned").into(),
        };
        Recorded::new(request, vec![span])
    }

    #[test]
    fn a_request_counts_the_bytes_it_owns() {
        let small = recorded("get", String::new()).request.bytes;
        let large = recorded("get", "x".repeat(10_000)).request.bytes;
        assert!(large >= small + 10_000, "{small} and {large}");
        // The span's owned name, the property vector and the entries.
        assert!(small >= std::mem::size_of::<RequestEntry>() + std::mem::size_of::<SpanEntry>() + 5);
    }

    /// A request recorded while a snapshot holds the ring goes to the side
    /// buffer, where the next read sees it: not into the thread's memory.
    #[test]
    fn a_request_recorded_while_the_ring_is_read_is_seen_by_the_next_read() {
        let ring =
            Ring { thread: 7, requests: VecDeque::new(), spans: VecDeque::new(), bytes: 0, closed: false };
        let shared = Arc::new(Shared { ring: Mutex::new(ring), side: Mutex::new(VecDeque::new()) });
        let mut local = Local { shared: shared.clone(), pending: Vec::new() };
        {
            let _reading = lock(&shared.ring);
            local.keep(recorded("during a read", String::new()), usize::MAX);
        }
        assert!(local.pending.is_empty());
        assert_eq!(lock(&shared.side).len(), 1);
        // The thread's next request moves it into the ring, in order.
        local.keep(recorded("after", String::new()), usize::MAX);
        let ring = lock(&shared.ring);
        let names: Vec<&str> = ring.requests().map(|(request, _)| request.name.as_ref()).collect();
        assert_eq!(names, ["during a read", "after"]);
        assert!(lock(&shared.side).is_empty());
    }
}
