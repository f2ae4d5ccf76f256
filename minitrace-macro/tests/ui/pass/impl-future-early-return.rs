// A fn returning `impl Future` may `return` its future early.
use std::future::{ready, Future, Ready};

use minitrace::prelude::*;

#[trace]
fn pick(cached: Option<u32>) -> impl Future<Output = u32> {
    if let Some(value) = cached {
        return ready(value);
    }
    ready(0)
}

#[trace]
fn pick_typed(cached: Option<u32>) -> Ready<u32> {
    if let Some(value) = cached {
        return ready(value);
    }
    ready(0)
}

fn main() {
    assert_eq!(futures::executor::block_on(pick(Some(1))), 1);
    assert_eq!(futures::executor::block_on(pick(None)), 0);
    assert_eq!(futures::executor::block_on(pick_typed(Some(2))), 2);
}
