use minitrace::prelude::*;

#[trace(short_name = false, "add")]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
