//! The history's tests: parts and thrown-away traces kept, let go
//! oldest first, and given back.

use std::borrow::Cow;

use super::*;
use crate::data::id::{SpanId, TraceId};
use crate::data::raw_span::LINE_PARENT;
use crate::data::record::PropertyList;
use crate::transport::exited::Exited;

fn list() -> PropertyList {
    Box::new(vec![("k".into(), "v".into())])
}

fn target() -> Targets {
    Targets::One(Target::new(TraceId(7), SpanId(1), 9))
}

#[test]
fn parts_that_make_room_give_back_their_buffers_and_their_root_s_list() {
    let mut spans = Vec::with_capacity(4);
    for id in 2..4 {
        let mut span = RawSpan::begin(SpanId(id), SpanId(1), Cow::Borrowed("step"), Instant::ZERO);
        assert!(span.add_properties(list()).is_none());
        spans.push(span);
    }
    let buffer = spans.as_ptr();
    let mut root = SpanState::new("root".into(), target(), Role::Root, Instant::ZERO);
    let root_list = list();
    let root_list_at = &*root_list as *const Vec<_>;
    assert!(root.add_properties(root_list).is_none());
    let shared = Message::new(
        Batch::Shared { spans: std::sync::Arc::new(Vec::new()), ids: crate::data::batch::IdMap::Keep },
        target(),
        Role::Child,
        0,
    );
    let parts = [
        Kept::new(Message::local_batch(spans, 2, target())),
        Kept::new(Message::Ended(EndedSpan { state: root, end: Instant::ZERO })),
        Kept::new(shared),
    ];
    let mut history = History::default();
    let mut released = Released::default();
    history.keep(parts, usize::MAX, &mut released);
    assert!(released.buffers.is_empty() && released.extras.is_empty());
    // A limit of nothing: every part makes room.
    history.keep([], 0, &mut released);
    assert!(history.is_empty() && history.bytes() == 0);
    // The local batch's buffer, its spans' lists still in it (given back
    // with the buffer), and the root's box, its list in it; the shared
    // batch, nothing.
    assert_eq!(released.buffers.len(), 1);
    assert_eq!(released.buffers[0].as_ptr(), buffer);
    assert!(released.buffers[0].iter().all(|span| span.properties.is_some()));
    assert_eq!(released.extras.len(), 1);
    let (_, list, _) = released.extras.pop().unwrap().into_parts();
    assert_eq!(list.as_deref().map(|list| list as *const Vec<_>), Some(root_list_at));
    released.recycle_here();
    assert!(released.buffers.is_empty() && released.extras.is_empty());
}

/// [`History::keep_thrown`] from the collector's side (no stretch lent),
/// the spans given in a buffer and the buffer given back.
fn keep_thrown(
    history: &mut History,
    spans: &mut Vec<RawSpan>,
    count: usize,
    root: SpanState,
    limit: usize,
    released: &mut Released,
) {
    let mut line = LineSpans::from(std::mem::take(spans));
    history.keep_thrown(&mut line, count, root, Instant::ZERO, limit, released, false);
    *spans = line.take_vec();
}

/// A root of trace `trace` on this thread, and its local spans: `n`
/// spans, the first with an owned name and properties if `owning`.
fn thrown(trace: u128, n: u64, owning: bool) -> (SpanState, Vec<RawSpan>) {
    let root = SpanState::new(
        "root".into(),
        Targets::One(Target::new(TraceId(trace), SpanId(0), trace as u64)),
        Role::Root,
        Instant::ZERO,
    );
    let spans = (0..n).map(|index| step(trace as u64 * 100 + index + 1, owning && index == 0)).collect();
    (root, spans)
}

/// A local span numbered `id`; if `owning`, with an owned name and
/// properties.
fn step(id: u64, owning: bool) -> RawSpan {
    let name = match owning {
        true => Cow::Owned(format!("owned {id}")),
        false => Cow::Borrowed("step"),
    };
    let mut span = RawSpan::begin(SpanId(id), LINE_PARENT, name, Instant::ZERO);
    if owning {
        assert!(span.add_properties(list()).is_none());
    }
    span
}

/// The traces a history holds, oldest first: each root's trace, and its
/// spans' ids, in order, read back from the ring.
fn held(history: &History) -> Vec<(u128, Vec<u64>)> {
    history
        .parts()
        .filter_map(|held| match held {
            Held::Thrown(thrown, (head, tail)) => {
                Some((thrown.root.trace_id().0, head.iter().chain(tail).map(|span| span.id.0).collect()))
            }
            Held::Kept(_) => None,
        })
        .collect()
}

#[test]
fn the_ring_keeps_the_newest_traces_whole_as_it_wraps_and_gives_back_what_they_owned() {
    let limit = 2048;
    let mut history = History::default();
    let mut released = Released::default();
    for trace in 1..=10u128 {
        let (root, mut spans) = thrown(trace, 3 + (trace % 2) as u64, trace % 3 == 0);
        let (buffer, count) = (spans.as_ptr(), spans.len());
        keep_thrown(&mut history, &mut spans, count, root, limit, &mut released);
        // The buffer is emptied, not taken: the caller's next line's.
        assert!(spans.is_empty() && spans.as_ptr() == buffer);
        assert!(history.bytes() <= limit);
    }
    assert!(history.ring.slots() < limit / std::mem::size_of::<RawSpan>(), "it wrapped");
    // The newest traces, whole and in order, whichever way they wrap.
    let kept = held(&history);
    assert!(kept.len() >= 3, "{kept:?}");
    let newest: Vec<u128> = kept.iter().map(|(trace, _)| *trace).collect();
    assert_eq!(newest, ((11 - kept.len() as u128)..=10).collect::<Vec<_>>());
    for (trace, ids) in &kept {
        let n = 3 + (trace % 2) as u64;
        assert_eq!(ids, &(0..n).map(|index| *trace as u64 * 100 + index + 1).collect::<Vec<_>>());
    }
    // The owning traces that went gave their span's list back.
    let gone_owning = [3, 6, 9].iter().filter(|trace| !newest.contains(trace)).count();
    assert_eq!(released.lists.len(), gone_owning);
    // The thread exits: its history moves whole (its ring not copied) to
    // the exited threads', where it reads the same.
    let ring = history.ring.at();
    let bytes = history.bytes();
    let mut exited = Exited::default();
    exited.take(7, &mut history);
    assert!(history.is_empty() && history.bytes() == 0);
    assert_eq!(exited.bytes(), bytes);
    let (thread, moved) = exited.histories().next().expect("moved");
    assert_eq!((thread, moved.ring.at()), (7, ring));
    assert_eq!(held(moved), kept);
    // Over its bound, it goes whole, giving back what its traces owned.
    let before = released.lists.len();
    exited.make_room(bytes - 1, &mut released);
    assert!(exited.histories().next().is_none() && exited.bytes() == 0);
    let owning = newest.iter().filter(|trace| *trace % 3 == 0).count();
    assert_eq!(released.lists.len() - before, owning);
}

/// Keeps traces `traces` (sizes 1 to 11, in no period the ring's slots
/// could divide; every fifth owning) under `limit`, checking after each
/// that the newest are consecutive, each whole, and none past the limit.
/// Returns how many times a trace held was found in two runs.
fn keep_checked(
    history: &mut History,
    released: &mut Released,
    traces: std::ops::RangeInclusive<u128>,
    limit: usize,
) -> usize {
    let size = |trace: u128| 1 + (trace * trace % 11) as u64;
    let mut split = 0;
    for trace in traces {
        let (root, mut spans) = thrown(trace, size(trace), trace % 5 == 0);
        let count = spans.len();
        keep_thrown(history, &mut spans, count, root, limit, released);
        assert!(history.bytes() <= limit);
        let kept = held(history);
        assert_eq!(kept.last().map(|(trace, _)| *trace), Some(trace));
        for (at, (held, ids)) in kept.iter().enumerate() {
            assert_eq!(*held, kept[0].0 + at as u128);
            assert_eq!(
                ids,
                &(0..size(*held)).map(|index| *held as u64 * 100 + index + 1).collect::<Vec<_>>()
            );
        }
        split += history
            .parts()
            .filter(|held| matches!(held, Held::Thrown(_, (_, tail)) if !tail.is_empty()))
            .count();
    }
    split
}

#[test]
fn traces_of_every_size_wrap_the_ring_in_one_or_two_runs_and_read_back_whole() {
    let mut history = History::default();
    let mut released = Released::default();
    let split = keep_checked(&mut history, &mut released, 1..=300, 4096);
    assert!(split > 0, "no trace was written in two runs");
    // Each owning trace that went gave its span's list back, once.
    let newest: Vec<u128> = held(&history).iter().map(|(trace, _)| *trace).collect();
    let gone_owning = (1..=300).filter(|trace| trace % 5 == 0 && !newest.contains(trace)).count();
    assert_eq!(released.lists.len(), gone_owning);
}

#[test]
fn a_limit_raised_grows_the_ring_keeping_what_it_held() {
    let (small, big) = (2048, 8192);
    let mut history = History::default();
    let mut released = Released::default();
    // Raised before the ring wrapped: its slots grow where they are.
    keep_checked(&mut history, &mut released, 1..=2, small);
    keep_checked(&mut history, &mut released, 3..=3, big);
    assert_eq!(history.ring.slots(), big / std::mem::size_of::<RawSpan>());
    let mut history = History::default();
    // Raised after: what it held stays, renumbered, and it holds more.
    keep_checked(&mut history, &mut released, 1..=60, small);
    let (before, slots) = (held(&history), history.ring.slots());
    assert!(before[0].0 > 1, "it made room");
    keep_checked(&mut history, &mut released, 61..=61, big);
    let after = held(&history);
    assert_eq!(after[..before.len()], before[..], "every trace held before is held still, whole");
    keep_checked(&mut history, &mut released, 62..=400, big);
    assert!(history.ring.slots() > 2 * slots, "{} slots, {slots} before", history.ring.slots());
    assert!(held(&history).len() > 2 * before.len());
    // Each owning trace that went gave its span's list back, once.
    let newest: Vec<u128> = held(&history).iter().map(|(trace, _)| *trace).collect();
    let gone_owning = (1..=400).filter(|trace| trace % 5 == 0 && !newest.contains(trace)).count();
    assert_eq!(released.lists.len(), gone_owning);
}

#[test]
fn a_trace_larger_than_the_ring_is_kept_as_parts_and_a_lower_limit_lets_the_ring_go() {
    let slot = std::mem::size_of::<RawSpan>();
    let limit = 20 * slot;
    let mut history = History::default();
    let mut released = Released::default();
    let (root, mut spans) = thrown(1, 21, false);
    let buffer = spans.as_ptr();
    keep_thrown(&mut history, &mut spans, 21, root, limit, &mut released);
    // Kept as its parts instead, buffer and all, and let go at once (too
    // large for the limit too).
    assert!(spans.is_empty() && spans.capacity() == 0, "the buffer went with the parts");
    assert!(history.is_empty() && history.bytes() == 0);
    assert!(history.ring.bytes() == 0);
    assert_eq!(released.buffers.len(), 1);
    assert_eq!(released.buffers[0].as_ptr(), buffer);
    assert_eq!(released.buffers[0].len(), 21, "its spans go back with it");
    let (root, mut spans) = thrown(2, 8, true);
    keep_thrown(&mut history, &mut spans, 8, root, limit, &mut released);
    assert_eq!(held(&history).len(), 1);
    // A lower limit: the trace goes, its list given back, and the
    // ring's slots with it.
    history.keep([], slot, &mut released);
    assert!(history.is_empty() && history.bytes() == 0);
    assert_eq!(released.lists.len(), 1);
    assert_eq!(history.ring.bytes(), 0);
}

#[test]
fn parts_kept_between_thrown_traces_go_oldest_first_with_them() {
    let limit = 2048;
    let mut history = History::default();
    let mut released = Released::default();
    let mut all = Vec::new();
    for trace in 1..=12u128 {
        let (root, spans) = thrown(trace, 4, false);
        let mut line = LineSpans::from(spans);
        history.keep_thrown(&mut line, 4, root, Instant::now(), limit, &mut released, false);
        // Parts filed back between the traces, ended after them.
        let (root, _) = thrown(100 + trace, 0, false);
        let ended = Kept::new(Message::Ended(EndedSpan { state: root, end: Instant::now() }));
        history.keep([ended], limit, &mut released);
        all.extend([trace, 100 + trace]);
        assert!(history.bytes() <= limit);
        // Oldest first: whatever is held is a suffix of what was kept.
        let mut roots: Vec<(Instant, u128)> = history
            .parts()
            .filter_map(|held| {
                let end = match &held {
                    Held::Kept(kept) => kept.end,
                    Held::Thrown(thrown, _) => thrown.end,
                };
                held.root().map(|root| (end, root.trace_id().0))
            })
            .collect();
        roots.sort();
        let roots: Vec<u128> = roots.into_iter().map(|(_, trace)| trace).collect();
        assert!(roots.len() >= all.len().min(4), "{roots:?}");
        assert_eq!(roots, all[all.len() - roots.len()..]);
    }
}

#[test]
fn a_trace_thrown_away_during_a_harvest_joins_the_ring_when_absorbed() {
    let mut history = History::default();
    let mut released = Released::default();
    let (root, spans) = thrown(5, 3, true);
    let buffer = spans.as_ptr();
    let mut waiting = vec![Waiting::Thrown { spans, count: 3, root, end: Instant::ZERO }];
    history.absorb(&mut waiting, 4096, &mut released, false);
    assert!(waiting.is_empty());
    assert_eq!(held(&history), [(5, vec![501, 502, 503])]);
    // Its buffer, emptied, is let go to be recycled.
    assert_eq!(released.buffers.len(), 1);
    assert!(released.buffers[0].is_empty() && released.buffers[0].as_ptr() == buffer);
}

/// Spans `ids` of a request written into `line` as a line writes them:
/// room made before each, the first one owning if `owning`.
fn record(line: &mut LineSpans, ids: std::ops::Range<u64>, owning: bool) {
    for id in ids.clone() {
        if line.len() == line.capacity() {
            line.make_room(true, || true);
        }
        // SAFETY: room was made above.
        unsafe { line.push_unchecked(step(id, owning && id == ids.start)) };
    }
}

fn root_of(trace: u128) -> SpanState {
    thrown(trace, 0, false).0
}

/// The newest thrown trace a history holds: its root's trace, its spans'
/// ids, and where its first span lies.
fn newest(history: &History) -> (u128, Vec<u64>, *const RawSpan) {
    let last = history.parts().filter(|held| matches!(held, Held::Thrown(..))).last().unwrap();
    let Held::Thrown(thrown, (head, tail)) = last else { unreachable!() };
    let ids = head.iter().chain(tail).map(|span| span.id.0).collect();
    (thrown.root.trace_id().0, ids, head.as_ptr())
}

/// Once its ring is full, a thread's next request is written in the
/// stretch the ring lends, and kept where it lies; a stretch given back,
/// outgrown, outlived by its ring, or held while another trace comes, is
/// copied or kept as parts, and nothing it held is lost or dropped twice.
#[test]
fn a_request_written_in_the_lent_stretch_is_kept_where_it_lies() {
    std::thread::spawn(|| {
        let limit = 32 << 10;
        let (mut history, mut released) = (History::default(), Released::default());
        let mut trace = 0;
        while line_spans::home().is_null() {
            trace += 1;
            assert!(trace < 1_000, "the ring lends once full");
            let (root, spans) = thrown(trace, 10, false);
            let mut line = LineSpans::from(spans);
            history.keep_thrown(&mut line, 10, root, Instant::ZERO, limit, &mut released, true);
        }
        // A request written in the stretch.
        let mut line = LineSpans::default();
        record(&mut line, 1_001..1_011, true);
        let at = line.as_ptr();
        assert!(line.is_lent() && line_spans::home().is_null() && line_spans::is_out());
        // Another trace thrown meanwhile: kept as parts, the stretch untouched.
        let (root, spans) = thrown(9_999, 3, false);
        history.keep_thrown(&mut LineSpans::from(spans), 3, root, Instant::ZERO, limit, &mut released, true);
        let as_parts = |held: Held| match held {
            Held::Kept(kept) => kept.root().is_some_and(|root| root.state.trace_id().0 == 9_999),
            Held::Thrown(..) => false,
        };
        assert!(history.parts().any(as_parts));
        assert_eq!(
            line.as_slice().iter().map(|span| span.id.0).collect::<Vec<_>>(),
            (1_001..1_011).collect::<Vec<_>>()
        );
        // Thrown away: kept where it lies, and the next stretch lent.
        history.keep_thrown(&mut line, 10, root_of(1_000), Instant::ZERO, limit, &mut released, true);
        assert_eq!(line.capacity(), 0, "the line keeps nothing");
        assert_eq!(newest(&history), (1_000, (1_001..1_011).collect(), at));
        assert!(!line_spans::home().is_null() && !line_spans::is_out());

        // A trace that waited through a harvest, kept with the next one,
        // written in the stretch: both go into the ring, the stretch's
        // where it lies, then the one that waited.
        let mut line = LineSpans::default();
        record(&mut line, 5_001..5_004, false);
        let at = line.as_ptr();
        let (root, spans) = thrown(5_100, 2, false);
        let mut waiting = vec![Waiting::Thrown { spans, count: 2, root, end: Instant::ZERO }];
        history.keep_thrown_here(
            &mut waiting,
            &mut line,
            3,
            root_of(5_000),
            Instant::ZERO,
            limit,
            &mut released,
        );
        let thrown: Vec<u128> = held(&history).iter().rev().take(2).map(|(trace, _)| *trace).collect();
        assert_eq!(thrown, [5_100, 5_000], "both in the ring");
        let where_it_lies = |held: Held| match held {
            Held::Thrown(thrown, (head, _)) => thrown.root.trace_id().0 == 5_000 && head.as_ptr() == at,
            Held::Kept(_) => false,
        };
        assert!(history.parts().any(where_it_lies), "the stretch's trace kept where it lies");

        // Given back unused: home again, where it was.
        let home = line_spans::home();
        let mut line = LineSpans::default();
        record(&mut line, 1..4, true);
        line.give_back();
        assert_eq!(line_spans::home(), home);

        // Outgrown: moved to a buffer, the stretch home, the spans copied in.
        let mut line = LineSpans::default();
        record(&mut line, 2_001..2_071, false);
        assert!(!line.is_lent() && line_spans::home() == home);
        history.keep_thrown(&mut line, 70, root_of(2_000), Instant::ZERO, limit, &mut released, true);
        let (trace, ids, _) = newest(&history);
        assert_eq!((trace, ids), (2_000, (2_001..2_071).collect()));

        // Outlived: the limit raised while a line writes in the stretch.
        let mut line = LineSpans::default();
        record(&mut line, 3_001..3_006, true);
        let old = line.as_ptr();
        history.keep_thrown(&mut line, 5, root_of(3_000), Instant::ZERO, 2 * limit, &mut released, true);
        let (trace, ids, now) = newest(&history);
        assert_eq!((trace, ids), (3_000, (3_001..3_006).collect()));
        assert!(now != old, "copied into the grown ring");
        assert!(line_spans::home().is_null(), "the old stretch went; the grown ring lends once full");

        // Written in place and let go: what they own given back, once.
        let lists = released.lists.len();
        let mut in_place = 0;
        for trace in 4_000..4_400u64 {
            let mut line = LineSpans::default();
            record(&mut line, trace * 10..trace * 10 + 4, true);
            let at = line.as_ptr();
            history.keep_thrown(
                &mut line,
                4,
                root_of(trace.into()),
                Instant::ZERO,
                2 * limit,
                &mut released,
                true,
            );
            let (newest_trace, ids, now) = newest(&history);
            assert_eq!((newest_trace, ids), (trace.into(), (trace * 10..trace * 10 + 4).collect()));
            in_place += usize::from(now == at);
        }
        assert!(in_place > 100, "{in_place} written in place in the grown ring");
        assert!(released.lists.len() > lists, "the owning traces that went gave their lists back");

        // The recorder off: the stretch goes, the line takes a buffer.
        let mut line = LineSpans::default();
        line.make_room(true, || false);
        assert!(!line.is_lent() && line_spans::home().is_null() && !line_spans::is_out());
        released.recycle_here();
    })
    .join()
    .unwrap();
}

/// A part filed back: one local span of trace `trace`, ended at
/// now, in a buffer of `capacity`, as an escaped line sends it.
fn filed(trace: u128, capacity: usize) -> Kept {
    let mut spans = Vec::with_capacity(capacity);
    let mut span = step(trace as u64 * 100 + 1, false);
    span.end = Instant::now();
    spans.push(span);
    let target = Targets::One(Target::new(TraceId(trace), SpanId(0), trace as u64));
    Kept::new(Message::local_batch(spans, 1, target))
}

/// Runs `traces` requests through a history of `limit` bytes, each a root
/// and one span, ended in turn: those `elsewhere` picks come as a
/// part filed back (in bursts of 300, as a collector files them), the
/// others are thrown away on the thread. Checks the bound after each.
/// Returns the history, and the traces thrown away it holds, oldest first.
fn run(traces: u128, limit: usize, elsewhere: impl Fn(u128) -> bool) -> (History, Vec<u128>) {
    let (mut history, mut released, mut burst) = (History::default(), Released::default(), Vec::new());
    for trace in 1..=traces {
        if elsewhere(trace) {
            burst.push(filed(trace, 16));
        } else {
            let (root, spans) = thrown(trace, 1, false);
            let mut line = LineSpans::from(spans);
            history.keep_thrown(&mut line, 1, root, Instant::now(), limit, &mut released, false);
        }
        if trace % 300 == 0 {
            history.keep(burst.drain(..), limit, &mut released);
        }
        assert!(history.bytes() <= limit, "{} over {limit} at {trace}", history.bytes());
        released.recycle_here();
    }
    let thrown = held(&history).into_iter().map(|(trace, _)| trace).collect();
    (history, thrown)
}

/// The thrown-away traces from the oldest held on are all held: whatever
/// made room took the oldest first.
fn newest_in_a_row(thrown: &[u128], traces: u128, elsewhere: impl Fn(u128) -> bool) -> usize {
    let oldest = *thrown.first().expect("some held");
    let expected: Vec<u128> = (oldest..=traces).filter(|trace| !elsewhere(*trace)).collect();
    assert_eq!(thrown, expected, "the newest, in a row");
    thrown.len()
}

/// Parts filed back in bursts, once the ring has taken all the memory,
/// take their room from the oldest traces, and the ring gives back their
/// slots: it holds the newest traces in a row, many of them, and does not
/// shrink again and again (a copy each time) once the mix settles.
#[test]
fn parts_filed_back_beside_a_full_ring_take_the_oldest_traces_room() {
    let elsewhere = |trace: u128| trace > 10_000 && trace % 5 == 0;
    let (history, thrown) = run(30_000, 1 << 20, elsewhere);
    let alone = newest_in_a_row(&run(30_000, 1 << 20, |_| false).1, 30_000, |_| false);
    let held = newest_in_a_row(&thrown, 30_000, elsewhere);
    // A part filed back takes its buffer's 16 slots: five requests with
    // one take about twice the room of five without.
    assert!(held * 3 >= alone, "{held} held, {alone} alone");
    let slots = history.ring.slots();
    let (history, _) = run(60_000, 1 << 20, elsewhere);
    assert_eq!(history.ring.slots(), slots, "settled");
}

/// Parts filed back late, ended before every part held, go first: the
/// newest traces thrown away stay.
#[test]
fn parts_filed_late_make_room_before_newer_traces() {
    let late: Vec<Kept> = (1..=100).map(|trace| filed(trace, 16)).collect();
    let (mut history, thrown) = run(10_000, 1 << 18, |_| false);
    let mut released = Released::default();
    history.keep(late, 1 << 18, &mut released);
    assert_eq!(held(&history).into_iter().map(|(trace, _)| trace).collect::<Vec<_>>(), thrown);
    assert!(history.parts().all(|part| matches!(part, Held::Thrown(..))), "the late parts went");
}

/// A ring fixed small beside parts filed back grows back once they go:
/// the history holds nearly as many traces as one that never held them.
#[test]
fn a_ring_fixed_beside_parts_grows_back_once_they_go() {
    let elsewhere = |trace: u128| trace <= 5_000;
    let alone = newest_in_a_row(&run(30_000, 1 << 20, |_| false).1, 30_000, |_| false);
    let held = newest_in_a_row(&run(30_000, 1 << 20, elsewhere).1, 30_000, elsewhere);
    assert!(held * 8 >= alone * 7, "{held} held, {alone} alone");
}
