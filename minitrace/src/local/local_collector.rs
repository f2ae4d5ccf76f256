use std::marker::PhantomData;
use std::sync::Arc;

use crate::data::batch::{Batch, IdMap};
use crate::data::context::SpanContext;
use crate::data::convert::{attach_events, convert, Emptied, Part};
use crate::data::raw_span::RawSpan;
use crate::data::record::SpanRecord;
use crate::data::target::Target;
use crate::data::timeline::Timeline;
use crate::local::stack;
use crate::transport::{gate, span_buffers};
use crate::util::recording::{recording, Recording};

/// Collects the local spans started on this thread while it is alive,
/// without a parent span: the batch ([`LocalSpans`]) can then be mounted
/// under any number of [`Span`](crate::Span)s with
/// [`Span::push_child_spans`](crate::Span::push_child_spans), e.g. one batch
/// of work done for several requests at once.
///
/// ```
/// use minitrace::local::{LocalCollector, LocalSpan};
/// use minitrace::prelude::*;
///
/// let collector = LocalCollector::start();
/// let _ = LocalSpan::enter_with_local_parent("write batch to disk");
/// let spans = collector.collect();
///
/// for request in [Span::root("put a", SpanContext::random()), Span::root("put b", SpanContext::random())] {
///     request.push_child_spans(spans.clone());
/// }
/// ```
#[must_use]
#[derive(Default, Debug)]
pub struct LocalCollector {
    epoch: Recording<u64>,
    _not_send: PhantomData<*const ()>,
}

/// A batch of finished local spans from a [`LocalCollector`]; cheap to clone.
///
/// ```
/// let spans = minitrace::local::LocalCollector::start().collect();
/// let copy = spans.clone();
/// # let _ = copy;
/// ```
#[derive(Debug, Clone, Default)]
pub struct LocalSpans {
    /// The spans, and how many of them are spans rather than events (counted
    /// as recorded, so that mounting the batch needs no pass over it).
    pub(crate) spans: Recording<(Arc<Vec<RawSpan>>, usize)>,
}

impl LocalCollector {
    /// Starts collecting this thread's local spans; a no-op while recording
    /// is [switched off](crate::set_enabled).
    ///
    /// ```
    /// let collector = minitrace::local::LocalCollector::start();
    /// # drop(collector);
    /// ```
    #[inline]
    pub fn start() -> LocalCollector {
        if !gate::is_enabled() {
            return LocalCollector::default();
        }
        LocalCollector { epoch: recording(stack::push_line(None, false)), _not_send: PhantomData }
    }

    /// Stops collecting and returns the spans; spans still open are closed now.
    ///
    /// ```
    /// let spans = minitrace::local::LocalCollector::start().collect();
    /// # let _ = spans;
    /// ```
    #[inline]
    pub fn collect(mut self) -> LocalSpans {
        let spans =
            self.epoch.take().and_then(stack::take_line).map(|(spans, count)| (Arc::new(spans), count));
        LocalSpans { spans: recording(spans) }
    }
}

impl Drop for LocalCollector {
    /// Dropped without `collect`: the spans are discarded.
    #[inline]
    fn drop(&mut self) {
        if let Some(epoch) = self.epoch.take() {
            stack::close_line(epoch);
        }
    }
}

impl LocalSpans {
    /// The spans as records under `parent`, without going through a reporter:
    /// for reporting them elsewhere, or for tests.
    ///
    /// ```
    /// use minitrace::local::{LocalCollector, LocalSpan};
    /// use minitrace::prelude::*;
    ///
    /// let collector = LocalCollector::start();
    /// drop(LocalSpan::enter_with_local_parent("step"));
    /// let records = collector.collect().to_span_records(SpanContext::random());
    /// assert_eq!(records.len(), 1);
    /// ```
    pub fn to_span_records(&self, parent: SpanContext) -> Vec<SpanRecord> {
        let Some((spans, _)) = self.spans.as_ref() else {
            return Vec::new();
        };
        let target = Target::new(parent.trace_id, parent.span_id, 0);
        let mut records = Vec::with_capacity(spans.len());
        let batch = Batch::Shared { spans: spans.clone(), ids: IdMap::Keep };
        into_records([(batch, target)], &Timeline::current(), &mut records);
        records
    }
}

/// Appends the records of `parts` (typically one trace) to `out`, with
/// events attached to their spans.
fn into_records(
    parts: impl IntoIterator<Item = (Batch, Target)>,
    timeline: &Timeline,
    out: &mut Vec<SpanRecord>,
) {
    let (first, mut events, mut emptied) = (out.len(), Vec::new(), Emptied::default());
    for (mut batch, target) in parts {
        convert(Part::Batch(&mut batch), &target, timeline, out, &mut events, &mut emptied);
    }
    attach_events(&mut out[first..], events);
    span_buffers::recycle(&mut emptied.buffers);
}
