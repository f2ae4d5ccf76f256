// `#[trace]` on `#[async_trait]` methods, in an impl and as a trait's default
// method, with every option.
use async_trait::async_trait;
use minitrace::prelude::*;

#[async_trait]
trait Service {
    async fn call(&self, request: u64) -> u64;

    #[trace(short_name = true)]
    async fn call_twice(&self, request: u64) -> u64 {
        self.call(request).await + self.call(request).await
    }
}

struct Echo;

#[async_trait]
impl Service for Echo {
    #[trace(name = "Echo::call", properties = { "request": "{request}" })]
    async fn call(&self, request: u64) -> u64 {
        request
    }
}

struct Polled;

#[async_trait]
impl Service for Polled {
    #[trace(enter_on_poll = true)]
    async fn call(&self, request: u64) -> u64 {
        request
    }
}

#[async_trait(?Send)]
trait Local {
    async fn run(&self, mut value: u64) -> u64;
}

#[async_trait(?Send)]
impl Local for Echo {
    #[trace]
    async fn run(&self, mut value: u64) -> u64 {
        value += 1;
        value
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(Echo.call_twice(2).await, 4);
    assert_eq!(Polled.call(3).await, 3);
    assert_eq!(Echo.run(1).await, 2);
    let boxed: Box<dyn Service> = Box::new(Echo);
    assert_eq!(boxed.call(5).await, 5);
}
