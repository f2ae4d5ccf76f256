//! A root's end on the thread that started it: its trace's fate is decided
//! there. Kept (reported), it goes to the collector with the local spans
//! that waited for it (see `local::parked`). Thrown away (cancelled, or
//! faster than `report_slow_traces_only`'s threshold), it stays where it
//! lies: with the flight recorder on, its parts move into the thread's
//! history (`transport::history`), as they were recorded, to be retrieved
//! after the fact; off, its buffers and property lists go back to the
//! thread's caches. Its spans
//! are counted in the thread's own counter; no message, no shared
//! read-modify-write. Only a trace with parts that may already be on their
//! way to the collector (see `data::escape`) sends its root, marked
//! cancelled, so the collector throws those away too.

use crate::data::batch::Role;
use crate::data::raw_span::Clock;
use crate::data::span_state::SpanState;
use crate::data::{collect_id, escape};

use crate::local::parked;
use crate::local::stack;
use crate::transport::history::{self, Kept};
use crate::transport::line_spans::LineSpans;
use crate::transport::message::{EndedSpan, Message};
use crate::transport::{gate, property_lists, queue, stats};

/// Ends `root`, a root (cancelled or not) started on this thread.
#[inline]
pub(crate) fn end_root_here(mut root: SpanState) {
    let end = Clock::SameThread.now();
    let collect_id = root.collect_id();
    let waiting = parked::take(collect_id);
    let kept = root.role() == Role::Root && {
        let policy = gate::policy();
        // The length is worked out only when a threshold is set.
        policy.threshold().is_none()
            || gate::root_is_kept(&policy, end.saturating_duration_since(root.begin()), || {
                (root.static_name_or_owned(), root.properties(), root.trace_id())
            })
    };
    if kept {
        if let Some(waiting) = waiting {
            waiting.submit();
        }
        queue::submit_with(1, || Message::Ended(EndedSpan { state: root, end }));
        return;
    }
    let mut thrown_away = waiting.as_ref().map_or(0, |waiting| waiting.count);
    let escaped = escape::is_marked(collect_id) || stack::has_line_of(collect_id);
    let limit = history::limit();
    if escaped {
        // The collector counts the root, and whatever else it gets of the trace.
        root.set_role(Role::CancelledRoot);
        queue::submit_with(1, || Message::Ended(EndedSpan { state: root, end }));
    } else if limit > 0 {
        // Kept for the flight recorder, as recorded: the root too.
        thrown_away += 1;
        stats::count_sampled_out_here(thrown_away);
        return match waiting {
            // Its spans under another target than the root's own line
            // (never, but kept safe): kept as parts.
            Some(waiting) if waiting.target != root.line_target() => queue::keep(
                &mut [
                    Some(Kept::new(waiting.into_message())),
                    Some(Kept::new(Message::Ended(EndedSpan { state: root, end }))),
                ],
                limit,
            ),
            Some(waiting) => queue::keep_thrown(waiting.spans, waiting.count, root, end, limit),
            None => queue::keep_thrown(LineSpans::default(), 0, root, end, limit),
        };
    } else {
        thrown_away += 1;
        if let Some(list) = root.into_properties() {
            property_lists::give_back_locally(list);
        }
    }
    match waiting {
        // This thread's part of an escaped trace: kept for the recorder.
        Some(waiting) if limit > 0 => queue::keep(&mut [Some(Kept::new(waiting.into_message()))], limit),
        Some(waiting) => waiting.spans.give_back(),
        None => {}
    }
    stats::count_sampled_out_here(thrown_away);
}

/// Whether `root`'s end is decided here (see [`end_root_here`]).
#[inline]
pub(crate) fn ends_here(state: &SpanState) -> bool {
    state.role() != Role::Child && collect_id::is_from_this_thread(state.collect_id())
}
