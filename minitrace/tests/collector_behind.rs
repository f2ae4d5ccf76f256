//! A collector cycle whose cut held a quarter of some thread's budget starts
//! the next cycle at once, not after `report_interval`: a thread whose queue
//! stays above a quarter full never *crosses* it again, so it wakes the
//! collector no more, and waiting out the interval would let its queue fill.
//!
//! Made deterministic with a reporter that holds the collector inside a
//! report while the test writes: the interval is an hour, so a trace written
//! after the big cut, which crosses nothing, is reported within the test's
//! minute only if the collector comes back at once.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use minitrace::collector::{Config, Reporter, SpanRecord};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

/// Requests of 1 root + 9 local spans: each costs its thread 10 spans and
/// one message's share of its budget (2¹⁷). 3 000 of them are past a
/// quarter of it, and below all of it (nothing is dropped).
const BULK: usize = 3_000;

fn request(name: &'static str) {
    let root = Span::root(name, SpanContext::random());
    let _guard = root.set_local_parent();
    for _ in 0..9 {
        let _span = LocalSpan::enter_with_local_parent("step");
    }
}

#[derive(Default)]
struct Shared {
    /// Root names reported, in order.
    roots: Vec<&'static str>,
    /// Every span reported, by trace.
    traces: HashMap<u128, Vec<SpanRecord>>,
    /// Which of the two holds the reporter is in (1, 2), or 0.
    holding: u8,
    /// Holds released so far.
    released: u8,
}

/// Holds the collector inside its first report of the trace "first", then
/// inside its first report of the "bulk" traces, until released.
struct Holding(Arc<(Mutex<Shared>, Condvar)>);

impl Reporter for Holding {
    fn report(&mut self, spans: &[SpanRecord]) {
        let (lock, changed) = &*self.0;
        let mut shared = lock.lock().unwrap();
        for span in spans {
            shared.traces.entry(span.trace_id.0).or_default().push(span.clone());
        }
        for span in spans.iter().filter(|span| span.parent_id.0 == 0) {
            shared.roots.push(match span.name.as_ref() {
                "first" => "first",
                "bulk" => "bulk",
                "after" => "after",
                other => panic!("unexpected root {other}"),
            });
        }
        changed.notify_all();
        let hold = match shared.released {
            0 if spans.iter().any(|span| span.name == "first") => 1,
            1 if spans.iter().any(|span| span.name == "bulk") => 2,
            _ => return,
        };
        shared.holding = hold;
        changed.notify_all();
        while shared.released < hold {
            shared = changed.wait(shared).unwrap();
        }
        shared.holding = 0;
    }
}

fn wait_until(shared: &Arc<(Mutex<Shared>, Condvar)>, what: &str, done: impl Fn(&Shared) -> bool) {
    let (lock, changed) = &**shared;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut state = lock.lock().unwrap();
    while !done(&state) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "waited a minute for {what}; reported roots: {}", state.roots.len());
        state = changed.wait_timeout(state, left).unwrap().0;
    }
}

fn release(shared: &Arc<(Mutex<Shared>, Condvar)>) {
    let (lock, changed) = &**shared;
    lock.lock().unwrap().released += 1;
    changed.notify_all();
}

#[test]
fn a_cut_of_a_quarter_of_a_budget_brings_the_next_cycle_at_once() {
    let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
    minitrace::set_reporter(
        Holding(shared.clone()),
        Config::default().report_interval(Duration::from_secs(3600)),
    );

    // Cycle 1: a flush (on another thread: it returns once reported) makes
    // the collector report "first", where the reporter holds it.
    request("first");
    let flusher = std::thread::spawn(minitrace::flush);
    wait_until(&shared, "the first hold", |s| s.holding == 1);

    // Written while the collector is held: the thread's queue crosses a
    // quarter (it asks for a cycle at once) and stays above it.
    for _ in 0..BULK {
        request("bulk");
    }
    release(&shared);

    // Cycle 2, asked for by the crossing: its cut holds the bulk, a quarter
    // and more of this thread's budget. Held again inside its report, the
    // collector has taken its cut: "after" goes to the next one, and
    // crosses nothing (the queue is credited back, or still above a quarter).
    wait_until(&shared, "the second hold", |s| s.holding == 2);
    request("after");
    release(&shared);

    // Cycle 3 comes at once, not in an hour.
    wait_until(&shared, "\"after\" to be reported", |s| s.roots.contains(&"after"));
    flusher.join().unwrap();
    let (lock, _) = &*shared;
    let shared = lock.lock().unwrap();
    // Each trace whole, in one report or several: its root and 9 steps, each
    // step a child of the root and inside its time.
    assert_eq!(shared.traces.len(), BULK + 2);
    for spans in shared.traces.values() {
        let [root] = &spans.iter().filter(|span| span.parent_id.0 == 0).collect::<Vec<_>>()[..] else {
            panic!("not one root: {spans:?}")
        };
        assert_eq!(spans.len(), 10, "{spans:?}");
        for step in spans.iter().filter(|span| span.parent_id.0 != 0) {
            assert_eq!((step.name.as_ref(), step.parent_id), ("step", root.span_id), "{spans:?}");
            assert!(step.begin_time_unix_ns >= root.begin_time_unix_ns, "{spans:?}");
            assert!(
                step.begin_time_unix_ns + step.duration_ns <= root.begin_time_unix_ns + root.duration_ns,
                "{spans:?}"
            );
        }
    }
    let roots = shared.roots.clone();
    assert_eq!(roots.iter().filter(|root| **root == "first").count(), 1);
    assert_eq!(roots.iter().filter(|root| **root == "bulk").count(), BULK);
    assert_eq!(roots.iter().filter(|root| **root == "after").count(), 1);
    assert_eq!(roots.last(), Some(&"after"));
}
