//! The ring a thread's history keeps the local spans of the traces it
//! threw away in (`transport::history`). Spans are numbered in the order
//! they come, the span numbered `n` in slot `n % slots`, and overwritten in
//! place once the ring is full (PERFORMANCE.md, "The flight recorder").
//!
//! They come in two ways. Copied in, one or two blocks a trace, from the
//! buffer of the line that recorded them. Or written in place: the ring
//! lends its thread the stretch of slots its next spans go to (a
//! [`Stretch`]); the line of the thread's next request writes its spans
//! straight there, and when the trace is thrown away the ring takes them
//! where they lie, with nothing to copy (see `transport::line_spans`).
//!
//! Who touches which slot, and when:
//! - The slots of the traces the history holds (numbered from
//!   [`Ring::oldest`] to [`Ring::next`]) are written once, by their thread
//!   under the handover's write, and read by the collector during a
//!   harvest: the handover orders the two (`transport::handoff`).
//! - A lent stretch's slots belong to no held trace (those in them went
//!   before it was lent), and nothing else is written there while it is
//!   lent: its thread writes them outside the handover, and a later
//!   handover write publishes them, which orders them before any read.
//! - The memory is shared (an `Arc`) by the ring and the stretch it lent:
//!   a ring let go, grown or moved while its stretch is out leaves the
//!   memory to the stretch, which then no longer matches any ring and is
//!   copied like any buffer.
//!
//! A slot owns what its span owns only while its trace is held: the
//! history takes what a trace's spans own when it lets the trace go, so
//! overwriting a slot drops nothing and reads nothing first, and the
//! memory, when it goes, drops no span it holds ([`Ring`]'s drop drops the
//! held traces' spans).

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::data::raw_span::RawSpan;

/// The slots a lent stretch has: enough for most requests' local spans
/// (a request with more is copied, as any buffer is).
pub(crate) const STRETCH: usize = 64;

/// A ring's memory: room for `cap` spans, allocated once. It never drops
/// a span in it: which slots hold spans is the ring's to know.
pub(crate) struct Slots {
    ptr: NonNull<RawSpan>,
    cap: usize,
}

// SAFETY: `Slots` owns its memory alone; which thread reads or writes which
// slot, and what orders the two, is the protocol the module's docs give,
// kept by `Ring` and `Stretch`, the only code that reaches the pointer.
unsafe impl Send for Slots {}
// SAFETY: as for `Send`: a shared `Slots` gives no access by itself.
unsafe impl Sync for Slots {}

impl Slots {
    fn new(cap: usize) -> Arc<Slots> {
        let mut memory = ManuallyDrop::new(Vec::<RawSpan>::with_capacity(cap));
        let cap = memory.capacity();
        Arc::new(Slots { ptr: NonNull::new(memory.as_mut_ptr()).unwrap_or(NonNull::dangling()), cap })
    }

    /// The slot `at`'s address (`at` at most `cap`).
    fn at(&self, at: usize) -> *mut RawSpan {
        debug_assert!(at <= self.cap);
        // SAFETY: `at` is within the allocation, or one past its end.
        unsafe { self.ptr.as_ptr().add(at) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: the pointer and capacity are those of the `Vec` made in
        // `Slots::new`, never freed since; with length 0 no span is dropped.
        drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), 0, self.cap) });
    }
}

/// The stretch of a ring's slots lent to its thread for the spans it
/// records next (see the module's docs): [`STRETCH`] slots from slot
/// `at`, the first numbered `first`.
pub(crate) struct Stretch {
    memory: Arc<Slots>,
    first: u64,
    at: usize,
}

impl Stretch {
    /// Where its first slot is.
    pub(crate) fn ptr(&self) -> *mut RawSpan {
        self.memory.at(self.at)
    }

    /// How many slots it has.
    pub(crate) fn cap(&self) -> usize {
        STRETCH
    }
}

impl std::fmt::Debug for Stretch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stretch").field("first", &self.first).field("at", &self.at).finish()
    }
}

/// The span numbered `n` (counted since the ring was made) is in slot
/// `n % slots`. A span overwritten owns nothing: the trace it belonged to
/// went first, and [`Ring::empty`] took what it owned.
#[derive(Default)]
pub(crate) struct Ring {
    memory: Option<Arc<Slots>>,
    /// Slots written at least once, from the first.
    filled: usize,
    /// The slots it may fill: as many as its limit holds until it first
    /// wraps, which fixes them (until it takes a limit again:
    /// [`Ring::take_limit`]).
    slots: usize,
    /// The limit its slots were set under (0: not made yet).
    limit: usize,
    /// The number the next span written gets.
    next: u64,
    /// Its slot, `next % slots`, kept as it moves: no division a trace.
    cursor: usize,
    /// The number of the oldest span still held (`next` if none is).
    oldest: u64,
    /// The number of the first slot of the stretch lent to its thread, if
    /// one is: no span is written there but by that thread.
    lent: Option<u64>,
}

const SLOT: usize = std::mem::size_of::<RawSpan>();

impl Ring {
    /// The bytes its slots take.
    pub(crate) fn bytes(&self) -> usize {
        self.filled * SLOT
    }

    /// The slots it may fill.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// Where its slots are.
    #[cfg(test)]
    pub(crate) fn at(&self) -> *const RawSpan {
        self.memory.as_ref().map_or(std::ptr::null(), |memory| memory.at(0))
    }

    /// The limit its slots were set under (0: not made yet).
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes as many slots as `limit` holds, and fills them from where its
    /// held spans end: the spans still held move to the first slots of
    /// memory of their size, in order, renumbered from 0, and the slots
    /// of spans let go are given back. Returns by how much their numbers
    /// fell, for the history to renumber its traces. The spans held must
    /// fit the slots. A stretch it had lent is lent no more.
    #[cold]
    pub(crate) fn take_limit(&mut self, limit: usize) -> u64 {
        let slots = limit / SLOT;
        let held = (self.next - self.oldest) as usize;
        debug_assert!(held <= slots, "held spans would be lost");
        // Renumbered from the oldest held span (0 in a ring not made yet).
        let (base, from) = (self.oldest, (self.oldest % self.slots.max(1) as u64) as usize);
        let memory = Slots::new(held.max(STRETCH.min(slots)));
        // Taken out first: the old ring, dropped below, then drops no span.
        if let Some(old) = self.memory.take() {
            let head = held.min(self.slots - from);
            // SAFETY: the old memory's slots `from..from + head` and
            // `0..held - head` hold the held spans, in order (the ring
            // wraps at `slots`); the new memory has room for `held`; two
            // allocations. The spans are moved: the old memory never drops
            // them.
            unsafe {
                std::ptr::copy_nonoverlapping(old.at(from), memory.at(0), head);
                std::ptr::copy_nonoverlapping(old.at(0), memory.at(head), held - head);
            }
        }
        let (next, oldest) = (self.next - base, self.oldest - base);
        *self = Ring {
            memory: Some(memory),
            filled: held,
            slots,
            limit,
            next,
            cursor: held % slots.max(1),
            oldest,
            lent: None,
        };
        base
    }

    /// Whether it fills all its slots: it wraps, or was fixed where it is.
    pub(crate) fn is_full(&self) -> bool {
        self.filled == self.slots
    }

    /// The bytes of its slots that hold no span of a held trace and are
    /// not lent: the slots of traces let go before their turn to be
    /// overwritten came.
    pub(crate) fn spare_bytes(&self) -> usize {
        let lent = if self.lent.is_some() { STRETCH } else { 0 };
        self.filled.saturating_sub((self.next - self.oldest) as usize + lent) * SLOT
    }

    /// The number the next span written gets.
    pub(crate) fn next(&self) -> u64 {
        self.next
    }

    /// The number of the oldest span still held.
    pub(crate) fn oldest(&self) -> u64 {
        self.oldest
    }

    /// Whether `entries` more spans fit under its limit; `over`: growing it
    /// by them would take the history past the limit, so it wraps where it
    /// is, if it can hold them already. No span is numbered past its length
    /// yet then, so each stays where its number says.
    pub(crate) fn fit(&mut self, entries: usize, over: bool) -> bool {
        if over && self.filled < self.slots && self.filled >= entries {
            // Not wrapped yet, so `next` is `filled`: the cursor wraps too.
            (self.slots, self.cursor) = (self.filled, 0);
        }
        entries <= self.slots
    }

    /// Spans numbered below this are overwritten by `entries` more.
    pub(crate) fn reused_from(&self, entries: usize) -> u64 {
        (self.next + entries as u64).saturating_sub(self.slots as u64)
    }

    /// Spans numbered below `oldest` are no longer held.
    pub(crate) fn let_go(&mut self, oldest: u64) {
        self.oldest = oldest;
    }

    /// Copies `spans` in (left empty, its capacity kept), numbered from
    /// [`Ring::next`]; returns the bytes the ring grew by, or `None`, the
    /// spans left where they are, if they do not fit ([`Ring::fit`] says
    /// first) or a stretch is lent. The slots they take must hold no
    /// trace still held: the history lets those go first.
    pub(crate) fn write(&mut self, spans: &mut Vec<RawSpan>) -> Option<usize> {
        let entries = spans.len();
        if self.memory.is_none() || entries > self.slots || self.lent.is_some() {
            return None;
        }
        if entries == 0 {
            return Some(0);
        }
        debug_assert!(self.oldest >= self.reused_from(entries), "held spans would be overwritten");
        let at = self.cursor;
        let head = entries.min(self.slots - at);
        if self.memory.as_ref().is_some_and(|memory| at + head > memory.cap) {
            self.reserve(at + head);
        }
        let memory = self.memory.as_ref()?;
        let from = spans.as_ptr();
        // SAFETY: `head` slots from the cursor `at` are in the memory (made
        // room for above); when `entries - head` more wrap to slot 0, the
        // first `head` reached the last of its `slots`, so the memory holds
        // them all, and `entries` is at most `slots`. `spans` is another
        // allocation. No thread reads or
        // writes these slots now: they hold no held trace (the history let
        // those go), and no stretch is lent. Each span is moved once:
        // `spans` forgets them right after. What the slots held owns
        // nothing (see `Ring`), so nothing leaks by not dropping it.
        unsafe {
            std::ptr::copy_nonoverlapping(from, memory.at(at), head);
            std::ptr::copy_nonoverlapping(from.add(head), memory.at(0), entries - head);
            spans.set_len(0);
        }
        Some(self.advance(entries))
    }

    /// Grows its memory to hold `slots` of its slots at least (twice what
    /// it held, up to all its slots): it fills its memory from the first
    /// slot before it first wraps, so a thread that records little holds
    /// little. The spans move with it; no stretch is lent (it lends only
    /// once it has all its slots).
    #[cold]
    fn reserve(&mut self, slots: usize) {
        debug_assert!(self.lent.is_none());
        let old = self.memory.take();
        let cap = old.as_ref().map_or(0, |old| old.cap);
        let memory = Slots::new(slots.max(2 * cap).min(self.slots.max(slots)));
        if let Some(old) = old {
            // SAFETY: the old memory's first `filled` slots are written, and
            // the new one has room for more; two allocations. The spans are
            // moved: the old memory never drops them.
            unsafe { std::ptr::copy_nonoverlapping(old.at(0), memory.at(0), self.filled) };
        }
        self.memory = Some(memory);
    }

    /// Moves `next` and the cursor on by `entries` spans just written from
    /// the cursor; returns the bytes the ring grew by.
    fn advance(&mut self, entries: usize) -> usize {
        let filled = self.filled;
        self.filled = filled.max((self.cursor + entries).min(self.slots));
        self.next += entries as u64;
        self.cursor += entries;
        if self.cursor >= self.slots {
            self.cursor -= self.slots;
        }
        (self.filled - filled) * SLOT
    }

    /// Lends its thread the stretch of slots its next spans go to, if it
    /// has none out, is full (its size fixed) and has [`STRETCH`] slots
    /// before it wraps; the held traces there must have gone first
    /// ([`Ring::reused_from`]). `slot`: the thread's stretch, aimed at
    /// these slots where it lies if it is of this ring's memory (no count of
    /// the memory's users taken), replaced otherwise. Whether it lent.
    pub(crate) fn lend(&mut self, slot: &mut Option<Stretch>) -> bool {
        let Some(memory) = self.memory.as_ref().filter(|_| self.lendable()) else { return false };
        if self.oldest < self.reused_from(STRETCH) {
            return false;
        }
        let (first, at) = (self.next, self.cursor);
        match slot {
            Some(stretch) if Arc::ptr_eq(&stretch.memory, memory) => {
                (stretch.first, stretch.at) = (first, at);
            }
            _ => *slot = Some(Stretch { memory: memory.clone(), first, at }),
        }
        self.lent = Some(first);
        true
    }

    /// Whether it could lend a stretch ([`Ring::lend`]) once the traces
    /// there go.
    pub(crate) fn lendable(&self) -> bool {
        self.memory.is_some()
            && self.lent.is_none()
            && self.filled == self.slots
            && self.slots - self.cursor >= STRETCH
    }

    /// Whether `stretch` is the one it has lent, and still where its next
    /// spans go.
    pub(crate) fn lent_here(&self, stretch: &Stretch) -> bool {
        self.lent == Some(stretch.first)
            && self.next == stretch.first
            && self.memory.as_ref().is_some_and(|memory| Arc::ptr_eq(memory, &stretch.memory))
    }

    /// Whether a stretch is lent.
    pub(crate) fn is_lent(&self) -> bool {
        self.lent.is_some()
    }

    /// Takes back the stretch it lent, unused ([`Ring::lent_here`]).
    pub(crate) fn take_back(&mut self, stretch: &Stretch) {
        debug_assert!(self.lent_here(stretch));
        self.lent = None;
    }

    /// Takes the `entries` spans written in the stretch it lent (which
    /// [`Ring::lent_here`] said) where they lie: numbered from
    /// [`Ring::next`].
    pub(crate) fn take_written(&mut self, entries: usize) {
        debug_assert!(self.lent == Some(self.next) && entries <= STRETCH);
        self.lent = None;
        self.advance(entries.min(STRETCH));
    }

    /// The slots of `entries` spans from number `first`, as one or two
    /// runs (the ring wraps). They must be held.
    pub(crate) fn runs(&self, first: u64, entries: usize) -> (&[RawSpan], &[RawSpan]) {
        let Some(memory) = self.memory.as_ref().filter(|_| entries > 0) else { return (&[], &[]) };
        debug_assert!(first >= self.oldest && first + entries as u64 <= self.next);
        let at = (first % self.slots as u64) as usize;
        let head = entries.min(self.slots - at);
        // SAFETY: held spans are in filled slots, `head` from `at` and the
        // rest from 0, within `slots`. While this borrow of the ring lasts
        // nothing writes them: they are written once, before they are held,
        // under a `&mut` of the ring, and no stretch covers them.
        unsafe {
            (
                std::slice::from_raw_parts(memory.at(at), head),
                std::slice::from_raw_parts(memory.at(0), entries - head),
            )
        }
    }

    /// Takes the spans from number `first` out of their slots, to `each`:
    /// their trace goes, and nothing is left owned there.
    pub(crate) fn empty(&mut self, first: u64, entries: usize, mut each: impl FnMut(RawSpan)) {
        let Some(memory) = self.memory.as_ref() else { return };
        for n in first..first + entries as u64 {
            // SAFETY: the spans of a trace going are in filled slots, each
            // read out once (the trace goes once), and under `&mut self` no
            // other thread reads them.
            each(unsafe { memory.at((n % self.slots as u64) as usize).read() });
        }
    }
}

impl Drop for Ring {
    /// Drops the spans still held: what their traces own.
    fn drop(&mut self) {
        let (first, entries) = (self.oldest, (self.next - self.oldest) as usize);
        self.empty(first, entries, drop);
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use minstant::Instant;

    use super::*;
    use crate::data::id::SpanId;

    fn spans(ids: std::ops::Range<u64>) -> Vec<RawSpan> {
        ids.map(|id| RawSpan::begin(SpanId(id), SpanId(0), Cow::Borrowed("step"), Instant::ZERO)).collect()
    }

    fn ids(ring: &Ring, first: u64, entries: usize) -> Vec<u64> {
        let (head, tail) = ring.runs(first, entries);
        head.iter().chain(tail).map(|span| span.id.0).collect()
    }

    /// A ring fixed at its length by a trace with no spans (it has not
    /// wrapped yet), then given a higher limit, grows at its end.
    #[test]
    fn a_ring_fixed_before_it_wrapped_grows_after_its_last_span() {
        let mut ring = Ring::default();
        assert_eq!(ring.take_limit(10 * SLOT), 0);
        assert!(ring.fit(3, false));
        assert_eq!((ring.next(), ring.write(&mut spans(1..4))), (0, Some(3 * SLOT)));
        assert!(ring.fit(0, true));
        assert_eq!(ring.slots(), 3, "fixed at its length");
        assert_eq!(ring.take_limit(20 * SLOT), 0, "nothing renumbered");
        assert!(ring.fit(2, false));
        assert_eq!((ring.next(), ring.write(&mut spans(4..6))), (3, Some(2 * SLOT)));
        assert_eq!(ids(&ring, 0, 5), [1, 2, 3, 4, 5]);
    }
}

/// The stretch's ordering under the model checker (`cargo test -p
/// minitrace --release --lib --features loom loom`): a thread writes a
/// stretch's slot outside the handover, publishes it under a handover
/// write (or, during a harvest, in the deferred cell the next write or
/// harvest absorbs), then writes the next stretch's slot while the
/// collector harvests and reads what is published. loom checks every
/// access to the slots against the others: a read not ordered after its
/// slot's write fails the model, and so does a write overlapping a read.
#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    use crate::transport::handoff::{Handoff, Hub};

    /// Slots, their thread's handover (the history: the slots published),
    /// and the hub.
    type Shared = (Arc<[UnsafeCell<u32>; 2]>, Arc<Handoff<(), usize, Vec<usize>>>, Arc<Hub>);

    /// The collector's side: takes what was deferred into the history, then
    /// reads every published slot.
    fn harvest((slots, handoff, hub): &Shared, read: &mut Vec<(usize, u32)>) {
        hub.harvest(
            || vec![handoff.clone()],
            |handoff| &**handoff,
            |_, main, older, _| {
                let cells = main.take_cells(older);
                main.history.extend(cells.kept);
                read.clear();
                for &slot in &main.history {
                    // SAFETY: published: its thread wrote it before the
                    // write that published it, and writes it no more.
                    read.push((slot, slots[slot].with(|value| unsafe { *value })));
                }
            },
        );
    }

    #[test]
    fn loom_a_stretch_written_outside_the_handover_is_read_only_once_published() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let shared: Shared = (
                Arc::new([UnsafeCell::new(0), UnsafeCell::new(0)]),
                Arc::new(Handoff::default()),
                Arc::new(Hub::new()),
            );
            let thread = thread::spawn({
                let (slots, handoff, hub) = shared.clone();
                move || {
                    for slot in 0..2 {
                        // SAFETY: the slot is lent to this thread: no one
                        // reads it until it is published below.
                        slots[slot].with_mut(|value| unsafe { *value = 7 + slot as u32 });
                        handoff.write(&hub, |cells, history| match history {
                            Some(history) => {
                                history.append(&mut cells.kept);
                                history.push(slot);
                            }
                            None => cells.kept.push(slot),
                        });
                    }
                }
            });
            let mut read = Vec::new();
            harvest(&shared, &mut read);
            harvest(&shared, &mut read);
            thread.join().unwrap();
            harvest(&shared, &mut read);
            assert_eq!(read, [(0, 7), (1, 8)], "each slot published once, in order, as written");
        });
    }
}
