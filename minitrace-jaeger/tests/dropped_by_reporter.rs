//! minitrace's process-wide loss counter (`stats().dropped_by_reporter`)
//! gets exactly the spans this reporter lost. The only test of this binary,
//! so that nothing else in the process moves the counter.

use std::time::Duration;

use minitrace::collector::{stats, Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{closed_port, Answer, Server};
use minitrace_jaeger::JaegerReporter;

fn records(count: u64) -> Vec<SpanRecord> {
    (1..=count)
        .map(|i| SpanRecord {
            trace_id: TraceId(3),
            span_id: SpanId(i),
            name: "span".into(),
            ..SpanRecord::default()
        })
        .collect()
}

#[test]
fn every_lost_span_is_counted_once_in_minitrace() {
    let before = stats().dropped_by_reporter;
    let server = Server::start(vec![
        Answer::status(400),
        Answer::redirect(302, "http://127.0.0.1:1/"),
        Answer::status(503),
    ]);
    let mut reporter = JaegerReporter::http(server.addr(), "counted").with_timeout(Duration::from_secs(20));
    let handle = reporter.stats();
    reporter.report(&records(3)); // 400: failed
    reporter.wait_for_delivery();
    reporter.report(&records(4)); // a redirect: failed
    reporter.wait_for_delivery();
    reporter.report(&records(5)); // 503, then accepted on the retry
    reporter.wait_for_delivery();
    let mut too_small = reporter.with_max_message_size(150);
    too_small.report(&records(2)); // too large even bare
    too_small.wait_for_delivery();
    let mut absent = JaegerReporter::http(closed_port(), "counted");
    let absent_handle = absent.stats();
    absent.report(&records(6)); // refused: failed
    absent.wait_for_delivery();

    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_failed, got.spans_too_large), (5, 7, 2), "{got:?}");
    assert_eq!(absent_handle.get().spans_failed, 6);
    assert_eq!(stats().dropped_by_reporter - before, 7 + 2 + 6);
}
