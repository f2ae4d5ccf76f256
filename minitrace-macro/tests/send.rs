//! `#[trace]` keeps an async fn's future `Send` when its body's future is:
//! the span the expansion holds across the body's `.await`s is `Send`. (The
//! converse, that a body that is not `Send` still makes a future that is not,
//! is `ui/fail/async-body-not-send.rs`.)

use std::future::Future;

use async_trait::async_trait;
use minitrace::prelude::*;

/// The static assertion: this compiles only for `Send` futures.
fn assert_send<T: Send>(value: T) -> T {
    value
}

// Pending once (waking itself), on any executor.
use tokio::task::yield_now as yield_once;

#[trace]
async fn plain(value: u64) -> u64 {
    // A `Send` value that owns memory, held across an `.await`.
    let held = String::from("held");
    yield_once().await;
    value + held.len() as u64 - 4
}

#[trace(name = "with properties", properties = { "value": "{value}", "text": "{text:?}" })]
async fn with_properties(value: u64, text: String) -> usize {
    yield_once().await;
    text.len() + plain(value).await as usize
}

#[trace(enter_on_poll = true)]
async fn polled(value: u64) -> u64 {
    yield_once().await;
    value
}

#[trace]
async fn generic<T: Send + Clone>(value: T) -> T {
    yield_once().await;
    value.clone()
}

#[trace(short_name = true)]
fn returns_future(value: u64) -> impl Future<Output = u64> + Send {
    async move {
        yield_once().await;
        value
    }
}

struct Service;

impl Service {
    #[trace]
    async fn call(&self, value: u64) -> u64 {
        yield_once().await;
        value
    }
}

#[async_trait]
trait Handler {
    async fn handle(&self, value: u64) -> u64;
}

#[async_trait]
impl Handler for Service {
    #[trace(properties = { "value": "{value}" })]
    async fn handle(&self, value: u64) -> u64 {
        yield_once().await;
        value
    }
}

#[test]
fn traced_async_fns_are_send() {
    let root = Span::root("root", SpanContext::random());
    let _guard = root.set_local_parent();

    let futures = (
        assert_send(plain(1)),
        assert_send(with_properties(2, "ab".into())),
        assert_send(polled(3)),
        assert_send(generic(4u64)),
        assert_send(returns_future(5)),
        assert_send(Service.call(6)),
        assert_send(Service.handle(7)),
    );

    // And they can be moved to another thread and run there.
    let results = std::thread::spawn(move || {
        futures::executor::block_on(async move {
            let (a, b, c, d, e, f, g) = futures;
            [a.await, b.await as u64, c.await, d.await, e.await, f.await, g.await]
        })
    })
    .join()
    .unwrap();
    assert_eq!(results, [1, 4, 3, 4, 5, 6, 7]);
}
