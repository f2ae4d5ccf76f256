//! Recycled property lists. A span's properties are filled on a traced
//! thread into a [`PropertyList`] and read on the collector thread, which
//! moves the vector into the span's record; once the record is reported,
//! the emptied vector goes back into an emptied list and the list to a
//! shared pool, from which traced threads take them in batches. In steady
//! state no list is allocated, and none is freed on another thread than
//! the one that allocated it (PERFORMANCE.md, "Recycled property lists").

use std::borrow::Cow;
use std::cell::RefCell;

use crate::data::record::PropertyList;
use crate::util::pool::{SharedPool, Weighed};
use crate::util::prefetch;

/// Property slots (48 bytes each) the pool's lists hold in all: 6 MiB.
/// Lists beyond that are freed. Enough for the lists in flight in one
/// collector cycle (10 ms) of two threads recording a span with two
/// properties every microsecond: fewer, and the lists freed at every
/// cycle's end are allocated again during the next.
const POOL_CAPACITY: usize = 1 << 17;
/// Lists a thread takes from the pool at once (one lock per this many),
/// and the most its own cache keeps.
const REFILL: usize = 64;
/// Lists with more room than this are freed rather than kept.
const MAX_KEPT_CAPACITY: usize = 16;

static POOL: SharedPool<Pooled> = SharedPool::new(POOL_CAPACITY);

thread_local! {
    static CACHE: RefCell<Vec<Pooled>> = const { RefCell::new(Vec::new()) };
}

/// A list as pools and caches keep it: with its capacity, read where the
/// list was last written, so that taking lists out of the pool reads none
/// of them.
pub(crate) struct Pooled(PropertyList, usize);

impl Pooled {
    pub(crate) fn new(list: PropertyList) -> Pooled {
        let capacity = list.capacity();
        Pooled(list, capacity)
    }
}

/// A list counts for its property slots.
impl Weighed for Pooled {
    fn weight(&self) -> usize {
        self.1
    }

    /// A property may own a string.
    fn empty(&mut self) {
        self.0.clear();
    }
}

/// Evaluates a user's properties closure into a recycled list; `None`
/// when it yields none (the list goes back to the cache). The closure runs
/// with no borrow held: it may record spans and properties itself.
#[inline]
pub(crate) fn collect<K, V, I, F>(properties: F) -> Option<PropertyList>
where
    K: Into<Cow<'static, str>>,
    V: Into<Cow<'static, str>>,
    I: IntoIterator<Item = (K, V)>,
    F: FnOnce() -> I,
{
    let pairs = properties().into_iter().map(|(key, value)| (key.into(), value.into()));
    let mut list = take();
    list.extend(pairs);
    if list.is_empty() {
        give_back_locally(list);
        return None;
    }
    Some(list)
}

/// An empty list, recycled when one is available.
#[inline]
fn take() -> PropertyList {
    CACHE
        .try_with(|cache| {
            let mut cache = cache.try_borrow_mut().ok()?;
            if cache.is_empty() {
                POOL.refill(&mut cache, REFILL);
            }
            let list = cache.pop();
            prefetch_next(&cache);
            list.map(|Pooled(list, _)| list)
        })
        .ok()
        .flatten()
        // Grown by the first properties to their number.
        .unwrap_or_default()
}

/// Asks for the lines the next two lists will be written through: the
/// collector wrote them last, on another core, and a miss on each would
/// otherwise stall the span that takes them (PERFORMANCE.md, "Recycled
/// property lists"). The next list's box was asked for by the take
/// before, so reading where its properties are is no miss.
#[inline]
fn prefetch_next(cache: &[Pooled]) {
    if let [.., Pooled(after_next, _), _] = cache {
        prefetch::line(&**after_next);
    }
    if let Some(Pooled(next, _)) = cache.last() {
        // A list that holds no room has a dangling pointer: still a hint.
        prefetch::line(next.as_ptr());
    }
}

/// Keeps a list on this thread (emptied here) for its next properties.
pub(crate) fn give_back_locally(mut list: PropertyList) {
    if !usual_size(list.capacity()) {
        return;
    }
    list.clear();
    let _ = CACHE.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            if cache.len() < REFILL {
                cache.push(Pooled::new(list));
            }
        }
    });
}

/// Returns lists (from the collector thread) to the shared pool, emptied;
/// those of an unusual size, or past its bound, are freed. `lists` is left
/// empty, its capacity kept.
pub(crate) fn recycle(lists: &mut Vec<Pooled>) {
    recycle_into(&POOL, lists);
}

/// [`recycle`] into `pool`.
fn recycle_into(pool: &SharedPool<Pooled>, lists: &mut Vec<Pooled>) {
    pool.put(lists, usual_size);
}

/// Whether a list is worth keeping: one that holds room for a property,
/// but not more than a span usually carries.
fn usual_size(capacity: usize) -> bool {
    (1..=MAX_KEPT_CAPACITY).contains(&capacity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::record::Property;

    #[test]
    fn a_closure_with_no_properties_yields_no_list() {
        assert!(collect(Vec::<(&str, &str)>::new).is_none());
        let list = collect(|| [("k", "v")]).unwrap();
        assert_eq!(*list, [("k".into(), "v".into())]);
    }

    #[test]
    fn a_list_given_back_is_handed_out_again_emptied() {
        // This test's thread alone uses its cache.
        let list = collect(|| [("a", "1"), ("b", "2")]).unwrap();
        let at = &*list as *const Vec<Property>;
        give_back_locally(list);
        let again = collect(|| [("c", "3")]).unwrap();
        assert_eq!(&*again as *const Vec<Property>, at);
        assert_eq!(*again, [("c".into(), "3".into())]);
    }

    #[test]
    fn only_lists_of_a_usual_size_are_kept() {
        assert!(usual_size(1));
        assert!(usual_size(MAX_KEPT_CAPACITY));
        assert!(!usual_size(0));
        assert!(!usual_size(MAX_KEPT_CAPACITY + 1));
        let mut lists = vec![
            Pooled::new(Box::new(Vec::with_capacity(MAX_KEPT_CAPACITY + 1))),
            Pooled::new(Box::default()),
        ];
        recycle(&mut lists);
        assert!(lists.is_empty());
        // Past the bound, lists are freed.
        let mut many: Vec<Pooled> =
            (0..POOL_CAPACITY + 1).map(|_| Pooled::new(Box::new(vec![("k".into(), "v".into())]))).collect();
        recycle(&mut many);
        assert!(many.is_empty());
        assert!(POOL.weight() <= POOL_CAPACITY);
    }

    #[test]
    fn recycling_pools_usual_lists_emptied_and_frees_the_others() {
        let pool = SharedPool::new(POOL_CAPACITY);
        let mut lists = vec![
            Pooled::new(Box::new(vec![("k".into(), "v".into())])),
            Pooled::new(Box::new(Vec::with_capacity(MAX_KEPT_CAPACITY + 1))),
            Pooled::new(Box::default()),
        ];
        recycle_into(&pool, &mut lists);
        assert!(lists.is_empty());
        let mut taken = Vec::new();
        pool.refill(&mut taken, REFILL);
        assert_eq!(taken.len(), 1, "only the usual list is pooled");
        let Pooled(list, capacity) = &taken[0];
        assert!(list.is_empty());
        assert_eq!((list.capacity(), *capacity), (1, 1));
    }
}
