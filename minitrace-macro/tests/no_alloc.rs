//! `#[trace]`, and the spans of a recorded trace, allocate nothing of
//! their own on the traced thread, as the crate's cost model promises.
//!
//! A counting global allocator (this test binary's own) counts the
//! allocations made on the current thread while traced sync fns run:
//!
//! - with no local parent, the case of a request that is not traced, a call
//!   allocates nothing at all, even with properties (they are formatted only
//!   for a span that records);
//! - under a recorded root (a reporter that discards is set, so roots
//!   record): making and ending the root, a child `Span`, a `Span` under the
//!   local parent, `set_local_parent`'s guard (whose span buffer is a
//!   recycled one), and `#[trace]`'d sync and async fns without properties
//!   allocate nothing ("`Span` ... no allocation"; a local span is "a push
//!   into the thread's recycled span buffer"), once the collector has had
//!   the chance to return the buffers it emptied (a flush between rounds,
//!   outside the count). A local span's properties cost the formatted
//!   values, the span's property vector, and a box around it: one
//!   allocation more than the cost model's "a small vector on the first
//!   property" names;
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
use std::sync::{Mutex, MutexGuard, Once};

use minitrace::collector::{Config, Reporter};
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

#[trace]
async fn traced_async(value: u64) -> u64 {
    value + 1
}

async fn untraced_async(value: u64) -> u64 {
    value + 1
}

/// Throws every record away: roots record, and nothing is kept.
struct Discard;

impl Reporter for Discard {
    fn report(&mut self, _spans: &[SpanRecord]) {}
}

/// Sets the discarding reporter once for this binary's tests.
fn record_roots() {
    static SET: Once = Once::new();
    SET.call_once(|| minitrace::set_reporter(Discard, Config::default()));
}

/// One test at a time: span buffers are recycled through a pool shared by
/// every thread, and a test's buffers must not be taken by another's.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
    let _serial = one_at_a_time();
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
    let _serial = one_at_a_time();
    // A no-op root, as an unsampled request gets: its guard sets no local parent.
    let mut counter = Counter(0);
    call_all(&mut counter, 0); // warm-up

    let allocations = allocations_in(|| {
        let root = Span::noop();
        let _guard = root.set_local_parent();
        for i in 0..10_000 {
            call_all(&mut counter, i);
        }
    });
    assert_eq!(allocations, 0);
}

/// `#[trace]`'d sync fns without properties: 8 local spans.
fn call_all_without_properties(counter: &mut Counter, i: u64) {
    black_box(full_name(black_box(i)));
    black_box(short_name(black_box(i)));
    black_box(named(black_box(i)));
    black_box(counter.bump(black_box(1u32)));
    black_box(nested(black_box(i)));
}

/// Runs `f`, adding the allocations it made on this thread to `count`.
fn counted<R>(count: &mut usize, f: impl FnOnce() -> R) -> R {
    let before = ALLOCATIONS.with(Cell::get);
    let result = f();
    *count += ALLOCATIONS.with(Cell::get) - before;
    result
}

/// The steps of a recorded request, each one's allocations counted apart.
const STEPS: [&str; 5] = ["root", "guard", "traced fns", "child Span", "local-parent Span"];

fn request(counter: &mut Counter, i: u64, counts: &mut [usize; 5]) {
    let root = counted(&mut counts[0], || Span::root("request", SpanContext::random()));
    assert!(root.elapsed().is_some(), "the root does not record: no reporter?");
    let guard = counted(&mut counts[1], || root.set_local_parent());
    counted(&mut counts[2], || call_all_without_properties(counter, i));
    counted(&mut counts[3], || drop(Span::enter_with_parent("child", &root)));
    counted(&mut counts[4], || drop(Span::enter_with_local_parent("under the local parent")));
    counted(&mut counts[1], || drop(guard));
    counted(&mut counts[0], || drop(root));
}

#[test]
fn no_allocation_under_a_recorded_root() {
    const ROUNDS: usize = 100;
    // A thread refills its cache of span buffers 32 at a time.
    const REQUESTS_PER_ROUND: usize = 32;
    let _serial = one_at_a_time();
    record_roots();
    let mut counter = Counter(0);
    // Warm-up, in rounds as measured: this thread's queue and thread-locals,
    // its first span buffers, and its cache of recycled ones (allocated at
    // the first refill from the pool).
    for _ in 0..3 {
        for i in 0..REQUESTS_PER_ROUND {
            request(&mut counter, i as u64, &mut [0; 5]);
        }
        minitrace::flush();
    }

    let mut counts = [0; 5];
    for round in 0..ROUNDS {
        for i in 0..REQUESTS_PER_ROUND {
            request(&mut counter, (round * REQUESTS_PER_ROUND + i) as u64, &mut counts);
        }
        // Outside the count: the collector returns the emptied span buffers.
        minitrace::flush();
    }
    let counts: Vec<(&str, usize)> = STEPS.into_iter().zip(counts).collect();
    eprintln!("allocations in {} recorded requests: {counts:?}", ROUNDS * REQUESTS_PER_ROUND);
    assert!(counts.iter().all(|(_, allocations)| *allocations == 0), "{counts:?}");
}

#[test]
fn a_traced_async_fn_under_a_recorded_root_allocates_as_an_untraced_one() {
    const CALLS: u64 = 1_000;
    let _serial = one_at_a_time();
    record_roots();
    let root = Span::root("request", SpanContext::random());
    assert!(root.elapsed().is_some(), "the root does not record: no reporter?");
    let _guard = root.set_local_parent();
    let run = |traced: bool| {
        // The executor's own allocations (if any) are the same for both.
        allocations_in(|| {
            for i in 0..CALLS {
                let value = match traced {
                    true => futures::executor::block_on(traced_async(black_box(i))),
                    false => futures::executor::block_on(untraced_async(black_box(i))),
                };
                black_box(value);
            }
        })
    };
    // Warm-up: the executor's thread-locals, and a first recorded span.
    run(true);
    run(false);
    let (traced, untraced) = (run(true), run(false));
    eprintln!("allocations for {CALLS} calls: traced async fn {traced}, untraced {untraced}");
    assert_eq!(traced, untraced, "a traced async fn allocates where an untraced one does not");
}

#[test]
fn properties_under_a_recorded_root_allocate_their_vector_its_box_and_formatted_values() {
    const CALLS: usize = 1_000;
    let _serial = one_at_a_time();
    record_roots();
    let root = Span::root("request", SpanContext::random());
    let _guard = root.set_local_parent();
    black_box(with_properties(0, "text")); // warm-up
    let per_call: Vec<usize> = (0..CALLS)
        .map(|i| allocations_in(|| _ = black_box(with_properties(black_box(i as u64), black_box("text")))))
        .collect();
    // 4 a call: the two formatted values, "{value}" and "{text:?}" (the
    // closure's; the constant "c" is not copied), the span's property
    // vector, and the box that holds it (a local span keeps its properties
    // boxed, to stay 64 bytes). The cost model names only "a small vector
    // on the first property": the box is a second allocation it leaves out.
    // One more where the line's span buffer grows (amortised, doubling).
    let growths = per_call.iter().filter(|&&allocations| allocations == 5).count();
    eprintln!("allocations in {CALLS} calls with 3 properties: {}", per_call.iter().sum::<usize>());
    assert!(per_call.iter().all(|&allocations| allocations == 4 || allocations == 5), "{per_call:?}");
    assert!(growths <= 2 * (usize::BITS - CALLS.leading_zeros()) as usize, "{growths} buffer growths");
}

#[test]
fn under_a_local_collector_only_the_span_buffer_grows() {
    const CALLS: u64 = 10_000;
    let _serial = one_at_a_time();
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
