//! The libraries with the minitrace 0.6 API: this workspace, minitrace
//! 0.6.7 and fastrace 0.7, on identical code (`traced_workloads!` from the
//! suite's library, plus the async workloads below), each with a reporter
//! that counts and discards the spans.

use super::{Contender, Delivered};

/// A reporter that counts the spans it is handed and discards them.
pub struct Discard(pub &'static Delivered);

impl minitrace::collector::Reporter for Discard {
    fn report(&mut self, spans: &[minitrace::collector::SpanRecord]) {
        self.0.add(spans.len());
        criterion::black_box(spans);
    }
}

impl minitrace_067::collector::Reporter for Discard {
    fn report(&mut self, spans: &[minitrace_067::collector::SpanRecord]) {
        self.0.add(spans.len());
        criterion::black_box(spans);
    }
}

impl fastrace::collector::Reporter for Discard {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        self.0.add(spans.len());
        criterion::black_box(spans);
    }
}

/// Generates the contender `$module::Library` for `$krate` (a library with
/// the minitrace 0.6 API) and `$module::install()`, which sets its
/// reporter and returns it.
macro_rules! minitrace_api {
    ($module:ident, $krate:ident, $name:expr, $sink:expr) => {
        pub mod $module {
            use minitrace_suite::{Step, Worker};
            use $krate::future::FutureExt as _;
            use $krate::prelude::*;

            use crate::contenders::{awaits, block_on, Contender, Delivered, YieldOnce};

            minitrace_suite::traced_workloads!(workloads, $krate);

            static DELIVERED: Delivered = Delivered::new();

            /// The library, its reporter installed by [`install`].
            pub struct Library;

            /// Sets the library's reporter.
            pub fn install() -> &'static dyn Contender {
                $krate::set_reporter(super::Discard(&DELIVERED), $krate::collector::Config::default());
                &Library
            }

            /// Each step is traced as `#[trace]` traces an `async fn`: a
            /// thread-safe span under the local parent, kept by `in_span`.
            pub fn async_steps(n: usize) {
                let task = async move {
                    for _ in 0..n {
                        YieldOnce::default().in_span(Span::enter_with_local_parent("step")).await;
                    }
                };
                block_on(task.in_span(Span::root("root", SpanContext::random())));
            }

            /// A local span around each poll of the task, under its root.
            pub fn async_polls(n: usize) {
                let task = awaits(n).enter_on_poll("poll");
                block_on(task.in_span(Span::root("root", SpanContext::random())));
            }

            impl Contender for Library {
                fn name(&self) -> &'static str {
                    $name
                }
                fn sink(&self) -> &'static str {
                    $sink
                }
                fn flush(&self) {
                    workloads::flush()
                }
                fn delivered(&self) -> Option<u64> {
                    Some(DELIVERED.get())
                }
                fn wide(&self, n: usize) {
                    workloads::wide(n)
                }
                fn deep(&self, n: usize) {
                    workloads::deep(n)
                }
                fn request(&self, steps: usize, step: Step) -> u64 {
                    workloads::request(steps, step)
                }
                fn handoff(&self, n: usize, worker: &Worker) {
                    workloads::handoff(n, worker)
                }
                fn async_steps(&self, n: usize) {
                    async_steps(n)
                }
                fn async_polls(&self) -> Option<fn(usize)> {
                    Some(async_polls)
                }
            }
        }
    };
}

minitrace_api!(
    ours,
    minitrace,
    super::super::OURS,
    "a collector thread (minitrace-collector) drains every thread's span ring every 10 ms and \
     calls a reporter that discards the spans; flush() wakes it and waits for that cycle"
);
minitrace_api!(
    v067,
    minitrace_067,
    "minitrace 0.6.7",
    "a collector thread drains every thread's command queue every 10 ms and calls a reporter \
     that discards the spans; flush() does the same on a thread it spawns and joins"
);
minitrace_api!(
    fastrace_07,
    fastrace,
    "fastrace 0.7",
    "a collector thread drains every thread's command queue every second and calls a reporter \
     that discards the spans; flush() does the same on a thread it spawns and joins"
);

/// This workspace, its reporter set.
pub fn ours() -> &'static dyn Contender {
    ours::install()
}

/// minitrace 0.6.7, its reporter set.
pub fn minitrace_067() -> &'static dyn Contender {
    v067::install()
}

/// fastrace 0.7, its reporter set.
pub fn fastrace() -> &'static dyn Contender {
    fastrace_07::install()
}
