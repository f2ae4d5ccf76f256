use minitrace::prelude::*;

#[trace(short_name = true, properties = {}, short_name = false)]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
