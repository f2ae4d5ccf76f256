//! `tracing` fields as minitrace properties: values formatted as a reader
//! expects them (strings without quotes, numbers and bools as written,
//! anything else with `Debug`), keys borrowed from the callsite.

use std::borrow::Cow;
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
pub(crate) fn callsite(metadata: &'static Metadata<'static>) -> Vec<Property> {
    vec![
        (Cow::Borrowed(TARGET_KEY), Cow::Borrowed(metadata.target())),
        (Cow::Borrowed(LEVEL_KEY), Cow::Borrowed(metadata.level().as_str())),
    ]
}

/// Appends every field it visits to a list of properties; an event's
/// `message` field is kept aside when `message` is set.
pub(crate) struct Properties<'a> {
    pub(crate) properties: &'a mut Vec<Property>,
    pub(crate) message: Option<&'a mut Option<String>>,
}

impl Properties<'_> {
    fn push(&mut self, field: &Field, value: String) {
        if field.name() == MESSAGE {
            if let Some(message) = self.message.as_deref_mut() {
                *message = Some(value);
                return;
            }
        }
        self.properties.push((Cow::Borrowed(field.name()), Cow::Owned(value)));
    }
}

impl Visit for Properties<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_owned());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.to_string());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.to_string());
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

/// A span's properties: its callsite's, then the fields `record` visits.
pub(crate) fn span_properties(
    metadata: &'static Metadata<'static>,
    record: impl FnOnce(&mut dyn Visit),
) -> Vec<Property> {
    let mut properties = callsite(metadata);
    record(&mut Properties { properties: &mut properties, message: None });
    properties
}

/// An event's name and properties: the name is its `message` field, or
/// the callsite's name (`event src/lib.rs:12`) for an event without one.
pub(crate) fn event(event: &Event<'_>) -> (Cow<'static, str>, Vec<Property>) {
    let metadata = event.metadata();
    let mut properties = callsite(metadata);
    let mut message = None;
    event.record(&mut Properties { properties: &mut properties, message: Some(&mut message) });
    let name = message.map_or(Cow::Borrowed(metadata.name()), Cow::Owned);
    (name, properties)
}
