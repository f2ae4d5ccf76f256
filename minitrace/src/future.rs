//! Tracing for futures: [`FutureExt::in_span`] keeps a [`Span`] for the
//! future's whole life and makes it the local parent while it is polled;
//! [`FutureExt::enter_on_poll`] records one local span per poll.
//!
//! A thread's local parent cannot follow a task that moves between threads
//! at each `.await`; these adapters travel with the future instead.
//! `#[trace]` on an `async fn` expands to `in_span`.
//!
//! ```
//! use minitrace::prelude::*;
//!
//! async fn handle() {
//!     // A local span around each poll of the sleep, under "request".
//!     tokio::time::sleep(std::time::Duration::from_millis(1)).enter_on_poll("sleep").await;
//! }
//!
//! let runtime = tokio::runtime::Builder::new_multi_thread().enable_time().build().unwrap();
//! let root = Span::root("request", SpanContext::random());
//! // "request" is the local parent during each poll, on whichever worker
//! // thread, and ends when the task completes.
//! let task = runtime.spawn(handle().in_span(root));
//! runtime.block_on(task).unwrap();
//! ```

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::local::local_span::LocalSpan;
use crate::span::Span;

impl<T: Future> FutureExt for T {}

/// Adapters that trace a future.
///
/// ```
/// use minitrace::prelude::*;
///
/// # async fn fetch() {}
/// async fn handle() {
///     let root = Span::root("request", SpanContext::random());
///     fetch().in_span(Span::enter_with_parent("fetch", &root)).await;
/// }
/// ```
pub trait FutureExt: Future + Sized {
    /// Runs the future inside `span`: the span (which started when it was
    /// created) ends when the future completes or is dropped, and is the
    /// local parent during every poll, wherever the future is polled.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// let traced = async { 1 + 1 }.in_span(Span::enter_with_parent("add", &root));
    /// # drop(traced);
    /// ```
    #[inline]
    fn in_span(self, span: Span) -> InSpan<Self> {
        InSpan { inner: self, span }
    }

    /// Records a local span named `name` around each poll of the future,
    /// under the local parent of the thread polling it.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let traced = async { 1 + 1 }.enter_on_poll("add");
    /// # drop(traced);
    /// ```
    #[inline]
    fn enter_on_poll(self, name: impl Into<Cow<'static, str>>) -> EnterOnPoll<Self> {
        EnterOnPoll { inner: self, name: name.into() }
    }
}

pin_project_lite::pin_project! {
    /// A future traced by a [`Span`]; see [`FutureExt::in_span`].
    ///
    /// ```
    /// use minitrace::future::InSpan;
    /// use minitrace::prelude::*;
    ///
    /// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let traced: InSpan<_> = async { 42 }.in_span(Span::noop());
    /// assert_eq!(runtime.block_on(traced), 42);
    /// ```
    #[must_use = "futures do nothing unless polled"]
    pub struct InSpan<T> {
        #[pin]
        inner: T,
        // A `Span` can be empty itself: no `Option`, so that without
        // `enable` a traced future is no larger than the untraced one.
        span: Span,
    }
}

impl<T: Future> Future for InSpan<T> {
    type Output = T::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = self.project();
        let guard = this.span.set_local_parent();
        let result = this.inner.poll(cx);
        if result.is_ready() {
            drop(guard);
            // The span ends when the future completes, not when it is dropped.
            drop(std::mem::take(this.span));
        } else {
            // Polled again later, maybe on another thread, where the span
            // may end: what this poll recorded must not wait on this
            // thread for it (a trace would then be reported in two parts).
            guard.drop_unparked();
        }
        result
    }
}

pin_project_lite::pin_project! {
    /// A future with a local span around each poll; see [`FutureExt::enter_on_poll`].
    ///
    /// ```
    /// use minitrace::future::EnterOnPoll;
    /// use minitrace::prelude::*;
    ///
    /// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let traced: EnterOnPoll<_> = async { 42 }.enter_on_poll("compute");
    /// assert_eq!(runtime.block_on(traced), 42);
    /// ```
    #[must_use = "futures do nothing unless polled"]
    pub struct EnterOnPoll<T> {
        #[pin]
        inner: T,
        name: Cow<'static, str>,
    }
}

impl<T: Future> Future for EnterOnPoll<T> {
    type Output = T::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = self.project();
        let _span = LocalSpan::enter_with_local_parent(this.name.clone());
        this.inner.poll(cx)
    }
}
