use minitrace::prelude::*;

#[trace]
pub struct Request {
    id: u64,
}

fn main() {}
