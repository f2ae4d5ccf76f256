//! Reading span records' properties ahead of an encoder.

use std::borrow::Cow;

use minitrace::collector::SpanRecord;

/// Reads the properties of the records an encoder is about to reach, a
/// window at a time.
///
/// The traced threads wrote the properties, on another core, and an
/// encoder has much to do between one record's properties and the next's:
/// read only when reached, each record's were one cache miss waited for
/// alone. Read ahead, in a loop of loads independent of one another, the
/// misses overlap; a window at a time, so that what is read is still in the
/// nearest cache when used. Both reporters' encoders use it.
///
/// ```
/// use minitrace::collector::SpanRecord;
/// use minitrace_delivery::ReadAhead;
///
/// let records = vec![SpanRecord::default(); 1_000];
/// let mut ahead = ReadAhead::from(0);
/// for (index, _record) in records.iter().enumerate() {
///     ahead.before(&records, index);
///     // ... encode the record ...
/// }
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadAhead {
    /// The first record not read yet.
    next: usize,
}

impl From<usize> for ReadAhead {
    /// Reading ahead from the record at `start`.
    fn from(start: usize) -> ReadAhead {
        ReadAhead { next: start }
    }
}

impl ReadAhead {
    /// Records read ahead at a time.
    pub const WINDOW: usize = 128;

    /// Called with each record's index before the record is used.
    #[inline]
    pub fn before(&mut self, records: &[SpanRecord], index: usize) {
        if index + Self::WINDOW / 2 >= self.next && self.next < records.len() {
            let end = (self.next + Self::WINDOW).min(records.len());
            std::hint::black_box(read_properties(&records[self.next..end]));
            self.next = end;
        }
    }
}

/// Reads the first and the last property of each record.
fn read_properties(records: &[SpanRecord]) -> usize {
    let key_len =
        |property: Option<&(Cow<'static, str>, Cow<'static, str>)>| property.map_or(0, |(key, _)| key.len());
    records
        .iter()
        .fold(0, |sum, record| sum ^ key_len(record.properties.first()) ^ key_len(record.properties.last()))
}
