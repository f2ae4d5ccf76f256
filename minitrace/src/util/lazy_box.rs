//! A box allocated on first use, which can be created through a shared
//! reference: one pointer wide, where `OnceLock<Box<T>>` is two words. A
//! [`Span`](crate::Span) keeps what few spans have (properties, events,
//! several parents) in one, so that the common span fits in a cache line.

use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

pub(crate) struct LazyBox<T> {
    ptr: AtomicPtr<T>,
    /// Owns a `T`: the auto traits and drop check follow `Box<T>`'s, not
    /// `AtomicPtr`'s (which is `Send` and `Sync` whatever it points to).
    _owns: PhantomData<Box<T>>,
}

impl<T> LazyBox<T> {
    pub(crate) const fn new() -> LazyBox<T> {
        LazyBox { ptr: AtomicPtr::new(ptr::null_mut()), _owns: PhantomData }
    }

    /// The value, if it was created, taken out.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<Box<T>> {
        let raw = std::mem::replace(self.ptr.get_mut(), ptr::null_mut());
        // SAFETY: a non-null pointer came from `Box::into_raw` (in
        // `get_or_default`), and was just replaced by null, so this is the
        // only `Box` made from it.
        (!raw.is_null()).then(|| unsafe { Box::from_raw(raw) })
    }

    /// The value, if it was created.
    pub(crate) fn get(&self) -> Option<&T> {
        let current = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` and was
        // published with release ordering (and read here with acquire); it
        // is freed only through `&mut self` (`take`, drop), which cannot
        // overlap the shared borrow returned here.
        (!current.is_null()).then(|| unsafe { &*current })
    }
}

impl<T> LazyBox<T> {
    /// The value, put in from `make` if there was none, through an
    /// exclusive borrow (no atomic operation).
    pub(crate) fn get_mut_or_insert_with(&mut self, make: impl FnOnce() -> Box<T>) -> &mut T {
        let slot = self.ptr.get_mut();
        if slot.is_null() {
            *slot = Box::into_raw(make());
        }
        // SAFETY: the pointer is non-null, so it came from `Box::into_raw`;
        // `&mut self` makes this the only borrow of the value.
        unsafe { &mut **slot }
    }
}

impl<T: Default> LazyBox<T> {
    /// The value, created if it was not.
    pub(crate) fn get_or_default(&self) -> &T {
        if let Some(value) = self.get() {
            return value;
        }
        let fresh = Box::into_raw(Box::<T>::default());
        let published =
            match self.ptr.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => fresh,
                Err(winner) => {
                    // SAFETY: `fresh` came from `Box::into_raw` just above and
                    // was never published: this thread owns it.
                    drop(unsafe { Box::from_raw(fresh) });
                    winner
                }
            };
        // SAFETY: as in `get`: `published` is the non-null pointer now in
        // `self.ptr`, read with acquire ordering if another thread set it.
        unsafe { &*published }
    }

    /// The value, created if it was not, through an exclusive borrow (no
    /// atomic operation).
    pub(crate) fn get_mut_or_default(&mut self) -> &mut T {
        self.get_mut_or_insert_with(Box::default)
    }
}

impl<T> Drop for LazyBox<T> {
    #[inline]
    fn drop(&mut self) {
        drop(self.take());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn the_value_is_created_once_and_taken_once() {
        let mut lazy = LazyBox::<Mutex<Vec<u32>>>::new();
        assert!(lazy.take().is_none());
        std::thread::scope(|scope| {
            for i in 0..4 {
                let lazy = &lazy;
                scope.spawn(move || lazy.get_or_default().lock().unwrap().push(i));
            }
        });
        lazy.get_mut_or_default().get_mut().unwrap().push(4);
        let mut values = lazy.take().unwrap().into_inner().unwrap();
        values.sort_unstable();
        assert_eq!(values, [0, 1, 2, 3, 4]);
        assert!(lazy.take().is_none());
    }

    #[test]
    fn a_value_left_in_the_box_is_dropped_with_it() {
        let counted = std::sync::Arc::new(());
        let lazy = LazyBox::<Vec<std::sync::Arc<()>>>::new();
        // Through a shared borrow, as a `Span`'s events are added.
        let shared = &lazy;
        let _ = shared.get_or_default();
        let mut lazy = lazy;
        lazy.get_mut_or_default().push(counted.clone());
        drop(lazy);
        assert_eq!(std::sync::Arc::strong_count(&counted), 1);
    }
}
