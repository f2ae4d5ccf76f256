// `#[trace]` on fns returning `impl Future`: the returned future is traced.
use std::future::Future;

use minitrace::prelude::*;

#[trace]
fn later(a: u32) -> impl Future<Output = u32> {
    async move { a + 1 }
}

#[trace(properties = { "a": "{a}" })]
fn later_send(a: u32) -> impl std::future::Future<Output = u32> + Send + 'static {
    let b = a * 2;
    async move { b }
}

#[trace(name = "borrowing")]
fn borrowing<'a>(values: &'a [u32]) -> impl Future<Output = u32> + 'a {
    async move { values.iter().sum() }
}

fn main() {
    assert_eq!(futures::executor::block_on(later(1)), 2);
    assert_eq!(futures::executor::block_on(later_send(2)), 4);
    assert_eq!(futures::executor::block_on(borrowing(&[1, 2, 3])), 6);
}
