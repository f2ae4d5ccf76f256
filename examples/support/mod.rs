//! What the examples share: a reporter that prints each trace as a tree.
//!
//! This directory is not an example of its own (Cargo builds
//! `examples/*.rs` and `examples/*/main.rs`); the examples include it with
//! `mod support;`.

// Each example uses only part of this module.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use minitrace::collector::{Reporter, SpanRecord, TraceId};

/// Prints every trace it receives to standard output as an indented tree:
/// each span's start (relative to the trace's first span), its duration,
/// its name and properties, and its events marked with `*`.
///
/// ```text
/// trace 5c8d0f...
///      0.0 µs    412.3 µs  request user=7
///      1.2 µs    401.9 µs    query
///      3.4 µs                * cache miss key=7
/// ```
///
/// Reporters run on minitrace's collector thread, so the printing costs the
/// traced threads nothing.
#[derive(Default)]
pub struct TreePrinter {
    traces: Arc<AtomicU64>,
}

impl TreePrinter {
    /// A printer, and a counter of the traces it has printed.
    pub fn new() -> (TreePrinter, Arc<AtomicU64>) {
        let printer = TreePrinter::default();
        let traces = printer.traces.clone();
        (printer, traces)
    }
}

impl Reporter for TreePrinter {
    fn report(&mut self, spans: &[SpanRecord]) {
        let mut traces: Vec<(TraceId, Vec<&SpanRecord>)> = Vec::new();
        let mut index: HashMap<TraceId, usize> = HashMap::new();
        for span in spans {
            let slot = *index.entry(span.trace_id).or_insert_with(|| {
                traces.push((span.trace_id, Vec::new()));
                traces.len() - 1
            });
            traces[slot].1.push(span);
        }
        for (trace_id, spans) in traces {
            println!("trace {trace_id}");
            print!("{}", render_tree(&spans));
            println!();
            self.traces.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The spans of one trace as text, one line per span or event, children
/// under their parents in the order they started.
pub fn render_tree(spans: &[&SpanRecord]) -> String {
    let ids: HashSet<_> = spans.iter().map(|span| span.span_id).collect();
    let start = spans.iter().map(|span| span.begin_time_unix_ns).min().unwrap_or(0);
    let mut roots: Vec<&SpanRecord> =
        spans.iter().copied().filter(|span| !ids.contains(&span.parent_id)).collect();
    roots.sort_by_key(|span| span.begin_time_unix_ns);
    let mut text = String::new();
    for root in roots {
        render_span(root, spans, start, 0, &mut text);
    }
    text
}

fn render_span(span: &SpanRecord, all: &[&SpanRecord], start: u64, depth: usize, text: &mut String) {
    let micros = |nanos: u64| nanos as f64 / 1e3;
    text.push_str(&format!(
        "{:>9.1} µs {:>9.1} µs  {:indent$}{}{}\n",
        micros(span.begin_time_unix_ns.saturating_sub(start)),
        micros(span.duration_ns),
        "",
        span.name,
        properties(&span.properties),
        indent = depth * 2,
    ));
    for event in &span.events {
        text.push_str(&format!(
            "{:>9.1} µs {:>12}  {:indent$}* {}{}\n",
            micros(event.timestamp_unix_ns.saturating_sub(start)),
            "",
            "",
            event.name,
            properties(&event.properties),
            indent = depth * 2 + 2,
        ));
    }
    let mut children: Vec<&SpanRecord> =
        all.iter().copied().filter(|child| child.parent_id == span.span_id).collect();
    children.sort_by_key(|child| child.begin_time_unix_ns);
    for child in children {
        render_span(child, all, start, depth + 1, text);
    }
}

type Properties = [(std::borrow::Cow<'static, str>, std::borrow::Cow<'static, str>)];

fn properties(properties: &Properties) -> String {
    properties.iter().map(|(key, value)| format!(" {key}={value}")).collect()
}
