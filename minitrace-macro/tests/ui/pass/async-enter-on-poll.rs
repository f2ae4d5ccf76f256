// `enter_on_poll = true`: a local span around each poll.
use minitrace::prelude::*;

#[trace(enter_on_poll = true)]
async fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[trace(name = "polled", enter_on_poll = true)]
async fn polled() -> u32 {
    add(1, 2).await
}

#[trace(short_name = true, enter_on_poll = true)]
fn later(a: u32) -> impl std::future::Future<Output = u32> {
    async move { a }
}

fn main() {
    assert_eq!(futures::executor::block_on(polled()), 3);
    assert_eq!(futures::executor::block_on(later(4)), 4);
}
