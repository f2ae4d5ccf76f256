//! minitrace's process-wide loss counter (`stats().dropped_by_reporter`)
//! gets exactly the spans this reporter failed to deliver or saw rejected.
//! The only test of this binary, so that nothing else in the process moves
//! the counter.

use minitrace::collector::{stats, Reporter, SpanId, SpanRecord, TraceId};
use minitrace_delivery_testkit::{closed_port, Answer, Server};
use minitrace_otlp::OtlpReporter;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message;

fn records(count: u64) -> Vec<SpanRecord> {
    (1..=count)
        .map(|i| SpanRecord { trace_id: TraceId(3), span_id: SpanId(i), ..SpanRecord::default() })
        .collect()
}

#[test]
fn every_lost_span_is_counted_once_in_minitrace() {
    let before = stats().dropped_by_reporter;
    let partial = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess { rejected_spans: 2, error_message: "old".into() }),
    };
    let server = Server::start(vec![
        Answer::status(400),
        Answer::redirect(302, "http://127.0.0.1:1/"),
        Answer::status(503),
        Answer::status(200),
        Answer::Status(200, vec![("content-type", "application/x-protobuf".into())], partial.encode_to_vec()),
    ]);
    let mut reporter = OtlpReporter::builder().env(|_| None).endpoint(server.url()).build().unwrap();
    let handle = reporter.stats();
    reporter.report(&records(3)); // 400: failed
    reporter.wait_for_delivery();
    reporter.report(&records(4)); // a redirect: failed
    reporter.wait_for_delivery();
    reporter.report(&records(5)); // 503, then accepted on the retry
    reporter.wait_for_delivery();
    reporter.report(&records(6)); // 2 of 6 rejected
    reporter.wait_for_delivery();
    let mut absent =
        OtlpReporter::builder().env(|_| None).endpoint(format!("http://{}", closed_port())).build().unwrap();
    let absent_handle = absent.stats();
    absent.report(&records(7)); // refused: failed
    absent.wait_for_delivery();

    let got = handle.get();
    assert_eq!((got.spans_sent, got.spans_rejected, got.spans_failed), (9, 2, 7), "{got:?}");
    assert_eq!(absent_handle.get().spans_failed, 7);
    assert_eq!(stats().dropped_by_reporter - before, 2 + 7 + 7);
}
