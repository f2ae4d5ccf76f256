use minitrace::prelude::*;

#[trace(properties = ["a", "{a}"])]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
