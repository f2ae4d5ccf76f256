//! The per-thread stack of span lines. A line is what local spans are
//! recorded into: one per live [`LocalParentGuard`](crate::local::LocalParentGuard)
//! (spans go to the guard's span) or [`LocalCollector`](crate::local::LocalCollector)
//! (spans are handed back to the caller). The top line is the current one.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::num::NonZeroU64;

use crate::data::context::SpanContext;
use crate::data::escape;
use crate::data::raw_span::{RawSpan, LINE_PARENT};
use crate::data::record::PropertyList;
use crate::data::target::Targets;
use crate::local::parked;
use crate::local::span_queue::{SpanQueue, MAX_SPANS_PER_QUEUE};
use crate::transport::message::Message;
use crate::transport::{gate, property_lists, queue};

pub(crate) struct SpanLine {
    epoch: u64,
    queue: SpanQueue,
    /// Where the line's spans are reported; `None` for a `LocalCollector`.
    targets: Option<Targets>,
    /// Whether its spans may wait for their root's end on this thread: the
    /// line of a root itself (a child span's line goes on as it always did).
    parks: bool,
}

impl SpanLine {
    /// Closes open spans and sends everything to the line's targets (a
    /// collector's line, whose spans are not wanted, only gives its buffer
    /// back). The line is left empty where it lies.
    fn submit(&mut self) {
        let (spans, count) = self.queue.take_all();
        match self.targets.take() {
            // Under a root of this thread: waits there for the root's end.
            Some(Targets::One(target)) if self.parks && !spans.is_empty() && gate::parking() => {
                parked::park(target, spans, count);
            }
            Some(targets) if !spans.is_empty() => {
                escape::mark_targets(&targets);
                let spans = spans.into_vec();
                queue::submit_with(count, || Message::local_batch(spans, count, targets));
            }
            _ => spans.give_back(),
        }
    }
}

/// Where a local span lives: its line's epoch and its index in the line's
/// queue, in one word, so that a [`LocalSpan`](crate::local::LocalSpan) is
/// passed and returned in registers (PERFORMANCE.md, "Local spans").
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalSpanHandle(NonZeroU64);

const INDEX_BITS: u32 = 16;
const _: () = assert!(MAX_SPANS_PER_QUEUE <= 1 << INDEX_BITS);
/// Epochs run through 1..=EPOCH_MASK, the bits the index leaves.
const EPOCH_MASK: u64 = u64::MAX >> INDEX_BITS;

fn epoch_after(epoch: u64) -> u64 {
    if epoch >= EPOCH_MASK {
        1
    } else {
        epoch + 1
    }
}

impl LocalSpanHandle {
    fn new(epoch: u64, index: usize) -> Option<LocalSpanHandle> {
        NonZeroU64::new(epoch << INDEX_BITS | index as u64).map(LocalSpanHandle)
    }

    fn epoch(self) -> u64 {
        self.0.get() >> INDEX_BITS
    }

    fn index(self) -> usize {
        (self.0.get() & ((1 << INDEX_BITS) - 1)) as usize
    }
}

pub(crate) struct LocalStack {
    /// Not dropped with the thread-local: the thread's exit closes the lines
    /// (see [`close_thread`]).
    lines: ManuallyDrop<Vec<SpanLine>>,
    next_epoch: u64,
    exit: ExitHook,
}

/// Whether the thread's exit will close its lines: asked of the transport's
/// exit hook once, by the first line, rather than by every line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExitHook {
    Unarmed,
    Armed,
    /// The thread's exit closed its lines: no more can be opened.
    Closed,
}

thread_local! {
    /// How many lines are open: read first by a local span, so that one with
    /// no local parent (the untraced, unsampled and switched-off cases)
    /// costs one thread-local load rather than the stack's borrow.
    static OPEN_LINES: Cell<usize> = const { Cell::new(0) };
    static STACK: RefCell<LocalStack> = const {
        RefCell::new(LocalStack { lines: ManuallyDrop::new(Vec::new()), next_epoch: 1, exit: ExitHook::Unarmed })
    };
}

/// Runs `f` on this thread's stack; `None` if called re-entrantly (never
/// from our code; then the caller gets a no-op). `try_with` although it
/// cannot fail: `with` was compiled to a call through the key's accessor.
#[inline]
fn with_stack<R>(f: impl FnOnce(&mut LocalStack) -> R) -> Option<R> {
    STACK.try_with(|stack| stack.try_borrow_mut().ok().map(|mut stack| f(&mut stack))).ok().flatten()
}

/// Opens a line (`parks`: see [`SpanLine::parks`]); returns its epoch, the key to close it with. `None` once
/// the thread's exit has closed its lines: a line opened later could never
/// be closed for it.
#[inline]
pub(crate) fn push_line(targets: Option<Targets>, parks: bool) -> Option<u64> {
    with_stack(|stack| {
        match stack.exit {
            ExitHook::Armed => {}
            ExitHook::Unarmed if queue::thread_exit_armed_for(close_thread) => stack.exit = ExitHook::Armed,
            _ => return None,
        }
        let epoch = stack.next_epoch;
        stack.next_epoch = epoch_after(epoch);
        let queue = SpanQueue::new(parks);
        stack.lines.push(SpanLine { epoch, queue, targets, parks });
        OPEN_LINES.set(stack.lines.len());
        Some(epoch)
    })
    .flatten()
}

/// Removes a line and sends what it recorded to its targets. Out of line,
/// so that a guard's drop glue stays small enough to inline.
#[inline(never)]
pub(crate) fn close_line(epoch: u64) {
    finish_line(epoch, SpanLine::submit);
}

/// As [`close_line`], but what the line recorded never waits on this thread
/// for its root: a future that will be polled again, maybe on another
/// thread, where its root may end.
pub(crate) fn close_line_unparked(epoch: u64) {
    finish_line(epoch, |line| {
        line.parks = false;
        line.submit();
    });
}

/// Removes a line and returns what it recorded, and how many entries are
/// spans (not events); spans still open are closed now.
#[inline]
pub(crate) fn take_line(epoch: u64) -> Option<(Vec<RawSpan>, usize)> {
    finish_line(epoch, |line| {
        let (spans, count) = line.queue.take_all();
        (spans.into_vec(), count)
    })
}

/// Runs `f` on a line where it lies, then removes the line: not moved out
/// first (PERFORMANCE.md, "Building values where they live").
#[inline]
fn finish_line<R>(epoch: u64, f: impl FnOnce(&mut SpanLine) -> R) -> Option<R> {
    with_stack(|stack| {
        let position = line_position(&stack.lines, epoch)?;
        let result = f(&mut stack.lines[position]);
        remove_line(&mut stack.lines, position);
        Some(result)
    })
    .flatten()
}

/// Where the line is, searched from the top, where it normally is; guards
/// dropped out of order find theirs further down.
#[inline]
fn line_position(lines: &[SpanLine], epoch: u64) -> Option<usize> {
    lines.iter().rposition(|line| line.epoch == epoch)
}

/// The line itself, searched as [`line_position`] does.
#[inline]
fn line_mut(lines: &mut [SpanLine], epoch: u64) -> Option<&mut SpanLine> {
    lines.iter_mut().rev().find(|line| line.epoch == epoch)
}

/// The top line is dropped where it lies: `remove` would move it out
/// through the stack first, only to drop it.
#[inline]
fn remove_line(lines: &mut Vec<SpanLine>, position: usize) {
    if position + 1 == lines.len() {
        lines.truncate(position);
    } else {
        lines.remove(position);
    }
    OPEN_LINES.set(lines.len());
}

/// The check is inlined into the caller; the work behind it is a call, so
/// that a span with no local parent never pays the call's register saves.
#[inline(always)]
pub(crate) fn enter_span(name: impl Into<Cow<'static, str>>) -> Option<LocalSpanHandle> {
    if OPEN_LINES.with(Cell::get) == 0 {
        return None;
    }
    enter_span_on_top_line(name.into())
}

#[inline]
fn enter_span_on_top_line(name: Cow<'static, str>) -> Option<LocalSpanHandle> {
    with_stack(|stack| {
        let line = stack.lines.last_mut()?;
        let index = line.queue.start_span(name)?;
        LocalSpanHandle::new(line.epoch, index)
    })
    .flatten()
}

/// Kept out of line so that a span's drop glue stays small enough to be
/// inlined, and a no-op span's drop is one test in the caller.
#[inline(never)]
pub(crate) fn exit_span(handle: LocalSpanHandle) {
    with_stack(|stack| {
        if let Some(line) = line_mut(&mut stack.lines, handle.epoch()) {
            line.queue.finish_span(handle.index());
        }
    });
}

pub(crate) fn add_properties_to_span(handle: LocalSpanHandle, list: PropertyList) {
    let left = with_stack(|stack| match line_mut(&mut stack.lines, handle.epoch()) {
        Some(line) => line.queue.add_properties(handle.index(), list),
        None => Some(list),
    });
    // Given back once the stack is released.
    if let Some(list) = left.flatten() {
        property_lists::give_back_locally(list);
    }
}

pub(crate) fn add_properties_to_current(list: PropertyList) {
    let left = with_stack(|stack| match stack.lines.last_mut() {
        Some(line) => line.queue.add_properties_to_current(list),
        None => Some(list),
    });
    if let Some(list) = left.flatten() {
        property_lists::give_back_locally(list);
    }
}

pub(crate) fn add_event(name: Cow<'static, str>, properties: Option<PropertyList>) {
    with_stack(|stack| {
        if let Some(line) = stack.lines.last_mut() {
            line.queue.add_event(name, properties);
        }
    });
}

/// The targets a thread-safe span started under the current local parent
/// gets: `None` without a local parent or inside a `LocalCollector`.
pub(crate) fn current_targets() -> Option<Targets> {
    with_stack(|stack| {
        let line = stack.lines.last()?;
        let targets = line.targets.as_ref()?;
        Some(match line.queue.current_parent_id() {
            LINE_PARENT => targets.clone(),
            local_parent => targets.with_parent(local_parent),
        })
    })
    .flatten()
}

pub(crate) fn current_context() -> Option<SpanContext> {
    with_stack(|stack| {
        let line = stack.lines.last()?;
        let target = line.targets.as_ref()?.first();
        let parent_id = match line.queue.current_parent_id() {
            LINE_PARENT => target.parent_id,
            local_parent => local_parent,
        };
        Some(SpanContext::new(target.trace_id(), parent_id))
    })
    .flatten()
}

/// What the thread's exit closes of the local layer, before its outbox to the
/// collector closes: lines still open, then the batch waiting for its root.
fn close_thread() {
    close_all_lines();
    parked::send_waiting();
}

/// A thread exiting with guards still open: their spans are closed and
/// reported, not lost.
pub(crate) fn close_all_lines() {
    let lines = with_stack(|stack| {
        stack.exit = ExitHook::Closed;
        OPEN_LINES.set(0);
        std::mem::take(&mut *stack.lines)
    })
    .unwrap_or_default();
    for mut line in lines {
        line.submit();
    }
}

/// Whether a line of `collect_id`'s trace is open on this thread: its
/// spans will be sent when its guard drops, after the root's end.
pub(crate) fn has_line_of(collect_id: u64) -> bool {
    // Usually no line is open when a root ends: one load, no borrow.
    if OPEN_LINES.with(Cell::get) == 0 {
        return false;
    }
    with_stack(|stack| {
        stack.lines.iter().any(|line| {
            line.targets.as_ref().is_some_and(|targets| {
                targets.as_slice().iter().any(|target| target.collect_id == collect_id)
            })
        })
    })
    .unwrap_or(false)
}

/// Whether the thread has a local parent (a guard's span or a collector).
pub(crate) fn has_line() -> bool {
    OPEN_LINES.with(Cell::get) != 0
}

/// Whether there is an innermost open local span to add properties to.
pub(crate) fn has_open_local_span() -> bool {
    with_stack(|stack| stack.lines.last().is_some_and(|line| line.queue.current_parent_id() != LINE_PARENT))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_keeps_its_epoch_and_index_at_the_limits() {
        for (epoch, index) in [(1, 0), (1, MAX_SPANS_PER_QUEUE - 1), (EPOCH_MASK, 0), (EPOCH_MASK, 12_345)] {
            let handle = LocalSpanHandle::new(epoch, index).unwrap();
            assert_eq!((handle.epoch(), handle.index()), (epoch, index));
        }
    }

    #[test]
    fn epochs_wrap_to_one_within_the_handle_bits() {
        assert_eq!(epoch_after(1), 2);
        assert_eq!(epoch_after(EPOCH_MASK - 1), EPOCH_MASK);
        assert_eq!(epoch_after(EPOCH_MASK), 1);
    }
}
