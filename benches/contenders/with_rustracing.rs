//! `rustracing` with the `rustracing_jaeger` tracer (`AllSampler`): each
//! finished span is sent, on the thread that drops it, into the tracer's
//! channel; flush drains the receiver and drops the spans.
//!
//! rustracing (OpenTracing) has no current span and no future adapter:
//! every parent is explicit. Its closest equivalent of a local span is a
//! child started from the parent handed down (`parent.child(..)`), and of
//! a traced future a child span held across the `.await`.

use minitrace_suite::{Step, Worker};
use rustracing::sampler::AllSampler;
use rustracing_jaeger::span::SpanReceiver;
use rustracing_jaeger::{Span, Tracer};

use super::{block_on, Contender, Delivered, YieldOnce};

/// rustracing with the Jaeger tracer and its (unbounded) span channel.
pub struct RustracingContender {
    tracer: Tracer,
    receiver: SpanReceiver,
    delivered: Delivered,
}

impl RustracingContender {
    /// A tracer that samples every trace, and its channel's receiver.
    pub fn new() -> RustracingContender {
        // The unbounded channel: a bounded one (`Tracer::with_sender`)
        // silently drops spans when full.
        let (tracer, receiver) = Tracer::new(AllSampler);
        RustracingContender { tracer, receiver, delivered: Delivered::new() }
    }

    fn root(&self, name: &'static str) -> Span {
        self.tracer.span(name).start()
    }
}

impl Default for RustracingContender {
    fn default() -> RustracingContender {
        RustracingContender::new()
    }
}

fn child(parent: &Span, name: &'static str) -> Span {
    parent.child(name, |options| options.start())
}

impl Contender for RustracingContender {
    fn name(&self) -> &'static str {
        "rustracing 0.6 + rustracing_jaeger 0.10"
    }
    fn sink(&self) -> &'static str {
        "each span is sent into the tracer's crossbeam channel on the thread that drops it; \
         flush drains the receiver on the bench thread and drops the spans"
    }
    fn flush(&self) {
        self.delivered.add(self.receiver.try_iter().map(criterion::black_box).count());
    }
    fn delivered(&self) -> Option<u64> {
        Some(self.delivered.get())
    }
    fn wide(&self, n: usize) {
        let root = self.root("root");
        for _ in 0..n {
            let _span = child(&root, "child");
        }
    }
    fn deep(&self, n: usize) {
        fn nest(parent: &Span, depth: usize) {
            if depth > 0 {
                let span = child(parent, "child");
                nest(&span, depth - 1);
            }
        }
        nest(&self.root("root"), n);
    }
    fn request(&self, steps: usize, step: Step) -> u64 {
        let root = self.root("request");
        (0..steps).fold(0, |previous, _| {
            let _span = child(&root, "step");
            step.run(previous)
        })
    }
    fn handoff(&self, n: usize, worker: &Worker) {
        let root = self.root("root");
        let spans: Vec<Span> = (0..n).map(|_| self.tracer.span("child").child_of(&root).start()).collect();
        worker.finish(Box::new(spans));
    }
    fn async_steps(&self, n: usize) {
        let root = self.root("root");
        block_on(async move {
            for _ in 0..n {
                let _span = child(&root, "step");
                YieldOnce::default().await;
            }
        });
    }
}
