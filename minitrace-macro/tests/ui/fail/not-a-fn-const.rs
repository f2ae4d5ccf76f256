use minitrace::prelude::*;

#[trace(name = "limit")]
const LIMIT: u32 = 1;

fn main() {}
