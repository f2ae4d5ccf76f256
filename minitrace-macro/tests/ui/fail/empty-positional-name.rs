use minitrace_macro::trace_async;

#[trace_async("")]
async fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
