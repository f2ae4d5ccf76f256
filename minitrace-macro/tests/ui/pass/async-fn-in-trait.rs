// `#[trace]` on native `async fn`s in traits (default bodies) and impls.
use minitrace::prelude::*;

trait Store {
    async fn get(&self, key: &str) -> usize;

    #[trace(short_name = true)]
    async fn get_both(&self, a: &str, b: &str) -> usize {
        self.get(a).await + self.get(b).await
    }
}

struct Memory;

impl Store for Memory {
    #[trace(properties = { "key": "{key}" })]
    async fn get(&self, key: &str) -> usize {
        key.len()
    }
}

fn main() {
    assert_eq!(futures::executor::block_on(Memory.get_both("a", "bc")), 3);
}
