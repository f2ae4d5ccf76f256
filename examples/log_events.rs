//! `log` records inside traces: a `log::Log` implementation that attaches
//! each record to the current span as an event, so that a trace shows what
//! was logged, when, and in which step of which request.
//!
//! `cargo run --release --example log_events`
//!
//! The logger still prints every record, as a logger would; a record logged
//! outside any trace (the first and last lines here) is printed but
//! attached to nothing. Events are marked `*` in the printed traces.

mod support;

use std::time::Duration;

use log::{info, warn, LevelFilter, Log, Metadata, Record};
use minitrace::collector::Config;
use minitrace::prelude::*;

/// Prints each record to standard error and adds it as an event to the
/// thread's local parent: the innermost open local span, or the span set
/// with `Span::set_local_parent`. Without a local parent the event costs a
/// thread-local read and is not recorded.
struct TracingLogger;

impl Log for TracingLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        eprintln!("[{:<5} {}] {}", record.level(), record.target(), record.args());
        // The event's name is the message; the closure building the
        // properties runs only when there is a span to attach them to.
        Event::add_to_local_parent(record.args().to_string(), || {
            [
                ("level".into(), record.level().as_str().into()),
                ("target".into(), record.target().to_string().into()),
            ]
        });
    }

    fn flush(&self) {}
}

static LOGGER: TracingLogger = TracingLogger;

#[trace(short_name = true, properties = { "user": "{user}" })]
fn authenticate(user: &str) -> bool {
    let known = user != "mallory";
    if known {
        info!("user {user} authenticated");
    } else {
        warn!("unknown user {user}");
    }
    known
}

#[trace(short_name = true)]
fn load_cart(user: &str) -> usize {
    std::thread::sleep(Duration::from_micros(200));
    let items = user.len();
    info!("cart has {items} items");
    items
}

fn handle(user: &str) {
    let root = Span::root("checkout", SpanContext::random());
    let _guard = root.set_local_parent();
    info!("checkout started"); // an event of the root span
    if authenticate(user) {
        load_cart(user);
    }
}

fn main() {
    log::set_logger(&LOGGER).expect("no other logger is set");
    log::set_max_level(LevelFilter::Info);
    let (reporter, _) = support::TreePrinter::new();
    minitrace::set_reporter(reporter, Config::default());

    info!("service starting");
    handle("alice");
    handle("mallory");
    minitrace::flush();
    info!("service stopped");
}
