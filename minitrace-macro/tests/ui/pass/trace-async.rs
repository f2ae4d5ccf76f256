// `#[trace_async]` and `#[trace_async("name")]`: `#[trace]` for async fns,
// with the same options.
use minitrace_macro::trace_async;

#[trace_async]
async fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[trace_async("mul")]
async fn mul(a: u32, b: u32) -> u32 {
    a * b
}

#[trace_async(name = "sub", properties = { "a": "{a}" })]
async fn sub(a: u32, b: u32) -> u32 {
    a - b
}

#[trace_async(enter_on_poll = true)]
async fn div(a: u32, b: u32) -> u32 {
    a / b
}

#[trace_async(short_name = true)]
fn later(a: u32) -> impl std::future::Future<Output = u32> {
    async move { a }
}

fn main() {
    futures::executor::block_on(async {
        assert_eq!(add(1, 2).await, 3);
        assert_eq!(mul(2, 3).await, 6);
        assert_eq!(sub(3, 2).await, 1);
        assert_eq!(div(6, 2).await, 3);
        assert_eq!(later(4).await, 4);
    });
}
