//! One request's delivery: send, and on a retryable answer wait (the
//! server's `Retry-After`, else an exponential backoff with jitter) and
//! send again, all before the report's deadline.

use std::time::{Duration, Instant};

use minitrace::collector::SpanId;

use crate::stats::Counters;

/// The first wait before a retry without `Retry-After`.
const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two tries without `Retry-After`.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What one try of a request came to.
#[derive(Debug, PartialEq)]
pub(crate) enum Attempt {
    /// The server took the request; it may have rejected some spans (an
    /// OTLP partial success), with a message for people.
    Delivered {
        /// Spans the server rejected.
        rejected: u64,
        /// The server's message, empty when none.
        message: String,
    },
    /// A transient failure the OTLP spec says to retry, with how long the
    /// server asked to wait, if it did.
    Retry {
        /// What went wrong.
        error: String,
        /// `Retry-After`, or gRPC's equivalent.
        after: Option<Duration>,
    },
    /// A failure that retrying would not mend.
    Failed(String),
}

/// Tries a request with `send` (given the time left) until it is
/// delivered, fails for good, or no retry fits before `deadline`. Returns
/// the spans rejected and the server's message, or the last error.
pub(crate) fn deliver(
    deadline: Instant,
    counters: &Counters,
    mut send: impl FnMut(Duration) -> Attempt,
) -> Result<(u64, String), String> {
    let mut backoff = INITIAL_BACKOFF;
    let mut tries = 0u64;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(if tries == 0 {
                "the report's timeout passed before this request could be sent".to_owned()
            } else {
                "the report's timeout passed".to_owned()
            });
        }
        Counters::add(&counters.requests, 1);
        if tries > 0 {
            Counters::add(&counters.retries, 1);
        }
        tries += 1;
        let (error, after) = match send(left) {
            Attempt::Delivered { rejected, message } => return Ok((rejected, message)),
            Attempt::Failed(error) => return Err(error),
            Attempt::Retry { error, after } => (error, after),
        };
        let wait = after.unwrap_or_else(|| jittered(backoff));
        backoff = (backoff * 2).min(MAX_BACKOFF);
        if Instant::now() + wait >= deadline {
            return Err(format!("{error} (no retry: waiting {wait:?} would pass the report's timeout)"));
        }
        std::thread::sleep(wait);
    }
}

/// Between half and all of `backoff`, so that many reporters that failed
/// together do not retry together.
fn jittered(backoff: Duration) -> Duration {
    // Any random source will do: minitrace's span ids are random.
    let fraction = (SpanId::random().0 % 1024) as u32;
    backoff / 2 + backoff / 2 * fraction / 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry(after: Option<Duration>) -> Attempt {
        Attempt::Retry { error: "503".into(), after }
    }

    #[test]
    fn retries_until_delivered_and_counts() {
        let counters = Counters::default();
        let mut answers = vec![retry(None), retry(Some(Duration::from_millis(1)))].into_iter();
        let result = deliver(Instant::now() + Duration::from_secs(30), &counters, |_| {
            answers.next().unwrap_or(Attempt::Delivered { rejected: 2, message: "half".into() })
        });
        assert_eq!(result, Ok((2, "half".into())));
        assert_eq!(counters.requests.load(std::sync::atomic::Ordering::Relaxed), 3);
        assert_eq!(counters.retries.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    #[test]
    fn a_retry_after_past_the_deadline_is_not_waited_for() {
        let counters = Counters::default();
        let start = Instant::now();
        let result =
            deliver(start + Duration::from_secs(5), &counters, |_| retry(Some(Duration::from_secs(3600))));
        assert!(result.unwrap_err().contains("no retry"));
        // Not a timing figure: only that the hour was not slept.
        assert!(start.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn a_failure_is_not_retried_and_a_spent_deadline_sends_nothing() {
        let counters = Counters::default();
        let mut tries = 0;
        let result = deliver(Instant::now() + Duration::from_secs(5), &counters, |_| {
            tries += 1;
            Attempt::Failed("400".into())
        });
        assert_eq!((result, tries), (Err("400".into()), 1));
        let result = deliver(Instant::now(), &counters, |_| unreachable!());
        assert!(result.is_err());
    }

    #[test]
    fn jitter_stays_within_half_and_all_of_the_backoff() {
        for _ in 0..100 {
            let wait = jittered(Duration::from_millis(400));
            assert!(wait >= Duration::from_millis(200) && wait <= Duration::from_millis(400), "{wait:?}");
        }
    }
}
