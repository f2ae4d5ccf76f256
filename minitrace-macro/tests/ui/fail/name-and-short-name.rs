use minitrace::prelude::*;

#[trace(name = "add", short_name = true)]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
