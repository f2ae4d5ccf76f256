// `#[trace("name")]`: the name as the first argument, alone or before options.
use minitrace::prelude::*;

#[trace("add")]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[trace("mul", properties = { "a": "{a}" })]
fn mul(a: u32, b: u32) -> u32 {
    a * b
}

#[trace("sub")]
async fn sub(a: u32, b: u32) -> u32 {
    a - b
}

fn main() {
    assert_eq!(add(1, 2), 3);
    assert_eq!(mul(2, 3), 6);
    assert_eq!(futures::executor::block_on(sub(3, 2)), 1);
}
