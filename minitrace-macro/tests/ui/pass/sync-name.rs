// `name = ".."` sets the span name.
use minitrace::prelude::*;

#[trace(name = "add numbers")]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {
    assert_eq!(add(1, 2), 3);
}
