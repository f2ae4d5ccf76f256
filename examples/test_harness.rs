//! A unit-test harness that wraps each test in a root span and prints the
//! test's trace: which traced functions ran, in what order, for how long.
//!
//! `cargo run --release --example test_harness`
//!
//! In a test suite, call the helper from each test:
//!
//! ```ignore
//! #[test]
//! fn parses_prices() {
//!     traced_test(minitrace::func_name!(), || {
//!         assert_eq!(parse_price("12.50"), Some(1250));
//!     });
//! }
//! ```
//!
//! The test harness captures what a passing test prints, so the trace is
//! shown for failing tests (and for all with `cargo test -- --nocapture`).
//! Tests run in parallel threads: each test's spans are picked out of the
//! shared reporter by the test's own trace id. Here `main` stands in for
//! the harness and runs two small tests.

mod support;

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use minitrace::collector::{Config, SpanRecord, TestReporter};
use minitrace::prelude::*;

/// Runs `test` inside a root span named `name`, then prints the test's
/// trace. A panic in the test is raised again after the trace is printed,
/// so a failing test still fails, with the trace of what it did.
fn traced_test(name: &'static str, test: impl FnOnce()) {
    static SPANS: OnceLock<Arc<Mutex<Vec<SpanRecord>>>> = OnceLock::new();
    let spans = SPANS.get_or_init(|| {
        // One reporter for the whole test binary, set by the first test.
        let (reporter, spans) = TestReporter::new();
        minitrace::set_reporter(reporter, Config::default());
        spans
    });

    let context = SpanContext::random();
    let outcome = {
        let mut root = Span::root(name, context);
        let outcome = {
            let _guard = root.set_local_parent();
            panic::catch_unwind(AssertUnwindSafe(test))
        };
        root.add_property(|| ("outcome", if outcome.is_ok() { "passed" } else { "panicked" }));
        outcome
    };
    minitrace::flush();

    let trace: Vec<SpanRecord> = {
        let mut all = spans.lock();
        let (trace, others) = all.drain(..).partition(|span| span.trace_id == context.trace_id);
        *all = others;
        trace
    };
    let trace: Vec<&SpanRecord> = trace.iter().collect();
    println!("test {name}: {} spans\n{}", trace.len(), support::render_tree(&trace));

    if let Err(panic) = outcome {
        panic::resume_unwind(panic);
    }
}

// The code under test.

#[trace(short_name = true, properties = { "text": "{text}" })]
fn parse_price(text: &str) -> Option<u64> {
    let (units, cents) = text.split_once('.')?;
    Some(units.parse::<u64>().ok()? * 100 + cents.parse::<u64>().ok()?)
}

#[trace(short_name = true)]
fn total_with_discount(prices: &[&str], percent: u64) -> Option<u64> {
    let total: u64 = prices.iter().map(|price| parse_price(price)).sum::<Option<u64>>()?;
    Some(apply_discount(total, percent))
}

#[trace(short_name = true)]
fn apply_discount(total: u64, percent: u64) -> u64 {
    total - total * percent / 100
}

// The tests, as they would be written with `#[test]`.

fn parses_prices() {
    traced_test(minitrace::func_name!(), || {
        assert_eq!(parse_price("12.50"), Some(1250));
        assert_eq!(parse_price("twelve"), None);
    });
}

fn applies_discounts() {
    traced_test(minitrace::func_name!(), || {
        assert_eq!(total_with_discount(&["10.00", "5.00"], 10), Some(1350));
    });
}

fn main() {
    let tests: [(&str, fn()); 2] =
        [("parses_prices", parses_prices), ("applies_discounts", applies_discounts)];
    for (name, test) in tests {
        test();
        println!("test {name} ... ok\n");
    }
    println!("test result: ok. {} passed", tests.len());
}
