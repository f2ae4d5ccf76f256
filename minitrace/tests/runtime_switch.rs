//! `set_enabled` switches recording of new traces at run time: off, roots
//! and local collectors are no-ops; a trace begun while on finishes whole,
//! however often the switch flips under it, from any thread.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{new_root, trace};
use minitrace::local::{LocalCollector, LocalSpan};
use minitrace::prelude::*;

// One test: the switch is global to the process.
#[test]
fn traces_begun_while_on_finish_whole_and_none_begin_while_off() {
    assert!(minitrace::is_enabled(), "on by default");

    // Begun while on, switched off midway: reported whole.
    let (root, begun_on) = new_root("begun while on");
    {
        let _guard = root.set_local_parent();
        let _before = LocalSpan::enter_with_local_parent("before the switch");
        minitrace::set_enabled(false);
        assert!(!minitrace::is_enabled());
        let _after = LocalSpan::enter_with_local_parent("after the switch");
        drop(Span::enter_with_local_parent("thread-safe child after the switch"));
    }
    drop(root);

    // Begun while off: nothing.
    let (off_root, begun_off) = new_root("begun while off");
    assert!(off_root.elapsed().is_none());
    {
        let _guard = off_root.set_local_parent();
        let _span = LocalSpan::enter_with_local_parent("under an off root");
        assert_eq!(SpanContext::current_local_parent(), None);
    }
    drop(off_root);
    let collector = LocalCollector::start();
    drop(LocalSpan::enter_with_local_parent("collected while off"));
    let collected = collector.collect();
    let (target, target_trace) = {
        minitrace::set_enabled(true);
        new_root("mounts a batch collected while off")
    };
    target.push_child_spans(collected);
    drop(target);

    let mut names: Vec<String> = trace(begun_on).iter().map(|record| record.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        ["after the switch", "before the switch", "begun while on", "thread-safe child after the switch"]
    );
    assert!(trace(begun_off).is_empty());
    assert_eq!(trace(target_trace).len(), 1, "the batch collected while off is empty");

    // Flipped all the time from one thread while four record: every trace
    // that began is reported whole, whatever the switch did under it.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut on = false;
            while !stop.load(Ordering::Relaxed) {
                minitrace::set_enabled(on);
                on = !on;
                std::thread::yield_now();
            }
            minitrace::set_enabled(true);
        })
    };
    let producers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let mut begun = Vec::new();
                // 2 000 roots, and on until one began while the switch was
                // on: on a busy machine the flipper may not run for a while.
                let started = std::time::Instant::now();
                let mut made = 0;
                while made < 2_000 || (begun.is_empty() && started.elapsed() < Duration::from_secs(30)) {
                    made += 1;
                    let context = SpanContext::random();
                    let root = Span::root("flipped", context);
                    if root.elapsed().is_some() {
                        begun.push(context.trace_id);
                    }
                    let _guard = root.set_local_parent();
                    for _ in 0..5 {
                        let _span = LocalSpan::enter_with_local_parent("step");
                    }
                }
                begun
            })
        })
        .collect();
    let begun: Vec<TraceId> = producers.into_iter().flat_map(|p| p.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(!begun.is_empty(), "the switch was on for some roots");
    minitrace::flush();
    let spans = common::reported();
    let spans = spans.lock();
    let mut per_trace = std::collections::HashMap::<TraceId, usize>::new();
    for record in spans.iter() {
        *per_trace.entry(record.trace_id).or_default() += 1;
    }
    for trace_id in &begun {
        assert_eq!(per_trace.get(trace_id), Some(&6), "trace {trace_id} not whole");
    }
    let flipped = spans.iter().filter(|record| record.name == "flipped").count();
    assert_eq!(flipped, begun.len(), "a root begun while off was reported");
}
