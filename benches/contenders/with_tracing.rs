//! tokio's `tracing` with `tracing-subscriber`: a `Registry` alone (span
//! bookkeeping only, nothing collected), and a `Registry` with
//! [`RecordClosed`], a small layer that records each closed span.
//!
//! Both are one subscriber, set as the global default as applications do:
//! tracing's global default is its fast path (no thread-local look-up, and
//! no reference count on the subscriber per span, which two cores would
//! fight over). "Registry alone" is that subscriber with the layer
//! switched off ([`RECORDING`] false: one relaxed load per layer hook).
//!
//! Idioms: a local span is `info_span!(..).entered()` (the current span is
//! the parent); a root is `info_span!(parent: None, ..)`; an explicit
//! parent is `info_span!(parent: &root, ..)`; futures use `Instrument`.
//! The workloads are free functions of the current subscriber, so that
//! `benches/no_reporter.rs` runs them with no subscriber at all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Instant;

use minitrace_suite::{Step, Worker};
use tracing::span::{Attributes, Id};
use tracing::{info_span, Instrument, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

use super::{block_on, Contender, Delivered, YieldOnce};

/// A closed span, as [`RecordClosed`] keeps it.
pub struct ClosedSpan {
    /// The span's name.
    pub name: &'static str,
    /// The span's id.
    pub id: u64,
    /// The parent's id, if any.
    pub parent: Option<u64>,
    /// When it was created.
    pub start: Instant,
    /// When it was closed.
    pub end: Instant,
}

/// When a span was created, kept in the span's extensions.
struct Started(Instant);

/// Whether [`RecordClosed`] records: the contender being measured.
pub static RECORDING: AtomicBool = AtomicBool::new(false);

/// Every thread's buffer of closed spans, for the flush to take.
static BUFFERS: Mutex<Vec<Arc<Mutex<Vec<ClosedSpan>>>>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's buffer: a buffer per thread, as this workspace has a
    /// ring per thread, so that its lock is contended only by a flush.
    static BUFFER: Arc<Mutex<Vec<ClosedSpan>>> = {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        BUFFERS.lock().unwrap().push(buffer.clone());
        buffer
    };
}

/// Takes and drops every span recorded so far on any thread; returns how many.
pub fn take_closed() -> usize {
    let buffers = BUFFERS.lock().unwrap();
    buffers
        .iter()
        .map(|buffer| {
            let spans = std::mem::take(&mut *buffer.lock().unwrap());
            let count = spans.len();
            drop(criterion::black_box(spans));
            count
        })
        .sum()
}

/// A layer that records each closed span (name, ids, timestamps) into the
/// closing thread's buffer, which the contender takes and discards at flush.
pub struct RecordClosed;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for RecordClosed {
    fn on_new_span(&self, _: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !RECORDING.load(Ordering::Relaxed) {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Started(Instant::now()));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if !RECORDING.load(Ordering::Relaxed) {
            return;
        }
        let end = Instant::now();
        let Some(span) = ctx.span(&id) else { return };
        let start = span.extensions().get::<Started>().map_or(end, |started| started.0);
        let record = ClosedSpan {
            name: span.name(),
            id: id.into_u64(),
            parent: span.parent().map(|parent| parent.id().into_u64()),
            start,
            end,
        };
        BUFFER.with(|buffer| buffer.lock().unwrap().push(record));
    }
}

/// Sets the global default subscriber, a `Registry` with [`RecordClosed`],
/// once.
fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let subscriber = Registry::default().with(RecordClosed);
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
    });
}

/// A root with `n` children, each entered (the current span) while it lives.
pub fn wide(n: usize) {
    let _root = info_span!(parent: None, "root").entered();
    for _ in 0..n {
        let _span = info_span!("child").entered();
    }
}

/// A root with `n` nested children.
pub fn deep(n: usize) {
    fn nest(depth: usize) {
        if depth > 0 {
            let _span = info_span!("child").entered();
            nest(depth - 1);
        }
    }
    let _root = info_span!(parent: None, "root").entered();
    nest(n);
}

/// A request of `steps` traced steps of `work` each.
pub fn request(steps: usize, step: Step) -> u64 {
    let _root = info_span!(parent: None, "request").entered();
    (0..steps).fold(0, |previous, _| {
        let _span = info_span!("step").entered();
        step.run(previous)
    })
}

/// A root and `n` spans with it as explicit parent, closed by `worker`.
pub fn handoff(n: usize, worker: &Worker) {
    let root = info_span!(parent: None, "root");
    let spans: Vec<tracing::Span> = (0..n).map(|_| info_span!(parent: &root, "child")).collect();
    worker.finish(Box::new(spans));
}

/// Each step `Instrument`ed with its own span (what `#[instrument]` on an
/// `async fn` does), the task with the root. `Instrument` enters its span
/// around each poll; tracing has no span-per-poll adapter, so there is no
/// `enter_on_poll` counterpart.
pub fn async_steps(n: usize) {
    let task = async move {
        for _ in 0..n {
            YieldOnce::default().instrument(info_span!("step")).await;
        }
    };
    block_on(task.instrument(info_span!(parent: None, "root")));
}

/// `tracing` with the global subscriber, its layer on or off.
pub struct TracingContender {
    name: &'static str,
    sink: &'static str,
    recording: bool,
    delivered: Delivered,
}

impl TracingContender {
    /// The `Registry` alone: it keeps each span's data in a slab and frees
    /// it at close; nothing is collected. (A bare `Registry` as the
    /// subscriber would never free a span's slot, as only a layered
    /// subscriber's close does: its memory grows by gigabytes within one
    /// benchmark. Here it is layered, with the layer off.)
    pub fn registry() -> TracingContender {
        install();
        TracingContender {
            name: "tracing 0.1 + Registry",
            sink: "none: the Registry frees each span's data when it closes, on the thread that \
                   closes it (tracing's own bookkeeping, a baseline; the recording layer is off)",
            recording: false,
            delivered: Delivered::new(),
        }
    }

    /// The `Registry` with [`RecordClosed`] on.
    pub fn recording() -> TracingContender {
        install();
        TracingContender {
            name: "tracing 0.1 + Registry + recording layer",
            sink: "a layer records each closed span (name, ids, start, end) into a buffer of the \
                   thread that closes it (a Mutex<Vec> per thread); flush takes every thread's Vec on \
                   the bench thread and drops them",
            recording: true,
            delivered: Delivered::new(),
        }
    }
}

impl Contender for TracingContender {
    fn name(&self) -> &'static str {
        self.name
    }
    fn sink(&self) -> &'static str {
        self.sink
    }
    fn scoped(&self, batch: &mut dyn FnMut()) {
        // Contenders run one after the other, and every span of a batch is
        // closed before its flush.
        RECORDING.store(self.recording, Ordering::Relaxed);
        batch()
    }
    fn flush(&self) {
        if self.recording {
            self.delivered.add(take_closed());
        }
    }
    fn delivered(&self) -> Option<u64> {
        self.recording.then(|| self.delivered.get())
    }
    fn wide(&self, n: usize) {
        wide(n)
    }
    fn deep(&self, n: usize) {
        deep(n)
    }
    fn request(&self, steps: usize, step: Step) -> u64 {
        request(steps, step)
    }
    fn handoff(&self, n: usize, worker: &Worker) {
        handoff(n, worker)
    }
    fn async_steps(&self, n: usize) {
        async_steps(n)
    }
}
