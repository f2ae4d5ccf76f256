//! The `futures` feature's adapters: a stream or sink traced like a future
//! (`future::StreamExt`, `future::SinkExt`).

#![cfg(feature = "futures")]

mod common;

use std::pin::pin;
use std::sync::mpsc;
use std::task::{Context, Poll};

use common::{new_root, trace};
use futures::executor::block_on;
use futures::stream::{self, StreamExt as _};
use futures::task::noop_waker_ref;
use futures::{Sink, SinkExt as _, Stream};
use minitrace::future::{SinkExt, StreamExt};
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

fn named<'a>(records: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    records
        .iter()
        .find(|record| record.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {records:#?}"))
}

fn end(record: &SpanRecord) -> u64 {
    record.begin_time_unix_ns + record.duration_ns
}

/// Yields `0..items`, pending once before each item, with a local span
/// around the making of each item.
fn slow_numbers(items: u32) -> impl Stream<Item = u32> {
    let mut next = 0;
    let mut ready = false;
    stream::poll_fn(move |cx| {
        if next == items {
            return Poll::Ready(None);
        }
        if !ready {
            let _waiting = LocalSpan::enter_with_local_parent("waiting");
            ready = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let _making = LocalSpan::enter_with_local_parent(format!("item {next}"));
        ready = false;
        next += 1;
        Poll::Ready(Some(next - 1))
    })
}

#[test]
fn a_stream_in_span_parents_every_poll_and_ends_with_the_stream() {
    let (root, trace_id) = new_root("request");
    let rows = slow_numbers(3).in_span(Span::enter_with_parent("rows", &root));
    assert_eq!(block_on(rows.collect::<Vec<_>>()), [0, 1, 2]);
    drop(root);

    let records = trace(trace_id);
    let rows = named(&records, "rows");
    assert_eq!(rows.parent_id, named(&records, "request").span_id);
    for item in ["item 0", "item 1", "item 2"] {
        assert_eq!(named(&records, item).parent_id, rows.span_id, "{item}");
    }
    let waits: Vec<_> = records.iter().filter(|record| record.name == "waiting").collect();
    assert_eq!(waits.len(), 3, "one pending poll before each item");
    assert!(waits.iter().all(|wait| wait.parent_id == rows.span_id));
    assert!(end(rows) >= end(named(&records, "item 2")), "the span lasts until the stream ends");
}

#[test]
fn a_pending_poll_sends_its_spans_before_the_stream_moves_on() {
    // The root starts on one thread, which polls the stream once (pending)
    // and stays alive, idle; another thread finishes the stream, and with
    // it the root. The first poll's spans must not wait on the first
    // thread for the root's end, which happens elsewhere.
    let (handed, received) = mpsc::channel();
    let (done, release) = mpsc::channel::<()>();
    let first = std::thread::spawn(move || {
        let (root, trace_id) = new_root("stream root");
        let mut stream = Box::pin(slow_numbers(1).in_span(root));
        let mut cx = Context::from_waker(noop_waker_ref());
        assert!(stream.as_mut().poll_next(&mut cx).is_pending());
        handed.send((stream, trace_id)).unwrap();
        release.recv().unwrap();
    });
    let (mut stream, trace_id) = received.recv().unwrap();
    let second = std::thread::spawn(move || {
        let mut cx = Context::from_waker(noop_waker_ref());
        assert_eq!(stream.as_mut().poll_next(&mut cx), Poll::Ready(Some(0)));
        assert_eq!(stream.as_mut().poll_next(&mut cx), Poll::Ready(None));
    });
    second.join().unwrap();

    let records = trace(trace_id);
    let root = named(&records, "stream root");
    assert_eq!(named(&records, "waiting").parent_id, root.span_id, "the first thread's poll: {records:#?}");
    assert_eq!(named(&records, "item 0").parent_id, root.span_id);
    done.send(()).unwrap();
    first.join().unwrap();
}

#[test]
fn a_dropped_stream_ends_its_span() {
    let (root, trace_id) = new_root("request");
    let mut rows = Box::pin(slow_numbers(3).in_span(Span::enter_with_parent("rows", &root)));
    assert_eq!(block_on(rows.next()), Some(0));
    drop(rows);
    drop(root);

    let records = trace(trace_id);
    let rows = named(&records, "rows");
    assert_eq!(named(&records, "item 0").parent_id, rows.span_id);
    assert!(records.iter().all(|record| record.name != "item 1"), "never made");
}

#[test]
fn enter_on_poll_records_a_span_per_poll_of_a_stream() {
    let (root, trace_id) = new_root("request");
    {
        let _guard = root.set_local_parent();
        let numbers = stream::iter([1, 2]).enter_on_poll("next");
        assert_eq!(block_on(numbers.collect::<Vec<_>>()), [1, 2]);
    }
    drop(root);

    let records = trace(trace_id);
    let root = named(&records, "request");
    let polls: Vec<_> = records.iter().filter(|record| record.name == "next").collect();
    assert_eq!(polls.len(), 3, "two items and the end");
    assert!(polls.iter().all(|poll| poll.parent_id == root.span_id));
}

/// A sink of numbers that records a local span for each one it takes.
fn recording_sink() -> impl Sink<u32, Error = std::convert::Infallible> {
    futures::sink::drain().with(|number: u32| {
        let _taking = LocalSpan::enter_with_local_parent(format!("take {number}"));
        std::future::ready(Ok::<_, std::convert::Infallible>(number))
    })
}

#[test]
fn a_sink_in_span_parents_every_call_and_ends_when_closed() {
    let (root, trace_id) = new_root("request");
    let mut sink = pin!(recording_sink().in_span(Span::enter_with_parent("write", &root)));
    block_on(async {
        sink.send(1).await.unwrap();
        sink.send(2).await.unwrap();
        sink.close().await.unwrap();
    });
    // Closed: the span has ended though the sink is still alive.
    drop(root);

    let records = trace(trace_id);
    let write = named(&records, "write");
    assert_eq!(write.parent_id, named(&records, "request").span_id);
    for take in ["take 1", "take 2"] {
        assert_eq!(named(&records, take).parent_id, write.span_id, "{take}");
    }
    assert!(end(write) >= end(named(&records, "take 2")));
    assert!(end(write) <= end(named(&records, "request")));
    // `sink` lives on to here: closing, not dropping, ended its span.
}

#[test]
fn enter_on_poll_records_a_span_per_call_of_a_sink() {
    let (root, trace_id) = new_root("request");
    {
        let _guard = root.set_local_parent();
        let mut sink = pin!(futures::sink::drain::<u32>().enter_on_poll("write"));
        block_on(async {
            sink.send(1).await.unwrap();
            sink.close().await.unwrap();
        });
    }
    drop(root);

    let records = trace(trace_id);
    let root = named(&records, "request");
    let calls: Vec<_> = records.iter().filter(|record| record.name == "write").collect();
    // `send`: poll_ready, start_send, poll_flush; then poll_close.
    assert_eq!(calls.len(), 4, "{records:#?}");
    assert!(calls.iter().all(|call| call.parent_id == root.span_id));
}
