//! Attribute macros that trace a fn with [minitrace]: [`#[trace]`](macro@trace)
//! records a span for every call, named after the fn, under the caller's
//! local parent. It is re-exported as `minitrace::trace` and in
//! `minitrace::prelude`; [`#[trace_async]`](macro@trace_async), the older
//! spelling for async fns, is used from this crate.
//!
//! ```
//! use minitrace::collector::{Config, TestReporter};
//! use minitrace::prelude::*;
//! use minitrace::util::tree::tree_str_from_span_records;
//!
//! #[trace(short_name = true)]
//! fn parse(request: &str) -> usize {
//!     request.len()
//! }
//!
//! #[trace(name = "handle", properties = { "user": "{user}" })]
//! async fn handle(user: u64, request: &str) -> usize {
//!     parse(request)
//! }
//!
//! let (reporter, spans) = TestReporter::new();
//! minitrace::set_reporter(reporter, Config::default());
//! {
//!     let root = Span::root("request", SpanContext::random());
//!     let _guard = root.set_local_parent();
//!     assert_eq!(futures::executor::block_on(handle(42, "GET /")), 5);
//! }
//! minitrace::flush();
//!
//! let records = spans.lock().clone();
//! assert_eq!(
//!     tree_str_from_span_records(records),
//!     r#"
//! request []
//!     handle [("user", "42")]
//!         parse []
//! "#
//! );
//! ```
//!
//! # Concepts
//!
//! - **Which span.** A sync fn gets a [`LocalSpan`] for the call: the
//!   cheapest kind, two clock reads and a push, on the calling thread. An
//!   `async fn` (or a fn returning `impl Future`) gets a thread-safe [`Span`]
//!   bound to its future with [`in_span`]: the span lasts until the future
//!   completes, and is the local parent whenever the future is polled,
//!   across `.await`s and thread moves. See [`#[trace]`](macro@trace) for
//!   every kind of fn.
//! - **Which parent.** The span's parent is the caller's *local parent*:
//!   the innermost open local span, or the span made the local parent with
//!   [`Span::set_local_parent`] (usually a request's root span). A traced fn
//!   called outside any trace records nothing, formats no property and
//!   allocates nothing, so fns can be traced wherever they are, and show up
//!   only in the traces of the requests that call them.
//! - **Which name.** The fn's full path by default (`my_crate::db::query`),
//!   the fn's own name with `short_name = true`, or any `name = ".."`.
//! - **Properties.** `properties = { "key": "{argument}" }` are format
//!   strings over the arguments, formatted only when the span is recorded.
//! - **Cost.** Exactly the hand-written equivalent shown in
//!   [`#[trace]`](macro@trace): the macro adds no work of its own. Without
//!   minitrace's `enable` feature, every span call in the expansion returns
//!   a no-op at once (the core checks a constant first) and no property is
//!   formatted, so libraries can trace their fns and leave the choice to
//!   the application.
//! - **Roots.** A trace starts with a root span, which has no local parent
//!   to attach to: create it by hand with [`Span::root`] where a request
//!   arrives, and let `#[trace]` record the fns it calls.
//!
//! The expansion names items by absolute paths (`::minitrace::..`): the
//! crate using the attributes needs `minitrace` as a dependency under that
//! name, and no imports.
//!
//! [minitrace]: https://docs.rs/minitrace/0.6
//! [`Span`]: https://docs.rs/minitrace/0.6/minitrace/struct.Span.html
//! [`Span::root`]: https://docs.rs/minitrace/0.6/minitrace/struct.Span.html#method.root
//! [`Span::set_local_parent`]: https://docs.rs/minitrace/0.6/minitrace/struct.Span.html#method.set_local_parent
//! [`LocalSpan`]: https://docs.rs/minitrace/0.6/minitrace/local/struct.LocalSpan.html
//! [`in_span`]: https://docs.rs/minitrace/0.6/minitrace/future/trait.FutureExt.html#method.in_span

mod expand;
mod format;
mod options;

use proc_macro::TokenStream;

use crate::expand::{expand, Flavor};

/// Records a span for every call of the fn it is applied to.
///
/// The span's parent is the caller's local parent (the innermost open
/// [`LocalSpan`] or the [`Span`] set with [`Span::set_local_parent`]); where
/// there is none, nothing is recorded, no property is formatted and nothing
/// is allocated.
///
/// # Kinds of fn
///
/// - A **sync fn** gets a [`LocalSpan`] guard for the duration of the call.
/// - An **`async fn`** gets a [`Span`] started under the local parent when
///   the future is first polled, bound to the body's future with
///   [`in_span`]: it lasts until the body completes and is the local parent
///   whenever the body is polled, on any thread.
/// - A **fn returning `impl Future`** gets a [`Span`] started when it is
///   called (and the local parent while the body builds the future), bound
///   to the future it returns.
/// - An **`#[async_trait]` method**, whose body `async_trait` rewrites to
///   `Box::pin(async move { .. })`, gets a [`Span`] bound to the boxed
///   future. Put `#[trace]` on the method, inside the `#[async_trait]` impl
///   or trait.
///
/// Methods in impls and default methods in traits, generic fns, fns with
/// `mut` or pattern arguments and `impl Trait` returns are all accepted; the
/// signature is left as written.
///
/// # Options
///
/// - `name = "..."`, or the name alone as the first argument
///   (`#[trace("name")]`): the span name. By default it is the fn's full
///   path, as [`full_name!`] gives it.
/// - `short_name = true`: the fn's name without its path, as [`func_name!`]
///   gives it. Not with a name.
/// - `enter_on_poll = true` (async fns only): instead of one span for the
///   whole future, a [`LocalSpan`] around each poll, with [`enter_on_poll`].
///   Not with `properties`.
/// - `properties = { "key": "value", .. }`: properties of the span. Values
///   are format strings that may name the fn's arguments (`"{id}"`,
///   `"{query:?}"`), with `{{` and `}}` for literal braces; they are
///   formatted only when the span is recorded.
///
/// A misspelt, repeated or conflicting option, an empty name, a property
/// key that is not a string literal, unbalanced braces in a property value,
/// and the attribute on something that is not a fn with a body are compile
/// errors that point at the offending token.
///
/// # Examples
///
/// ```
/// use minitrace::prelude::*;
///
/// // A span named after the fn's full path, e.g. "my_crate::server::lookup".
/// #[trace]
/// fn lookup(key: &str) -> Option<u64> {
///     key.parse().ok()
/// }
///
/// // A span named "lookup_async" (the fn's own name).
/// #[trace(short_name = true)]
/// async fn lookup_async(key: &str) -> Option<u64> {
///     key.parse().ok()
/// }
///
/// // A local span named "poll fetch" around each poll of the future.
/// #[trace(name = "poll fetch", enter_on_poll = true)]
/// async fn fetch(id: u64) -> u64 {
///     id
/// }
///
/// // Properties formatted from the arguments: ("id", "7"), ("query", "\"k\"").
/// #[trace(properties = { "id": "{id}", "query": "{query:?}", "set": "{{1, 2}}" })]
/// fn query(id: u64, query: &str) -> usize {
///     query.len() + id as usize
/// }
///
/// struct Store;
///
/// impl Store {
///     // Methods work the same; so do generic fns.
///     #[trace("Store::get")]
///     fn get<K: AsRef<str>>(&self, mut key: K) -> usize {
///         key.as_ref().len()
///     }
/// }
///
/// # let _ = futures::executor::block_on(async { lookup_async("1").await.unwrap() + fetch(1).await });
/// # let _ = (lookup("1"), query(7, "k"), Store.get("k"));
/// ```
///
/// On an `async fn`, `#[trace]` expands to roughly this:
///
/// ```
/// use minitrace::prelude::*;
///
/// async fn fetch(id: u64) -> u64 {
///     let span = Span::enter_with_local_parent(minitrace::full_name!())
///         .with_properties(|| [("id", format!("{id}"))]);
///     async move { id }.in_span(span).await
/// }
/// # let _ = futures::executor::block_on(fetch(1));
/// ```
///
/// and on a sync fn to this:
///
/// ```
/// use minitrace::prelude::*;
///
/// fn lookup(key: &str) -> Option<u64> {
///     let _guard = LocalSpan::enter_with_local_parent(minitrace::full_name!());
///     key.parse().ok()
/// }
/// # let _ = lookup("1");
/// ```
///
/// With `async_trait`:
///
/// ```
/// use async_trait::async_trait;
/// use minitrace::prelude::*;
///
/// #[async_trait]
/// trait Service {
///     async fn call(&self, request: u64) -> u64;
/// }
///
/// struct Echo;
///
/// #[async_trait]
/// impl Service for Echo {
///     #[trace(name = "Echo::call", properties = { "request": "{request}" })]
///     async fn call(&self, request: u64) -> u64 {
///         request
///     }
/// }
/// # assert_eq!(futures::executor::block_on(Echo.call(1)), 1);
/// ```
///
/// [`Span`]: https://docs.rs/minitrace/0.6/minitrace/struct.Span.html
/// [`Span::set_local_parent`]: https://docs.rs/minitrace/0.6/minitrace/struct.Span.html#method.set_local_parent
/// [`LocalSpan`]: https://docs.rs/minitrace/0.6/minitrace/local/struct.LocalSpan.html
/// [`in_span`]: https://docs.rs/minitrace/0.6/minitrace/future/trait.FutureExt.html#method.in_span
/// [`enter_on_poll`]: https://docs.rs/minitrace/0.6/minitrace/future/trait.FutureExt.html#method.enter_on_poll
/// [`full_name!`]: https://docs.rs/minitrace/0.6/minitrace/macro.full_name.html
/// [`func_name!`]: https://docs.rs/minitrace/0.6/minitrace/macro.func_name.html
#[proc_macro_attribute]
pub fn trace(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Flavor::Trace, args.into(), item.into()).into()
}

/// [`#[trace]`](macro@trace) for async fns, the spelling of older
/// minitrace releases: `#[trace_async]` and `#[trace_async("name")]` expand
/// exactly as `#[trace]` and `#[trace("name")]` do on an async fn, and take
/// the same options. On a sync fn it is an error.
///
/// ```
/// use minitrace::prelude::*;
/// use minitrace::trace_async;
///
/// #[trace_async]
/// async fn fetch(id: u64) -> u64 {
///     id
/// }
///
/// #[trace_async("store")]
/// async fn store(id: u64) {
///     let _ = id;
/// }
///
/// #[trace_async(properties = { "id": "{id}" })]
/// fn fetch_later(id: u64) -> impl std::future::Future<Output = u64> {
///     async move { id }
/// }
/// # futures::executor::block_on(async { fetch(1).await + fetch_later(2).await });
/// # futures::executor::block_on(store(1));
/// ```
#[proc_macro_attribute]
pub fn trace_async(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Flavor::TraceAsync, args.into(), item.into()).into()
}
