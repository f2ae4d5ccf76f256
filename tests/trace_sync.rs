//! `#[trace]` on sync fns, under a real collector: the names, parents and
//! properties of the spans recorded.

mod trace_support;

use minitrace::prelude::*;
use trace_support::traced;

#[trace]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

mod storage {
    use minitrace::prelude::*;

    #[trace]
    pub fn get(key: &str) -> usize {
        key.len()
    }

    pub mod index {
        #[minitrace::trace]
        pub fn lookup(key: &str) -> usize {
            super::get(key)
        }
    }
}

#[test]
fn default_names_are_full_paths() {
    let tree = traced(|| {
        assert_eq!(add(1, 2), 3);
        assert_eq!(storage::index::lookup("key"), 3);
    });
    assert_eq!(
        tree,
        r#"
root []
    trace_sync::add []
    trace_sync::storage::index::lookup []
        trace_sync::storage::get []
"#
    );
}

#[trace(name = "explicit")]
fn explicit() {}

#[trace("positional")]
fn positional() {}

#[trace(short_name = true)]
fn short() {}

#[trace(short_name = false)]
fn not_short() {}

/// The short name is what `func_name!()` gives (raw identifiers included).
#[trace(short_name = true)]
fn r#match() -> &'static str {
    minitrace::func_name!()
}

#[test]
fn names() {
    let tree = traced(|| {
        explicit();
        positional();
        short();
        not_short();
        assert_eq!(r#match(), "match");
    });
    assert_eq!(
        tree,
        r#"
root []
    explicit []
    match []
    positional []
    short []
    trace_sync::not_short []
"#
    );
}

#[trace(short_name = true, properties = { "n": "{n}" })]
fn fib(n: u32) -> u32 {
    if n < 2 {
        return n;
    }
    fib(n - 1) + fib(n - 2)
}

#[test]
fn nested_calls_nest_spans() {
    let tree = traced(|| assert_eq!(fib(3), 2));
    assert_eq!(
        tree,
        r#"
root []
    fib [("n", "3")]
        fib [("n", "1")]
        fib [("n", "2")]
            fib [("n", "0")]
            fib [("n", "1")]
"#
    );
}

#[derive(Debug)]
struct Request {
    id: u64,
}

#[trace(name = "handle", properties = {
    "constant": "value",
    "id": "{id}",
    "request": "{request:?}",
    "padded": "{id:>4}",
    "braces": "{{literal}}",
    "both": "{{{id}}}",
})]
fn handle(id: u64, request: &Request) -> u64 {
    id + request.id
}

#[test]
fn properties() {
    let tree = traced(|| assert_eq!(handle(7, &Request { id: 1 }), 8));
    assert_eq!(
        tree,
        r#"
root []
    handle [("constant", "value"), ("id", "7"), ("request", "Request { id: 1 }"), ("padded", "   7"), ("braces", "{literal}"), ("both", "{7}")]
"#
    );
}

struct Counter {
    count: u64,
}

impl Counter {
    #[trace]
    fn bump(&mut self, by: u64) -> u64 {
        self.count += by;
        self.describe().len() as u64
    }

    #[trace(short_name = true)]
    fn get<T: From<u64>>(&self) -> T {
        T::from(self.count)
    }
}

trait Describe {
    fn name(&self) -> String;

    #[trace]
    fn describe(&self) -> String {
        format!("<{}>", self.name())
    }
}

impl Describe for Counter {
    #[trace(name = "Counter::name", properties = { "kind": "counter" })]
    fn name(&self) -> String {
        self.count.to_string()
    }
}

#[test]
fn methods_generics_and_default_methods() {
    let tree = traced(|| {
        let mut counter = Counter { count: 0 };
        counter.bump(41);
        assert_eq!(counter.get::<u128>(), 41);
    });
    assert_eq!(
        tree,
        r#"
root []
    get []
    trace_sync::Counter::bump []
        trace_sync::Describe::describe []
            Counter::name [("kind", "counter")]
"#
    );
}

#[trace(name = "pattern arguments", properties = { "a": "{a}", "b": "{b}", "m": "{m}" })]
fn patterns((a, b): (u32, u32), mut m: u32) -> u32 {
    m += a + b;
    m
}

#[test]
fn mut_and_pattern_arguments() {
    let tree = traced(|| assert_eq!(patterns((1, 2), 3), 6));
    assert_eq!(
        tree,
        r#"
root []
    pattern arguments [("a", "1"), ("b", "2"), ("m", "3")]
"#
    );
}

#[trace(name = "panics")]
fn panics() {
    let _inner = add(1, 1);
    panic!("traced fn panicked");
}

#[test]
fn a_span_ends_when_its_fn_unwinds() {
    let tree = traced(|| {
        assert!(std::panic::catch_unwind(panics).is_err());
    });
    assert_eq!(
        tree,
        r#"
root []
    panics []
        trace_sync::add []
"#
    );
}

#[trace(name = "unparented call")]
fn unparented() -> u32 {
    add(2, 2)
}

#[test]
fn without_a_local_parent_nothing_is_recorded() {
    // The reporter is set first, so that the call below is unrecorded for
    // want of a parent, not for want of a reporter.
    trace_support::reported();
    assert_eq!(unparented(), 4);
    // A later root does not pick it up either; `traced` also flushes.
    let tree = traced(|| {});
    assert_eq!(tree, "\nroot []\n");
    let spans = trace_support::reported().lock();
    assert!(spans.iter().all(|span| span.name != "unparented call"));
}
