//! Traces of random shapes, for the stress and retrieval tests: nested
//! local spans with properties, links and events through the local parent;
//! thread-safe children handed to other threads, which record local spans
//! and events there and end them before or after their root; roots
//! cancelled or moved to another thread to end there; children cancelled.
//! Each trace comes with what should arrive of it.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use minitrace::collector::{Reporter, SpanContext, SpanRecord, TraceId};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

/// Producer threads per phase.
pub const PRODUCERS: usize = 4;
/// The latency threshold of a phase that has one: slow roots spin past it.
pub const THRESHOLD: Duration = Duration::from_micros(300);

/// xorshift64*, seeded per producer from the run's seed.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// Every report() call's records, in order.
#[derive(Clone, Default)]
pub struct Calls(pub Arc<Mutex<Vec<Vec<SpanRecord>>>>);

impl Reporter for Calls {
    fn report(&mut self, spans: &[SpanRecord]) {
        if !spans.is_empty() {
            self.0.lock().unwrap().push(spans.to_vec());
        }
    }
}

/// What a span should look like once reported.
#[derive(Clone, Debug, Default)]
pub struct Expected {
    /// The parent's name; "" for the root.
    pub parent: String,
    pub events: Vec<String>,
    pub properties: Vec<(String, String)>,
    /// It ended before its root did, so it comes in the root's report.
    pub before_root: bool,
    /// It ended before its parent did.
    pub before_parent: bool,
}

#[derive(Debug, Default)]
pub struct Trace {
    pub id: Option<TraceId>,
    /// Whether it should be reported; `None`: either (a root meant to be
    /// fast that the scheduler made slow), but whole or not at all.
    pub kept: Option<bool>,
    /// Spans made that record (cancelled ones included).
    pub made: usize,
    pub spans: HashMap<String, Expected>,
    /// The root was moved to another thread to end there: its local spans
    /// may follow in a later report (the documented exception).
    pub root_moved: bool,
    /// Where it was made, for the messages: the producer and the trace's number there.
    pub made_at: (usize, usize),
}

/// What runs on a hop thread: a child set as the local parent there.
pub struct Hop {
    child: Span,
    name: String,
    locals: usize,
    cancel: bool,
    done: Option<mpsc::Sender<()>>,
}

pub fn hop(work: Hop) {
    let Hop { mut child, name, locals, cancel, done } = work;
    if cancel {
        child.cancel();
    } else {
        let guard = child.set_local_parent();
        let mut open = Vec::new();
        for local in 0..locals {
            open.push(LocalSpan::enter_with_local_parent(format!("{name}-l{local}")));
            Event::add_to_local_parent(format!("{name}-l{local}-e"), || []);
        }
        while let Some(span) = open.pop() {
            drop(span);
        }
        Event::add_to_local_parent(format!("{name}-e"), || []);
        child.add_event(format!("{name}-se"), || [("k", "v")]);
        drop(guard);
    }
    drop(child);
    if let Some(done) = done {
        let _ = done.send(());
    }
}

/// Runs one trace of a random shape; returns what should arrive.
pub fn run_trace(rng: &mut Rng, number: usize, hops: &mpsc::Sender<Hop>, slow: Option<bool>) -> Trace {
    let mut trace = Trace { kept: Some(true), ..Trace::default() };
    let started = Instant::now();
    let context = SpanContext::random();
    trace.id = Some(context.trace_id);
    let mut root = Span::root("root", context).with_property(|| ("number", number.to_string()));
    trace.spans.insert(
        "root".into(),
        Expected {
            properties: vec![("number".into(), number.to_string())],
            before_root: true,
            ..Expected::default()
        },
    );
    let mut waits = Vec::new();
    {
        let _guard = root.set_local_parent();
        // Nested and sibling local spans, with events through the local parent.
        let mut stack: Vec<(String, LocalSpan)> = Vec::new();
        for local in 0..rng.below(6) {
            while !stack.is_empty() && rng.one_in(2) {
                stack.pop();
            }
            let name = format!("l{local}");
            let parent = stack.last().map_or("root".to_string(), |(name, _)| name.clone());
            let mut expected =
                Expected { parent, before_root: true, before_parent: true, ..Expected::default() };
            let mut span = LocalSpan::enter_with_local_parent(name.clone());
            if rng.one_in(3) {
                span = span.with_property(|| ("local", "yes"));
                expected.properties.push(("local".into(), "yes".into()));
            }
            if rng.one_in(4) {
                span = span.with_link(SpanContext::random());
            }
            if rng.one_in(2) {
                Event::add_to_local_parent(format!("{name}-e"), || []);
                expected.events.push(format!("{name}-e"));
            }
            trace.spans.insert(name.clone(), expected);
            stack.push((name, span));
        }
        // Thread-safe children, handed to hop threads.
        for child in 0..rng.below(3) {
            let name = format!("c{child}");
            // A purely local request in the threshold phase: only the
            // scheduler can make it slow.
            if slow == Some(false) {
                break;
            }
            let (span, parent) = if rng.one_in(2) {
                (Span::enter_with_parent(name.clone(), &root), "root".to_string())
            } else {
                let parent = stack.last().map_or("root".to_string(), |(name, _)| name.clone());
                (Span::enter_with_local_parent(name.clone()), parent)
            };
            let cancel = rng.one_in(20);
            let locals = rng.below(3) as usize;
            let before_root = rng.below(4) != 0;
            let (done, wait) = if before_root {
                let (sender, receiver) = mpsc::channel();
                (Some(sender), Some(receiver))
            } else {
                (None, None)
            };
            waits.extend(wait);
            trace.made += 1 + if cancel { 0 } else { locals };
            if !cancel {
                let before_parent = before_root && parent == "root";
                let mut expected = Expected { parent, before_root, before_parent, ..Expected::default() };
                expected.events = vec![format!("{name}-e"), format!("{name}-se")];
                for local in 0..locals {
                    let local_name = format!("{name}-l{local}");
                    let local_parent =
                        if local == 0 { name.clone() } else { format!("{name}-l{}", local - 1) };
                    trace.spans.insert(
                        local_name.clone(),
                        Expected {
                            parent: local_parent,
                            events: vec![format!("{local_name}-e")],
                            before_root,
                            before_parent: true,
                            ..Expected::default()
                        },
                    );
                }
                trace.spans.insert(name.clone(), expected);
            }
            hops.send(Hop { child: span, name, locals, cancel, done }).unwrap();
        }
        while let Some(span) = stack.pop() {
            drop(span);
        }
        for wait in waits.drain(..) {
            wait.recv().unwrap();
        }
        if let Some(true) = slow {
            let start = Instant::now();
            while start.elapsed() < THRESHOLD + THRESHOLD / 2 {
                std::hint::spin_loop();
            }
        }
    }
    if rng.one_in(20) {
        root.cancel();
        trace.kept = Some(false);
    }
    // Moved to another thread to end there; not in the threshold phase,
    // where the move's own time would decide the fate.
    if slow.is_none() && rng.one_in(20) {
        trace.root_moved = true;
        std::thread::spawn(move || drop(root)).join().unwrap();
    } else {
        drop(root);
    }
    // The root and its local spans (the children were counted as handed off).
    trace.made += trace.spans.keys().filter(|name| !name.starts_with('c')).count();
    if slow == Some(false) && trace.kept == Some(true) {
        // Thrown away unless the scheduler made it as slow as the threshold.
        trace.kept = if started.elapsed() < THRESHOLD { Some(false) } else { None };
    }
    trace
}

/// Runs one phase: every producer's traces; what should arrive.
pub fn phase(
    seed: u64,
    phase: u64,
    traces_per_producer: usize,
    slow: impl Fn(&mut Rng) -> Option<bool> + Clone + Send + 'static,
) -> Vec<Trace> {
    let (hops, hop_work) = mpsc::channel::<Hop>();
    let hop_work = Arc::new(Mutex::new(hop_work));
    let hop_threads: Vec<_> = (0..2)
        .map(|_| {
            let hop_work = hop_work.clone();
            std::thread::spawn(move || loop {
                let work = hop_work.lock().unwrap().recv();
                match work {
                    Ok(work) => hop(work),
                    Err(_) => return,
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| {
            let (hops, slow) = (hops.clone(), slow.clone());
            let mut rng =
                Rng(seed ^ (phase << 32) ^ (producer as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            std::thread::spawn(move || {
                (0..traces_per_producer)
                    .map(|number| {
                        let slow = slow(&mut rng);
                        let mut trace = run_trace(&mut rng, number, &hops, slow);
                        trace.made_at = (producer, number);
                        trace
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    drop(hops);
    let traces: Vec<Trace> = producers.into_iter().flat_map(|producer| producer.join().unwrap()).collect();
    for thread in hop_threads {
        thread.join().unwrap();
    }
    traces
}
