// `#[trace]` keeps an async fn's future `Send` only when its body is: a
// body holding an `Rc` across an `.await` is not `Send`, traced or not.
use std::rc::Rc;

use minitrace::prelude::*;

#[trace]
async fn not_send() -> u32 {
    let shared = Rc::new(1);
    std::future::ready(()).await;
    *shared
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    assert_send(not_send());
}
