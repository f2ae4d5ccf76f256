//! minitrace-macro 0.6.7's `#[trace]`, reached as 0.6 code reaches it (`minitrace::trace`, the
//! prelude, the `#[minitrace::trace]` path), with each of its options on fns, methods, trait
//! methods, async fns and `#[async_trait]` methods; and minitrace 0.6.7's naming macros
//! `func_name!`, `full_name!` and `file_location!`, which name `#[trace]`'s spans. The span
//! names, nesting and properties are asserted through `TestReporter`.

use std::fmt::Debug;
use std::future::Future;
use std::num::ParseIntError;
use std::pin::Pin;
use std::sync::Arc;

use minitrace::collector::{Config, SpanContext, SpanId, SpanRecord, TestReporter};
use minitrace::{file_location, full_name, func_name, trace, Span};
use minitrace_compat_06::{block_on, serial, yield_once};

/// Runs `work` under a root span set as the local parent, and returns every other recorded
/// span as `parent > name [properties]`, sorted.
fn traced(work: impl FnOnce()) -> Vec<String> {
    let _serial = serial();
    let (reporter, spans): (TestReporter, Arc<parking_lot::Mutex<Vec<SpanRecord>>>) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default());
    {
        let root = Span::root("root", SpanContext::random());
        let _guard = root.set_local_parent();
        work();
    }
    minitrace::flush();
    let records: Vec<SpanRecord> = spans.lock().clone();
    let name_of = |id: SpanId| -> String {
        records.iter().find(|r| r.span_id == id).map(|r| r.name.to_string()).unwrap_or_default()
    };
    let mut lines: Vec<String> = records
        .iter()
        .filter(|r| r.name != "root")
        .map(|r| format!("{} > {} {:?}", name_of(r.parent_id), r.name, r.properties))
        .collect();
    lines.sort();
    lines
}

/// Sorts expected lines the way `traced` does.
fn sorted(lines: &[&str]) -> Vec<String> {
    let mut lines: Vec<String> = lines.iter().map(|line| line.to_string()).collect();
    lines.sort();
    lines
}

#[trace]
fn plain() {}

#[trace(short_name = true)]
fn short() {}

#[trace(name = "custom name")]
fn named() {}

#[minitrace::trace(name = "by path")]
fn by_path() {}

#[trace(properties = { "k1": "v1", "a": "argument `a` is {a:?}", "mixed": "{{x}} {b}-{a}", "escaped": "{{not a field}}" })]
fn with_properties(a: u64, b: &str) {
    let _ = (a, b);
}

#[trace(short_name = true, properties = { "n": "{n}" })]
fn short_with_properties(n: u8) -> u8 {
    n
}

/// Options in any order, spelled-out defaults, trailing commas and an empty property list.
#[rustfmt::skip] // rustfmt would drop the trailing comma that 0.6.7 accepts.
#[trace(short_name = false, name = "spelled out",)]
fn spelled_out() {}

#[trace(properties = { "a": "1", "b": "2", }, short_name = true)]
fn trailing_comma_in_properties() {}

#[trace(properties = {})]
fn empty_properties() {}

#[trace(enter_on_poll = false, short_name = false)]
async fn explicit_defaults() {}

#[trace(enter_on_poll = true, name = "poll first")]
async fn poll_first() {}

#[trace]
fn nests() {
    plain();
    short();
}

#[trace(short_name = true)]
fn fallible(text: &str) -> Result<u32, ParseIntError> {
    // `?` and early returns keep working in the instrumented body.
    let n: u32 = text.parse()?;
    if n == 0 {
        return Ok(0);
    }
    Ok(n * 2)
}

/// Attributes, visibility, generics, const generics, lifetimes, `impl Trait` arguments and
/// where clauses all survive the attribute.
#[trace(short_name = true)]
#[inline]
#[must_use]
pub(crate) fn generic<'a, T: Clone + Debug, U, const N: usize>(
    items: &'a [T; N],
    separator: &str,
    extra: impl Into<String>,
    unit: U,
) -> (&'a T, String)
where
    U: Debug,
{
    (&items[N - 1], format!("{}{separator}{unit:?}", extra.into()))
}

#[trace(short_name = true)]
unsafe fn read_raw(pointer: *const u8) -> u8 {
    *pointer
}

#[trace(short_name = true)]
extern "C" fn c_abi(x: u32) -> u32 {
    x + 1
}

#[trace]
async fn async_plain() -> u8 {
    yield_once().await;
    1
}

#[trace(short_name = true)]
async fn async_short() {
    plain();
}

#[trace(name = "async custom")]
async fn async_named() {}

#[trace(properties = { "id": "{id}" })]
async fn async_with_properties(id: u32) {}

#[trace(enter_on_poll = true)]
async fn polled() {
    yield_once().await;
}

#[trace(name = "polled custom", enter_on_poll = true)]
async fn polled_named() {
    yield_once().await;
}

#[trace(short_name = true, enter_on_poll = true)]
async fn polled_short() {}

#[trace(short_name = true)]
#[allow(clippy::needless_lifetimes)] // Named lifetimes must survive the attribute.
async fn borrowing<'a>(text: &'a str) -> &'a str {
    yield_once().await;
    text
}

#[trace(short_name = true)]
async fn async_fallible(text: &str) -> Result<u32, ParseIntError> {
    Ok(text.parse::<u32>()? + 1)
}

#[trace(short_name = true)]
async fn async_nests() {
    plain();
    async_plain().await;
}

/// The hand-written shape of an `#[async_trait]` method: 0.6.7 instruments the boxed future.
#[trace(short_name = true)]
fn boxed(x: u32) -> Pin<Box<dyn Future<Output = u32> + Send>> {
    Box::pin(async move {
        yield_once().await;
        plain();
        x
    })
}

struct Store {
    base: u32,
}

impl Store {
    #[trace]
    fn get(&self, key: u32) -> u32 {
        self.base + key
    }

    #[trace(short_name = true)]
    fn bump(&mut self) {
        self.base += 1;
    }

    #[trace]
    fn associated() -> u32 {
        1
    }

    #[trace]
    async fn fetch(&self, key: u32) -> u32 {
        yield_once().await;
        self.base + key
    }

    fn names() -> (&'static str, &'static str) {
        (func_name!(), full_name!())
    }
}

trait Describe {
    fn describe(&self) -> String;
}

impl Describe for Store {
    #[trace]
    fn describe(&self) -> String {
        format!("store at {}", self.base)
    }
}

#[async_trait::async_trait]
trait Service {
    async fn call(&self, x: u32) -> u32;
    async fn call_polled(&self);
}

#[async_trait::async_trait]
impl Service for Store {
    #[trace]
    async fn call(&self, x: u32) -> u32 {
        yield_once().await;
        plain();
        x + self.base
    }

    #[trace(short_name = true, enter_on_poll = true)]
    async fn call_polled(&self) {
        yield_once().await;
    }
}

/// `async fn` in a trait, without `#[async_trait]`.
trait NativeAsync {
    async fn native(&self) -> u32;
}

impl NativeAsync for Store {
    #[trace]
    async fn native(&self) -> u32 {
        yield_once().await;
        self.base
    }
}

struct Wrapper<T>(T);

impl<T: Debug> Wrapper<T> {
    #[trace]
    fn show(&self) -> String {
        format!("{:?}", self.0)
    }
}

mod nested {
    use minitrace::prelude::*;

    /// `#[trace]` from the prelude.
    #[trace]
    pub fn in_module() {}

    pub fn names() -> (&'static str, &'static str) {
        (func_name!(), full_name!())
    }
}

async fn async_names() -> (&'static str, &'static str) {
    (func_name!(), full_name!())
}

fn assert_send<F: Future + Send>(future: F) -> F {
    future
}

#[test]
fn sync_fns_get_local_spans_named_by_the_options() {
    let lines = traced(|| {
        plain();
        short();
        named();
        by_path();
        with_properties(5, "b");
        assert_eq!(short_with_properties(3), 3);
        nests();
        nested::in_module();
        spelled_out();
        trailing_comma_in_properties();
        empty_properties();
        block_on(explicit_defaults());
        block_on(poll_first());
    });
    let expected = sorted(&[
        "root > macro_api::plain []",
        "root > short []",
        "root > custom name []",
        "root > by path []",
        r#"root > macro_api::with_properties [("k1", "v1"), ("a", "argument `a` is 5"), ("mixed", "{x} b-5"), ("escaped", "{not a field}")]"#,
        r#"root > short_with_properties [("n", "3")]"#,
        "root > macro_api::nests []",
        "macro_api::nests > macro_api::plain []",
        "macro_api::nests > short []",
        "root > macro_api::nested::in_module []",
        "root > spelled out []",
        r#"root > trailing_comma_in_properties [("a", "1"), ("b", "2")]"#,
        "root > macro_api::empty_properties []",
        "root > macro_api::explicit_defaults []",
        "root > poll first []",
    ]);
    assert_eq!(lines, expected);
}

#[test]
fn signatures_and_bodies_survive_the_attribute() {
    let lines = traced(|| {
        assert_eq!(fallible("21"), Ok(42));
        assert_eq!(fallible("0"), Ok(0));
        assert!(fallible("x").is_err());
        let items = [1, 2, 3];
        let (last, extra): (&i32, String) = generic(&items, "-", "extra", 'u');
        assert_eq!((*last, extra.as_str()), (3, "extra-'u'"));
        let byte = 9u8;
        // SAFETY: the pointer comes from a live reference.
        assert_eq!(unsafe { read_raw(&byte) }, 9);
        assert_eq!(c_abi(1), 2);
    });
    let expected = sorted(&[
        "root > fallible []",
        "root > fallible []",
        "root > fallible []",
        "root > generic []",
        "root > read_raw []",
        "root > c_abi []",
    ]);
    assert_eq!(lines, expected);
}

#[test]
fn methods_are_named_by_their_impl() {
    let lines = traced(|| {
        let mut store = Store { base: 10 };
        assert_eq!(store.get(1), 11);
        store.bump();
        assert_eq!(Store::associated(), 1);
        assert_eq!(store.describe(), "store at 11");
        assert_eq!(block_on(store.fetch(2)), 13);
        assert_eq!(block_on(store.native()), 11);
        assert_eq!(Wrapper(5u8).show(), "5");
    });
    let expected = sorted(&[
        "root > macro_api::Store::get []",
        "root > bump []",
        "root > macro_api::Store::associated []",
        "root > <macro_api::Store as macro_api::Describe>::describe []",
        "root > macro_api::Store::fetch []",
        "root > <macro_api::Store as macro_api::NativeAsync>::native []",
        // `std::any::type_name` spells a generic impl's parameters `_`.
        "root > macro_api::Wrapper<_>::show []",
    ]);
    assert_eq!(lines, expected);
}

#[test]
fn async_fns_get_spans_named_by_the_options() {
    let lines = traced(|| {
        assert_eq!(block_on(assert_send(async_plain())), 1);
        block_on(async_short());
        block_on(async_named());
        block_on(async_with_properties(7));
        assert_eq!(block_on(borrowing("text")), "text");
        assert_eq!(block_on(async_fallible("1")), Ok(2));
        block_on(async_nests());
    });
    let expected = sorted(&[
        "root > macro_api::async_plain []",
        "root > async_short []",
        "async_short > macro_api::plain []",
        "root > async custom []",
        r#"root > macro_api::async_with_properties [("id", "7")]"#,
        "root > borrowing []",
        "root > async_fallible []",
        "root > async_nests []",
        "async_nests > macro_api::plain []",
        "async_nests > macro_api::async_plain []",
    ]);
    assert_eq!(lines, expected);
}

#[test]
fn enter_on_poll_gives_a_span_per_poll() {
    let lines = traced(|| {
        block_on(assert_send(polled()));
        block_on(polled_named());
        block_on(polled_short());
    });
    let expected = sorted(&[
        "root > macro_api::polled []",
        "root > macro_api::polled []",
        "root > polled custom []",
        "root > polled custom []",
        "root > polled_short []",
    ]);
    assert_eq!(lines, expected);
}

#[test]
fn boxed_futures_and_async_trait_methods_are_instrumented() {
    let lines = traced(|| {
        assert_eq!(block_on(boxed(4)), 4);
        let store = Store { base: 1 };
        assert_eq!(block_on(assert_send(store.call(2))), 3);
        block_on(store.call_polled());
    });
    let expected = sorted(&[
        "root > boxed []",
        "boxed > macro_api::plain []",
        "root > <macro_api::Store as macro_api::Service>::call []",
        "<macro_api::Store as macro_api::Service>::call > macro_api::plain []",
        "root > call_polled []",
        "root > call_polled []",
    ]);
    assert_eq!(lines, expected);
}

#[test]
fn traced_fns_without_a_local_parent_record_nothing() {
    let _serial = serial();
    let (reporter, spans): (TestReporter, Arc<parking_lot::Mutex<Vec<SpanRecord>>>) = TestReporter::new();
    minitrace::set_reporter(reporter, Config::default());
    plain();
    assert_eq!(fallible("2"), Ok(4));
    assert_eq!(block_on(async_plain()), 1);
    block_on(polled());
    assert_eq!(block_on(boxed(1)), 1);
    minitrace::flush();
    assert!(spans.lock().is_empty());
}

#[test]
#[allow(clippy::redundant_closure_call)] // The nested closures are what is under test.
fn func_name_and_full_name_see_through_closures_and_async_blocks() {
    let name: &'static str = func_name!();
    let full: &'static str = full_name!();
    assert_eq!(name, "func_name_and_full_name_see_through_closures_and_async_blocks");
    assert_eq!(full, "macro_api::func_name_and_full_name_see_through_closures_and_async_blocks");
    let in_closure = || (func_name!(), full_name!());
    assert_eq!(in_closure(), (name, full));
    let in_nested_closure = || (|| (func_name!(), full_name!()))();
    assert_eq!(in_nested_closure(), (name, full));
    assert_eq!(block_on(async { (func_name!(), full_name!()) }), (name, full));
    assert_eq!(block_on(async { (|| (func_name!(), full_name!()))() }), (name, full));
    assert_eq!(block_on(async_names()), ("async_names", "macro_api::async_names"));
    assert_eq!(Store::names(), ("names", "macro_api::Store::names"));
    assert_eq!(nested::names(), ("names", "macro_api::nested::names"));
    fn inner() -> (&'static str, &'static str) {
        (func_name!(), full_name!())
    }
    assert_eq!(
        inner(),
        ("inner", "macro_api::func_name_and_full_name_see_through_closures_and_async_blocks::inner")
    );
}

/// `file_location!()` is a literal, so it works in constants.
const LOCATION: &str = file_location!();

#[test]
fn file_location_is_file_line_column() {
    let here: (&str, u32) = (file_location!(), line!());
    assert_eq!(here.0, format!("{}:{}:30", file!(), here.1));
    let location: &'static str = file_location!();
    assert!(location.starts_with(file!()));
    assert!(LOCATION.starts_with(&format!("{}:", file!())));
    assert_eq!(LOCATION.matches(':').count(), 2, "{LOCATION}");
}
