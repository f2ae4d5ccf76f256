// `impl Trait` return types that are not futures: the sync expansion.
use std::fmt::Display;

use minitrace::prelude::*;

#[trace]
fn evens(limit: u32) -> impl Iterator<Item = u32> {
    (0..limit).filter(|n| n % 2 == 0)
}

#[trace]
fn shown(value: u32) -> impl Display + Clone {
    value
}

#[trace]
async fn shown_async(value: u32) -> impl Display {
    value
}

#[trace]
fn adder(by: u32) -> impl Fn(u32) -> u32 {
    move |n| n + by
}

fn main() {
    assert_eq!(evens(5).collect::<Vec<_>>(), [0, 2, 4]);
    assert_eq!(shown(1).to_string(), "1");
    assert_eq!(futures::executor::block_on(shown_async(2)).to_string(), "2");
    assert_eq!(adder(1)(2), 3);
}
