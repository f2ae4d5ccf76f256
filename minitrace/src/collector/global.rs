//! The global collector: a background thread, started by the first
//! [`set_reporter`], that wakes every `report_interval` (or on [`flush`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant as StdInstant};

use crate::collector::assemble::Collector;
use crate::collector::{escape, gate, Config, Reporter};
use crate::util::lock;

static REPORTER_SET: AtomicBool = AtomicBool::new(false);
static CONTROL: Mutex<Control> = Mutex::new(Control {
    pending: None,
    flushes_requested: 0,
    flushes_done: 0,
    wake_early: false,
    started: false,
});
/// Wakes the collector thread early.
static WAKE: Condvar = Condvar::new();
/// Wakes threads waiting in `flush`.
static FLUSHED: Condvar = Condvar::new();

/// `flush` gives up waiting after this long, e.g. for a reporter stuck on I/O.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

struct Control {
    pending: Option<(Box<dyn Reporter>, Config)>,
    flushes_requested: u64,
    flushes_done: u64,
    /// A queue is filling up: collect before the interval ends.
    wake_early: bool,
    started: bool,
}

thread_local! {
    static ON_COLLECTOR_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is the collector's.
pub(crate) fn on_collector_thread() -> bool {
    ON_COLLECTOR_THREAD.try_with(Cell::get).unwrap_or(false)
}

/// Whether spans have somewhere to go; roots started before that are no-ops.
#[inline]
pub(crate) fn reporter_is_set() -> bool {
    REPORTER_SET.load(Ordering::Relaxed)
}

/// Sets where finished spans are reported, and starts the collector thread.
///
/// Calling it again replaces the reporter and the configuration: spans
/// that finished before the call go to the old reporter (the collector
/// delivers them before switching), later ones to the new.
///
/// Before the first call, root spans are no-ops (counted in
/// [`Stats::roots_without_reporter`](crate::collector::Stats::roots_without_reporter)).
/// Without the `enable` feature this does nothing.
///
/// ```
/// use minitrace::collector::{Config, ConsoleReporter};
///
/// minitrace::set_reporter(ConsoleReporter, Config::default());
/// ```
pub fn set_reporter(reporter: impl Reporter, config: Config) {
    if !crate::ENABLED {
        return;
    }
    let mut control = lock(&CONTROL);
    // A reporter set but not yet installed is replaced; it is dropped after
    // the lock is released, as its `Drop` may end spans.
    let replaced = control.pending.replace((Box::new(reporter), config));
    if !control.started {
        match std::thread::Builder::new().name("minitrace-collector".into()).spawn(run_collector) {
            Ok(_) => control.started = true,
            Err(error) => {
                // Spans stay no-ops (and counted) until a later call succeeds.
                let not_installed = control.pending.take();
                drop(control);
                drop(not_installed);
                eprintln!("minitrace: cannot start the collector thread, spans are not recorded: {error}");
                return;
            }
        }
    }
    REPORTER_SET.store(true, Ordering::Release);
    if let Some((_, config)) = &control.pending {
        gate::reporter_set(config);
    }
    // Wait for the switch, so that spans finished after this call go to the
    // new reporter.
    if ON_COLLECTOR_THREAD.with(Cell::get) {
        drop(control);
    } else {
        wait_for_cycle(control);
    }
    drop(replaced);
}

/// Reports every span that finished before this call (in traces whose root
/// has finished, or all of them with `report_before_root_finish`), and
/// waits until the reporter has returned, for at most 10 seconds.
///
/// It blocks the calling thread, so inside an async runtime it briefly
/// blocks that worker; it needs no runtime. It returns at once when no
/// reporter is set, and when called from a reporter (on the collector
/// thread), where waiting would deadlock.
///
/// ```
/// minitrace::flush();
/// ```
pub fn flush() {
    if !crate::ENABLED || !reporter_is_set() || ON_COLLECTOR_THREAD.with(Cell::get) {
        return;
    }
    crate::local::parked::send_waiting();
    wait_for_cycle(lock(&CONTROL));
}

/// Asks the collector thread for a cycle (which also installs a pending
/// reporter) and waits for it to finish, for at most [`FLUSH_TIMEOUT`].
fn wait_for_cycle(mut control: MutexGuard<'static, Control>) {
    let deadline = StdInstant::now() + FLUSH_TIMEOUT;
    control.flushes_requested += 1;
    let wanted = control.flushes_requested;
    WAKE.notify_one();
    while control.flushes_done < wanted {
        let Some(left) = deadline.checked_duration_since(StdInstant::now()) else {
            return;
        };
        control = FLUSHED.wait_timeout(control, left).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// Makes the collector thread start a cycle now.
pub(crate) fn wake_collector() {
    lock(&CONTROL).wake_early = true;
    WAKE.notify_one();
}

fn run_collector() {
    ON_COLLECTOR_THREAD.with(|on| on.set(true));
    let mut collector: Option<Collector> = None;
    loop {
        let (pending, flush_target) = {
            let mut control = lock(&CONTROL);
            // At least 100 µs, so that a zero interval does not spin.
            let interval = collector
                .as_ref()
                .map_or(Duration::from_millis(10), |c| c.config().report_interval)
                .max(Duration::from_micros(100));
            if control.pending.is_none()
                && control.flushes_requested == control.flushes_done
                && !control.wake_early
            {
                control = WAKE.wait_timeout(control, interval).unwrap_or_else(|e| e.into_inner()).0;
            }
            control.wake_early = false;
            (control.pending.take(), control.flushes_requested)
        };
        if let Some(collector) = &mut collector {
            collector.cycle();
        }
        if let Some((reporter, config)) = pending {
            match &mut collector {
                Some(collector) => collector.replace(reporter, config),
                None => {
                    let mut first = Collector::new(reporter, config);
                    first.cycle();
                    collector = Some(first);
                }
            }
        }
        let mut control = lock(&CONTROL);
        control.flushes_done = flush_target;
        FLUSHED.notify_all();
    }
}

// Blocks start at multiples of `ID_BLOCK` (id 0 stays unused), so that each
// lines up with one bitmap of the collector's fates.
static NEXT_ID_BLOCK: AtomicU64 = AtomicU64::new(ID_BLOCK);
/// Collect ids are handed to each thread in blocks of this many.
pub(crate) const ID_BLOCK: u64 = 1 << 12;
/// Collect ids stay below this, so that a `Span` keeps one in 4 bytes. They
/// wrap after 2³² traces or 2²⁰ blocks (as many threads starting traces),
/// far longer than the collector keeps an open trace or a trace's fate
/// (10 s).
const COLLECT_ID_LIMIT: u64 = 1 << 32;

thread_local! {
    static NEXT_COLLECT_ID: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// An id for a new trace's buffer in the collector, unique among the traces
/// it holds or remembers, taken from a per-thread block so that starting a
/// root touches no shared cache line.
pub(crate) fn next_collect_id() -> u64 {
    NEXT_COLLECT_ID.with(|cell| {
        let (mut next, end) = cell.get();
        if next == end {
            let (first, end) = block_ids(NEXT_ID_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed));
            escape::clear_block(first);
            next = first;
            cell.set((next + 1, end));
        } else {
            cell.set((next + 1, end));
        }
        next
    })
}

/// Whether `collect_id` comes from the block this thread takes ids from
/// now: then the root that holds it was started on this thread. Exact
/// until blocks wrap (see [`COLLECT_ID_LIMIT`]): a thread keeps its block
/// while it lives, so after 2²⁰ blocks a new thread may be handed the block
/// of one still alive, and a root of one ended on the other would take the
/// cheaper read, early by at most what that CPU had in flight.
#[inline]
pub(crate) fn is_from_this_thread(collect_id: u64) -> bool {
    NEXT_COLLECT_ID.with(|cell| {
        let (_, end) = cell.get();
        end != 0 && (end - ID_BLOCK..end).contains(&collect_id)
    })
}

/// The ids of the block whose unwrapped start is `start`: the first and
/// one past the last, below `COLLECT_ID_LIMIT`, with id 0 left out.
fn block_ids(start: u64) -> (u64, u64) {
    let block = start % COLLECT_ID_LIMIT;
    (block.max(1), block + ID_BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_ids_wrap_below_the_limit_and_never_are_0() {
        assert_eq!(block_ids(ID_BLOCK), (ID_BLOCK, 2 * ID_BLOCK));
        // The last block before the wrap ends at the limit; the next one is
        // the first block again, without id 0.
        assert_eq!(block_ids(COLLECT_ID_LIMIT - ID_BLOCK).1, COLLECT_ID_LIMIT);
        assert_eq!(block_ids(COLLECT_ID_LIMIT), (1, ID_BLOCK));
        assert_eq!(block_ids(3 * COLLECT_ID_LIMIT + 2 * ID_BLOCK), (2 * ID_BLOCK, 3 * ID_BLOCK));
    }

    #[test]
    fn a_collect_id_is_known_as_its_own_by_the_thread_that_took_it() {
        let here = next_collect_id();
        assert!(is_from_this_thread(here));
        let (there, here_seen_there) =
            std::thread::spawn(move || (next_collect_id(), is_from_this_thread(here))).join().unwrap();
        assert!(!here_seen_there);
        assert!(!is_from_this_thread(there));
        assert!(!is_from_this_thread(0));
        // Once the thread has moved on to its next block, the id is no
        // longer known as its own: its root ends on the ordered read.
        for _ in 0..ID_BLOCK {
            next_collect_id();
        }
        assert!(!is_from_this_thread(here));
    }
}
