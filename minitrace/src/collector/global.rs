//! The global collector: a background thread, started by the first
//! [`set_reporter`], that wakes every `report_interval` (or on [`flush`]).

use std::cell::Cell;
use std::sync::MutexGuard;
use std::time::{Duration, Instant as StdInstant};

use crate::collector::assemble::Collector;
use crate::data::config::Config;
use crate::data::record::Reporter;
use crate::transport::gate;
use crate::transport::wake::{Control, CONTROL, FLUSHED, ON_COLLECTOR_THREAD, WAKE};
use crate::util::lock;
use crate::util::recording::ENABLED;

/// `flush` gives up waiting after this long, e.g. for a reporter stuck on I/O.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

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
    if !ENABLED {
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
    gate::mark_reporter_set();
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
/// waits until the reporter has delivered them
/// ([`Reporter::wait_for_delivery`](crate::collector::Reporter::wait_for_delivery)),
/// for at most 10 seconds.
///
/// It blocks the calling thread, so inside an async runtime it briefly
/// blocks that worker; it needs no runtime. It returns at once when no
/// reporter is set, and when called from a reporter (on the collector
/// thread), where waiting would deadlock.
///
/// One exception: a root's local spans wait on their thread for the root's
/// end there; if the root was moved to another thread and ended there, they
/// follow when their thread next records a trace, calls `flush`, or exits.
///
/// ```
/// minitrace::flush();
/// ```
pub fn flush() {
    if !ENABLED || !gate::reporter_is_set() || ON_COLLECTOR_THREAD.with(Cell::get) {
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
fn run_collector() {
    ON_COLLECTOR_THREAD.with(|on| on.set(true));
    // Before the first harvest: the traced threads' half of the handover's
    // barrier costs nothing once the collector's half is a system call.
    crate::util::barrier::prepare();
    let mut collector: Option<Collector> = None;
    // The last cycle found a thread's queue filling faster than the
    // interval drains it: the next one starts at once.
    let mut behind = false;
    loop {
        let (pending, flush_target, flushing) = {
            let mut control = lock(&CONTROL);
            // At least 100 µs, so that a zero interval does not spin.
            let interval = collector
                .as_ref()
                .map_or(Duration::from_millis(10), |c| c.config().report_interval)
                .max(Duration::from_micros(100));
            if control.pending.is_none()
                && control.flushes_requested == control.flushes_done
                && !control.wake_early
                && !behind
            {
                control = WAKE.wait_timeout(control, interval).unwrap_or_else(|e| e.into_inner()).0;
            }
            control.wake_early = false;
            let flushing = control.flushes_requested != control.flushes_done;
            (control.pending.take(), control.flushes_requested, flushing)
        };
        behind = collector.as_mut().is_some_and(Collector::cycle);
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
        if flushing {
            if let Some(collector) = &mut collector {
                collector.wait_for_delivery();
            }
        }
        let mut control = lock(&CONTROL);
        control.flushes_done = flush_target;
        FLUSHED.notify_all();
    }
}
