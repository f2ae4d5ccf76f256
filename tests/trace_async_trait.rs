//! `#[trace]` on `#[async_trait]` methods (the `Box::pin(async move { .. })`
//! shape) and on native async fns in traits, under a real collector.

mod trace_support;

use async_trait::async_trait;
use futures::executor::block_on;
use minitrace::prelude::*;
use trace_support::traced;

#[trace]
fn parse(request: &str) -> usize {
    request.len()
}

#[async_trait]
trait Service: Sync {
    async fn call(&self, request: &str) -> usize;

    /// A default method, traced.
    #[trace(short_name = true, properties = { "times": "{times}" })]
    async fn call_many(&self, request: &str, times: usize) -> usize {
        let mut total = 0;
        for _ in 0..times {
            total += self.call(request).await;
        }
        total
    }
}

struct Echo;

#[async_trait]
impl Service for Echo {
    #[trace(properties = { "request": "{request}" })]
    async fn call(&self, request: &str) -> usize {
        parse(request)
    }
}

struct Polled;

#[async_trait]
impl Service for Polled {
    #[trace(name = "Polled::call", enter_on_poll = true)]
    async fn call(&self, request: &str) -> usize {
        futures::future::ready(()).await;
        parse(request)
    }
}

#[test]
fn async_trait_methods() {
    let tree = traced(|| {
        assert_eq!(block_on(Echo.call("ab")), 2);
        assert_eq!(block_on(Echo.call_many("abc", 2)), 6);
        assert_eq!(block_on(Polled.call("a")), 1);
    });
    let echo_call = "<trace_async_trait::Echo as trace_async_trait::Service>::call";
    assert_eq!(
        tree,
        format!(
            r#"
root []
    {echo_call} [("request", "ab")]
        trace_async_trait::parse []
    Polled::call []
        trace_async_trait::parse []
    call_many [("times", "2")]
        {echo_call} [("request", "abc")]
            trace_async_trait::parse []
        {echo_call} [("request", "abc")]
            trace_async_trait::parse []
"#
        )
    );
}

#[test]
fn through_a_trait_object() {
    let services: Vec<Box<dyn Service>> = vec![Box::new(Echo), Box::new(Polled)];
    let tree = traced(|| {
        for service in &services {
            assert_eq!(block_on(service.call("abcd")), 4);
        }
    });
    assert_eq!(
        tree,
        r#"
root []
    <trace_async_trait::Echo as trace_async_trait::Service>::call [("request", "abcd")]
        trace_async_trait::parse []
    Polled::call []
        trace_async_trait::parse []
"#
    );
}

#[async_trait(?Send)]
trait LocalService {
    async fn run(&self, mut value: u64) -> u64;
}

#[async_trait(?Send)]
impl LocalService for Echo {
    #[trace(name = "local run", properties = { "value": "{value}" })]
    async fn run(&self, mut value: u64) -> u64 {
        value += parse("xy") as u64;
        value
    }
}

trait Native {
    async fn get(&self, key: &str) -> usize;

    #[trace(name = "Native::get_both")]
    async fn get_both(&self, a: &str, b: &str) -> usize {
        self.get(a).await + self.get(b).await
    }
}

impl Native for Echo {
    #[trace(short_name = true)]
    async fn get(&self, key: &str) -> usize {
        parse(key)
    }
}

#[test]
fn non_send_async_trait_and_native_async_fns_in_traits() {
    let tree = traced(|| {
        assert_eq!(block_on(Echo.run(1)), 3);
        assert_eq!(block_on(Echo.get_both("a", "bc")), 3);
    });
    assert_eq!(
        tree,
        r#"
root []
    Native::get_both []
        get []
            trace_async_trait::parse []
        get []
            trace_async_trait::parse []
    local run [("value", "1")]
        trace_async_trait::parse []
"#
    );
}

#[test]
fn on_a_tokio_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let tree = traced(|| {
        let span = Span::enter_with_local_parent("spawned");
        let task = runtime.spawn(async { Echo.call_many("a", 3).await }.in_span(span));
        assert_eq!(runtime.block_on(task).unwrap(), 3);
    });
    let echo_call = "<trace_async_trait::Echo as trace_async_trait::Service>::call";
    assert_eq!(
        tree,
        format!(
            r#"
root []
    spawned []
        call_many [("times", "3")]
            {echo_call} [("request", "a")]
                trace_async_trait::parse []
            {echo_call} [("request", "a")]
                trace_async_trait::parse []
            {echo_call} [("request", "a")]
                trace_async_trait::parse []
"#
        )
    );
}
