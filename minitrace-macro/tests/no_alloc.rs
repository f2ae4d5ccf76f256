//! The sync expansion of `#[trace]` allocates nothing of its own.
//!
//! A counting global allocator (this test binary's own) counts the
//! allocations made on the current thread while traced sync fns run:
//!
//! - with no local parent, the case of a request that is not traced, a call
//!   allocates nothing at all, even with properties (they are formatted only
//!   for a span that records);
//! - under a [`LocalCollector`], spans are pushed into the collector's span
//!   buffer, which grows (amortised, doubling) as any `Vec` does. That
//!   growth is the core's, not the expansion's, so the check is that a traced
//!   fn allocates exactly as often as the same number of hand-written
//!   `LocalSpan`s with a literal name, and only logarithmically often.
//!
//! The first use of minitrace on a thread may allocate once (std registering
//! its thread-locals' destructors), so each test warms up first.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;

use minitrace::local::{LocalCollector, LocalSpan};
use minitrace::prelude::*;

struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_allocation() {
    // `try_with`: allocations during thread exit are not counted.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

// SAFETY: every method forwards to `System` with the arguments it was given,
// so `System`'s guarantees are ours. Counting touches only a
// const-initialised thread-local `Cell<usize>`, which has no destructor and
// never allocates, so it cannot recurse into the allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Allocations made on this thread while `f` runs.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[trace]
fn full_name(value: u64) -> u64 {
    value + 1
}

#[trace(short_name = true)]
fn short_name(value: u64) -> u64 {
    value + 1
}

#[trace("named")]
fn named(value: u64) -> u64 {
    value + 1
}

#[trace(properties = { "value": "{value}", "text": "{text:?}", "constant": "c" })]
fn with_properties(value: u64, text: &str) -> u64 {
    value + text.len() as u64
}

struct Counter(u64);

impl Counter {
    #[trace]
    fn bump<T: Into<u64>>(&mut self, by: T) -> u64 {
        self.0 += by.into();
        self.0
    }
}

#[trace]
fn nested(value: u64) -> u64 {
    full_name(short_name(named(value)))
}

fn call_all(counter: &mut Counter, i: u64) {
    black_box(full_name(black_box(i)));
    black_box(short_name(black_box(i)));
    black_box(named(black_box(i)));
    black_box(with_properties(black_box(i), black_box("text")));
    black_box(counter.bump(black_box(1u32)));
    black_box(nested(black_box(i)));
}

#[test]
fn no_allocation_without_a_local_parent() {
    let mut counter = Counter(0);
    call_all(&mut counter, 0); // warm-up

    let allocations = allocations_in(|| {
        for i in 0..10_000 {
            call_all(&mut counter, i);
        }
    });
    assert_eq!(allocations, 0);
}

#[test]
fn no_allocation_without_a_local_parent_inside_a_noop_root() {
    // No reporter is set in this binary, so roots are no-ops.
    let mut counter = Counter(0);
    call_all(&mut counter, 0); // warm-up

    let allocations = allocations_in(|| {
        let root = Span::root("root", SpanContext::random());
        let _guard = root.set_local_parent();
        for i in 0..10_000 {
            call_all(&mut counter, i);
        }
    });
    assert_eq!(allocations, 0);
}

#[test]
fn under_a_local_collector_only_the_span_buffer_grows() {
    const CALLS: u64 = 10_000;
    let mut counter = Counter(0);
    // Warm-up: the thread-locals, and a first recording span (its clock
    // read may initialise per-thread state).
    {
        let _collector = LocalCollector::start();
        call_all(&mut counter, 0);
    }

    // Each run: a fresh collector, `CALLS` spans, the collector dropped
    // outside the measurement.
    let measure = |body: &mut dyn FnMut(u64)| {
        // Every run starts alike: a small buffer, recycled from a dropped
        // collector, waiting in the thread's cache (a run's own grown buffer
        // is too large to be kept).
        {
            let _warm = LocalCollector::start();
            drop(LocalSpan::enter_with_local_parent("warm"));
        }
        let collector = LocalCollector::start();
        let allocations = allocations_in(|| {
            for i in 0..CALLS {
                body(i);
            }
        });
        drop(collector);
        allocations
    };

    let traced = measure(&mut |i| {
        black_box(full_name(black_box(i)));
    });
    let traced_short = measure(&mut |i| {
        black_box(short_name(black_box(i)));
    });
    let traced_method = measure(&mut |_| {
        black_box(counter.bump(black_box(1u32)));
    });
    let by_hand = measure(&mut |i| {
        let _span = LocalSpan::enter_with_local_parent("by hand");
        black_box(i + 1);
    });

    eprintln!(
        "allocations for {CALLS} spans: traced {traced}, short name {traced_short}, method {traced_method}, \
         hand-written LocalSpan {by_hand}"
    );
    assert_eq!(traced, by_hand, "a traced fn allocates more than a hand-written LocalSpan");
    assert_eq!(traced_short, by_hand);
    assert_eq!(traced_method, by_hand);
    // The buffer's growth: logarithmic in the number of spans.
    let bound = 2 * (64 - CALLS.leading_zeros()) as usize;
    assert!(by_hand <= bound, "{by_hand} allocations for {CALLS} spans (bound {bound})");
}
