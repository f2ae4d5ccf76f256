//! Tracing async code on a multi-threaded tokio runtime: `in_span` binds a
//! span to a future, `#[trace]` does it for an `async fn`, and
//! `enter_on_poll` records each poll of a future.
//!
//! `cargo run --release --example asynchronous`
//!
//! A task may move between worker threads at every `.await`. A thread's
//! local parent cannot follow it, so an async span travels *with the
//! future* instead: it is the local parent whenever the future is polled,
//! on whichever thread that happens.

mod support;

use std::time::Duration;

use minitrace::collector::Config;
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

/// `#[trace]` on an `async fn`: one span from the first poll until the body
/// completes, across every `.await`, named `fetch_user` and carrying the
/// argument as a property.
#[trace(short_name = true, properties = { "user": "{user}" })]
async fn fetch_user(user: u64) -> String {
    let profile = query_database(user).await;
    // Sync code called from async code: the `#[trace]` local span is a
    // child of `fetch_user`, the local parent while this future is polled.
    render(&profile)
}

#[trace(short_name = true)]
async fn query_database(user: u64) -> String {
    tokio::time::sleep(Duration::from_millis(2)).await;
    format!("user {user}")
}

#[trace(short_name = true)]
fn render(profile: &str) -> String {
    profile.to_uppercase()
}

/// `enter_on_poll = true`: instead of one span for the whole call, a local
/// span around each poll, to see when the future actually ran and how many
/// times it was woken.
#[trace(name = "poll warm_cache", enter_on_poll = true)]
async fn warm_cache() {
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// One request: several traced futures, some run concurrently.
async fn handle_request(user: u64) -> String {
    // `in_span` by hand: the same as `#[trace]`, for a future you did not
    // write. Both futures run at once; each has its own span.
    let audit = async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let _step = LocalSpan::enter_with_local_parent("write audit record");
    }
    .in_span(Span::enter_with_local_parent("audit"));
    let (name, ()) = tokio::join!(fetch_user(user), audit);

    // `enter_on_poll` by hand on any future.
    tokio::task::yield_now().enter_on_poll("yield").await;
    warm_cache().await;
    name
}

fn main() {
    let (reporter, traces) = support::TreePrinter::new();
    minitrace::set_reporter(reporter, Config::default());

    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let names = runtime.block_on(async {
        let requests: Vec<_> = (1..=2)
            .map(|user| {
                // The root of each request's trace is bound to the task's
                // future: it ends when the task completes.
                let root =
                    Span::root("request", SpanContext::random()).with_property(|| ("user", user.to_string()));
                tokio::spawn(handle_request(user).in_span(root))
            })
            .collect();
        let mut names = Vec::new();
        for request in requests {
            names.push(request.await.unwrap());
        }
        names
    });

    minitrace::flush();
    println!("served {names:?}; printed {} traces", traces.load(std::sync::atomic::Ordering::Relaxed));
}
