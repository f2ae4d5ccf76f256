//! OpenTelemetry's span fields set on `Span` and `LocalSpan`, read back
//! typed from the reported records.

mod common;

use common::{new_root, trace};
use minitrace::collector::{is_reserved_key, SpanKind, SpanStatus};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

fn named<'a>(records: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    records.iter().find(|record| record.name == name).unwrap_or_else(|| panic!("no span {name}"))
}

#[test]
fn fields_set_on_spans_are_reported_typed() {
    let linked = SpanContext::new(TraceId(42), SpanId(7));
    let (root, trace_id) = new_root("handle");
    let mut root = root.with_kind(SpanKind::Server).with_link(linked).with_tracestate("vendor=opaque");
    root.add_event("accepted", || [("peer", "127.0.0.1")]);
    {
        let _guard = root.set_local_parent();
        let _call = LocalSpan::enter_with_local_parent("call")
            .with_kind(SpanKind::Client)
            .with_status(SpanStatus::Ok)
            .with_link(linked);
        let _plain = LocalSpan::enter_with_local_parent("plain");
    }
    let mut child = Span::enter_with_parent("send", &root).with_kind(SpanKind::Producer);
    child.set_status(SpanStatus::error("first"));
    child.set_status(SpanStatus::error("queue full"));
    drop(child);
    root.set_status(SpanStatus::error("upstream failed"));
    drop(root);

    let records = trace(trace_id);
    let handle = named(&records, "handle");
    assert_eq!(handle.kind(), SpanKind::Server);
    assert_eq!(handle.status(), SpanStatus::error("upstream failed"));
    assert_eq!(handle.links(), vec![linked]);
    assert_eq!(handle.tracestate(), Some("vendor=opaque"));
    assert_eq!(handle.events.len(), 1);
    assert_eq!(handle.events[0].name, "accepted");

    let call = named(&records, "call");
    assert_eq!((call.kind(), call.status(), call.links()), (SpanKind::Client, SpanStatus::Ok, vec![linked]));

    let send = named(&records, "send");
    assert_eq!(send.kind(), SpanKind::Producer);
    assert_eq!(send.status(), SpanStatus::error("queue full"), "the last status set counts");

    // A span that sets none carries nothing for them.
    let plain = named(&records, "plain");
    assert_eq!(
        (plain.kind(), plain.status(), plain.links()),
        (SpanKind::Internal, SpanStatus::Unset, vec![])
    );
    assert!(plain.properties.iter().all(|(key, _)| !is_reserved_key(key)));
}

#[test]
fn fields_on_noop_spans_do_nothing() {
    let mut span = Span::noop().with_kind(SpanKind::Client).with_link(SpanContext::random());
    span.set_status(SpanStatus::error("ignored"));
    span.add_event("ignored", || [("k", "v")]);
    drop(LocalSpan::enter_with_local_parent("no parent").with_status(SpanStatus::Ok));
    assert!(span.elapsed().is_none());
    assert!(SpanContext::from_span(&span).is_none());
    drop(span);
    let spans = common::reported();
    minitrace::flush();
    assert!(spans.lock().iter().all(
        |record| record.name != "no parent" && record.events.iter().all(|event| event.name != "ignored")
    ));
}
