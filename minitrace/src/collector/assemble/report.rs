//! The outbox handed to the reporter: every record but the staged
//! trace's, in batches that end between traces.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::collector::assemble::{Collector, REPORT_BATCH};
use crate::data::record::SpanRecord;
use crate::transport::{property_lists, stats};

impl Collector {
    /// Hands every record but the staged trace's to the reporter.
    pub(super) fn report(&mut self) {
        let end = self.staged.as_ref().map_or(self.outbox.len(), |staged| staged.first);
        if end == 0 {
            // Still called once a cycle, as minitrace 0.6 does: a reporter
            // that batches on its own flushes on this call.
            let reporter = &mut self.reporter;
            let _ = catch_unwind(AssertUnwindSafe(|| reporter.report(&[])));
            return;
        }
        let reporter = &mut self.reporter;
        let batch = &self.outbox[..end];
        match catch_unwind(AssertUnwindSafe(|| reporter.report(batch))) {
            Ok(()) => stats::count_reported(end),
            Err(_) => stats::count_dropped_by_reporter(end as u64),
        }
        // The staged trace's records leave first (a few, see `MOVE_LIMIT`),
        // so that the reported ones are emptied as a whole.
        let staged_records = self.staged.as_mut().map(|staged| {
            staged.first = 0;
            let mut records = self.spare.pop().unwrap_or_default();
            records.extend(self.outbox.drain(end..));
            records
        });
        if self.reclaim_properties() {
            // Most batches own no heap memory at all: emptied without a drop
            // call per record (PERFORMANCE.md, "The collector: batches to the reporter").
            // SAFETY: shrinking the length leaves no uninitialised element
            // in it; the records are not dropped, which leaks nothing, as
            // `owns_nothing` checked every field that could own memory.
            unsafe { self.outbox.set_len(0) };
        } else {
            self.outbox.clear();
        }
        if let Some(mut records) = staged_records {
            std::mem::swap(&mut self.outbox, &mut records);
            self.keep_spare(records);
        }
    }

    /// Takes the reported records' property vectors back into lists for
    /// the traced threads, so that they are neither freed here nor
    /// allocated there (PERFORMANCE.md, "Recycled property lists"); returns
    /// whether the records, without them, own nothing.
    fn reclaim_properties(&mut self) -> bool {
        let (empty, refilled) = (&mut self.emptied.lists, &mut self.refilled);
        let mut owns = false;
        for record in self.outbox.iter_mut() {
            if record.properties.capacity() != 0 {
                let properties = std::mem::take(&mut record.properties);
                let mut list = empty.pop().unwrap_or_default();
                *list = properties;
                refilled.push(property_lists::Pooled::new(list));
            }
            owns |= !owns_nothing(record);
        }
        property_lists::recycle(refilled);
        // Lists of records dropped unreported (traces discarded) are not
        // kept beyond a batch's worth.
        empty.truncate(REPORT_BATCH);
        !owns
    }

    /// Waits for the reporter to deliver what it was given: the end of a
    /// cycle [`flush`](crate::flush) asked for. A panic in it is the
    /// reporter's; the spans it lost are its to count.
    pub(crate) fn wait_for_delivery(&mut self) {
        let reporter = &mut self.reporter;
        let _ = catch_unwind(AssertUnwindSafe(|| reporter.wait_for_delivery()));
    }
}

/// so that a field added to `SpanRecord` must be considered here.
fn owns_nothing(record: &SpanRecord) -> bool {
    let SpanRecord {
        trace_id: _,
        span_id: _,
        parent_id: _,
        begin_time_unix_ns: _,
        duration_ns: _,
        name,
        properties,
        events,
    } = record;
    matches!(name, std::borrow::Cow::Borrowed(_)) && properties.capacity() == 0 && events.capacity() == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::record::EventRecord;

    #[test]
    fn a_record_owns_memory_through_its_name_properties_or_events() {
        let plain = SpanRecord { name: "static".into(), ..SpanRecord::default() };
        assert!(owns_nothing(&plain));
        let owned_name = SpanRecord { name: String::from("owned").into(), ..plain.clone() };
        let property = SpanRecord { properties: vec![("k".into(), "v".into())], ..plain.clone() };
        let emptied = SpanRecord { properties: Vec::with_capacity(1), ..plain.clone() };
        let event = SpanRecord { events: vec![EventRecord::default()], ..plain.clone() };
        for record in [owned_name, property, emptied, event] {
            assert!(!owns_nothing(&record), "{record:?}");
        }
    }
}
