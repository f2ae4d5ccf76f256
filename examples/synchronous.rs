//! Tracing plain threaded code: a root span per request, `#[trace]` on the
//! functions it calls, local spans with properties and events, and a span
//! that carries the trace onto another thread.
//!
//! `cargo run --release --example synchronous`
//!
//! Each request prints as a tree: start offset, duration, name, properties;
//! events are the lines marked `*`.

mod support;

use std::thread;
use std::time::Duration;

use minitrace::collector::Config;
use minitrace::local::LocalSpan;
use minitrace::prelude::*;

struct Order {
    id: u64,
    items: Vec<&'static str>,
}

/// Handles one order on the calling thread. Every span recorded while
/// `_guard` is alive, by this function or anything it calls, belongs to
/// this request's trace.
fn handle_order(order: &Order) -> u64 {
    let root =
        Span::root("handle_order", SpanContext::random()).with_property(|| ("order", order.id.to_string()));
    let _guard = root.set_local_parent();

    validate(order);
    let total = price(&order.items);

    // A `Span` (unlike a `LocalSpan`) may be moved to another thread: the
    // receipt is sent in the background, still inside this trace.
    let receipt = Span::enter_with_local_parent("send receipt");
    let sender = thread::spawn(move || {
        // On the new thread the span becomes the local parent in its turn.
        let _guard = receipt.set_local_parent();
        render_receipt(total);
        let _smtp = LocalSpan::enter_with_local_parent("smtp");
        thread::sleep(Duration::from_micros(300));
    });
    sender.join().unwrap();
    total
}

/// `#[trace]` on a sync function records a local span around the call:
/// a clock read and a push at each end.
#[trace(short_name = true)]
fn validate(order: &Order) {
    for item in &order.items {
        check_stock(item);
    }
}

/// Properties are format strings over the arguments, formatted only when
/// the span is recorded.
#[trace(short_name = true, properties = { "item": "{item}" })]
fn check_stock(item: &str) {
    if item.starts_with('x') {
        // An event marks a moment inside the innermost open span.
        Event::add_to_local_parent("backordered", || [("item".into(), item.to_string().into())]);
    }
    thread::sleep(Duration::from_micros(50));
}

#[trace(short_name = true)]
fn price(items: &[&str]) -> u64 {
    let total: u64 = items.iter().map(|item| item.len() as u64 * 100).sum();
    // A property known only once the work is done goes on the open span.
    LocalSpan::add_property(|| ("total", total.to_string()));
    total
}

fn render_receipt(total: u64) -> String {
    // Without the macro: a local span is a guard that ends when dropped.
    let _span = LocalSpan::enter_with_local_parent("render receipt");
    format!("total: {total}")
}

fn main() {
    let (reporter, traces) = support::TreePrinter::new();
    minitrace::set_reporter(reporter, Config::default());

    let orders = [
        Order { id: 1, items: vec!["apple", "pear"] },
        Order { id: 2, items: vec!["xylophone", "drum", "flute"] },
    ];
    // One worker thread per order; each trace stays separate.
    let totals: Vec<u64> = thread::scope(|scope| {
        let workers: Vec<_> = orders.iter().map(|order| scope.spawn(|| handle_order(order))).collect();
        workers.into_iter().map(|worker| worker.join().unwrap()).collect()
    });

    minitrace::flush();
    println!(
        "handled {} orders (totals {totals:?}); printed {} traces",
        orders.len(),
        traces.load(std::sync::atomic::Ordering::Relaxed)
    );
}
