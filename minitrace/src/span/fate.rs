//! A root's end on the thread that started it: its trace's fate is decided
//! there. Kept (reported), it goes to the collector with the local spans
//! that waited for it (see `local::parked`). Thrown away (cancelled, or
//! faster than `report_slow_traces_only`'s threshold), it is reset where it
//! lies: its buffers go back to the thread's pool and its spans are counted
//! in the thread's own counter; no message, no shared write. Only a trace
//! with parts that may already be on their way to the collector (see
//! `data::escape`) sends its root, marked cancelled, so the collector
//! throws those away too.

use crate::data::batch::Role;
use crate::data::raw_span::Clock;
use crate::data::span_state::SpanState;
use crate::data::{collect_id, escape};
use minstant::Instant;

use crate::local::parked::{self, Parked};
use crate::local::stack;
use crate::recorder;
use crate::transport::message::{EndedSpan, Message};
use crate::transport::{gate, queue, span_buffers, stats};

/// Ends `root`, a root (cancelled or not) started on this thread.
#[inline]
pub(crate) fn end_root_here(mut root: SpanState) {
    let end = Clock::SameThread.now();
    let collect_id = root.collect_id();
    let mut waiting = parked::take(collect_id);
    let kept = root.role() == Role::Root && gate::keeps_root(root.begin(), end);
    if recorder::is_on() {
        record(&root, end, waiting.as_mut(), kept);
    }
    if kept {
        if let Some(waiting) = waiting {
            waiting.submit();
        }
        queue::submit_with(1, || Message::Ended(EndedSpan { state: root, end }));
        return;
    }
    let mut thrown_away = 0;
    if let Some(waiting) = waiting {
        thrown_away += waiting.count;
        span_buffers::give_back_locally(waiting.spans);
    }
    if escape::is_marked(collect_id) || stack::has_line_of(collect_id) {
        // The collector counts the root, and whatever else it gets of the trace.
        root.set_role(Role::CancelledRoot);
        queue::submit_with(1, || Message::Ended(EndedSpan { state: root, end }));
    } else {
        thrown_away += 1;
        drop(root);
    }
    stats::count_sampled_out_here(thrown_away);
}

/// Keeps the request in the flight recorder; a root kept for its length
/// also starts an automatic dump of what overlapped it.
#[cold]
fn record(root: &SpanState, end: Instant, waiting: Option<&mut Parked>, kept: bool) {
    let spans = waiting.map_or(&mut [][..], |waiting| &mut waiting.spans[..]);
    let (trace_id, begin) = (root.trace_id(), root.begin());
    recorder::record(trace_id, (root.name(), root.properties(), begin, end), spans, !kept);
    if kept && gate::slow_threshold_set() {
        recorder::slow_root(trace_id, begin, end);
    }
}

/// Whether `root`'s end is decided here (see [`end_root_here`]).
#[inline]
pub(crate) fn ends_here(state: &SpanState) -> bool {
    state.role() != Role::Child && collect_id::is_from_this_thread(state.collect_id())
}
