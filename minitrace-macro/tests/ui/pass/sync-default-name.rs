// `#[trace]` on a sync fn, the span named after the fn's full path.
use minitrace::prelude::*;

#[trace]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[trace]
fn nothing() {}

fn main() {
    assert_eq!(add(1, 2), 3);
    nothing();
}
