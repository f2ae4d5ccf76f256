//! Renders span records as an indented tree, for tests that check the shape
//! of a trace:
//!
//! ```text
//! root []
//!     child [("key", "value")]
//! ```
//!
//! Each line is a span's name and its properties; children are indented by
//! four spaces and sorted, so the text does not depend on timing.

use std::collections::HashMap;

use crate::data::id::SpanId;
use crate::data::record::SpanRecord;

/// The tree of `records` (one trace) as text, starting with a newline so
/// that it lines up with a raw string literal in a test.
///
/// ```
/// use minitrace::collector::{SpanId, SpanRecord};
/// use minitrace::util::tree::tree_str_from_span_records;
///
/// let records = vec![
///     SpanRecord { span_id: SpanId(1), name: "root".into(), ..Default::default() },
///     SpanRecord { span_id: SpanId(2), parent_id: SpanId(1), name: "child".into(), ..Default::default() },
/// ];
/// assert_eq!(tree_str_from_span_records(records), "\nroot []\n    child []\n");
/// ```
pub fn tree_str_from_span_records(records: Vec<SpanRecord>) -> String {
    let ids: std::collections::HashSet<SpanId> = records.iter().map(|r| r.span_id).collect();
    let mut children: HashMap<SpanId, Vec<&SpanRecord>> = HashMap::new();
    let mut roots = Vec::new();
    for record in &records {
        if ids.contains(&record.parent_id) && record.parent_id != record.span_id {
            children.entry(record.parent_id).or_default().push(record);
        } else {
            roots.push(record);
        }
    }
    let mut trees: Vec<Tree> = roots.into_iter().map(|root| Tree::new(root, &children)).collect();
    trees.sort();
    let mut text = String::from("\n");
    for tree in &trees {
        tree.render(0, &mut text);
    }
    text
}

/// Siblings sort by name, then by their subtrees, then by properties, so
/// that spans of the same name are told apart by what is under them.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Tree {
    name: String,
    children: Vec<Tree>,
    properties: Vec<(String, String)>,
}

impl Tree {
    fn new(record: &SpanRecord, children: &HashMap<SpanId, Vec<&SpanRecord>>) -> Tree {
        let mut subtrees: Vec<Tree> = children
            .get(&record.span_id)
            .into_iter()
            .flatten()
            .map(|child| Tree::new(child, children))
            .collect();
        subtrees.sort();
        Tree {
            name: record.name.to_string(),
            children: subtrees,
            properties: record
                .properties
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        }
    }

    fn render(&self, depth: usize, text: &mut String) {
        text.push_str(&format!("{:indent$}{} {:?}\n", "", self.name, self.properties, indent = depth * 4));
        for child in &self.children {
            child.render(depth + 1, text);
        }
    }
}
