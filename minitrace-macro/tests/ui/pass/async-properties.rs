// Properties on an async fn, formatted from its arguments.
use minitrace::prelude::*;

#[trace(properties = { "user": "{user}", "query": "{query:?}", "kind": "read" })]
async fn lookup(user: u64, query: String) -> usize {
    query.len() + user as usize
}

fn main() {
    assert_eq!(futures::executor::block_on(lookup(1, "ab".to_string())), 3);
}
