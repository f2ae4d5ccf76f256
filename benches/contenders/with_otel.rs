//! The OpenTelemetry SDK: a `SdkTracerProvider` (default sampler,
//! parent-based always-on) whose `BatchSpanProcessor` hands the spans to
//! [`DiscardExporter`]; flush is the provider's `force_flush`.
//!
//! Idioms: a local span is `tracer.in_span(..)` (the span is attached to
//! the thread's current `Context` while the closure runs, so it parents
//! the spans started inside); an explicit parent is
//! `start_with_context(.., &parent_context)`; a future is traced with
//! `FutureExt::with_context`. The workloads are generic over the
//! `Tracer`, so that `benches/no_reporter.rs` runs them on the global
//! (no-op) tracer.

use std::future::Future;

use minitrace_suite::{Step, Worker};
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{TraceContextExt as _, Tracer, TracerProvider as _};
use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};

use super::{block_on, Contender, Delivered, YieldOnce};

/// How many finished spans the batch processor's queue holds. The default,
/// 2 048, overflows (and drops spans) in the 1 000-span workloads before
/// the processor's thread gets a turn on a busy 2-core machine.
const QUEUE: usize = 1 << 16;

/// An exporter that counts the spans it is handed and discards them.
#[derive(Debug)]
pub struct DiscardExporter(&'static Delivered);

impl SpanExporter for DiscardExporter {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        self.0.add(batch.len());
        drop(criterion::black_box(batch));
        std::future::ready(Ok(()))
    }
}

/// A root with `n` children, each the current span while it lives.
pub fn wide<T: Tracer>(tracer: &T, n: usize)
where
    T::Span: Send + Sync + 'static,
{
    tracer.in_span("root", |_| {
        for _ in 0..n {
            tracer.in_span("child", |_| {});
        }
    })
}

/// A root with `n` nested children.
pub fn deep<T: Tracer>(tracer: &T, n: usize)
where
    T::Span: Send + Sync + 'static,
{
    fn nest<T: Tracer>(tracer: &T, depth: usize)
    where
        T::Span: Send + Sync + 'static,
    {
        if depth > 0 {
            tracer.in_span("child", |_| nest(tracer, depth - 1));
        }
    }
    tracer.in_span("root", |_| nest(tracer, n))
}

/// A request of `steps` traced steps of `work` each.
pub fn request<T: Tracer>(tracer: &T, steps: usize, step: Step) -> u64
where
    T::Span: Send + Sync + 'static,
{
    tracer.in_span("request", |_| {
        (0..steps).fold(0, |previous, _| tracer.in_span("step", |_| step.run(previous)))
    })
}

/// A root and `n` spans with it as explicit parent, ended by `worker`.
pub fn handoff<T: Tracer>(tracer: &T, n: usize, worker: &Worker)
where
    T::Span: Send + Sync + 'static,
{
    let root = Context::new().with_span(tracer.start_with_context("root", &Context::new()));
    let spans: Vec<T::Span> = (0..n).map(|_| tracer.start_with_context("child", &root)).collect();
    worker.finish(Box::new(spans));
}

/// Each step runs in the `Context` of its own span, the task in the
/// root's (`with_context` attaches it around each poll). OpenTelemetry has
/// no span-per-poll adapter, so there is no `enter_on_poll` counterpart.
pub fn async_steps<T: Tracer>(tracer: &T, n: usize)
where
    T::Span: Send + Sync + 'static,
{
    let root = Context::new().with_span(tracer.start_with_context("root", &Context::new()));
    let task = async move {
        for _ in 0..n {
            let step = Context::current_with_span(tracer.start("step"));
            YieldOnce::default().with_context(step).await;
        }
    };
    block_on(task.with_context(root));
}

/// The OpenTelemetry SDK with a batch processor and [`DiscardExporter`].
pub struct OtelContender {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

static DELIVERED: Delivered = Delivered::new();

impl OtelContender {
    /// A provider with a `BatchSpanProcessor` (its own export thread) of
    /// [`QUEUE`] spans, in batches of 512 (the default).
    pub fn new() -> OtelContender {
        let config = BatchConfigBuilder::default().with_max_queue_size(QUEUE).build();
        let processor =
            BatchSpanProcessor::builder(DiscardExporter(&DELIVERED)).with_batch_config(config).build();
        let provider = SdkTracerProvider::builder().with_span_processor(processor).build();
        let tracer = provider.tracer("bench");
        OtelContender { provider, tracer }
    }
}

impl Default for OtelContender {
    fn default() -> OtelContender {
        OtelContender::new()
    }
}

impl Contender for OtelContender {
    fn name(&self) -> &'static str {
        "opentelemetry_sdk 0.33"
    }
    fn sink(&self) -> &'static str {
        "each ended span is queued to the BatchSpanProcessor on the thread that ends it; the \
         processor's thread exports batches of 512 to an exporter that discards them; flush \
         (force_flush) waits for the queue to be exported"
    }
    fn flush(&self) {
        self.provider.force_flush().expect("force_flush");
    }
    fn delivered(&self) -> Option<u64> {
        Some(DELIVERED.get())
    }
    fn wide(&self, n: usize) {
        wide(&self.tracer, n)
    }
    fn deep(&self, n: usize) {
        deep(&self.tracer, n)
    }
    fn request(&self, steps: usize, step: Step) -> u64 {
        request(&self.tracer, steps, step)
    }
    fn handoff(&self, n: usize, worker: &Worker) {
        handoff(&self.tracer, n, worker)
    }
    fn async_steps(&self, n: usize) {
        async_steps(&self.tracer, n)
    }
}
