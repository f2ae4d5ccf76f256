//! `#[trace]` and `#[trace_async]` on async fns and fns returning
//! `impl Future`, under a real collector: the names, parents and properties
//! of the spans recorded, on one thread and across a multi-thread runtime.

mod trace_support;

use std::future::Future;
use std::time::Duration;

use futures::executor::block_on;
use minitrace::prelude::*;
use minitrace_macro::trace_async;
use trace_support::traced;

// Pending once (waking itself), on any executor.
use tokio::task::yield_now as yield_once;

#[trace]
fn get(key: &str) -> usize {
    key.len()
}

#[trace]
async fn fetch(key: &str) -> usize {
    yield_once().await;
    get(key)
}

#[trace(name = "request", properties = { "user": "{user}", "keys": "{keys:?}" })]
async fn request(user: u64, keys: Vec<&'static str>) -> usize {
    let mut total = 0;
    for key in keys {
        total += fetch(key).await;
    }
    total
}

#[test]
fn async_fns_nest_across_awaits() {
    let tree = traced(|| assert_eq!(block_on(request(7, vec!["a", "bc"])), 3));
    assert_eq!(
        tree,
        r#"
root []
    request [("user", "7"), ("keys", "[\"a\", \"bc\"]")]
        trace_async::fetch []
            trace_async::get []
        trace_async::fetch []
            trace_async::get []
"#
    );
}

#[trace(short_name = true)]
async fn short() {}

#[trace_async]
async fn seed_default() {}

#[trace_async("seed named")]
async fn seed_named() {}

#[trace_async(name = "seed options", properties = { "n": "{n}" })]
async fn seed_options(n: u32) -> u32 {
    n
}

#[test]
fn names_and_the_trace_async_spelling() {
    let tree = traced(|| {
        block_on(async {
            short().await;
            seed_default().await;
            seed_named().await;
            assert_eq!(seed_options(3).await, 3);
        })
    });
    assert_eq!(
        tree,
        r#"
root []
    seed named []
    seed options [("n", "3")]
    short []
    trace_async::seed_default []
"#
    );
}

#[trace(name = "polled", enter_on_poll = true)]
async fn polled() -> usize {
    yield_once().await;
    yield_once().await;
    get("abc")
}

#[test]
fn enter_on_poll_records_a_local_span_per_poll() {
    let tree = traced(|| assert_eq!(block_on(polled()), 3));
    assert_eq!(
        tree,
        r#"
root []
    polled []
    polled []
    polled []
        trace_async::get []
"#
    );
}

#[trace(name = "prepare", properties = { "n": "{n}" })]
fn prepare(n: usize) -> impl Future<Output = usize> {
    // Runs when `prepare` is called: its span is the local parent.
    let length = get(&"x".repeat(n));
    // Runs when the future is polled: in the span too.
    async move { fetch("ab").await + length }
}

#[trace(name = "cached")]
fn cached(hit: Option<usize>) -> impl Future<Output = usize> {
    if let Some(value) = hit {
        return futures::future::Either::Left(std::future::ready(value));
    }
    futures::future::Either::Right(async { fetch("abc").await })
}

#[test]
fn fns_returning_impl_future_trace_the_future() {
    let tree = traced(|| {
        let future = prepare(4);
        assert_eq!(block_on(future), 6);
        assert_eq!(block_on(cached(Some(1))), 1);
        assert_eq!(block_on(cached(None)), 3);
    });
    assert_eq!(
        tree,
        r#"
root []
    cached []
    cached []
        trace_async::fetch []
            trace_async::get []
    prepare [("n", "4")]
        trace_async::fetch []
            trace_async::get []
        trace_async::get []
"#
    );
}

#[trace(name = "never")]
async fn never() {
    std::future::pending::<()>().await
}

#[test]
fn a_span_ends_when_its_future_is_dropped() {
    let tree = traced(|| assert!(futures::FutureExt::now_or_never(never()).is_none()));
    assert_eq!(
        tree,
        r#"
root []
    never []
"#
    );
}

#[trace(short_name = true, properties = { "i": "{i}" })]
async fn work(i: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(1)).await;
    get("key") as u64 + i
}

#[trace(name = "spawner")]
async fn spawner() -> u64 {
    let tasks: Vec<_> =
        (0..3).map(|i| tokio::spawn(work(i).in_span(Span::enter_with_local_parent("task")))).collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total
}

#[test]
fn spans_follow_futures_across_threads() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let tree = traced(|| assert_eq!(runtime.block_on(spawner()), 12));
    assert_eq!(
        tree,
        r#"
root []
    spawner []
        task []
            work [("i", "0")]
                trace_async::get []
        task []
            work [("i", "1")]
                trace_async::get []
        task []
            work [("i", "2")]
                trace_async::get []
"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_tokio_test() {
    trace_support::reported();
    let context = SpanContext::random();
    let root = Span::root("root", context);
    let total = async { fetch("abcd").await + fetch("e").await }.in_span(root).await;
    assert_eq!(total, 5);
    let tree = minitrace::util::tree::tree_str_from_span_records(trace_support::spans_of(context.trace_id));
    assert_eq!(
        tree,
        r#"
root []
    trace_async::fetch []
        trace_async::get []
    trace_async::fetch []
        trace_async::get []
"#
    );
}
