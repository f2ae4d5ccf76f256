//! The workspace's own package (never published). It owns the top-level
//! `benches/`, `examples/` and `tests/`, which exercise the workspace crates
//! beside their peers from crates.io. This library holds what they share.

#![deny(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A small CPU-bound workload of roughly `iterations` nanoseconds, that the
/// optimiser cannot remove: the "request" that examples and benches trace.
///
/// ```
/// let checksum = minitrace_suite::busy_work(1_000);
/// # let _ = checksum;
/// ```
pub fn busy_work(iterations: u64) -> u64 {
    busy_work_from(0x9e37_79b9_7f4a_7c15, iterations)
}

fn busy_work_from(seed: u64, iterations: u64) -> u64 {
    let mut state = seed;
    for i in 0..iterations {
        state = std::hint::black_box(state.rotate_left(5) ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    state
}

/// One step of a traced request: [`busy_work`] of `iterations`, either
/// independent of the step before it or chained to it.
///
/// Independent steps are one long dependency chain each, so the CPU runs
/// the end of one step alongside the start of the next; a clock read
/// between them (any tracer's span boundary) stops that overlap, which
/// makes the reads cost several times their back-to-back price. Chained
/// steps start from the previous step's result, as the steps of a real
/// request use each other's output: nothing overlaps, and a clock read
/// costs what it costs alone.
///
/// ```
/// use minitrace_suite::Step;
/// let chained = Step { iterations: 100, chained: true };
/// assert_ne!(chained.run(1), chained.run(2)); // it starts from the previous result
/// let independent = Step { iterations: 100, chained: false };
/// assert_eq!(independent.run(1) ^ 1, independent.run(2) ^ 2); // it only folds it in
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Iterations of [`busy_work`]: roughly nanoseconds.
    pub iterations: u64,
    /// Whether the step starts from the previous step's result.
    pub chained: bool,
}

impl Step {
    /// Runs the step after one that returned `previous` (0 for the first);
    /// returns its result, which the next step takes.
    pub fn run(self, previous: u64) -> u64 {
        if self.chained {
            busy_work_from(previous, self.iterations)
        } else {
            previous ^ busy_work(self.iterations)
        }
    }
}

/// CPU time used so far by every thread of this process, collector threads
/// included: what the benches charge each library for, so that work moved
/// to a background thread is not hidden.
///
/// ```
/// let before = minitrace_suite::process_cpu_time();
/// minitrace_suite::busy_work(10_000);
/// assert!(minitrace_suite::process_cpu_time() >= before);
/// ```
pub fn process_cpu_time() -> std::time::Duration {
    cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time used so far by the calling thread.
fn thread_cpu_time() -> std::time::Duration {
    cpu_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_time(clock: libc::clockid_t) -> std::time::Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec to write to, and the process and
    // thread CPU clocks exist on every Linux and BSD.
    unsafe { libc::clock_gettime(clock, &mut now) };
    std::time::Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Generates the same traced workloads for every library with the
/// minitrace 0.6 API (this workspace, minitrace 0.6.7, fastrace), so that
/// they are compared on identical code. `$module` is the generated module,
/// `$krate` the library.
#[macro_export]
macro_rules! traced_workloads {
    ($module:ident, $krate:ident) => {
        pub mod $module {
            use $krate::local::LocalSpan;
            use $krate::prelude::*;

            /// A root with `children` sibling local spans.
            pub fn wide(children: usize) {
                let root = Span::root("root", SpanContext::random());
                let _guard = root.set_local_parent();
                for _ in 0..children {
                    let _span = LocalSpan::enter_with_local_parent("child");
                }
            }

            /// A root with `depth` nested local spans.
            pub fn deep(depth: usize) {
                fn nest(depth: usize) {
                    if depth > 0 {
                        let _span = LocalSpan::enter_with_local_parent("child");
                        nest(depth - 1);
                    }
                }
                let root = Span::root("root", SpanContext::random());
                let _guard = root.set_local_parent();
                nest(depth);
            }

            /// A request of `children` steps, every step traced.
            pub fn request(children: usize, step: $crate::Step) -> u64 {
                let root = Span::root("request", SpanContext::random());
                let _guard = root.set_local_parent();
                (0..children).fold(0, |previous, _| {
                    let _span = LocalSpan::enter_with_local_parent("step");
                    step.run(previous)
                })
            }

            /// A root and `children` thread-safe spans with the root as
            /// explicit parent, handed to `worker` to finish there.
            pub fn handoff(children: usize, worker: &$crate::Worker) {
                let root = Span::root("root", SpanContext::random());
                let spans: Vec<Span> =
                    (0..children).map(|_| Span::enter_with_parent("child", &root)).collect();
                worker.finish(Box::new(spans));
            }

            /// Waits until the library's collector has processed everything.
            pub fn flush() {
                $krate::flush();
            }
        }
    };
}

/// A thread that drops whatever it is handed and then acknowledges, so the
/// spans end on another thread than they started on.
///
/// It also keeps the CPU time that the hand-off itself costs, so that a
/// bench can charge a library only for its own work: handing an item over
/// wakes the worker and then the caller, and on a virtual machine each
/// wake-up of a parked thread costs microseconds of CPU (an interrupt
/// between cores), more than a busy thread's spin-then-park would suggest.
/// A baseline row of an untraced hand-off does not capture that cost: with
/// nothing to drop, both threads are still spinning when the other answers,
/// while a traced hand-off keeps each side waiting long enough to park.
pub struct Worker {
    work: crossbeam_channel::Sender<Box<dyn Send>>,
    done: crossbeam_channel::Receiver<()>,
    /// Nanoseconds of CPU spent on the hand-off: the caller's time inside
    /// [`Worker::finish`], and the worker's time outside dropping items.
    hand_off_cpu: Arc<AtomicU64>,
}

impl Default for Worker {
    fn default() -> Worker {
        Worker::new()
    }
}

impl Worker {
    /// Starts the thread, wherever the scheduler puts it.
    ///
    /// ```
    /// let worker = minitrace_suite::Worker::new();
    /// worker.finish(Box::new(vec![1, 2, 3]));
    /// ```
    pub fn new() -> Worker {
        Worker::on_cpu(None)
    }

    /// Starts the thread, kept on `cpu` if one is given and it can be.
    ///
    /// ```
    /// let cpu = minitrace_suite::allowed_cpus().last().copied();
    /// let worker = minitrace_suite::Worker::on_cpu(cpu);
    /// worker.finish(Box::new(vec![1, 2, 3]));
    /// ```
    pub fn on_cpu(cpu: Option<usize>) -> Worker {
        let (work, inbox) = crossbeam_channel::bounded::<Box<dyn Send>>(1);
        let (acknowledge, done) = crossbeam_channel::bounded(1);
        let hand_off_cpu = Arc::new(AtomicU64::new(0));
        let worker_hand_off_cpu = hand_off_cpu.clone();
        std::thread::spawn(move || {
            // Kept for the thread's life: it ends with the thread.
            let _pinned = cpu.and_then(Pinned::current_thread);
            // Everything between the end of one drop and the start of the
            // next (acknowledging, waiting, waking up) is the hand-off's.
            let mut dropped = thread_cpu_time();
            for item in inbox {
                let received = thread_cpu_time();
                drop(item);
                let waited = received.saturating_sub(dropped);
                dropped = thread_cpu_time();
                worker_hand_off_cpu.fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
                if acknowledge.send(()).is_err() {
                    break;
                }
            }
        });
        Worker { work, done, hand_off_cpu }
    }

    /// Hands `item` to the thread and waits until it has been dropped there.
    pub fn finish(&self, item: Box<dyn Send>) {
        let start = thread_cpu_time();
        if self.work.send(item).is_ok() {
            let _ = self.done.recv();
        }
        let spent = thread_cpu_time().saturating_sub(start);
        self.hand_off_cpu.fetch_add(spent.as_nanos() as u64, Ordering::Relaxed);
    }

    /// CPU time that handing items over has cost so far, on both threads:
    /// the caller's time inside [`finish`](Worker::finish) (sending, waiting,
    /// being woken up) and the worker's time outside dropping the items
    /// (acknowledging, waiting, being woken up). The worker's last wait is
    /// counted when the next item arrives.
    ///
    /// ```
    /// let worker = minitrace_suite::Worker::new();
    /// let before = worker.hand_off_cpu();
    /// worker.finish(Box::new(vec![1, 2, 3]));
    /// // At least the caller's send and wait are counted.
    /// assert!(worker.hand_off_cpu() > before);
    /// ```
    pub fn hand_off_cpu(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.hand_off_cpu.load(Ordering::Relaxed))
    }
}

/// The CPUs the calling thread may run on, in increasing order (empty
/// where that cannot be asked: off Linux, or if the call fails).
///
/// ```
/// let cpus = minitrace_suite::allowed_cpus();
/// # let _ = cpus;
/// ```
pub fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    if let Some(set) = affinity() {
        // SAFETY: `CPU_ISSET` reads a bit of a valid set, below its size.
        return (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect();
    }
    Vec::new()
}

/// Keeps the calling thread on one CPU until dropped, then gives it back
/// the CPUs it was allowed before.
///
/// ```
/// use minitrace_suite::{allowed_cpus, Pinned};
///
/// let before = allowed_cpus();
/// if let Some(&cpu) = before.last() {
///     let pinned = Pinned::current_thread(cpu);
///     if pinned.is_some() {
///         assert_eq!(allowed_cpus(), [cpu]);
///     }
///     drop(pinned);
///     assert_eq!(allowed_cpus(), before);
/// }
/// ```
pub struct Pinned {
    #[cfg(target_os = "linux")]
    previous: libc::cpu_set_t,
    // Made on, and only valid for, the thread it pins.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Pinned {
    /// Pins the calling thread to `cpu`; `None` if it cannot be (off
    /// Linux, or `cpu` is not allowed).
    pub fn current_thread(cpu: usize) -> Option<Pinned> {
        #[cfg(target_os = "linux")]
        {
            if cpu >= libc::CPU_SETSIZE as usize {
                return None;
            }
            let previous = affinity()?;
            // SAFETY: a zeroed `cpu_set_t` is an empty set.
            let mut only = unsafe { std::mem::zeroed::<libc::cpu_set_t>() };
            // SAFETY: `cpu` is below `CPU_SETSIZE`, the set's size in bits.
            unsafe { libc::CPU_SET(cpu, &mut only) };
            set_affinity(&only).then_some(Pinned { previous, _not_send: std::marker::PhantomData })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = cpu;
            None
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        set_affinity(&self.previous);
    }
}

#[cfg(target_os = "linux")]
fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed `cpu_set_t` is a valid (empty) set.
    let mut set = unsafe { std::mem::zeroed::<libc::cpu_set_t>() };
    // SAFETY: the kernel writes at most the size passed, the set's; pid 0
    // is this thread.
    let done = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    (done == 0).then_some(set)
}

#[cfg(target_os = "linux")]
fn set_affinity(set: &libc::cpu_set_t) -> bool {
    // SAFETY: `set` is a valid set of the size passed; pid 0 is this thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) == 0 }
}
