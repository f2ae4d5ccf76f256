//! No allocation per span on the export path: a counting global allocator
//! over 100 000 spans, encoded alone and then reported through the sender
//! thread to a receiver on 127.0.0.1 (minitrace-delivery-testkit's
//! `allocations`, shared with minitrace-otlp's).

use minitrace::collector::SpanRecord;
use minitrace_delivery_testkit::allocations::{check_no_allocation_per_span, receiver, Counting, Exporter};
use minitrace_jaeger::JaegerReporter;

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Jaeger(JaegerReporter);

impl minitrace::collector::Reporter for Jaeger {
    fn report(&mut self, spans: &[SpanRecord]) {
        self.0.report(spans);
    }

    fn wait_for_delivery(&mut self) {
        self.0.wait_for_delivery();
    }
}

impl Exporter for Jaeger {
    fn encode_each(&mut self, spans: &[SpanRecord], each: &mut dyn FnMut(&[u8])) {
        self.0.encode_each(spans, |body, _| each(body));
    }

    fn sent(&self) -> (u64, u64) {
        let stats = self.0.stats().get();
        (stats.spans_sent, stats.messages_sent)
    }
}

#[test]
fn no_allocation_per_span() {
    let port = receiver(b"HTTP/1.1 202 Accepted");
    let reporter = JaegerReporter::http(format!("127.0.0.1:{port}").parse().unwrap(), "allocations");
    check_no_allocation_per_span(&mut Jaeger(reporter));
}
