//! One request's delivery: the retry policy, the counters and the error log
//! around the tries of a transport.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use minitrace::collector::{count_dropped_by_reporter, SpanId};

use crate::log::ErrorLog;
use crate::stats::Counters;

/// The default shortest time between two lines of a reporter's error log.
///
/// ```
/// assert_eq!(minitrace_delivery::DEFAULT_ERROR_INTERVAL.as_secs(), 10);
/// ```
pub const DEFAULT_ERROR_INTERVAL: Duration = Duration::from_secs(10);

/// What one try of a request came to, as a transport tells it.
///
/// ```
/// use minitrace_delivery::Attempt;
///
/// let busy = Attempt::Retry { error: "HTTP 503".into(), after: None };
/// assert_ne!(busy, Attempt::Failed("HTTP 400".into()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The endpoint took the request; it may have rejected some of its
    /// spans (an OTLP partial success), with a message for people. Never
    /// retried.
    Delivered {
        /// Spans the endpoint rejected.
        rejected: u64,
        /// The endpoint's message, empty when none.
        message: String,
    },
    /// A transient refusal that the OTLP spec says to retry: HTTP 429, 502,
    /// 503, 504, or one of gRPC's retryable codes. Sent again after `after`
    /// (`Retry-After`) or a backoff, if that fits before the report's
    /// deadline.
    Retry {
        /// What the endpoint answered.
        error: String,
        /// How long the endpoint asked to wait, if it did.
        after: Option<Duration>,
    },
    /// The connection closed with no answer (a kept-alive connection that
    /// the endpoint had just closed, most often): sent again at once the
    /// first time, after a backoff later.
    Unanswered(String),
    /// No answer within the time given: not retried, and the endpoint left
    /// alone for a pause (see [`RetryPolicy::pause_after_timeout`]).
    TimedOut(String),
    /// Refused, or the host unknown: nothing to wait for. Not retried, and
    /// the rest of the report is not sent either.
    Unreachable(String),
    /// A failure that a retry would not mend: any other status (400, 413,
    /// 500, a redirect...), a TLS failure. Not retried.
    Failed(String),
}

/// How long [`Delivery`] waits between tries.
///
/// ```
/// let policy = minitrace_delivery::RetryPolicy::default();
/// assert!(policy.initial_backoff < policy.max_backoff);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The first wait before a retry without `Retry-After`; each later one
    /// doubles, up to [`max_backoff`](Self::max_backoff). Every wait is
    /// between half and all of it (jitter), so reporters that failed
    /// together do not retry together.
    pub initial_backoff: Duration,
    /// The longest wait between two tries without `Retry-After`.
    pub max_backoff: Duration,
    /// After a try timed out, how long requests fail without being sent, so
    /// that a dead endpoint does not hold every report for its whole
    /// timeout.
    pub pause_after_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            pause_after_timeout: Duration::from_secs(5),
        }
    }
}

/// The deadline of one report (one call of a reporter's `report`), which
/// none of its requests and retries goes past, and what was learnt on the
/// way: an unreachable endpoint is not tried again within the report.
///
/// ```
/// let report = minitrace_delivery::Report::new(std::time::Duration::from_secs(10));
/// assert!(report.deadline() > std::time::Instant::now());
/// ```
#[derive(Clone, Debug)]
pub struct Report {
    deadline: Instant,
    unreachable: Option<String>,
    /// Tells reports apart on a [`Pipeline`](crate::Pipeline)'s thread.
    id: u64,
}

impl Report {
    /// A report that must be done within `timeout` from now.
    ///
    /// ```
    /// let report = minitrace_delivery::Report::new(std::time::Duration::from_millis(500));
    /// # drop(report);
    /// ```
    pub fn new(timeout: Duration) -> Report {
        let now = Instant::now();
        Report::until(now.checked_add(timeout).unwrap_or(now + Duration::from_secs(86_400)))
    }

    /// A report that must be done by `deadline`.
    pub(crate) fn until(deadline: Instant) -> Report {
        Report { deadline, unreachable: None, id: Report::next_id() }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// When the report's time is up.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let report = minitrace_delivery::Report::new(Duration::from_secs(1));
    /// assert!(report.deadline() <= Instant::now() + Duration::from_secs(1));
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// What became of one request's spans.
///
/// ```
/// use minitrace_delivery::Outcome;
/// assert_ne!(Outcome::Sent { rejected: 0 }, Outcome::Failed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Delivered; `rejected` of its spans were refused by the endpoint.
    Sent {
        /// Spans the endpoint rejected (a partial success).
        rejected: u64,
    },
    /// Not delivered: every span counted failed.
    Failed,
}

/// The delivery of one reporter: tries each request with its transport as
/// the retry policy says, counts what became of every span, and tells of
/// errors in a rate-limited log that never shows a secret.
///
/// ```
/// use std::time::Duration;
/// use minitrace_delivery::{Attempt, Delivery, Outcome, Report};
///
/// let mut delivery = Delivery::new("my-reporter", "http://127.0.0.1:4318/v1/traces");
/// let mut report = Report::new(Duration::from_secs(10));
/// let mut answers = vec![Attempt::Retry { error: "HTTP 503".into(), after: Some(Duration::ZERO) }].into_iter();
/// // The transport: here a script; in a reporter, an HTTP or gRPC client.
/// let outcome = delivery.deliver(&mut report, 3, 120, |_time_left| {
///     answers.next().unwrap_or(Attempt::Delivered { rejected: 0, message: String::new() })
/// });
/// assert_eq!(outcome, Outcome::Sent { rejected: 0 });
/// let stats = delivery.counters().get();
/// assert_eq!((stats.spans_sent, stats.requests, stats.retries), (3, 2, 1));
/// ```
pub struct Delivery {
    target: String,
    counters: Arc<Counters>,
    log: ErrorLog,
    policy: RetryPolicy,
    paused_until: Option<Instant>,
    /// Header values and the like: removed from every message.
    secrets: Vec<String>,
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("target", &self.target)
            .field("stats", &self.counters.get())
            .field("policy", &self.policy)
            .field("paused_until", &self.paused_until)
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// The delivery of the reporter `reporter` (the prefix of its error
    /// log's lines) to `target` (where messages say spans were going; never
    /// a URL with credentials, which [`Endpoint`](crate::Endpoint) refuses).
    ///
    /// ```
    /// let delivery = minitrace_delivery::Delivery::new("minitrace-otlp", "http://127.0.0.1:4318/v1/traces");
    /// # drop(delivery);
    /// ```
    pub fn new(reporter: &'static str, target: impl Into<String>) -> Delivery {
        Delivery {
            target: target.into(),
            counters: Arc::default(),
            log: ErrorLog::new(reporter, DEFAULT_ERROR_INTERVAL),
            policy: RetryPolicy::default(),
            paused_until: None,
            secrets: Vec::new(),
        }
    }

    /// Sets the shortest time between two lines of the error log (default
    /// [`DEFAULT_ERROR_INTERVAL`]).
    ///
    /// ```
    /// let mut delivery = minitrace_delivery::Delivery::new("r", "x");
    /// delivery.set_error_interval(std::time::Duration::from_secs(60));
    /// ```
    pub fn set_error_interval(&mut self, interval: Duration) {
        self.log.set_interval(interval);
    }

    /// Sets the waits between tries.
    ///
    /// ```
    /// let mut policy = minitrace_delivery::RetryPolicy::default();
    /// policy.initial_backoff = std::time::Duration::from_millis(10);
    /// let mut delivery = minitrace_delivery::Delivery::new("r", "x");
    /// delivery.set_policy(policy);
    /// ```
    pub fn set_policy(&mut self, policy: RetryPolicy) {
        self.policy = policy;
    }

    /// Keeps `secret` (a header value, a token) out of every message: where
    /// an endpoint's answer or an error quotes it, or the part after its
    /// first space (the credentials of `Bearer <token>`), `***` is written
    /// instead. Values shorter than 4 characters are not looked for.
    ///
    /// ```
    /// let mut delivery = minitrace_delivery::Delivery::new("r", "x");
    /// delivery.hide("Bearer s3cret");
    /// ```
    pub fn hide(&mut self, secret: &str) {
        let secret = secret.trim();
        // `Bearer <token>`, `Basic <credentials>`: an answer may quote the
        // credentials alone.
        let credentials = secret.split_once(' ').map(|(_scheme, credentials)| credentials.trim());
        for secret in [Some(secret), credentials].into_iter().flatten() {
            // Fewer characters would make messages rows of stars.
            if secret.len() >= 4 && !self.secrets.iter().any(|known| known == secret) {
                self.secrets.push(secret.to_owned());
            }
        }
        // The longest first, so that one secret inside another goes whole.
        self.secrets.sort_by_key(|known| std::cmp::Reverse(known.len()));
    }

    /// The counters, to read from any thread.
    ///
    /// ```
    /// let delivery = minitrace_delivery::Delivery::new("r", "x");
    /// assert_eq!(delivery.counters().get().spans_sent, 0);
    /// ```
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// Writes `message()` to the error log, unless a line was written less
    /// than the interval ago; secrets are removed from it.
    ///
    /// ```
    /// let mut delivery = minitrace_delivery::Delivery::new("r", "x");
    /// delivery.log(|| "a setting was left out".into());
    /// ```
    pub fn log(&mut self, message: impl FnOnce() -> String) {
        let secrets = &self.secrets;
        self.log.log(|| scrub(secrets, message()));
    }

    /// Delivers one request of `spans` spans and a `bytes`-byte body:
    /// `send` makes one try with the time left before the report's
    /// deadline, and says what came of it; it is called again as the
    /// [`Attempt`] and the policy say. Every span ends counted as sent,
    /// rejected or failed, the last two also in minitrace's
    /// [`count_dropped_by_reporter`]; an error is logged and kept as the
    /// last error.
    ///
    /// ```
    /// use std::time::Duration;
    /// use minitrace_delivery::{Attempt, Delivery, Outcome, Report};
    ///
    /// let mut delivery = Delivery::new("r", "x");
    /// let mut report = Report::new(Duration::from_secs(10));
    /// let outcome = delivery.deliver(&mut report, 5, 100, |_| Attempt::Failed("HTTP 400".into()));
    /// assert_eq!(outcome, Outcome::Failed);
    /// assert_eq!(delivery.counters().get().spans_failed, 5);
    /// assert_eq!(delivery.counters().last_error().unwrap(), "5 spans not delivered to x: HTTP 400");
    /// ```
    pub fn deliver(
        &mut self,
        report: &mut Report,
        spans: u64,
        bytes: u64,
        mut send: impl FnMut(Duration) -> Attempt,
    ) -> Outcome {
        if let Some(until) = self.paused_until {
            if Instant::now() < until {
                let pause = self.policy.pause_after_timeout;
                let why = format!("not sent: the endpoint timed out less than {pause:?} ago");
                return self.fail(spans, &why);
            }
            self.paused_until = None;
        }
        if let Some(why) = &report.unreachable {
            let why = format!("not sent: earlier in this report, {why}");
            return self.fail(spans, &why);
        }
        let mut backoff = self.policy.initial_backoff;
        let max_backoff = self.policy.max_backoff;
        let mut tries = 0u32;
        let mut resent = false;
        loop {
            let left = report.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let why = if tries == 0 {
                    "the report's timeout passed before this request could be sent"
                } else {
                    "the report's timeout passed"
                };
                return self.fail(spans, why);
            }
            self.counters.request(tries > 0);
            tries += 1;
            let mut backoff_wait = || {
                let wait = jittered(backoff);
                backoff = (backoff * 2).min(max_backoff);
                wait
            };
            let (error, wait) = match send(left) {
                Attempt::Delivered { rejected, message } => {
                    return self.delivered(spans, rejected, bytes, &message);
                }
                Attempt::Failed(error) => return self.fail(spans, &error),
                Attempt::TimedOut(error) => {
                    self.paused_until = Instant::now().checked_add(self.policy.pause_after_timeout);
                    return self.fail(spans, &error);
                }
                Attempt::Unreachable(error) => {
                    report.unreachable = Some(error.clone());
                    return self.fail(spans, &error);
                }
                Attempt::Retry { error, after } => {
                    let wait = after.unwrap_or_else(&mut backoff_wait);
                    (error, wait)
                }
                Attempt::Unanswered(error) => {
                    let wait = if resent { backoff_wait() } else { Duration::ZERO };
                    resent = true;
                    (error, wait)
                }
            };
            if Instant::now().checked_add(wait).is_none_or(|resume| resume >= report.deadline) {
                let why = format!("{error} (not retried: waiting {wait:?} would pass the report's timeout)");
                return self.fail(spans, &why);
            }
            std::thread::sleep(wait);
        }
    }

    /// Counts `spans` spans failed without a try (e.g. a datagram that could
    /// not be sent), and logs why.
    ///
    /// ```
    /// let mut delivery = minitrace_delivery::Delivery::new("r", "x");
    /// delivery.lost(2, "too large");
    /// assert_eq!(delivery.counters().get().spans_failed, 2);
    /// ```
    pub fn lost(&mut self, spans: u64, why: &str) {
        self.fail(spans, why);
    }

    /// Moves `spans` spans counted sent to failed, and logs why: a UDP
    /// datagram handed to the operating system, which the agent is then
    /// seen to have refused.
    ///
    /// ```
    /// use std::time::Duration;
    /// use minitrace_delivery::{Attempt, Delivery, Report};
    ///
    /// let mut delivery = Delivery::new("r", "x");
    /// let sent = Attempt::Delivered { rejected: 0, message: String::new() };
    /// delivery.deliver(&mut Report::new(Duration::from_secs(1)), 4, 50, |_| sent.clone());
    /// delivery.unsent(4, "the agent refused it");
    /// let stats = delivery.counters().get();
    /// assert_eq!((stats.spans_sent, stats.spans_failed), (0, 4));
    /// ```
    pub fn unsent(&mut self, spans: u64, why: &str) {
        if spans == 0 {
            return;
        }
        self.counters.unsent(spans);
        count_dropped_by_reporter(spans);
        self.report_error(format!("{spans} spans sent to {} were lost: {why}", self.target));
    }

    fn delivered(&mut self, spans: u64, rejected: u64, bytes: u64, message: &str) -> Outcome {
        let rejected = rejected.min(spans);
        self.counters.sent(spans, rejected, bytes);
        if rejected > 0 {
            count_dropped_by_reporter(rejected);
            self.report_error(format!("{} rejected {rejected} of {spans} spans: {message}", self.target));
        } else if !message.is_empty() {
            self.report_error(format!("{} accepted {spans} spans, saying: {message}", self.target));
        }
        Outcome::Sent { rejected }
    }

    fn fail(&mut self, spans: u64, why: &str) -> Outcome {
        self.counters.failed(spans);
        count_dropped_by_reporter(spans);
        self.report_error(format!("{spans} spans not delivered to {}: {why}", self.target));
        Outcome::Failed
    }

    /// Keeps `message` as the last error and logs it, secrets removed,
    /// counting no span: for losses a reporter counts itself.
    ///
    /// ```
    /// let mut delivery = minitrace_delivery::Delivery::new("r", "x");
    /// delivery.report_error("2 spans too large".into());
    /// assert_eq!(delivery.counters().last_error().unwrap(), "2 spans too large");
    /// ```
    pub fn report_error(&mut self, message: String) {
        let message = scrub(&self.secrets, message);
        self.counters.set_last_error(&message);
        self.log.log(|| message);
    }
}

/// `message` with every secret replaced by `***`.
fn scrub(secrets: &[String], mut message: String) -> String {
    for secret in secrets {
        if message.contains(secret.as_str()) {
            message = message.replace(secret.as_str(), "***");
        }
    }
    message
}

/// Between half and all of `backoff`.
fn jittered(backoff: Duration) -> Duration {
    // Any random source will do: minitrace's span ids are random.
    let fraction = (SpanId::random().0 % 1024) as u32;
    backoff / 2 + backoff / 2 * fraction / 1024
}

/// The wait that a `Retry-After` value asks for: seconds, or an HTTP date
/// (a date already past asks for none). `None` if it is neither.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use minitrace_delivery::retry_after;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
/// assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), Some(Duration::from_secs(10)));
/// assert_eq!(retry_after("soon", now), None);
/// ```
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered() -> Attempt {
        Attempt::Delivered { rejected: 0, message: String::new() }
    }

    fn retry(after: Option<Duration>) -> Attempt {
        Attempt::Retry { error: "HTTP 503".into(), after }
    }

    fn fast() -> Delivery {
        let mut delivery = Delivery::new("test", "the endpoint");
        delivery
            .set_policy(RetryPolicy { initial_backoff: Duration::from_millis(4), ..RetryPolicy::default() });
        delivery
    }

    /// Delivers one request of `spans` with the answers of `script` in turn,
    /// and returns them with the number of tries made.
    fn run(delivery: &mut Delivery, timeout: Duration, spans: u64, script: Vec<Attempt>) -> (Outcome, usize) {
        let mut script = script.into_iter();
        let mut tries = 0;
        let outcome = delivery.deliver(&mut Report::new(timeout), spans, 10, |_| {
            tries += 1;
            script.next().expect("a try past the script")
        });
        (outcome, tries)
    }

    #[test]
    fn retryable_answers_are_retried_until_delivered() {
        let mut delivery = fast();
        let script = vec![retry(None), retry(Some(Duration::from_millis(1))), delivered()];
        let (outcome, tries) = run(&mut delivery, Duration::from_secs(30), 3, script);
        assert_eq!((outcome, tries), (Outcome::Sent { rejected: 0 }, 3));
        let stats = delivery.counters().get();
        assert_eq!((stats.spans_sent, stats.spans_failed, stats.requests, stats.retries), (3, 0, 3, 2));
        assert_eq!((stats.messages_sent, stats.bytes_sent), (1, 10));
    }

    #[test]
    fn final_failures_are_tried_once() {
        for attempt in [
            Attempt::Failed("HTTP 400".into()),
            Attempt::TimedOut("timed out".into()),
            Attempt::Unreachable("connection refused".into()),
        ] {
            let mut delivery = fast();
            let (outcome, tries) = run(&mut delivery, Duration::from_secs(30), 4, vec![attempt.clone()]);
            assert_eq!((outcome, tries), (Outcome::Failed, 1), "{attempt:?}");
            let stats = delivery.counters().get();
            assert_eq!((stats.spans_failed, stats.requests, stats.retries), (4, 1, 0), "{attempt:?}");
        }
    }

    #[test]
    fn a_partial_success_is_not_retried_and_its_rejected_spans_are_counted() {
        let mut delivery = fast();
        let partial = Attempt::Delivered { rejected: 3, message: "too old".into() };
        let (outcome, tries) = run(&mut delivery, Duration::from_secs(30), 10, vec![partial]);
        assert_eq!((outcome, tries), (Outcome::Sent { rejected: 3 }, 1));
        let stats = delivery.counters().get();
        assert_eq!((stats.spans_sent, stats.spans_rejected, stats.spans_failed), (7, 3, 0));
        assert_eq!(delivery.counters().last_error().unwrap(), "the endpoint rejected 3 of 10 spans: too old");
        // More rejected than sent: the endpoint is wrong, the counts stay exact.
        let partial = Attempt::Delivered { rejected: 99, message: String::new() };
        run(&mut delivery, Duration::from_secs(30), 2, vec![partial]);
        assert_eq!(delivery.counters().get().spans_rejected, 5);
    }

    #[test]
    fn an_unanswered_request_is_resent_at_once_then_after_a_backoff() {
        let mut delivery = fast();
        let unanswered = || Attempt::Unanswered("closed".into());
        let script = vec![unanswered(), unanswered(), delivered()];
        let (outcome, tries) = run(&mut delivery, Duration::from_secs(30), 1, script);
        assert_eq!((outcome, tries), (Outcome::Sent { rejected: 0 }, 3));
        assert_eq!(delivery.counters().get().retries, 2);
    }

    #[test]
    fn a_wait_past_the_deadline_is_not_made() {
        let mut delivery = fast();
        let start = Instant::now();
        let (outcome, tries) =
            run(&mut delivery, Duration::from_secs(5), 2, vec![retry(Some(Duration::from_secs(3600)))]);
        assert_eq!((outcome, tries), (Outcome::Failed, 1));
        // Not a timing figure: only that the hour was not slept.
        assert!(start.elapsed() < Duration::from_secs(60));
        let error = delivery.counters().last_error().unwrap();
        assert!(error.contains("HTTP 503") && error.contains("not retried"), "{error}");
        // A wait that no clock can add is not made either.
        let (outcome, _) = run(&mut delivery, Duration::from_secs(5), 1, vec![retry(Some(Duration::MAX))]);
        assert_eq!(outcome, Outcome::Failed);
    }

    #[test]
    fn a_spent_deadline_sends_nothing() {
        let mut delivery = fast();
        let (outcome, tries) = run(&mut delivery, Duration::ZERO, 6, Vec::new());
        assert_eq!((outcome, tries), (Outcome::Failed, 0));
        let stats = delivery.counters().get();
        assert_eq!((stats.spans_failed, stats.requests), (6, 0));
    }

    #[test]
    fn an_unreachable_endpoint_fails_the_rest_of_the_report_untried() {
        let mut delivery = fast();
        let mut report = Report::new(Duration::from_secs(30));
        let mut tries = 0;
        for _ in 0..3 {
            delivery.deliver(&mut report, 2, 10, |_| {
                tries += 1;
                Attempt::Unreachable("connection refused".into())
            });
        }
        assert_eq!(tries, 1);
        let stats = delivery.counters().get();
        assert_eq!((stats.spans_failed, stats.requests), (6, 1));
        // The next report tries again.
        let (_, tries) = run(&mut delivery, Duration::from_secs(30), 1, vec![delivered()]);
        assert_eq!(tries, 1);
    }

    #[test]
    fn a_timeout_pauses_the_endpoint() {
        let mut delivery = fast();
        run(&mut delivery, Duration::from_secs(30), 1, vec![Attempt::TimedOut("timed out".into())]);
        // Within the pause: failed untried, in later reports too.
        let (outcome, tries) = run(&mut delivery, Duration::from_secs(30), 2, Vec::new());
        assert_eq!((outcome, tries), (Outcome::Failed, 0));
        assert!(delivery.counters().last_error().unwrap().contains("timed out less than"));
        // Past it: tried again.
        delivery.set_policy(RetryPolicy { pause_after_timeout: Duration::ZERO, ..RetryPolicy::default() });
        delivery.paused_until = Some(Instant::now());
        let (outcome, tries) = run(&mut delivery, Duration::from_secs(30), 1, vec![delivered()]);
        assert_eq!((outcome, tries), (Outcome::Sent { rejected: 0 }, 1));
        let stats = delivery.counters().get();
        assert_eq!((stats.spans_sent, stats.spans_failed, stats.requests), (1, 3, 2));
    }

    #[test]
    fn secrets_are_scrubbed_from_messages() {
        let mut delivery = fast();
        delivery.hide("SECRET-KEY");
        delivery.hide("KEY");
        delivery.hide("Bearer t0ken");
        let echo = Attempt::Failed("HTTP 401: bad key SECRET-KEY, bad token t0ken".into());
        run(&mut delivery, Duration::from_secs(5), 1, vec![echo]);
        let error = delivery.counters().last_error().unwrap();
        assert_eq!(error, "1 spans not delivered to the endpoint: HTTP 401: bad key ***, bad token ***");
    }

    #[test]
    fn jitter_stays_within_half_and_all_of_the_backoff() {
        for _ in 0..100 {
            let wait = jittered(Duration::from_millis(400));
            assert!(wait >= Duration::from_millis(200) && wait <= Duration::from_millis(400), "{wait:?}");
        }
    }

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(retry_after(" 1 ", now), Some(Duration::from_secs(1)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(retry_after(&later, now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(retry_after(&earlier, now), Some(Duration::ZERO));
        for bad in ["", "-1", "1.5", "tomorrow"] {
            assert_eq!(retry_after(bad, now), None, "{bad:?}");
        }
    }
}
