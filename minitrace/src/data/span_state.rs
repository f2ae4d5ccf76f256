//! A recording [`Span`](crate::Span)'s state, in one cache line.
//!
//! The common span (a static name, one parent, no properties or events)
//! fits in 64 bytes; anything else goes to an [`Extra`] allocated when first
//! needed. One line, as every line of a `Span` handed to another thread
//! crosses between cores (PERFORMANCE.md, "One cache line per span").

use std::borrow::Cow;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use minstant::Instant;

use crate::data::batch::{Batch, IdMap, Role};
use crate::data::collect_id;
use crate::data::id::{SpanId, TraceId};
use crate::data::raw_span::{Clock, RawSpan, LINE_PARENT};
use crate::data::record::{Property, PropertyList};
use crate::data::target::{Target, Targets};
use crate::util::lazy_box::LazyBox;

/// Field by field, the first target is inlined rather than kept as a
/// [`Target`], whose padding would not leave room for the name's length.
pub(crate) struct SpanState {
    id: SpanId,
    begin: Instant,
    trace_id: [u64; 2],
    parent_id: SpanId,
    name: StaticBytes,
    extra: LazyBox<Extra>,
    /// Collect ids are handed out below 2³² (see `collect_id::next_collect_id`).
    collect_id: u32,
    /// The static name's length, when it has one (see [`Extra::name`]).
    name_len: u16,
    role: Role,
}

const _: () =
    assert!(cfg!(not(target_pointer_width = "64")) || std::mem::size_of::<Option<SpanState>>() == 64);

/// What few spans have.
#[derive(Default)]
pub(crate) struct Extra {
    /// An owned name, or a static one longer than `u16::MAX` bytes: takes
    /// the place of the inline one.
    name: Option<Cow<'static, str>>,
    properties: Option<PropertyList>,
    /// The targets after the first, for a span with several parents.
    more_targets: Vec<Target>,
    /// Events added through `&Span`.
    events: Mutex<Vec<RawSpan>>,
}

/// Emptied boxes of rare fields, recycled: a request's root with
/// properties, reported, would otherwise allocate its box on the traced
/// thread and free it on the collector's, a free on another thread than
/// the allocation's, which makes the traced thread's next allocation slow
/// (PERFORMANCE.md, "Recycled property lists"). A box emptied anywhere (a
/// span thrown away on its thread, or converted by the collector) goes to
/// that thread's cache; a cache past two batches hands one to a shared
/// pool, and an empty one takes a batch from it.
mod spare {
    use std::cell::RefCell;

    use super::Extra;
    use crate::util::pool::{SharedPool, Weighed};

    /// Boxes the pool keeps (~100 bytes each: ~1.6 MiB); more are freed.
    pub(super) const POOL_BOXES: usize = 1 << 14;
    /// Boxes moved between a thread's cache and the pool at once.
    pub(super) const BATCH: usize = 64;
    /// A box keeps room for at most this many further parents.
    pub(super) const MAX_KEPT_TARGETS: usize = 4;

    pub(super) static POOL: SharedPool<Box<Extra>> = SharedPool::new(POOL_BOXES);

    /// A box counts for one.
    impl Weighed for Box<Extra> {
        fn weight(&self) -> usize {
            1
        }

        /// Nothing left: a box is given already emptied, its parts taken
        /// by `Extra::into_parts`.
        fn empty(&mut self) {}
    }

    thread_local! {
        #[allow(clippy::vec_box)]
        pub(super) static CACHE: RefCell<Vec<Box<Extra>>> = const { RefCell::new(Vec::new()) };
    }

    /// An emptied box, if this thread's cache or the pool has one.
    pub(super) fn take() -> Option<Box<Extra>> {
        CACHE
            .try_with(|cache| {
                let mut cache = cache.try_borrow_mut().ok()?;
                if cache.is_empty() {
                    POOL.refill(&mut cache, BATCH);
                }
                cache.pop()
            })
            .ok()
            .flatten()
    }

    /// Keeps an emptied box for a later span.
    pub(super) fn give(extra: Box<Extra>) {
        let _ = CACHE.try_with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else { return };
            cache.push(extra);
            if cache.len() > 2 * BATCH {
                // What finds no room in the pool is freed.
                let from = cache.len() - BATCH;
                POOL.put_tail(&mut cache, from, |_| true);
            }
        });
    }
}

/// The bytes of a `&'static str`, as a thin pointer: its length is kept
/// apart, in a field that packs with others.
#[derive(Clone, Copy)]
struct StaticBytes(NonNull<u8>);

// SAFETY: the pointer is only ever read as the `&'static str` it was taken
// from, which is immutable and lives for the whole program: sending or
// sharing it is as safe as sending or sharing that `&'static str`.
unsafe impl Send for StaticBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for StaticBytes {}

impl SpanState {
    /// `targets` must hold at least one target.
    #[inline(always)]
    pub(crate) fn new(name: Cow<'static, str>, targets: Targets, role: Role, begin: Instant) -> SpanState {
        let (first, more) = match targets {
            Targets::One(target) => (target, Vec::new()),
            Targets::Many(mut targets) => (targets.remove(0), targets),
        };
        debug_assert!(first.collect_id < 1 << 32, "see `collect_id::next_collect_id`");
        let (static_name, owned_name) = match name {
            Cow::Borrowed(name) if name.len() <= usize::from(u16::MAX) => (name, None),
            name => ("", Some(name)),
        };
        let mut extra = LazyBox::new();
        if owned_name.is_some() || !more.is_empty() {
            *extra.get_mut_or_default() = Extra { name: owned_name, more_targets: more, ..Extra::default() };
        }
        // One expression, every field from a register, not finished field by
        // field (PERFORMANCE.md, "Building values where they live").
        SpanState {
            id: SpanId::random(),
            begin,
            trace_id: first.trace_id,
            parent_id: first.parent_id,
            name: StaticBytes(NonNull::from(static_name.as_bytes()).cast()),
            extra,
            collect_id: first.collect_id as u32,
            name_len: static_name.len() as u16,
            role,
        }
    }

    pub(crate) fn id(&self) -> SpanId {
        self.id
    }

    pub(crate) fn begin(&self) -> Instant {
        self.begin
    }

    pub(crate) fn collect_id(&self) -> u64 {
        self.collect_id.into()
    }

    pub(crate) fn role(&self) -> Role {
        self.role
    }

    pub(crate) fn set_role(&mut self, role: Role) {
        self.role = role;
    }

    /// The clock for the span's end: the cheaper reading for a root ending
    /// on the thread that started it, where the start was read; the
    /// ordered one for a span that may have started on another thread.
    /// The cheaper reading is not ordered with ordered ones: a thread-safe
    /// child or an event ended just before the root may appear to end up
    /// to a fraction of a microsecond after it. The cheaper reading wherever
    /// it will do, as the ordered one waits for all the work still in flight
    /// (PERFORMANCE.md, "Which reading ends a span").
    #[inline]
    pub(crate) fn end_clock(&self) -> Clock {
        match self.role {
            Role::Root if collect_id::is_from_this_thread(self.collect_id.into()) => Clock::SameThread,
            _ => Clock::AnyThread,
        }
    }

    /// The span's name, borrowed.
    pub(crate) fn static_name_or_owned(&self) -> &str {
        match self.extra.get().and_then(|extra| extra.name.as_deref()) {
            Some(name) => name,
            None => self.static_name(),
        }
    }

    /// The properties added so far.
    pub(crate) fn properties(&self) -> &[Property] {
        self.extra.get().and_then(|extra| extra.properties.as_deref()).map_or(&[], Vec::as_slice)
    }

    pub(crate) fn trace_id(&self) -> TraceId {
        self.first_target().trace_id()
    }

    /// The target of this span's local spans on its own thread, when it
    /// has one target (a root's line).
    #[inline]
    pub(crate) fn line_target(&self) -> Target {
        self.first_target().with_parent(self.id)
    }

    /// The targets of a child of this span.
    #[inline(always)]
    pub(crate) fn child_targets(&self) -> Targets {
        self.targets().with_parent(self.id)
    }

    /// Each of this span's own targets, without making a list of them.
    #[inline]
    pub(crate) fn for_each_target(&self, mut each: impl FnMut(&Target)) {
        each(&self.first_target());
        if let Some(extra) = self.extra.get() {
            extra.more_targets.iter().for_each(each);
        }
    }

    /// This span's own targets.
    #[inline]
    pub(crate) fn targets(&self) -> Targets {
        match self.extra.get() {
            Some(extra) if !extra.more_targets.is_empty() => Targets::Many(
                std::iter::once(self.first_target()).chain(extra.more_targets.iter().copied()).collect(),
            ),
            _ => Targets::One(self.first_target()),
        }
    }

    /// The span's properties, as the list that holds them, the rest
    /// dropped: for a span thrown away on its thread, whose list goes back
    /// to the thread's cache instead of being freed. Its box of rare
    /// fields, emptied, is kept for a later span (see [`spare`]).
    pub(crate) fn into_properties(mut self) -> Option<PropertyList> {
        let (_, properties, _) = self.extra.take()?.into_parts();
        properties
    }

    /// The first list moves in as it is; a later one's properties are
    /// appended, and that list, emptied, is handed back for reuse.
    pub(crate) fn add_properties(&mut self, mut list: PropertyList) -> Option<PropertyList> {
        if list.is_empty() {
            return Some(list);
        }
        let extra = self.extra.get_mut_or_insert_with(|| spare::take().unwrap_or_default());
        match &mut extra.properties {
            Some(existing) => {
                existing.append(&mut list);
                Some(list)
            }
            slot @ None => {
                *slot = Some(list);
                None
            }
        }
    }

    pub(crate) fn add_event(&self, event: RawSpan) {
        crate::util::lock(&self.extra.get_or_default().events).push(event);
    }

    /// The heap bytes the span owns beside its own 64: what it keeps out of
    /// line (an owned name, properties, events, further targets). Inlined
    /// with its test for nothing out of line, what most spans find.
    #[inline]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.extra.get().map_or(0, Extra::heap_bytes)
    }

    /// The events added through `&Span`.
    pub(crate) fn event_count(&self) -> usize {
        self.extra.get().map_or(0, |extra| crate::util::lock(&extra.events).len())
    }

    /// How many records the span yields: one per target.
    pub(crate) fn target_count(&self) -> usize {
        1 + self.extra.get().map_or(0, |extra| extra.more_targets.len())
    }

    /// The span, ended at `end`, as a batch its targets share (a span with
    /// several parents): the span, then its events. What it owns is taken
    /// out, and the rest can be dropped where it lies. (Its targets are read
    /// first, with [`targets`](Self::targets).)
    pub(crate) fn take_batch(&mut self, end: Instant) -> Batch {
        let mut raw = RawSpan::begin(self.id, LINE_PARENT, Cow::Borrowed(self.static_name()), self.begin);
        raw.end = end;
        let mut spans = Vec::new();
        if let Some(extra) = self.take_extra() {
            let (name, properties, events) = extra.into_parts();
            if let Some(name) = name {
                raw.name = name;
            }
            if let Some(properties) = properties {
                raw.add_properties(properties);
            }
            spans = events;
        }
        spans.insert(0, raw);
        Batch::Shared { spans: Arc::new(spans), ids: IdMap::Keep }
    }

    /// What it keeps out of line (an owned name, properties, events),
    /// cloned: it stays where it is.
    pub(crate) fn cloned_extra(&self) -> (Option<Cow<'static, str>>, Vec<Property>, Vec<RawSpan>) {
        match self.extra.get() {
            None => (None, Vec::new(), Vec::new()),
            Some(extra) => {
                let events = crate::util::lock(&extra.events).clone();
                let properties = extra.properties.as_deref().cloned().unwrap_or_default();
                (extra.name.clone(), properties, events)
            }
        }
    }

    /// The span ended at `end`, as [`take_batch`](Self::take_batch) makes
    /// it, from clones: it stays where it is.
    pub(crate) fn cloned_batch(&self, end: Instant) -> Batch {
        let (name, properties, events) = self.cloned_extra();
        let mut raw = RawSpan::begin(self.id, LINE_PARENT, Cow::Borrowed(self.static_name()), self.begin);
        raw.end = end;
        if let Some(name) = name {
            raw.name = name;
        }
        if !properties.is_empty() {
            raw.add_properties(Box::new(properties));
        }
        let mut spans = events;
        spans.insert(0, raw);
        Batch::Shared { spans: Arc::new(spans), ids: IdMap::Keep }
    }

    /// What the span kept out of line, taken.
    #[inline]
    pub(crate) fn take_extra(&mut self) -> Option<Box<Extra>> {
        self.extra.take()
    }

    #[inline]
    fn first_target(&self) -> Target {
        Target { trace_id: self.trace_id, parent_id: self.parent_id, collect_id: u64::from(self.collect_id) }
    }

    pub(crate) fn static_name(&self) -> &'static str {
        // SAFETY: `name` and `name_len` are set together from one
        // `&'static str` (an empty one when the name is kept in `Extra`),
        // so they describe valid UTF-8 that lives for the whole program.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                self.name.0.as_ptr(),
                self.name_len.into(),
            ))
        }
    }
}

impl Extra {
    /// Its bytes and what it owns: see [`SpanState::heap_bytes`].
    #[cold]
    fn heap_bytes(&self) -> usize {
        let events = crate::util::lock(&self.events);
        std::mem::size_of::<Extra>()
            + self.name.as_ref().map_or(0, crate::data::record::owned_bytes)
            + self.properties.as_deref().map_or(0, |properties| {
                std::mem::size_of::<Vec<Property>>() + crate::data::record::properties_bytes(properties)
            })
            + events.iter().map(|event| std::mem::size_of::<RawSpan>() + event.heap_bytes()).sum::<usize>()
            + self.more_targets.capacity() * std::mem::size_of::<Target>()
    }

    /// The owned name (if any), the properties and the events, taken out;
    /// the emptied box is kept for a later span (see [`spare`]).
    #[cold]
    pub(crate) fn into_parts(
        mut self: Box<Self>,
    ) -> (Option<Cow<'static, str>>, Option<PropertyList>, Vec<RawSpan>) {
        // A box whose lock a panic poisoned is not reused.
        let poisoned = self.events.is_poisoned();
        let events = std::mem::take(self.events.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()));
        let parts = (self.name.take(), self.properties.take(), events);
        if !poisoned {
            // Room for a few parents is kept; a span's thousand is not.
            if self.more_targets.capacity() > spare::MAX_KEPT_TARGETS {
                self.more_targets = Vec::new();
            }
            self.more_targets.clear();
            spare::give(self);
        }
        parts
    }
}

/// Test seam: spans whose links a test spells out.
#[cfg(test)]
impl SpanState {
    pub(crate) fn with_id(mut self, id: SpanId) -> SpanState {
        self.id = id;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(parent: u64) -> Target {
        Target::new(TraceId(7), SpanId(parent), 9)
    }

    #[test]
    fn a_span_with_a_static_name_and_one_parent_needs_no_extra() {
        let mut state = SpanState::new("step".into(), Targets::One(target(1)), Role::Child, Instant::ZERO);
        assert!(state.extra.get().is_none());
        assert_eq!(state.child_targets(), Targets::One(target(1).with_parent(state.id())));
        assert_eq!(state.targets(), Targets::One(target(1)));
        let Batch::Shared { spans, ids: IdMap::Keep } = state.take_batch(Instant::ZERO) else {
            panic!("not a batch of its own")
        };
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].name.as_ref(), spans[0].parent_id), ("step", LINE_PARENT));
    }

    fn with_properties() -> SpanState {
        let mut state = SpanState::new("step".into(), Targets::One(target(1)), Role::Child, Instant::ZERO);
        assert!(state.add_properties(Box::new(vec![("k".into(), "v".into())])).is_none());
        state
    }

    fn extra_at(state: &SpanState) -> *const Extra {
        state.extra.get().expect("a box of rare fields")
    }

    #[test]
    fn an_emptied_box_of_rare_fields_is_used_again_and_a_poisoned_one_is_not() {
        // This test's thread alone uses its cache: the box given back last
        // is on its top.
        let mut state = with_properties();
        state.add_event(RawSpan::event(state.id(), "event".into(), None));
        let at = extra_at(&state);
        let (name, properties, events) = state.take_extra().unwrap().into_parts();
        assert_eq!((name, properties.map(|p| p.len()), events.len()), (None, Some(1), 1));
        // The next span given properties gets the same box, emptied.
        let mut again = with_properties();
        assert_eq!(extra_at(&again), at);
        assert_eq!(again.event_count(), 0);
        assert_eq!(again.target_count(), 1);
        // A panic while an event was added poisons the box's lock: dropped.
        let extra = again.extra.get().unwrap();
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _events = extra.events.lock();
            panic!("while adding an event");
        }));
        let cached = || spare::CACHE.with(|cache| cache.borrow().len());
        let before = cached();
        let (_, properties, _) = again.take_extra().unwrap().into_parts();
        assert_eq!(properties.map(|p| p.len()), Some(1));
        assert_eq!(cached(), before, "a poisoned box was kept");
    }

    #[test]
    fn a_thread_keeps_at_most_two_batches_and_the_pool_its_bound() {
        let boxes = std::thread::spawn(|| {
            for _ in 0..3 * spare::POOL_BOXES {
                Box::<Extra>::default().into_parts();
                assert!(spare::CACHE.with(|cache| cache.borrow().len()) <= 2 * spare::BATCH);
            }
            let mut many = Box::<Extra>::default();
            many.more_targets = vec![target(1); spare::MAX_KEPT_TARGETS + 1];
            many.into_parts();
            spare::CACHE.with(|cache| cache.borrow().last().unwrap().more_targets.capacity())
        })
        .join()
        .unwrap();
        assert_eq!(boxes, 0);
        assert!(spare::POOL.len() <= spare::POOL_BOXES);
    }

    #[test]
    fn only_a_root_ending_where_it_started_ends_on_the_cheaper_clock() {
        let root_target = Target::new(TraceId(7), SpanId(0), collect_id::next_collect_id());
        let root = SpanState::new("root".into(), Targets::One(root_target), Role::Root, Instant::ZERO);
        let child = SpanState::new("child".into(), root.child_targets(), Role::Child, Instant::ZERO);
        assert_eq!((root.end_clock(), child.end_clock()), (Clock::SameThread, Clock::AnyThread));
        let elsewhere = std::thread::spawn(move || (root.end_clock(), child.end_clock())).join().unwrap();
        assert_eq!(elsewhere, (Clock::AnyThread, Clock::AnyThread));
    }

    #[test]
    fn owned_and_long_names_several_parents_properties_and_events_travel_with_the_span() {
        let long: &'static str = Box::leak("x".repeat(usize::from(u16::MAX) + 1).into_boxed_str());
        for name in [Cow::Owned(String::from("owned")), Cow::Borrowed(long)] {
            let targets = Targets::Many(vec![target(1), target(2)]);
            let mut state = SpanState::new(name.clone(), targets.clone(), Role::Child, Instant::ZERO);
            assert!(state.add_properties(Box::new(vec![("k".into(), "v".into())])).is_none());
            state.add_event(RawSpan::event(state.id(), "event".into(), None));
            let id = state.id();
            assert_eq!(state.targets(), targets);
            assert_eq!(
                state.child_targets(),
                Targets::Many(vec![target(1).with_parent(id), target(2).with_parent(id)])
            );
            assert_eq!(state.target_count(), 2);
            let Batch::Shared { spans, ids: IdMap::Keep } = state.take_batch(Instant::ZERO) else {
                panic!("not a batch of its own")
            };
            let [raw, event] = &spans[..] else { panic!("not the span and its event") };
            assert_eq!(raw.name, name);
            assert_eq!(raw.properties.as_deref().map(Vec::len), Some(1));
            assert!(event.is_event() && event.parent_id == id);
        }
    }
}
