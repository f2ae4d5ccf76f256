// `short_name = false` is the default, so it may go with a name;
// `enter_on_poll = false` is the default, so it may go with a sync fn and
// with properties.
use minitrace::prelude::*;

#[trace(name = "add", short_name = false)]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[trace(enter_on_poll = false, properties = { "a": "{a}" })]
fn sub(a: u32, b: u32) -> u32 {
    a - b
}

#[trace(short_name = false, enter_on_poll = false)]
async fn mul(a: u32, b: u32) -> u32 {
    a * b
}

fn main() {
    assert_eq!(add(1, 2), 3);
    assert_eq!(sub(3, 2), 1);
    assert_eq!(futures::executor::block_on(mul(2, 3)), 6);
}
