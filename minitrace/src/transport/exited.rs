//! The histories of threads that exited (`transport::history`), kept
//! until they take more than the recorder's bound, oldest thread first.

use std::collections::VecDeque;

use crate::transport::history::{History, Kept, Released};

/// The histories of threads that exited, kept whole (ring and all: moved,
/// not converted) until they take more than their bound, oldest thread
/// first. Requests find their traces here as in a live thread's history.
#[derive(Default)]
pub(crate) struct Exited {
    histories: VecDeque<(u32, History)>,
    bytes: usize,
}

impl Exited {
    /// Each exited thread's number and history, oldest first.
    pub(crate) fn histories(&self) -> impl Iterator<Item = (u32, &History)> {
        self.histories.iter().map(|(thread, history)| (*thread, history))
    }

    /// The bytes they hold.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `history`, the memory of the thread numbered `thread`, which
    /// exited; left empty there.
    pub(crate) fn take(&mut self, thread: u32, history: &mut History) {
        if !history.is_empty() {
            self.bytes += history.bytes();
            self.histories.push_back((thread, std::mem::take(history)));
        }
    }

    /// Keeps parts filed from the thread numbered `thread` after it exited,
    /// with its history if that is still here.
    pub(crate) fn keep(&mut self, thread: u32, parts: Vec<Kept>, limit: usize, released: &mut Released) {
        let at = self.histories.iter().rposition(|(of, _)| *of == thread);
        let history = match at {
            Some(at) => &mut self.histories[at].1,
            None => {
                self.histories.push_back((thread, History::default()));
                &mut self.histories.back_mut().expect("just pushed").1
            }
        };
        self.bytes -= history.bytes();
        history.keep(parts, limit, released);
        self.bytes += history.bytes();
    }

    /// Lets the oldest threads' histories go until it holds at most
    /// `limit` bytes; each goes whole, counted as overwritten.
    pub(crate) fn make_room(&mut self, limit: usize, released: &mut Released) {
        while self.bytes > limit {
            let Some((_, mut gone)) = self.histories.pop_front() else { break };
            self.bytes -= gone.bytes();
            gone.let_all_go(released);
        }
    }

    /// Forgets every history (the recorder was switched off).
    pub(crate) fn forget(&mut self) {
        (self.histories, self.bytes) = (VecDeque::new(), 0);
    }
}
