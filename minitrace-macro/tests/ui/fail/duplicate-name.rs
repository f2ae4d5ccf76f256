use minitrace::prelude::*;

#[trace("add", name = "plus")]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
