//! Each traced thread's ring of recent requests: written by its thread at
//! each root's end, read by [`snapshot`](super::snapshot) from any thread.
//!
//! The thread holds its ring's lock only while it appends one request, and
//! never waits for it: when a snapshot is copying the ring, the request goes
//! to a thread-local side buffer, appended at the thread's next request. So
//! a snapshot never pauses a traced thread, and loses nothing it records
//! meanwhile (it shows up in the next snapshot).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use minstant::Instant;

use crate::data::id::{SpanId, TraceId};
use crate::data::raw_span::RawSpan;
use crate::data::record::Property;
use crate::util::lock;

/// Bytes a span takes in a ring, for the memory bound.
pub(crate) const SPAN_BYTES: usize = std::mem::size_of::<SpanEntry>();
/// Bytes a request takes in a ring beside its spans.
pub(crate) const REQUEST_BYTES: usize = std::mem::size_of::<RequestEntry>();

static ON: AtomicBool = AtomicBool::new(false);
/// The memory bound of each thread's ring, in bytes.
static BYTES_PER_THREAD: AtomicUsize = AtomicUsize::new(0);
/// Every thread's ring, kept for a while after the thread exits.
static RINGS: Mutex<Vec<Arc<Mutex<Ring>>>> = Mutex::new(Vec::new());

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
    fn push(&mut self, request: RequestEntry, spans: impl Iterator<Item = SpanEntry>, limit: usize) {
        let before = self.spans.len();
        self.spans.extend(spans);
        let added = self.spans.len() - before;
        let request = RequestEntry { spans: added, ..request };
        self.bytes += REQUEST_BYTES + added * SPAN_BYTES;
        self.requests.push_back(request);
        // The oldest requests make room; a request larger than the bound is
        // not kept at all.
        while self.bytes > limit {
            let Some(oldest) = self.requests.pop_front() else { break };
            self.spans.drain(..oldest.spans);
            self.bytes -= REQUEST_BYTES + oldest.spans * SPAN_BYTES;
        }
    }
}

/// A thread's handle on its ring, and what waits while a snapshot reads it.
struct Local {
    ring: Arc<Mutex<Ring>>,
    pending: Vec<(RequestEntry, Vec<SpanEntry>)>,
}

impl Drop for Local {
    fn drop(&mut self) {
        let mut ring = lock(&self.ring);
        let limit = BYTES_PER_THREAD.load(Ordering::Relaxed);
        for (request, spans) in self.pending.drain(..) {
            ring.push(request, spans.into_iter(), limit);
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
    let request = RequestEntry { trace_id, begin, end, name, properties, spans: 0 };
    let entries = spans.iter_mut().filter(|raw| !raw.is_event()).map(|raw| SpanEntry {
        id: raw.id,
        parent_id: raw.parent_id,
        begin: raw.begin,
        end: raw.end,
        name: if take_names { std::mem::take(&mut raw.name) } else { raw.name.clone() },
    });
    let limit = BYTES_PER_THREAD.load(Ordering::Relaxed);
    let _ = LOCAL.try_with(|local| {
        let Ok(mut local) = local.try_borrow_mut() else { return };
        let local = local.get_or_insert_with(register);
        match local.ring.try_lock() {
            Ok(mut ring) => {
                for (request, spans) in local.pending.drain(..) {
                    ring.push(request, spans.into_iter(), limit);
                }
                ring.push(request, entries, limit);
            }
            // A snapshot is reading the ring: kept aside, never waited for.
            Err(_) => local.pending.push((request, entries.collect())),
        };
    });
}

fn register() -> Local {
    static NEXT_THREAD: AtomicUsize = AtomicUsize::new(1);
    let thread = NEXT_THREAD.fetch_add(1, Ordering::Relaxed) as u32;
    let ring = Ring { thread, requests: VecDeque::new(), spans: VecDeque::new(), bytes: 0, closed: false };
    let ring = Arc::new(Mutex::new(ring));
    let mut rings = lock(&RINGS);
    forget_old_closed_rings(&mut rings);
    rings.push(ring.clone());
    Local { ring, pending: Vec::new() }
}

/// Runs `read` on every ring in turn, each locked only while it is read.
pub(crate) fn read_rings(mut read: impl FnMut(&Ring)) {
    let rings: Vec<Arc<Mutex<Ring>>> = lock(&RINGS).clone();
    for ring in &rings {
        read(&lock(ring));
    }
}

/// Rings of exited threads kept for snapshots, the newest; older ones are
/// forgotten, so that threads coming and going cannot grow memory.
const MAX_CLOSED_RINGS: usize = 16;

/// Forgets the oldest rings of exited threads beyond [`MAX_CLOSED_RINGS`].
fn forget_old_closed_rings(rings: &mut Vec<Arc<Mutex<Ring>>>) {
    let closed = rings.iter().filter(|ring| lock(ring).closed).count();
    let mut excess = closed.saturating_sub(MAX_CLOSED_RINGS);
    rings.retain(|ring| {
        let forget = excess > 0 && lock(ring).closed;
        excess -= usize::from(forget);
        !forget
    });
}

/// Empties every ring (for `FlightRecorder::disable`, and tests).
pub(crate) fn clear() {
    for ring in lock(&RINGS).iter() {
        let mut ring = lock(ring);
        ring.requests.clear();
        ring.spans.clear();
        ring.bytes = 0;
    }
}
