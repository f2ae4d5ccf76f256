use minitrace::prelude::*;

#[trace(enter_on_poll = true)]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
