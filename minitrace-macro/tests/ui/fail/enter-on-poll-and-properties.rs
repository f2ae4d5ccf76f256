use minitrace::prelude::*;

#[trace(properties = { "a": "{a}" }, enter_on_poll = true)]
async fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
