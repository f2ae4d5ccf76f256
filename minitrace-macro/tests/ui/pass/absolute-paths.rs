// The expansion needs no imports and is not confused by local items named
// like the ones it uses.
#![allow(dead_code, unused_macros)]

mod std {}
mod core {}
struct Span;
struct LocalSpan;
struct Cow;
trait FutureExt {}
macro_rules! format {
    ($($t:tt)*) => {
        compile_error!("the expansion must use ::std::format!")
    };
}
macro_rules! full_name {
    () => {
        compile_error!("the expansion must use ::minitrace::full_name!")
    };
}

#[minitrace::trace(properties = { "a": "{a}" })]
fn sync_fn(a: u32) -> u32 {
    a
}

#[minitrace::trace(properties = { "a": "{a}" })]
async fn async_fn(a: u32) -> u32 {
    a
}

#[minitrace::trace]
fn impl_future(a: u32) -> impl ::std::future::Future<Output = u32> {
    async move { a }
}

#[minitrace::trace(short_name = true, enter_on_poll = true)]
async fn polled(a: u32) -> u32 {
    a
}

fn main() {
    assert_eq!(sync_fn(1), 1);
    assert_eq!(futures::executor::block_on(async_fn(2)), 2);
    assert_eq!(futures::executor::block_on(impl_future(3)), 3);
    assert_eq!(futures::executor::block_on(polled(4)), 4);
}
