//! A line's spans, where they are written: a buffer of the line's own (a
//! recycled `Vec`), or, with the flight recorder on, the stretch of its
//! thread's ring that the ring lent the thread for its next request's
//! spans (`transport::span_ring`). A request thrown away then leaves its
//! spans where they are: its thread's history takes them in place, with
//! nothing to copy. Anywhere else they go (a trace kept, a batch sent on,
//! a buffer grown past the stretch) they are copied into a buffer first,
//! and the stretch goes back home for the thread's next line.
//!
//! The stretch itself stays in a thread-local: a line holds only where it
//! is, so that a line's spans take no more room than a `Vec` does, and one
//! line at a time holds it. The thread's exit drops it, after its lines
//! are closed ([`drop_stretch`]).

use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use crate::data::raw_span::RawSpan;
use crate::transport::span_ring::Stretch;
use crate::transport::{property_lists, span_buffers};

thread_local! {
    /// The stretch the thread's ring lent it: at home, held by a line, or
    /// spent (its spans taken) until the ring aims it at its next slots.
    /// Not dropped with the thread-local: the thread's exit drops it once
    /// its lines are closed (a destructor of its own could run first).
    static STRETCH: ManuallyDrop<RefCell<Option<Stretch>>> = const { ManuallyDrop::new(RefCell::new(None)) };
    /// Where [`STRETCH`]'s slots are while it is at home (null: it is not).
    static HOME: Cell<(*mut RawSpan, usize)> = const { Cell::new((std::ptr::null_mut(), 0)) };
    /// Whether a line holds [`STRETCH`].
    static OUT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on the thread's stretch slot, where it lies (`None` if the
/// thread-local is gone, or borrowed: never, as no caller nests).
pub(crate) fn with_stretch<R>(f: impl FnOnce(&mut Option<Stretch>) -> R) -> Option<R> {
    STRETCH.try_with(|slot| slot.try_borrow_mut().ok().map(|mut slot| f(&mut slot))).ok().flatten()
}

/// Lets `aim` aim the thread's stretch (or make one) at its ring's next
/// slots, in one borrow of it; if it did, the stretch is at home there.
pub(crate) fn aim_home(aim: impl FnOnce(&mut Option<Stretch>) -> bool) {
    let at = with_stretch(|slot| match aim(slot) {
        true => slot.as_ref().map(|stretch| (stretch.ptr(), stretch.cap())),
        false => None,
    });
    if let Some(at) = at.flatten() {
        HOME.set(at);
    }
}

/// The stretch's spans were taken by its ring: no line holds it now, and
/// it is not at home until aimed again ([`aim_home`]).
pub(crate) fn spent() {
    OUT.set(false);
}

/// The line that held the stretch at `at` (`cap` slots) is done with it.
fn back_home(at: *mut RawSpan, cap: usize) {
    HOME.set((at, cap));
    OUT.set(false);
}

/// Whether a line holds the thread's stretch.
pub(crate) fn is_out() -> bool {
    OUT.get()
}

/// Takes the thread's stretch, whatever its state, for good.
pub(crate) fn take_stretch() -> Option<Stretch> {
    HOME.set((std::ptr::null_mut(), 0));
    OUT.set(false);
    with_stretch(Option::take).flatten()
}

/// Where the thread's stretch is while at home (null: it is not).
#[cfg(test)]
pub(crate) fn home() -> *mut RawSpan {
    HOME.get().0
}

/// Drops the thread's stretch (its exit, once its lines are closed).
pub(crate) fn drop_stretch() {
    drop(take_stretch());
}

/// The top bit of [`LineSpans::cap`]: its spans are in the thread's stretch.
const LENT: usize = 1 << (usize::BITS - 1);

/// The spans of one line: `len` of them at `ptr`, with room for `cap` (its
/// top bit [`LENT`] set when in the thread's stretch, clear in a `Vec`'s
/// buffer).
pub(crate) struct LineSpans {
    ptr: NonNull<RawSpan>,
    len: usize,
    cap: usize,
}

impl Default for LineSpans {
    fn default() -> LineSpans {
        LineSpans::from(Vec::new())
    }
}

impl From<Vec<RawSpan>> for LineSpans {
    fn from(buffer: Vec<RawSpan>) -> LineSpans {
        let mut buffer = ManuallyDrop::new(buffer);
        let (len, cap) = (buffer.len(), buffer.capacity());
        // A `Vec`'s pointer is never null, dangling when it has no memory.
        let ptr = NonNull::new(buffer.as_mut_ptr()).unwrap_or(NonNull::dangling());
        LineSpans { ptr, len, cap }
    }
}

impl std::fmt::Debug for LineSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineSpans").field("len", &self.len).field("lent", &self.is_lent()).finish()
    }
}

impl LineSpans {
    /// How many spans (and events) it holds.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many it has room for.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.cap & !LENT
    }

    /// Whether its spans are in the thread's stretch.
    #[inline]
    pub(crate) fn is_lent(&self) -> bool {
        self.cap & LENT != 0
    }

    /// Where its spans are.
    pub(crate) fn as_ptr(&self) -> *const RawSpan {
        self.ptr.as_ptr()
    }

    /// Adds `span`.
    ///
    /// # Safety
    ///
    /// It must have room for it: fewer spans than its
    /// [`capacity`](LineSpans::capacity).
    #[inline]
    pub(crate) unsafe fn push_unchecked(&mut self, span: RawSpan) {
        debug_assert!(self.len < self.capacity());
        // SAFETY: below its capacity (the caller's promise), the slot is in
        // its memory (a buffer's spare capacity, or the stretch's slots,
        // which only this line touches while it holds them) and holds no
        // span of its own, so it is written without dropping anything.
        unsafe { self.ptr.as_ptr().add(self.len).write(span) };
        self.len += 1;
    }

    /// The span at `index`, if it holds one there.
    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut RawSpan> {
        // SAFETY: below `len`, the slot holds a span written by this line,
        // which no other thread reads until it is handed on.
        (index < self.len).then(|| unsafe { &mut *self.ptr.as_ptr().add(index) })
    }

    /// Its spans.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [RawSpan] {
        // SAFETY: as for `get_mut`, for all `len` of them.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Its spans.
    pub(crate) fn as_slice(&self) -> &[RawSpan] {
        // SAFETY: as for `get_mut`, for all `len` of them.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Room for one more: for its first, the thread's stretch if `lend`
    /// (the line of a root) and one is at home, a recycled buffer
    /// otherwise; past its room, a buffer grown (the spans in a stretch
    /// moved out to it).
    /// `recording`: the recorder is on (asked only when `lend`); off, a
    /// stretch at home goes, with the memory it keeps alive.
    #[cold]
    pub(crate) fn make_room(&mut self, lend: bool, recording: impl FnOnce() -> bool) {
        if self.cap == 0 {
            // Only a root's line reads where the stretch is.
            let (at, cap) = if lend { HOME.get() } else { (std::ptr::null_mut(), 0) };
            if let Some(ptr) = NonNull::new(at) {
                HOME.set((std::ptr::null_mut(), 0));
                if recording() {
                    OUT.set(true);
                    (self.ptr, self.cap) = (ptr, cap | LENT);
                    return;
                }
                // The recorder is off: its memory goes.
                drop_stretch();
            }
            return self.hold(span_buffers::take());
        }
        if self.len == self.capacity() {
            let mut buffer = self.take_vec();
            buffer.reserve(1);
            self.hold(buffer);
        }
    }

    /// Holds `buffer`, having held nothing: written over, not dropped.
    #[inline]
    fn hold(&mut self, buffer: Vec<RawSpan>) {
        debug_assert!(self.cap == 0);
        // `From` made it, and a `LineSpans` of no capacity owns nothing.
        std::mem::forget(std::mem::replace(self, LineSpans::from(buffer)));
    }

    /// Its spans, in a buffer: the one they are in, or one they are moved
    /// to out of the stretch (which goes home). Left empty.
    pub(crate) fn take_vec(&mut self) -> Vec<RawSpan> {
        std::mem::take(self).into_vec()
    }

    /// Its spans, in a buffer (see [`LineSpans::take_vec`]).
    pub(crate) fn into_vec(self) -> Vec<RawSpan> {
        let this = ManuallyDrop::new(self);
        let (ptr, len) = (this.ptr.as_ptr(), this.len);
        if !this.is_lent() {
            // SAFETY: not lent, these are the parts of the `Vec` it was made
            // from, with `len` spans written since; `this` is forgotten, so
            // the buffer has one owner.
            return unsafe { Vec::from_raw_parts(ptr, len, this.cap) };
        }
        let mut buffer = span_buffers::take();
        buffer.reserve(len);
        // SAFETY: the stretch's first `len` slots hold the spans, moved
        // here once: the stretch goes home below, and its next line writes
        // over them without reading them; the buffer has room for `len`,
        // in another allocation. The stretch's memory is alive: the thread
        // keeps it while a line holds it.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, buffer.as_mut_ptr(), len);
            buffer.set_len(len);
        }
        back_home(ptr, this.capacity());
        buffer
    }

    /// Its spans in the stretch are its ring's now (the ring took them
    /// where they lie): forgotten here, left empty.
    pub(crate) fn give_to_ring(&mut self) {
        debug_assert!(self.is_lent());
        (self.ptr, self.len, self.cap) = (NonNull::dangling(), 0, 0);
    }

    /// Gives the memory back for the thread's next line, and the spans'
    /// property lists for its next properties.
    pub(crate) fn give_back(self) {
        if !self.is_lent() {
            return span_buffers::give_back_locally(self.into_vec());
        }
        let mut this = ManuallyDrop::new(self);
        for span in this.as_mut_slice() {
            if let Some(list) = span.properties.take() {
                property_lists::give_back_locally(list);
            }
        }
        this.drop_lent();
    }

    /// Drops the spans in the stretch where they lie, and sends the
    /// stretch home.
    fn drop_lent(&mut self) {
        let spans: *mut [RawSpan] = self.as_mut_slice();
        self.len = 0;
        // SAFETY: the spans were written by this line, which no longer
        // counts them (its length is 0), so they are dropped once.
        unsafe { std::ptr::drop_in_place(spans) };
        back_home(self.ptr.as_ptr(), self.capacity());
    }
}

impl Drop for LineSpans {
    /// Inlined with its test for nothing held: what most lines leave, their
    /// spans taken.
    #[inline]
    fn drop(&mut self) {
        if self.cap == 0 {
            return;
        }
        self.drop_held();
    }
}

impl LineSpans {
    /// [`Drop`] once it holds memory.
    #[cold]
    fn drop_held(&mut self) {
        match self.is_lent() {
            true => self.drop_lent(),
            // SAFETY: as in `into_vec`: the parts of its `Vec`.
            false => drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.cap) }),
        }
    }
}
