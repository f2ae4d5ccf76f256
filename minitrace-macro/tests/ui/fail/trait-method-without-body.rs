use minitrace::prelude::*;

trait Service {
    #[trace]
    fn call(&self, request: u64) -> u64;
}

fn main() {}
