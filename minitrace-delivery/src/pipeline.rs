//! A sender thread: bodies are delivered while the reporter encodes the
//! next ones.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::delivery::{Attempt, Delivery, Report};
use crate::stats::Counters;

/// The default number of bodies queued or in flight at once, per reporter.
///
/// ```
/// assert_eq!(minitrace_delivery::DEFAULT_PIPELINE_DEPTH, 8);
/// ```
pub const DEFAULT_PIPELINE_DEPTH: usize = 8;

/// One try of one body with the time left: what a transport does.
pub type Transport = Box<dyn FnMut(&[u8], Duration) -> Attempt + Send>;

struct Job {
    body: Vec<u8>,
    spans: u64,
    report: u64,
    deadline: Instant,
    /// Whether the reporter's thread captures the error log's lines (the
    /// `testing` feature): then the sender thread's lines are taken back
    /// to it.
    capture: bool,
}

/// A body back from the sender thread, and the log lines to write on the
/// reporter's thread (only when it captures them).
struct Done {
    body: Vec<u8>,
    lines: Vec<String>,
}

#[cfg(feature = "testing")]
fn capturing() -> bool {
    crate::log::testing::capturing()
}

#[cfg(not(feature = "testing"))]
fn capturing() -> bool {
    false
}

/// Runs `f`, capturing the log lines it writes if `capture`.
#[cfg(feature = "testing")]
fn run_capturing<R>(capture: bool, f: impl FnOnce() -> R) -> (R, Vec<String>) {
    if capture {
        crate::log::testing::capture_log(f)
    } else {
        (f(), Vec::new())
    }
}

#[cfg(not(feature = "testing"))]
fn run_capturing<R>(_capture: bool, f: impl FnOnce() -> R) -> (R, Vec<String>) {
    (f(), Vec::new())
}

/// A reporter's [`Delivery`] on a thread of its own, fed with encoded
/// bodies through a bounded queue, so that minitrace's collector thread
/// encodes the next body while the last one is on the wire.
///
/// The reporter takes an empty buffer with [`buffer`](Pipeline::buffer),
/// encodes a body into it and hands it over with [`send`](Pipeline::send);
/// once delivered (or failed), the buffer comes back for a later body, so a
/// reporter in its steady state allocates no body. When `depth` bodies are
/// queued or in flight, `send` waits for one to be done: a reporter never
/// gets further ahead of its endpoint than that. [`wait`](Pipeline::wait)
/// waits until every body sent is done; [`Counters::pending`] tells, from
/// any thread, how many spans are still queued or on the wire, and
/// [`Counters::wait_settled`] waits for none to be. A reporter calls
/// `wait` from `Reporter::wait_for_delivery`, so that `minitrace::flush()`
/// returns once its bodies are delivered.
///
/// The retry policy, the counters and the error log are the [`Delivery`]'s,
/// unchanged: each body is delivered as [`Delivery::deliver`] says, within
/// the deadline of the [`Report`] it was sent with.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use minitrace_delivery::{Attempt, Delivery, Pipeline, Report};
///
/// let delivery = Arc::new(Mutex::new(Delivery::new("my-reporter", "the endpoint")));
/// let counters = delivery.lock().unwrap().counters().clone();
/// let transport = Box::new(|body: &[u8], _time_left: Duration| {
///     assert_eq!(body, b"spans");
///     Attempt::Delivered { rejected: 0, message: String::new() }
/// });
/// let mut pipeline = Pipeline::new(delivery, 2, transport).unwrap();
/// let report = Report::new(Duration::from_secs(10));
/// let mut body = pipeline.buffer();
/// body.extend_from_slice(b"spans");
/// pipeline.send(&report, body, 3);
/// pipeline.wait();
/// assert_eq!(counters.get().spans_sent, 3);
/// ```
pub struct Pipeline {
    /// Behind a mutex only so that a reporter holding a pipeline stays
    /// `Sync` and unwind-safe; reached with `get_mut`, never locked.
    channels: Mutex<Channels>,
    pool: Vec<Vec<u8>>,
    in_flight: usize,
    depth: usize,
    delivery: Arc<Mutex<Delivery>>,
    counters: Arc<Counters>,
}

struct Channels {
    jobs: Option<SyncSender<Job>>,
    returned: Receiver<Done>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("depth", &self.depth)
            .field("in_flight", &self.in_flight)
            .field("pooled_buffers", &self.pool.len())
            .finish_non_exhaustive()
    }
}

/// Numbers reports, so that the sender thread knows where one ends.
static REPORTS: AtomicU64 = AtomicU64::new(1);

impl Report {
    pub(crate) fn next_id() -> u64 {
        REPORTS.fetch_add(1, Ordering::Relaxed)
    }
}

/// `delivery`, locked, whatever panicked while it was held.
fn lock(delivery: &Mutex<Delivery>) -> MutexGuard<'_, Delivery> {
    delivery.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl Pipeline {
    /// Starts the sender thread of `delivery`, which tries each body with
    /// `transport`; at most `depth` bodies (at least 1) are queued or in
    /// flight at once. Fails if no thread can be started.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use minitrace_delivery::{Attempt, Delivery, Pipeline};
    ///
    /// let delivery = Arc::new(Mutex::new(Delivery::new("r", "x")));
    /// let pipeline = Pipeline::new(delivery, 4, Box::new(|_: &[u8], _| Attempt::Failed("down".into())));
    /// assert!(pipeline.is_ok());
    /// ```
    pub fn new(
        delivery: Arc<Mutex<Delivery>>,
        depth: usize,
        mut transport: Transport,
    ) -> std::io::Result<Pipeline> {
        let depth = depth.max(1);
        let (jobs, queue) = mpsc::sync_channel::<Job>(depth);
        let (give_back, returned) = mpsc::channel();
        let shared = delivery.clone();
        let counters = lock(&delivery).counters().clone();
        let settled = counters.clone();
        let thread = std::thread::Builder::new().name("minitrace-delivery".into()).spawn(move || {
            let mut report = Report::new(Duration::ZERO);
            let mut report_id = 0;
            while let Ok(job) = queue.recv() {
                let mut delivery = lock(&shared);
                if job.report != report_id {
                    report_id = job.report;
                    report = Report::until(job.deadline);
                }
                let (spans, bytes) = (job.spans, job.body.len() as u64);
                let body = &job.body;
                let ((), lines) = run_capturing(job.capture, || {
                    let delivered = catch_unwind(AssertUnwindSafe(|| {
                        delivery.deliver(&mut report, spans, bytes, |left| transport(body, left))
                    }));
                    if delivered.is_err() {
                        delivery.lost(spans, "the transport panicked");
                    }
                });
                drop(delivery);
                settled.settled(spans);
                // The reporter may be gone: then so is the buffer.
                let _ = give_back.send(Done { body: job.body, lines });
            }
        })?;
        Ok(Pipeline {
            channels: Mutex::new(Channels { jobs: Some(jobs), returned, thread: Some(thread) }),
            pool: Vec::new(),
            in_flight: 0,
            depth,
            delivery,
            counters,
        })
    }

    /// An empty buffer for the next body: one that an earlier body was
    /// delivered in, when there is one.
    ///
    /// ```
    /// # use std::sync::{Arc, Mutex};
    /// # use minitrace_delivery::{Attempt, Delivery, Pipeline};
    /// # let delivery = Arc::new(Mutex::new(Delivery::new("r", "x")));
    /// # let mut pipeline = Pipeline::new(delivery, 1, Box::new(|_: &[u8], _| Attempt::Failed("down".into()))).unwrap();
    /// assert!(pipeline.buffer().is_empty());
    /// ```
    pub fn buffer(&mut self) -> Vec<u8> {
        while let Ok(done) = self.channels().returned.try_recv() {
            self.in_flight -= 1;
            self.take_back(done);
        }
        let mut body = self.pool.pop().unwrap_or_default();
        body.clear();
        body
    }

    /// Gives a buffer back unused.
    ///
    /// ```
    /// # use std::sync::{Arc, Mutex};
    /// # use minitrace_delivery::{Attempt, Delivery, Pipeline};
    /// # let delivery = Arc::new(Mutex::new(Delivery::new("r", "x")));
    /// # let mut pipeline = Pipeline::new(delivery, 1, Box::new(|_: &[u8], _| Attempt::Failed("down".into()))).unwrap();
    /// let body = pipeline.buffer();
    /// pipeline.put_back(body);
    /// ```
    pub fn put_back(&mut self, body: Vec<u8>) {
        if self.pool.len() <= self.depth {
            self.pool.push(body);
        }
    }

    /// Queues `body`, of `spans` spans, for delivery within `report`'s
    /// deadline; waits first while `depth` bodies are queued or in flight.
    ///
    /// ```
    /// # use std::sync::{Arc, Mutex};
    /// # use std::time::Duration;
    /// # use minitrace_delivery::{Attempt, Delivery, Pipeline, Report};
    /// # let delivery = Arc::new(Mutex::new(Delivery::new("r", "x")));
    /// # let counters = delivery.lock().unwrap().counters().clone();
    /// # let mut pipeline = Pipeline::new(delivery, 1, Box::new(|_: &[u8], _| Attempt::Failed("down".into()))).unwrap();
    /// pipeline.send(&Report::new(Duration::from_secs(1)), b"body".to_vec(), 2);
    /// pipeline.wait();
    /// assert_eq!(counters.get().spans_failed, 2);
    /// ```
    pub fn send(&mut self, report: &Report, body: Vec<u8>, spans: u64) {
        while self.in_flight >= self.depth {
            self.wait_one();
        }
        let job = Job { body, spans, report: report.id(), deadline: report.deadline(), capture: capturing() };
        self.counters.queued(spans);
        let Some(jobs) = &self.channels().jobs else {
            return;
        };
        match jobs.send(job) {
            Ok(()) => self.in_flight += 1,
            Err(mpsc::SendError(job)) => {
                self.counters.settled(job.spans);
                // The thread is gone (it never panics, but be exact).
                lock(&self.delivery).lost(job.spans, "the sender thread is gone");
                self.pool.push(job.body);
            }
        }
    }

    /// Waits until every body sent so far is delivered or failed, and so
    /// counted.
    ///
    /// ```
    /// # use std::sync::{Arc, Mutex};
    /// # use minitrace_delivery::{Attempt, Delivery, Pipeline};
    /// # let delivery = Arc::new(Mutex::new(Delivery::new("r", "x")));
    /// # let mut pipeline = Pipeline::new(delivery, 1, Box::new(|_: &[u8], _| Attempt::Failed("down".into()))).unwrap();
    /// pipeline.wait(); // nothing sent: returns at once
    /// ```
    pub fn wait(&mut self) {
        while self.in_flight > 0 {
            self.wait_one();
        }
    }

    fn wait_one(&mut self) {
        match self.channels().returned.recv() {
            Ok(done) => {
                self.in_flight -= 1;
                self.take_back(done);
            }
            // The thread is gone: nothing is in flight any more.
            Err(_) => self.in_flight = 0,
        }
    }

    fn channels(&mut self) -> &mut Channels {
        self.channels.get_mut().unwrap_or_else(|poison| poison.into_inner())
    }

    fn take_back(&mut self, done: Done) {
        for line in &done.lines {
            crate::log::write_line(line);
        }
        self.pool.push(done.body);
    }

    /// The delivery, shared with the sender thread: for the reporter's own
    /// counting and logging. It is locked while a body is delivered.
    ///
    /// ```
    /// # use std::sync::{Arc, Mutex};
    /// # use minitrace_delivery::{Attempt, Delivery, Pipeline};
    /// # let delivery = Arc::new(Mutex::new(Delivery::new("r", "x")));
    /// # let pipeline = Pipeline::new(delivery, 1, Box::new(|_: &[u8], _| Attempt::Failed("down".into()))).unwrap();
    /// assert_eq!(pipeline.delivery().lock().unwrap().counters().get().requests, 0);
    /// ```
    pub fn delivery(&self) -> &Arc<Mutex<Delivery>> {
        &self.delivery
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // Closing the queue ends the thread once the bodies in it are done.
        let channels = self.channels();
        channels.jobs = None;
        if let Some(thread) = channels.thread.take() {
            let _ = thread.join();
        }
    }
}
