//! The collector thread's doorbell: what it is asked for (a reporter to
//! install, a cycle for a flush, an early cycle for a filling queue), under
//! one lock, and the condition variables that it and flushing threads wait
//! on. The traced threads ring it from the transport; the collector thread
//! (see `collector::global`) answers.

use std::cell::Cell;
use std::sync::{Condvar, Mutex};

use crate::data::config::Config;
use crate::data::record::Reporter;
use crate::util::lock;

pub(crate) static CONTROL: Mutex<Control> = Mutex::new(Control {
    pending: None,
    flushes_requested: 0,
    flushes_done: 0,
    wake_early: false,
    started: false,
});
/// Wakes the collector thread early.
pub(crate) static WAKE: Condvar = Condvar::new();
/// Wakes threads waiting in `flush`.
pub(crate) static FLUSHED: Condvar = Condvar::new();

pub(crate) struct Control {
    pub(crate) pending: Option<(Box<dyn Reporter>, Config)>,
    pub(crate) flushes_requested: u64,
    pub(crate) flushes_done: u64,
    /// A queue is filling up: collect before the interval ends.
    pub(crate) wake_early: bool,
    pub(crate) started: bool,
}

thread_local! {
    pub(crate) static ON_COLLECTOR_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is the collector's.
pub(crate) fn on_collector_thread() -> bool {
    ON_COLLECTOR_THREAD.try_with(Cell::get).unwrap_or(false)
}

/// Makes the collector thread start a cycle now.
pub(crate) fn wake_collector() {
    lock(&CONTROL).wake_early = true;
    WAKE.notify_one();
}
