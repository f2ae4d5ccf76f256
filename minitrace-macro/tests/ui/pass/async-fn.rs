// `#[trace]` on an async fn.
use minitrace::prelude::*;

#[trace]
async fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[trace(name = "nested")]
async fn nested() -> u32 {
    add(1, 2).await + add(3, 4).await
}

fn main() {
    assert_eq!(futures::executor::block_on(nested()), 10);
}
