// The expansion's own locals do not clash with the body's.
use minitrace::prelude::*;

#[trace]
fn sync_fn(__minitrace_guard: u32) -> u32 {
    let __minitrace_span = 1;
    __minitrace_guard + __minitrace_span
}

#[trace]
async fn async_fn(__minitrace_span: u32) -> u32 {
    __minitrace_span
}

#[trace]
fn impl_future(__minitrace_future: u32) -> impl std::future::Future<Output = u32> {
    async move { __minitrace_future }
}

fn main() {
    assert_eq!(sync_fn(1), 2);
    assert_eq!(futures::executor::block_on(async_fn(2)), 2);
    assert_eq!(futures::executor::block_on(impl_future(3)), 3);
}
