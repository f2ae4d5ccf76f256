use minitrace::prelude::*;

#[trace("add", short_name = true)]
async fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
