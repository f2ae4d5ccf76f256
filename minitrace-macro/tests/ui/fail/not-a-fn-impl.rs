use minitrace::prelude::*;

struct Request;

#[trace]
impl Request {
    fn id(&self) -> u64 {
        1
    }
}

fn main() {}
