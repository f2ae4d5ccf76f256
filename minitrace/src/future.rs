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

/// Runs `f` with `span` as the thread's local parent, as one poll of an
/// unfinished [`InSpan`] future: the local spans `f` records go on to the
/// collector as `f` returns, rather than wait on this thread for `span`'s
/// end, which may come later on another thread.
///
/// For adapters that keep one span over several things they poll: a
/// server middleware's root over its service's future and then over the
/// response body (`minitrace-tower`), a stream's span over its polls. A
/// future that owns its span needs only [`FutureExt::in_span`].
///
/// ```
/// use minitrace::collector::{Config, TestReporter};
/// use minitrace::prelude::*;
///
/// let (reporter, records) = TestReporter::new();
/// minitrace::set_reporter(reporter, Config::default());
/// let root = Span::root("request", SpanContext::random());
/// let answer = minitrace::future::run_in_span(&root, || {
///     let _step = LocalSpan::enter_with_local_parent("step");
///     42
/// });
/// assert_eq!(answer, 42);
/// drop(root);
/// minitrace::flush();
/// let records = records.lock();
/// let span = |name: &str| records.iter().find(|record| record.name == name).unwrap();
/// assert_eq!(span("step").parent_id, span("request").span_id);
/// ```
#[inline]
pub fn run_in_span<R>(span: &Span, f: impl FnOnce() -> R) -> R {
    let guard = span.set_local_parent();
    let result = f();
    guard.drop_unparked();
    result
}

#[cfg(feature = "futures")]
pub use self::streams::{EnterOnPollSink, EnterOnPollStream, InSpanSink, InSpanStream, SinkExt, StreamExt};

/// The adapters of streams and sinks (the `futures` feature).
#[cfg(feature = "futures")]
mod streams {
    use std::borrow::Cow;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use futures_core::stream::{FusedStream, Stream};
    use futures_sink::Sink;

    use crate::local::local_span::LocalSpan;
    use crate::span::Span;

    impl<T: Stream> StreamExt for T {}

    /// Adapters that trace a [`Stream`] as [`FutureExt`](super::FutureExt)
    /// traces a future (the `futures` feature).
    ///
    /// ```
    /// use futures::executor::block_on;
    /// use futures::stream::{self, StreamExt as _};
    /// use minitrace::future::StreamExt;
    /// use minitrace::prelude::*;
    ///
    /// let root = Span::root("request", SpanContext::random());
    /// let rows = stream::iter([1, 2, 3]).in_span(Span::enter_with_parent("rows", &root));
    /// assert_eq!(block_on(rows.collect::<Vec<_>>()), [1, 2, 3]);
    /// ```
    pub trait StreamExt: Stream + Sized {
        /// Runs the stream inside `span`: the span (which started when it
        /// was created) ends when the stream ends (yields `None`) or is
        /// dropped, and is the local parent during every poll, wherever the
        /// stream is polled.
        ///
        /// ```
        /// use futures::stream;
        /// use minitrace::future::StreamExt;
        /// use minitrace::prelude::*;
        /// let root = Span::root("request", SpanContext::random());
        /// let traced = stream::iter([1, 2]).in_span(Span::enter_with_parent("numbers", &root));
        /// # drop(traced);
        /// ```
        #[inline]
        fn in_span(self, span: Span) -> InSpanStream<Self> {
            InSpanStream { inner: self, span }
        }

        /// Records a local span named `name` around each poll of the
        /// stream, under the local parent of the thread polling it.
        ///
        /// ```
        /// use futures::stream;
        /// use minitrace::future::StreamExt;
        /// let traced = stream::iter([1, 2]).enter_on_poll("next number");
        /// # drop(traced);
        /// ```
        #[inline]
        fn enter_on_poll(self, name: impl Into<Cow<'static, str>>) -> EnterOnPollStream<Self> {
            EnterOnPollStream { inner: self, name: name.into() }
        }
    }

    pin_project_lite::pin_project! {
        /// A stream traced by a [`Span`]; see [`StreamExt::in_span`].
        ///
        /// ```
        /// use futures::executor::block_on;
        /// use futures::stream::{self, StreamExt as _};
        /// use minitrace::future::{InSpanStream, StreamExt};
        /// use minitrace::prelude::*;
        ///
        /// let traced: InSpanStream<_> = stream::iter([4, 2]).in_span(Span::noop());
        /// assert_eq!(block_on(traced.collect::<Vec<_>>()), [4, 2]);
        /// ```
        #[must_use = "streams do nothing unless polled"]
        pub struct InSpanStream<T> {
            #[pin]
            inner: T,
            span: Span,
        }
    }

    impl<T: std::fmt::Debug> std::fmt::Debug for InSpanStream<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("InSpanStream").field("inner", &self.inner).field("span", &self.span).finish()
        }
    }

    impl<T: Stream> Stream for InSpanStream<T> {
        type Item = T::Item;

        fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T::Item>> {
            let this = self.project();
            let guard = this.span.set_local_parent();
            let result = this.inner.poll_next(cx);
            if let Poll::Ready(None) = result {
                drop(guard);
                // The span ends with the stream, on this thread: what this
                // poll recorded waits here for it.
                drop(std::mem::take(this.span));
            } else {
                // Polled again later (after an item too), maybe on another
                // thread, where the span may end: as `InSpan`'s pending
                // polls, what this one recorded goes on now.
                guard.drop_unparked();
            }
            result
        }

        #[inline]
        fn size_hint(&self) -> (usize, Option<usize>) {
            self.inner.size_hint()
        }
    }

    impl<T: FusedStream> FusedStream for InSpanStream<T> {
        #[inline]
        fn is_terminated(&self) -> bool {
            self.inner.is_terminated()
        }
    }

    pin_project_lite::pin_project! {
        /// A stream with a local span around each poll; see
        /// [`StreamExt::enter_on_poll`].
        ///
        /// ```
        /// use futures::executor::block_on;
        /// use futures::stream::{self, StreamExt as _};
        /// use minitrace::future::{EnterOnPollStream, StreamExt};
        ///
        /// let traced: EnterOnPollStream<_> = stream::iter([4, 2]).enter_on_poll("next");
        /// assert_eq!(block_on(traced.collect::<Vec<_>>()), [4, 2]);
        /// ```
        #[must_use = "streams do nothing unless polled"]
        pub struct EnterOnPollStream<T> {
            #[pin]
            inner: T,
            name: Cow<'static, str>,
        }
    }

    impl<T: std::fmt::Debug> std::fmt::Debug for EnterOnPollStream<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("EnterOnPollStream").field("inner", &self.inner).field("name", &self.name).finish()
        }
    }

    impl<T: Stream> Stream for EnterOnPollStream<T> {
        type Item = T::Item;

        fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T::Item>> {
            let this = self.project();
            let _span = LocalSpan::enter_with_local_parent(this.name.clone());
            this.inner.poll_next(cx)
        }

        #[inline]
        fn size_hint(&self) -> (usize, Option<usize>) {
            self.inner.size_hint()
        }
    }

    impl<T: FusedStream> FusedStream for EnterOnPollStream<T> {
        #[inline]
        fn is_terminated(&self) -> bool {
            self.inner.is_terminated()
        }
    }

    impl<T: Sink<Item>, Item> SinkExt<Item> for T {}

    /// Adapters that trace a [`Sink`] (the `futures` feature). A value that
    /// is a stream too (a duplex connection) names the trait it means:
    /// `SinkExt::in_span(connection, span)`.
    ///
    /// ```
    /// use futures::executor::block_on;
    /// use futures::SinkExt as _;
    /// use minitrace::future::SinkExt;
    /// use minitrace::prelude::*;
    ///
    /// let root = Span::root("request", SpanContext::random());
    /// let mut lines = Vec::<u8>::new().in_span(Span::enter_with_parent("write", &root));
    /// block_on(lines.send(7)).unwrap();
    /// ```
    pub trait SinkExt<Item>: Sink<Item> + Sized {
        /// Runs the sink inside `span`: the span (which started when it was
        /// created) ends when the sink has closed (`poll_close` is ready)
        /// or is dropped, and is the local parent during every call,
        /// wherever the sink is driven.
        ///
        /// ```
        /// use minitrace::future::SinkExt;
        /// use minitrace::prelude::*;
        /// let root = Span::root("request", SpanContext::random());
        /// let traced = Vec::<u8>::new().in_span(Span::enter_with_parent("write", &root));
        /// # drop(traced);
        /// ```
        #[inline]
        fn in_span(self, span: Span) -> InSpanSink<Self> {
            InSpanSink { inner: self, span }
        }

        /// Records a local span named `name` around each call of the sink
        /// (`poll_ready`, `start_send`, `poll_flush`, `poll_close`), under
        /// the local parent of the thread making it.
        ///
        /// ```
        /// use minitrace::future::SinkExt;
        /// let traced = Vec::<u8>::new().enter_on_poll("write");
        /// # drop(traced);
        /// ```
        #[inline]
        fn enter_on_poll(self, name: impl Into<Cow<'static, str>>) -> EnterOnPollSink<Self> {
            EnterOnPollSink { inner: self, name: name.into() }
        }
    }

    pin_project_lite::pin_project! {
        /// A sink traced by a [`Span`]; see [`SinkExt::in_span`].
        ///
        /// ```
        /// use futures::executor::block_on;
        /// use futures::SinkExt as _;
        /// use minitrace::future::{InSpanSink, SinkExt};
        /// use minitrace::prelude::*;
        ///
        /// let mut traced: InSpanSink<_> = Vec::<u8>::new().in_span(Span::noop());
        /// block_on(traced.send(7)).unwrap();
        /// ```
        #[must_use = "sinks do nothing unless polled"]
        pub struct InSpanSink<T> {
            #[pin]
            inner: T,
            span: Span,
        }
    }

    impl<T: std::fmt::Debug> std::fmt::Debug for InSpanSink<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("InSpanSink").field("inner", &self.inner).field("span", &self.span).finish()
        }
    }

    impl<T: Sink<Item>, Item> Sink<Item> for InSpanSink<T> {
        type Error = T::Error;

        fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
            let this = self.project();
            super::run_in_span(this.span, || this.inner.poll_ready(cx))
        }

        fn start_send(self: Pin<&mut Self>, item: Item) -> Result<(), T::Error> {
            let this = self.project();
            super::run_in_span(this.span, || this.inner.start_send(item))
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
            let this = self.project();
            super::run_in_span(this.span, || this.inner.poll_flush(cx))
        }

        fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
            let this = self.project();
            let guard = this.span.set_local_parent();
            let result = this.inner.poll_close(cx);
            if result.is_ready() {
                drop(guard);
                // Closed (or failed to): the sink's work is over.
                drop(std::mem::take(this.span));
            } else {
                guard.drop_unparked();
            }
            result
        }
    }

    pin_project_lite::pin_project! {
        /// A sink with a local span around each call; see
        /// [`SinkExt::enter_on_poll`].
        ///
        /// ```
        /// use futures::executor::block_on;
        /// use futures::SinkExt as _;
        /// use minitrace::future::{EnterOnPollSink, SinkExt};
        ///
        /// let mut traced: EnterOnPollSink<_> = Vec::<u8>::new().enter_on_poll("write");
        /// block_on(traced.send(7)).unwrap();
        /// ```
        #[must_use = "sinks do nothing unless polled"]
        pub struct EnterOnPollSink<T> {
            #[pin]
            inner: T,
            name: Cow<'static, str>,
        }
    }

    impl<T: std::fmt::Debug> std::fmt::Debug for EnterOnPollSink<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("EnterOnPollSink").field("inner", &self.inner).field("name", &self.name).finish()
        }
    }

    impl<T: Sink<Item>, Item> Sink<Item> for EnterOnPollSink<T> {
        type Error = T::Error;

        fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
            let this = self.project();
            let _span = LocalSpan::enter_with_local_parent(this.name.clone());
            this.inner.poll_ready(cx)
        }

        fn start_send(self: Pin<&mut Self>, item: Item) -> Result<(), T::Error> {
            let this = self.project();
            let _span = LocalSpan::enter_with_local_parent(this.name.clone());
            this.inner.start_send(item)
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
            let this = self.project();
            let _span = LocalSpan::enter_with_local_parent(this.name.clone());
            this.inner.poll_flush(cx)
        }

        fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
            let this = self.project();
            let _span = LocalSpan::enter_with_local_parent(this.name.clone());
            this.inner.poll_close(cx)
        }
    }
}
