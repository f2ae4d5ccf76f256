//! `tracing` fields as minitrace properties: values formatted as a reader
//! expects them (strings without quotes, numbers and bools as written,
//! anything else with `Debug`), keys borrowed from the callsite, and so
//! are bools' and small numbers' values.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use tracing_core::field::{Field, Visit};
use tracing_core::{Event, Metadata};

/// A property as minitrace takes it.
pub(crate) type Property = (Cow<'static, str>, Cow<'static, str>);

/// The key of the property that keeps the callsite's target.
pub(crate) const TARGET_KEY: &str = "tracing.target";
/// The key of the property that keeps the callsite's level.
pub(crate) const LEVEL_KEY: &str = "tracing.level";
/// The field `tracing`'s macros store an event's (or span's) message in.
const MESSAGE: &str = "message";

/// The target and level of a callsite, the first properties of each span
/// and event (both strings live as long as the callsite: nothing is copied).
pub(crate) fn callsite(metadata: &'static Metadata<'static>) -> [Property; 2] {
    [
        (Cow::Borrowed(TARGET_KEY), Cow::Borrowed(metadata.target())),
        (Cow::Borrowed(LEVEL_KEY), Cow::Borrowed(metadata.level().as_str())),
    ]
}

/// Appends every field it visits to a list of properties; an event's
/// `message` field is kept aside when `message` is set.
pub(crate) struct Properties<'a> {
    pub(crate) properties: &'a mut Vec<Property>,
    pub(crate) message: Option<&'a mut Option<Cow<'static, str>>>,
}

impl Properties<'_> {
    fn push(&mut self, field: &Field, value: impl Into<Cow<'static, str>>) {
        let value = value.into();
        if field.name() == MESSAGE {
            if let Some(message) = self.message.as_deref_mut() {
                *message = Some(value);
                return;
            }
        }
        self.properties.push((Cow::Borrowed(field.name()), value));
    }
}

/// Numbers below this are written from [`DIGITS`] rather than formatted.
const SMALL: u64 = 1000;

/// The decimal digits of each number below [`SMALL`], three bytes each,
/// zero-padded: a small number's value borrows its digits from here.
static DIGITS: [u8; 3 * SMALL as usize] = {
    let mut digits = [0; 3 * SMALL as usize];
    let mut n = 0;
    while n < SMALL as usize {
        digits[3 * n] = b'0' + (n / 100) as u8;
        digits[3 * n + 1] = b'0' + (n / 10 % 10) as u8;
        digits[3 * n + 2] = b'0' + (n % 10) as u8;
        n += 1;
    }
    digits
};

/// `value` in decimal. A small number (a count, an attempt, a status code)
/// borrows its digits: no string is allocated on the traced thread to be
/// freed on the collector's, the costliest part of a formatted field.
fn unsigned(value: u64) -> Cow<'static, str> {
    if value < SMALL {
        let end = 3 * value as usize + 3;
        let len = if value < 10 {
            1
        } else if value < 100 {
            2
        } else {
            3
        };
        if let Ok(digits) = std::str::from_utf8(&DIGITS[end - len..end]) {
            return Cow::Borrowed(digits);
        }
    }
    Cow::Owned(value.to_string())
}

impl Visit for Properties<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_owned());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, if value { "true" } else { "false" });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        match u64::try_from(value) {
            Ok(value) => self.push(field, unsigned(value)),
            Err(_) => self.push(field, value.to_string()),
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, unsigned(value));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, value.to_string());
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.push(field, value.to_string());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, value.to_string());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        // An error reads best as its message, as `{}` prints it.
        self.push(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}"));
    }
}

thread_local! {
    /// A list to gather properties in before minitrace takes them into a
    /// list of its own: kept, so that a span's properties allocate no list.
    static SCRATCH: Cell<Vec<Property>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's scratch list, empty, and empties it after.
/// Taken out of its slot meanwhile: a field's `Debug` that records spans
/// itself gets a list of its own.
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut Vec<Property>) -> R) -> R {
    let mut scratch = SCRATCH.try_with(Cell::take).unwrap_or_default();
    let result = f(&mut scratch);
    scratch.clear();
    let _ = SCRATCH.try_with(|slot| slot.set(scratch));
    result
}

/// Appends a span's properties to `properties`: its callsite's, then the
/// fields `record` visits.
pub(crate) fn span_properties(
    properties: &mut Vec<Property>,
    metadata: &'static Metadata<'static>,
    record: impl FnOnce(&mut dyn Visit),
) {
    properties.extend(callsite(metadata));
    record(&mut Properties { properties, message: None });
}

/// An event's name and properties: the name is its `message` field, or
/// the callsite's name (`event src/lib.rs:12`) for an event without one.
pub(crate) fn event(event: &Event<'_>) -> (Cow<'static, str>, Vec<Property>) {
    let metadata = event.metadata();
    let mut properties = Vec::from(callsite(metadata));
    let mut message = None;
    event.record(&mut Properties { properties: &mut properties, message: Some(&mut message) });
    let name = message.unwrap_or(Cow::Borrowed(metadata.name()));
    (name, properties)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_formatted_whether_borrowed_or_not() {
        for value in (0..2_000).chain([9_999, 10_000, u64::MAX]) {
            let written = unsigned(value);
            assert_eq!(written, value.to_string());
            assert_eq!(matches!(written, Cow::Borrowed(_)), value < SMALL, "{value}");
        }
    }
}
