//! The handover from each traced thread to the collector: what a thread
//! writes for the collector (its outbox) and what it keeps (its history)
//! lie in memory of the thread's own, and the collector takes them in a
//! *harvest*, all threads at once, a few hundred times a second.
//!
//! A traced thread never waits and never makes a read-modify-write: around
//! each write it stores a `busy` flag, loads the hub's epoch, and writes
//! into its own memory, behind an asymmetric barrier (`util::barrier`)
//! whose cost the collector pays. While a harvest runs (the epoch is odd)
//! the thread writes into one of two *deferred* cells instead, chosen by
//! the harvest's number, which the next harvest (or the thread itself,
//! once the harvest is over) takes. The collector waits, for each thread,
//! until that thread is not in the middle of a write.
//!
//! What a harvest takes is a *consistent cut*: if a write is taken by a
//! harvest, so is every write that happened before it, on any thread, or
//! it was taken by an earlier harvest. (A write that happened before
//! another read the epoch before it, and one global epoch is read
//! coherently: once a thread has seen a harvest begin, every write that
//! happens after that sees it too.) So when the collector files a cut's
//! roots after the rest of the cut, a trace whose parts all ended before
//! its root is whole.
//!
//! The protocol is model-checked with loom: see the tests at the end, built
//! with minitrace's `loom` feature.

use crate::util::barrier;
use crate::util::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::util::sync::{pause, UnsafeCell};

/// What a thread hands over: messages for the collector, and entries for
/// its history that wait to join it.
#[derive(Debug)]
pub(crate) struct Cells<M, E> {
    pub(crate) outbox: Vec<M>,
    pub(crate) kept: Vec<E>,
}

impl<M, E> Default for Cells<M, E> {
    fn default() -> Cells<M, E> {
        Cells { outbox: Vec::new(), kept: Vec::new() }
    }
}

impl<M, E> Cells<M, E> {
    fn is_empty(&self) -> bool {
        self.outbox.is_empty() && self.kept.is_empty()
    }

    /// Appends `later`'s content after this one's. Inlined with its test
    /// for nothing to append, which is what every write but the first
    /// after a harvest finds (PERFORMANCE.md, "The per-thread handover").
    #[inline]
    fn absorb(&mut self, later: &mut Cells<M, E>) {
        if later.is_empty() {
            return;
        }
        self.outbox.append(&mut later.outbox);
        self.kept.append(&mut later.kept);
    }
}

/// A thread's memory while no harvest runs: its cells, and its history
/// (`H`: what the thread keeps of its traces).
#[derive(Debug, Default)]
pub(crate) struct Main<M, E, H> {
    pub(crate) cells: Cells<M, E>,
    pub(crate) history: H,
}

/// One traced thread's side of the handover.
#[derive(Debug)]
pub(crate) struct Handoff<M, E, H> {
    /// Set by the thread around each write; read by a harvest.
    busy: AtomicBool,
    /// The thread will write no more (it exited): a harvest may take both
    /// deferred cells.
    closed: AtomicBool,
    /// The thread's, but during a harvest, when it is the collector's.
    main: UnsafeCell<Main<M, E, H>>,
    /// Written during a harvest (by the harvest number's parity), taken by
    /// the next harvest or by the thread once the harvest is over.
    deferred: [UnsafeCell<Cells<M, E>>; 2],
}

// SAFETY: the cells are accessed by the owning thread and by the collector
// under the protocol described in the module's docs: the thread only
// between its `busy` stores, the collector only while the epoch is odd and
// `busy` was seen false after the barrier. What they hold moves between
// threads, so it must be `Send`.
unsafe impl<M: Send, E: Send, H: Send> Sync for Handoff<M, E, H> {}
// SAFETY: as above; the whole moves between threads only with its content.
unsafe impl<M: Send, E: Send, H: Send> Send for Handoff<M, E, H> {}

impl<M, E, H: Default> Default for Handoff<M, E, H> {
    fn default() -> Handoff<M, E, H> {
        Handoff {
            busy: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            main: UnsafeCell::new(Main { cells: Cells::default(), history: H::default() }),
            deferred: [UnsafeCell::new(Cells::default()), UnsafeCell::new(Cells::default())],
        }
    }
}

impl<M, E, H: Default> Handoff<M, E, H> {
    /// A handoff whose outbox starts as `outbox` (with room for the
    /// thread's first messages).
    pub(crate) fn with_outbox(outbox: Vec<M>) -> Handoff<M, E, H> {
        let handoff = Handoff::default();
        handoff.main.with_mut(|main| {
            // SAFETY: the handoff is not shared yet.
            unsafe { (*main).cells.outbox = outbox };
        });
        handoff
    }
}

impl<M, E, H> Handoff<M, E, H> {
    /// The thread will write no more: called by it after its last write.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Runs `write` on the thread's memory, never waiting: with the history
    /// when no harvest runs, on a deferred cell without it while one does.
    /// Only the thread that owns the handoff may call it.
    #[inline]
    pub(crate) fn write<R>(&self, hub: &Hub, write: impl FnOnce(&mut Cells<M, E>, Option<&mut H>) -> R) -> R {
        self.busy.store(true, Ordering::Relaxed);
        #[cfg(not(feature = "loom"))]
        barrier::light();
        #[cfg(feature = "loom")]
        barrier::light_on(&hub.model_barrier);
        // Acquire: what the last harvest did to this memory is seen here.
        let epoch = hub.epoch.load(Ordering::Acquire);
        let result = if epoch & 1 == 0 {
            self.main.with_mut(|main| {
                // SAFETY: no harvest runs (the epoch is even), and one that
                // begins now waits for `busy` to be false before touching
                // this memory or the deferred cells (module docs): the
                // thread has them to itself.
                let main = unsafe { &mut *main };
                for deferred in &self.deferred {
                    // SAFETY: as above.
                    deferred.with_mut(|cells| main.cells.absorb(unsafe { &mut *cells }));
                }
                write(&mut main.cells, Some(&mut main.history))
            })
        } else {
            let slot = &self.deferred[(epoch >> 1) as usize & 1];
            // SAFETY: the harvest numbered `epoch >> 1` runs and touches the
            // other deferred cell only; the next harvest, which takes this
            // one, waits for `busy` to be false first.
            slot.with_mut(|cells| write(unsafe { &mut *cells }, None))
        };
        self.busy.store(false, Ordering::Release);
        result
    }
}

/// The collector's side: the epoch every traced thread reads, odd while a
/// harvest runs, and the count of harvests.
#[derive(Debug)]
pub(crate) struct Hub {
    epoch: AtomicU64,
    /// One harvest at a time.
    harvests: crate::util::sync::Mutex<u64>,
    /// What both sides of the barrier touch under loom (see `util::barrier`).
    #[cfg(feature = "loom")]
    model_barrier: AtomicU64,
}

impl Hub {
    #[cfg(not(feature = "loom"))]
    pub(crate) const fn new() -> Hub {
        Hub { epoch: AtomicU64::new(0), harvests: crate::util::sync::Mutex::new(0) }
    }

    #[cfg(feature = "loom")]
    pub(crate) fn new() -> Hub {
        Hub {
            epoch: AtomicU64::new(0),
            harvests: crate::util::sync::Mutex::new(0),
            model_barrier: AtomicU64::new(0),
        }
    }

    /// Holds every traced thread off its memory, then runs `take` on each
    /// item's handoff's memory (with the deferred cell written during the
    /// previous harvest, and whether the thread is *finished*: it closed
    /// its handoff and this harvest leaves nothing of it), then lets the
    /// threads go on. Threads that write
    /// meanwhile write into the other deferred cell, and never wait.
    ///
    /// `items` lists the handoffs once the harvest has begun: a thread that
    /// registers its handoff after that writes nothing that this harvest
    /// must take (it sees the harvest begun), but one registered before
    /// must be in the list, or a write of it could be missing from a cut
    /// that holds a later write of another thread. Returns the list.
    pub(crate) fn harvest<T, M, E, H>(
        &self,
        items: impl FnOnce() -> Vec<T>,
        handoff: impl Fn(&T) -> &Handoff<M, E, H>,
        mut take: impl FnMut(&T, &mut Main<M, E, H>, &mut Cells<M, E>, bool),
    ) -> Vec<T> {
        let mut harvests = self.harvests.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *harvests += 1;
        let number = *harvests;
        // Release: a thread that writes into a deferred cell because it saw
        // this harvest begin sees what earlier harvests did to that cell.
        self.epoch.store(2 * number + 1, Ordering::Release);
        #[cfg(not(feature = "loom"))]
        barrier::heavy();
        #[cfg(feature = "loom")]
        barrier::heavy_on(&self.model_barrier);
        let items = items();
        for item in &items {
            let handoff = handoff(item);
            let mut round = 0;
            // Acquire: the thread's last write is seen.
            while handoff.busy.load(Ordering::Acquire) {
                pause(round);
                round = round.saturating_add(1);
            }
            // Acquire: a closed thread's last writes are seen.
            let closed = handoff.closed.load(Ordering::Acquire);
            let previous = &handoff.deferred[((number - 1) & 1) as usize];
            let current = &handoff.deferred[(number & 1) as usize];
            // A closed thread writes nothing more: what it wrote during this
            // harvest is the next one's to take (taken now, it would join
            // this cut while an earlier write of another thread, deferred
            // too, did not). Once that is empty, nothing of it is left.
            // SAFETY: read only once the thread is closed: it writes no more.
            let finished = closed && current.with_mut(|cells| unsafe { (*cells).is_empty() });
            handoff.main.with_mut(|main| {
                previous.with_mut(|cells| {
                    // SAFETY: the epoch is odd, and after the barrier the
                    // thread was seen out of its write: it writes only into
                    // the deferred cell of this harvest's parity until the
                    // epoch is even again (module docs).
                    let (main, cells) = unsafe { (&mut *main, &mut *cells) };
                    take(item, main, cells, finished)
                })
            });
        }
        // Release: what the harvest did is seen by each thread's next write.
        self.epoch.store(2 * number + 2, Ordering::Release);
        items
    }
}

impl<M, E, H> Main<M, E, H> {
    /// The cells' content and `older`'s (written during the previous
    /// harvest, so before the cells'), taken in order.
    #[cfg(all(test, feature = "loom"))]
    pub(crate) fn take_cells(&mut self, older: &mut Cells<M, E>) -> Cells<M, E> {
        self.take_cells_with(older, Vec::new)
    }

    /// As [`take_cells`](Self::take_cells), leaving the thread outboxes
    /// that `spare` gives (emptied ones, with room), so that its next
    /// messages need no allocation.
    pub(crate) fn take_cells_with(
        &mut self,
        older: &mut Cells<M, E>,
        mut spare: impl FnMut() -> Vec<M>,
    ) -> Cells<M, E> {
        let mut taken = Cells { outbox: Vec::new(), kept: std::mem::take(&mut older.kept) };
        taken.kept.append(&mut self.cells.kept);
        match (older.outbox.is_empty(), self.cells.outbox.is_empty()) {
            (true, true) => {}
            // The usual case: the thread's outbox moves out whole.
            (true, false) => taken.outbox = std::mem::replace(&mut self.cells.outbox, spare()),
            (false, _) => {
                taken.outbox = std::mem::replace(&mut older.outbox, spare());
                taken.outbox.append(&mut self.cells.outbox);
            }
        }
        taken
    }
}

/// What the thread side keeps in order, outside the model checker.
#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    /// What a thread keeps while a harvest runs waits in a deferred cell;
    /// its first write after the harvest absorbs it, so that the history
    /// receives it before what the thread keeps later (the history is
    /// oldest first: the harvest would take it only after).
    #[test]
    fn a_write_after_a_harvest_first_absorbs_what_waited() {
        let hub = Hub::new();
        let handoff: Handoff<u32, u32, Vec<u32>> = Handoff::default();
        let keep = |value: u32| {
            handoff.write(&hub, |cells, history| match history {
                Some(history) => {
                    history.append(&mut cells.kept);
                    history.push(value);
                }
                None => cells.kept.push(value),
            })
        };
        keep(1);
        // Written while the harvest runs (its `take` ignores the thread).
        hub.harvest(|| vec![&handoff], |handoff| *handoff, |_, _, _, _| keep(2));
        keep(3);
        // SAFETY: no harvest runs and no other thread holds the handoff.
        handoff.main.with_mut(|main| assert_eq!(unsafe { &(*main).history }, &[1, 2, 3]));
    }
}

/// The protocol under the model checker: `cargo test -p minitrace --release
/// --lib --features loom loom` explores every interleaving (and
/// every reordering the memory model allows) of traced threads writing
/// while the collector harvests. loom also checks each access to the cells
/// against the others: a write overlapping a harvest fails the model.
#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::Arc;
    use loom::thread;

    type Item = (u8, u32);
    type Test = Handoff<Item, (), Vec<u32>>;

    /// Every item a harvest took, with the harvest's number.
    fn harvest(hub: &Hub, handoffs: &[Arc<Test>], number: u32, taken: &mut Vec<(u8, u32, u32)>) {
        harvest_seeing(hub, handoffs, number, taken);
    }

    /// As [`harvest`]; returns whether the harvest saw the first handoff closed.
    fn harvest_seeing(
        hub: &Hub,
        handoffs: &[Arc<Test>],
        number: u32,
        taken: &mut Vec<(u8, u32, u32)>,
    ) -> bool {
        let mut closed_seen = false;
        hub.harvest(
            || handoffs.to_vec(),
            |handoff| &**handoff,
            |_, main, older, closed| {
                closed_seen |= closed;
                let cells = main.take_cells(older);
                taken.extend(cells.outbox.into_iter().map(|(thread, item)| (thread, item, number)));
            },
        );
        closed_seen
    }

    /// Thread B writes a part, then (through a flag) thread A writes the
    /// root; the collector harvests while they do, then once more. Every
    /// item is taken exactly once, each thread's in order, and never the
    /// root before the part.
    #[test]
    fn loom_a_harvest_is_a_consistent_cut() {
        model(|| {
            let hub = Arc::new(Hub::new());
            let handoffs: Vec<Arc<Test>> = vec![Arc::new(Handoff::default()), Arc::new(Handoff::default())];
            let (a, b) = part_then_root(&hub, &handoffs, false);
            let mut taken = Vec::new();
            harvest(&hub, &handoffs, 1, &mut taken);
            a.join().unwrap();
            b.join().unwrap();
            harvest(&hub, &handoffs, 2, &mut taken);
            let part = taken.iter().find(|(thread, ..)| *thread == 1).map(|(.., number)| *number);
            let root = taken.iter().find(|(thread, ..)| *thread == 0).map(|(.., number)| *number);
            assert!(part.is_some(), "the part was lost: {taken:?}");
            if let Some(root) = root {
                assert!(part.unwrap() <= root, "the root came before its part: {taken:?}");
            }
            assert_eq!(taken.len(), 1 + usize::from(root.is_some()), "taken twice: {taken:?}");
        });
    }

    /// Thread B (`handoffs[1]`) writes a part, then sets a flag; thread A
    /// (`handoffs[0]`) writes the root if it sees the flag, then closes its
    /// handoff if `close`. An item is (thread, 0 for a part or 1 for a root).
    fn part_then_root(
        hub: &Arc<Hub>,
        handoffs: &[Arc<Test>],
        close: bool,
    ) -> (thread::JoinHandle<()>, thread::JoinHandle<()>) {
        let part_written = Arc::new(AtomicBool::new(false));
        let b = thread::spawn({
            let (hub, handoff, flag) = (hub.clone(), handoffs[1].clone(), part_written.clone());
            move || {
                handoff.write(&hub, |cells, _| cells.outbox.push((1, 0)));
                flag.store(true, Ordering::Release);
            }
        });
        let a = thread::spawn({
            let (hub, handoff, flag) = (hub.clone(), handoffs[0].clone(), part_written);
            move || {
                if flag.load(Ordering::Acquire) {
                    handoff.write(&hub, |cells, _| cells.outbox.push((0, 1)));
                }
                if close {
                    handoff.close();
                }
            }
        });
        (a, b)
    }

    /// Explores every interleaving with at most this many preemptions:
    /// the bugs of such protocols show with two or three (the loom
    /// documentation's advice), and the run stays within a minute.
    fn model(test: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(test);
    }

    /// As [`loom_a_harvest_is_a_consistent_cut`], with thread B registering
    /// its handoff just before it writes the part, while the harvest runs:
    /// a harvest that listed the threads before the epoch changed would
    /// take A's root without B's part.
    #[test]
    fn loom_a_thread_registering_during_a_harvest_keeps_the_cut_consistent() {
        model(|| {
            let hub = Arc::new(Hub::new());
            let a: Arc<Test> = Arc::new(Handoff::default());
            let registry = Arc::new(loom::sync::Mutex::new(vec![a.clone()]));
            let part_written = Arc::new(AtomicBool::new(false));
            let b = thread::spawn({
                let (hub, registry, flag) = (hub.clone(), registry.clone(), part_written.clone());
                move || {
                    let handoff: Arc<Test> = Arc::new(Handoff::default());
                    registry.lock().unwrap().push(handoff.clone());
                    handoff.write(&hub, |cells, _| cells.outbox.push((1, 0)));
                    flag.store(true, Ordering::Release);
                }
            });
            let writer_a = thread::spawn({
                let (hub, flag) = (hub.clone(), part_written.clone());
                move || {
                    if flag.load(Ordering::Acquire) {
                        a.write(&hub, |cells, _| cells.outbox.push((0, 1)));
                    }
                }
            });
            let mut taken = Vec::new();
            let take = |number: u32, taken: &mut Vec<(u8, u32, u32)>| {
                let list = || registry.lock().unwrap().clone();
                hub.harvest(
                    list,
                    |handoff| &**handoff,
                    |_, main, older, _| {
                        let cells = main.take_cells(older);
                        taken.extend(cells.outbox.into_iter().map(|(thread, item)| (thread, item, number)));
                    },
                );
            };
            take(1, &mut taken);
            writer_a.join().unwrap();
            b.join().unwrap();
            take(2, &mut taken);
            let part = taken.iter().find(|(thread, ..)| *thread == 1).map(|(.., number)| *number);
            let root = taken.iter().find(|(thread, ..)| *thread == 0).map(|(.., number)| *number);
            assert!(part.is_some(), "the part was lost: {taken:?}");
            if let Some(root) = root {
                assert!(part.unwrap() <= root, "the root came before its part: {taken:?}");
            }
        });
    }

    /// One thread writes three times while the collector harvests twice:
    /// writes deferred during either harvest, by either parity, are taken
    /// once, in the order they were written.
    #[test]
    fn loom_deferred_writes_are_taken_once_in_order() {
        model(|| {
            let hub = Arc::new(Hub::new());
            let handoffs: Vec<Arc<Test>> = vec![Arc::new(Handoff::default())];
            let writer = thread::spawn({
                let (hub, handoff) = (hub.clone(), handoffs[0].clone());
                move || {
                    for item in 0..3 {
                        handoff.write(&hub, |cells, _| cells.outbox.push((0, item)));
                    }
                }
            });
            let mut taken = Vec::new();
            harvest(&hub, &handoffs, 1, &mut taken);
            harvest(&hub, &handoffs, 2, &mut taken);
            writer.join().unwrap();
            harvest(&hub, &handoffs, 3, &mut taken);
            let items: Vec<u32> = taken.iter().map(|(_, item, _)| *item).collect();
            assert_eq!(items, [0, 1, 2], "{taken:?}");
        });
    }

    /// Thread B writes a part; thread A then writes the root and exits
    /// (closes its handoff), while the collector harvests twice. A closed
    /// thread's writes made during a harvest must wait for the next one as
    /// everyone's do: taking them at once put a root in a cut without a
    /// part deferred on another thread (found by the randomised stress test,
    /// at a thread's exit).
    #[test]
    fn loom_a_closing_thread_keeps_the_cut_consistent() {
        model(|| {
            let hub = Arc::new(Hub::new());
            let handoffs: Vec<Arc<Test>> = vec![Arc::new(Handoff::default()), Arc::new(Handoff::default())];
            let (a, b) = part_then_root(&hub, &handoffs, true);
            let mut taken = Vec::new();
            harvest(&hub, &handoffs, 1, &mut taken);
            harvest(&hub, &handoffs, 2, &mut taken);
            a.join().unwrap();
            b.join().unwrap();
            harvest(&hub, &handoffs, 3, &mut taken);
            let part = taken.iter().find(|(thread, ..)| *thread == 1).map(|(.., number)| *number).unwrap();
            if let Some(root) = taken.iter().find(|(thread, ..)| *thread == 0).map(|(.., number)| *number) {
                assert!(part <= root, "the root came before its part: {taken:?}");
            }
        });
    }

    /// A thread that writes, then closes its handoff, while the collector
    /// harvests; joined before the third harvest. Its write is taken once,
    /// and never after a harvest that called the thread finished.
    #[test]
    fn loom_a_closed_thread_is_finished_once_taken_whole() {
        model(|| {
            let hub = Arc::new(Hub::new());
            let handoffs: Vec<Arc<Test>> = vec![Arc::new(Handoff::default())];
            let writer = thread::spawn({
                let (hub, handoff) = (hub.clone(), handoffs[0].clone());
                move || {
                    handoff.write(&hub, |cells, _| cells.outbox.push((0, 0)));
                    handoff.close();
                }
            });
            let mut taken = Vec::new();
            let mut finished_at = None;
            let mut writer = Some(writer);
            for number in 1..=3 {
                if number == 3 {
                    writer.take().unwrap().join().unwrap();
                }
                if harvest_seeing(&hub, &handoffs, number, &mut taken) && finished_at.is_none() {
                    finished_at = Some(number);
                }
            }
            assert_eq!(taken.len(), 1, "{taken:?}");
            if let Some(finished) = finished_at {
                assert!(
                    taken[0].2 <= finished,
                    "taken in harvest {} after it was finished in {finished}",
                    taken[0].2
                );
            }
        });
    }
}
