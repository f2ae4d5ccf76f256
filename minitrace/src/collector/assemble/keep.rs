//! The flight recorder's part of a cycle. While it is on, what the
//! collector files is given back to the thread it came from at the next
//! harvest, to be kept in that thread's history beside the traces the
//! thread threw away itself (`transport::history`); and requests for what
//! the histories hold are answered (`collector::retrieve`).

use std::sync::Arc;

use crate::collector::assemble::fates::Fate;
use crate::collector::assemble::Collector;
use crate::collector::retrieve::{memory_of, Assembled, Gathering};
use crate::transport::gate;
use crate::transport::history::{self, Kept};
use crate::transport::message::Message;
use crate::transport::queue::{self, Thread};
use crate::transport::stats;

/// What the exited threads' memories may hold in all, in threads' worth:
/// threads come and go, their traces stay a while.
const EXITED_THREADS: usize = 16;

/// A cut: each thread's messages (`None`: those of exiting threads).
pub(super) type Cut = Vec<(Option<Arc<Thread>>, Vec<Message>)>;

impl Collector {
    /// Takes every thread's messages (a consistent cut); meanwhile gives
    /// each thread back what was filed from it last cycle, keeps what it
    /// threw away during the last harvest, and gathers what the requests
    /// want from its history.
    pub(super) fn harvest(&mut self, gathering: &mut Gathering) -> Cut {
        let limit = history::limit();
        let mut returning = std::mem::take(&mut self.to_return);
        let mut evicted = history::Released::default();
        let mut emptied = Vec::new();
        let mut cut = Vec::new();
        let timeline = &self.timeline;
        let spares = &mut self.spares;
        let exited = &mut self.exited;
        queue::harvest(spares, |thread, mut cells, history, finished| {
            if let (Some(thread), Some(history)) = (thread, history) {
                if limit == 0 || gathering.clear {
                    // Dropped where it is: the recorder was switched off.
                    drop(std::mem::take(history));
                    for waiting in cells.kept.drain(..) {
                        waiting.release(&mut evicted);
                    }
                } else {
                    if let Some(at) = returning.iter().position(|(of, _)| Arc::ptr_eq(of, thread)) {
                        let (_, mut filed) = returning.swap_remove(at);
                        history.keep(filed.drain(..).map(Kept::new), limit, &mut evicted);
                        emptied.push(filed);
                    }
                    history.absorb(&mut cells.kept, limit, &mut evicted, false);
                }
                if finished && cells.outbox.is_empty() {
                    // An exited thread's memory joins the exited threads',
                    // moved whole, where requests find it (unless it sent
                    // something now, which comes back to it first).
                    exited.take(thread.number, history);
                } else if !gathering.is_idle() {
                    for held in history.parts() {
                        gathering.gather_held(&held, thread.number, timeline);
                    }
                    if gathering.wants_memory() {
                        let memory =
                            memory_of(thread.number, false, history.bytes(), history.parts(), timeline);
                        gathering.note_memory(memory);
                    }
                }
            }
            cut.push((thread.cloned(), cells.outbox));
        });
        // What was to go back to threads let go meanwhile joins their
        // memories there.
        if limit > 0 && !gathering.clear {
            for (thread, filed) in returning {
                let parts = filed.into_iter().map(Kept::new).collect();
                self.exited.keep(thread.number, parts, limit, &mut evicted);
            }
            self.exited.make_room(limit * EXITED_THREADS, &mut evicted);
        } else {
            self.exited.forget();
        }
        if !gathering.is_idle() {
            for (thread, history) in self.exited.histories() {
                for held in history.parts() {
                    gathering.gather_held(&held, thread, timeline);
                }
            }
            if gathering.wants_memory() {
                for (thread, history) in self.exited.histories() {
                    let memory = memory_of(thread, true, history.bytes(), history.parts(), timeline);
                    gathering.note_memory(memory);
                }
            }
        }
        evicted.recycle_anywhere();
        self.spare_outboxes(emptied);
        cut
    }

    /// Keeps emptied outboxes to give threads at the next harvest.
    pub(super) fn spare_outboxes(&mut self, emptied: impl IntoIterator<Item = Vec<Message>>) {
        for outbox in emptied {
            if self.spares.len() < queue::MAX_SPARES && outbox.capacity() > 0 {
                debug_assert!(outbox.is_empty());
                self.spares.push(outbox);
            }
        }
    }

    /// After a cut is filed: its messages are kept to be given back, the
    /// requests gather from them too, and are answered; retrieved traces
    /// to report are reported.
    pub(super) fn keep_cut(&mut self, cut: Cut, mut gathering: Gathering) {
        for (thread, messages) in cut {
            let number = thread.as_ref().map_or(0, |thread| thread.number);
            for message in &messages {
                gathering.gather(message, number, &self.timeline);
            }
            match (self.keep, thread) {
                (true, Some(thread)) => self.to_return.push((thread, messages)),
                // What filing left in place is dropped there; the outbox
                // serves another thread.
                (_, _) => {
                    let mut messages = messages;
                    messages.clear();
                    self.spare_outboxes([messages]);
                }
            }
        }
        if gathering.is_idle() {
            return;
        }
        let finished = &self.finished;
        let (to_report, found_at_last) =
            gathering.answer(|collect_id| finished.get(collect_id) == Some(Fate::Reported));
        self.report_retrieved(to_report);
        // Awaited traces whose root ended before the want reached its
        // thread: reported now, as if kept when it ended.
        for trace_id in found_at_last {
            gate::reported(trace_id);
            crate::recorder::kept(trace_id);
        }
    }

    /// Hands retrieved traces to the reporter, each whole, counted apart
    /// from the spans reported when their roots ended.
    fn report_retrieved(&mut self, traces: Vec<Assembled>) {
        if traces.is_empty() {
            return;
        }
        let records: Vec<_> = traces.into_iter().flat_map(|trace| trace.spans).collect();
        let reporter = &mut self.reporter;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reporter.report(&records))) {
            Ok(()) => stats::count_retrieved(records.len()),
            Err(_) => stats::count_dropped_by_reporter(records.len() as u64),
        }
    }
}
