use minitrace::prelude::*;

#[trace(properties = { "x": "{a}", "x": "{b}" })]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
