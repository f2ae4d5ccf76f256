//! The shared half of a two-level recycling pool. Allocations that one
//! thread fills and another empties (span buffers, property lists, boxes of
//! rare fields) go back to the thread that will fill them again through a
//! pool like this one, not to the allocator from the wrong thread. Each
//! kind keeps a per-thread cache in front of it (a `thread_local!` cannot
//! be generic): the cache takes a batch at a time from here, and what is
//! emptied elsewhere comes back here in batches.
//!
//! What the pool holds is bounded by weight (span slots, properties,
//! boxes), each item's read from the item itself where that reads no line
//! another core wrote last (a buffer's capacity lies in the pool's own
//! vector), else from a weight kept beside it (a list's capacity is behind
//! its box). Items come in emptied before the lock is taken (what they
//! held may own memory to free), sorted out where they lie, then added in
//! one copy, not pushed one by one into lines the traced threads last read
//! (PERFORMANCE.md, "Recycled span buffers"). Past the bound, items are
//! freed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What a pooled item counts for against its pool's bound, and how it is
/// made ready for its next use.
pub(crate) trait Weighed {
    /// Read without following a pointer.
    fn weight(&self) -> usize;

    /// Empties it for its next use (what it held may own memory to free).
    /// Required, so that each kind says how, or why there is nothing to.
    fn empty(&mut self);
}

/// Recycled items of one kind, shared by every thread.
pub(crate) struct SharedPool<T> {
    /// How many items it holds, mirrored out of the lock so that an empty
    /// pool costs a load, not the lock.
    len: AtomicUsize,
    stock: Mutex<Stock<T>>,
    /// The most weight it keeps.
    bound: usize,
}

struct Stock<T> {
    items: Vec<T>,
    /// The sum of their weights.
    weight: usize,
}

impl<T: Weighed> SharedPool<T> {
    /// An empty pool that keeps at most `bound` of weight.
    pub(crate) const fn new(bound: usize) -> SharedPool<T> {
        SharedPool {
            len: AtomicUsize::new(0),
            stock: Mutex::new(Stock { items: Vec::new(), weight: 0 }),
            bound,
        }
    }

    /// Moves up to `batch` items (the last pooled) into `cache`; without
    /// taking the lock when the pool is empty.
    #[cold]
    #[inline(never)]
    pub(crate) fn refill(&self, cache: &mut Vec<T>, batch: usize) {
        if self.len.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut stock = super::lock(&self.stock);
        let keep = stock.items.len().saturating_sub(batch);
        stock.weight -= stock.items[keep..].iter().map(T::weight).sum::<usize>();
        cache.extend(stock.items.drain(keep..));
        self.len.store(stock.items.len(), Ordering::Relaxed);
    }

    /// Empties `items` and pools those whose weight `usual` accepts while
    /// they fit the bound, and frees the rest: `items` is left empty, its
    /// capacity kept.
    pub(crate) fn put(&self, items: &mut Vec<T>, usual: impl Fn(usize) -> bool) {
        self.put_tail(items, 0, usual);
    }

    /// [`put`](Self::put) for `items[from..]`: `items` is left `from` long.
    pub(crate) fn put_tail(&self, items: &mut Vec<T>, from: usize, usual: impl Fn(usize) -> bool) {
        if items.len() <= from {
            return;
        }
        for item in &mut items[from..] {
            item.empty();
        }
        let mut stock = super::lock(&self.stock);
        let Stock { items: pooled, weight } = &mut *stock;
        // One pass over the items where they lie, then one copy.
        let mut index = 0;
        items.retain_mut(|item| {
            index += 1;
            if index <= from {
                return true;
            }
            let item_weight = item.weight();
            let keep = usual(item_weight) && *weight + item_weight <= self.bound;
            if keep {
                *weight += item_weight;
            }
            keep
        });
        if from == 0 {
            pooled.append(items);
        } else {
            pooled.extend(items.drain(from..));
        }
        self.len.store(pooled.len(), Ordering::Relaxed);
    }

    /// How many items it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// The sum of their weights.
    #[cfg(test)]
    pub(crate) fn weight(&self) -> usize {
        super::lock(&self.stock).weight
    }
}

#[cfg(test)]
mod tests {
    use super::{SharedPool, Weighed};

    /// An item and its weight (nothing to empty).
    #[derive(Debug, PartialEq)]
    struct Item(&'static str, usize);

    impl Weighed for Item {
        fn weight(&self) -> usize {
            self.1
        }

        fn empty(&mut self) {}
    }

    #[test]
    fn refill_takes_the_last_pooled_first_and_at_most_a_batch() {
        let pool = SharedPool::new(100);
        let names = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
        pool.put(&mut names.iter().map(|name| Item(name, 1)).collect(), |_| true);
        let mut cache = Vec::new();
        pool.refill(&mut cache, 4);
        assert_eq!(cache, [Item("6", 1), Item("7", 1), Item("8", 1), Item("9", 1)]);
        assert_eq!((pool.len(), pool.weight()), (6, 6));
        pool.refill(&mut cache, 100);
        assert_eq!(cache.len(), 10);
        assert_eq!((pool.len(), pool.weight()), (0, 0));
        // Empty: nothing moves.
        pool.refill(&mut cache, 4);
        assert_eq!(cache.len(), 10);
    }

    #[test]
    fn what_does_not_fit_the_bound_is_freed() {
        let pool = SharedPool::new(10);
        let mut items = vec![Item("a", 4), Item("b", 4), Item("c", 4), Item("d", 2), Item("e", 0)];
        // What `usual` refuses is freed too.
        pool.put(&mut items, |weight| weight != 0);
        assert!(items.is_empty());
        assert_eq!(pool.weight(), 10);
        // "c" would have passed the bound; "d" still fit.
        let mut cache = Vec::new();
        pool.refill(&mut cache, 10);
        assert_eq!(cache, [Item("a", 4), Item("b", 4), Item("d", 2)]);
        assert_eq!(pool.weight(), 0);
    }

    #[test]
    fn items_past_the_bound_are_dropped() {
        use std::rc::Rc;

        struct Counted(#[allow(dead_code)] Rc<()>);
        impl Weighed for Counted {
            fn weight(&self) -> usize {
                1
            }

            fn empty(&mut self) {}
        }
        let counted = Rc::new(());
        let pool = SharedPool::new(1);
        pool.put(&mut vec![Counted(counted.clone()), Counted(counted.clone())], |_| true);
        assert_eq!(Rc::strong_count(&counted), 2);
    }

    #[test]
    fn put_tail_pools_the_tail_and_keeps_the_head() {
        let pool = SharedPool::new(3);
        let mut items: Vec<Item> = ["0", "1", "2", "3", "4", "5"].iter().map(|name| Item(name, 1)).collect();
        pool.put_tail(&mut items, 2, |_| true);
        assert_eq!(items, [Item("0", 1), Item("1", 1)]);
        let mut cache = Vec::new();
        pool.refill(&mut cache, 10);
        assert_eq!(cache, [Item("2", 1), Item("3", 1), Item("4", 1)]);
    }

    #[test]
    fn what_is_put_is_emptied_and_the_head_left_as_it_was() {
        /// A list that remembers its name: emptied, it holds nothing.
        #[derive(Debug, PartialEq)]
        struct List(&'static str, Vec<u8>);
        impl Weighed for List {
            fn weight(&self) -> usize {
                1
            }

            fn empty(&mut self) {
                self.1.clear();
            }
        }
        let pool = SharedPool::new(10);
        let mut items: Vec<List> = ["0", "1", "2", "3"].iter().map(|name| List(name, vec![1, 2])).collect();
        pool.put_tail(&mut items, 2, |_| true);
        assert_eq!(items, [List("0", vec![1, 2]), List("1", vec![1, 2])]);
        // Pooled items come back empty, in the order they were put.
        pool.put(&mut items, |_| true);
        let mut cache = Vec::new();
        pool.refill(&mut cache, 10);
        assert_eq!(cache, [List("2", vec![]), List("3", vec![]), List("0", vec![]), List("1", vec![])]);
    }
}
