// `short_name = true`: the fn's name without its path.
use minitrace::prelude::*;

#[trace(short_name = true)]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[trace(short_name = true)]
async fn add_async(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {
    assert_eq!(add(1, 2), 3);
    assert_eq!(futures::executor::block_on(add_async(1, 2)), 3);
}
