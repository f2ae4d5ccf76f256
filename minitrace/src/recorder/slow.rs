//! The automatic dump around a slow trace: when the collector files a root
//! slower than `report_slow_traces_only`'s threshold, a background thread
//! waits a moment for the traces that overlapped it to end, then hands
//! every trace the recorder holds that overlapped it to the user's
//! callback.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant as StdInstant};

use crate::data::id::TraceId;
use crate::recorder::RecordedTrace;
use crate::util::lock;

/// Slow roots waiting for their dump, at most this many; more are counted
/// as skipped.
const MAX_WAITING: usize = 64;

/// The traces that overlapped a slow one, and the slow one itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlowTraceWindow {
    /// The slow request's trace.
    pub trace_id: TraceId,
    /// When the slow request started.
    pub begin_unix_ns: u64,
    /// When it ended.
    pub end_unix_ns: u64,
    /// Every trace the recorder held whose root ran at some moment of the
    /// slow one, itself included.
    pub traces: Vec<RecordedTrace>,
}

pub(crate) type Callback = Arc<dyn Fn(SlowTraceWindow) + Send + Sync>;

#[derive(Default)]
pub(crate) struct Settings {
    pub(crate) callback: Option<Callback>,
    pub(crate) settle: Duration,
    pub(crate) min_interval: Duration,
}

struct Waiting {
    trace_id: TraceId,
    begin_unix_ns: u64,
    end_unix_ns: u64,
    due: StdInstant,
}

struct Dumps {
    settings: Mutex<Settings>,
    waiting: Mutex<VecDeque<Waiting>>,
    wake: Condvar,
}

static DUMPS: OnceLock<Dumps> = OnceLock::new();
static SKIPPED: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);

static ON_KEPT: std::sync::RwLock<Option<crate::recorder::KeptHook>> = std::sync::RwLock::new(None);
static ON_KEPT_SET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn set_on_kept(hook: Option<crate::recorder::KeptHook>) {
    ON_KEPT_SET.store(hook.is_some(), Ordering::Relaxed);
    *ON_KEPT.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = hook;
}

/// The collector kept `trace_id`'s trace for its length or a trigger.
pub(crate) fn kept(trace_id: TraceId) {
    if !ON_KEPT_SET.load(Ordering::Relaxed) {
        return;
    }
    let hook = ON_KEPT.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    if let Some(hook) = hook {
        // A panicking hook must not end the collector.
        let _ = catch_unwind(AssertUnwindSafe(|| hook(trace_id)));
    }
}

/// Automatic dumps skipped (too many slow traces at once, or within the
/// minimum interval of the last one), and done.
pub(crate) fn counts() -> (u64, u64) {
    (SKIPPED.load(Ordering::Relaxed), DONE.load(Ordering::Relaxed))
}

pub(crate) fn configure(settings: Settings) {
    let mut created = false;
    let dumps = DUMPS.get_or_init(|| {
        created = true;
        Dumps {
            settings: Mutex::new(Settings {
                callback: None,
                settle: Duration::ZERO,
                min_interval: Duration::ZERO,
            }),
            waiting: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
        }
    });
    *lock(&dumps.settings) = settings;
    if created {
        // Without the thread there are no automatic dumps; snapshots still work.
        let spawned =
            std::thread::Builder::new().name("minitrace-flight-recorder".into()).spawn(|| dump_thread(dumps));
        if let Err(error) = spawned {
            eprintln!("minitrace: no automatic flight recorder dumps: {error}");
        }
    }
}

/// The collector filed a root kept as slow: its window is dumped soon.
#[cold]
pub(crate) fn slow_root(trace_id: TraceId, begin_unix_ns: u64, end_unix_ns: u64) {
    let Some(dumps) = DUMPS.get() else { return };
    let settle = {
        let settings = lock(&dumps.settings);
        if settings.callback.is_none() {
            return;
        }
        settings.settle
    };
    let mut waiting = lock(&dumps.waiting);
    if waiting.len() >= MAX_WAITING {
        SKIPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    waiting.push_back(Waiting { trace_id, begin_unix_ns, end_unix_ns, due: StdInstant::now() + settle });
    dumps.wake.notify_one();
}

fn dump_thread(dumps: &'static Dumps) {
    let mut last_dump: Option<StdInstant> = None;
    loop {
        let next = {
            let mut waiting = lock(&dumps.waiting);
            loop {
                match waiting.front() {
                    Some(first) if first.due <= StdInstant::now() => break waiting.pop_front(),
                    Some(first) => {
                        let wait = first.due.saturating_duration_since(StdInstant::now());
                        waiting = dumps.wake.wait_timeout(waiting, wait).unwrap_or_else(|e| e.into_inner()).0;
                    }
                    None => waiting = dumps.wake.wait(waiting).unwrap_or_else(|e| e.into_inner()),
                }
            }
        };
        let Some(slow) = next else { continue };
        let (callback, min_interval) = {
            let settings = lock(&dumps.settings);
            (settings.callback.clone(), settings.min_interval)
        };
        let Some(callback) = callback else { continue };
        if last_dump.is_some_and(|last| last.elapsed() < min_interval) {
            SKIPPED.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        last_dump = Some(StdInstant::now());
        let traces = crate::recorder::window(slow.begin_unix_ns, slow.end_unix_ns);
        let window = SlowTraceWindow {
            trace_id: slow.trace_id,
            begin_unix_ns: slow.begin_unix_ns,
            end_unix_ns: slow.end_unix_ns,
            traces,
        };
        // A panicking callback must not end the automatic dumps.
        if catch_unwind(AssertUnwindSafe(|| callback(window))).is_ok() {
            DONE.fetch_add(1, Ordering::Relaxed);
        }
    }
}
