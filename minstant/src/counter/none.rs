//! Stands in for the counter where none is implemented (anything but x86
//! and aarch64 Linux): the clock reads the OS clock.

use super::{Calibrated, Start};
use crate::clock::ClockSource;
use crate::machine::Counter;

/// Uninhabited: no value exists, so every method is unreachable.
pub(crate) enum Hardware {}

pub(crate) const SOURCE: ClockSource = ClockSource::Monotonic;

impl Counter for Hardware {
    fn read(&self) -> Option<u64> {
        match *self {}
    }

    fn read_unordered(&self) -> Option<u64> {
        match *self {}
    }

    fn shifted(self, _: u64) -> Self {
        match self {}
    }
}

pub(crate) fn detect() -> Result<Start, String> {
    Err("the CPU's counter is only used on x86, x86_64 and aarch64 Linux".into())
}

pub(crate) fn calibrate() -> Result<Calibrated, String> {
    Err("no counter".into())
}
