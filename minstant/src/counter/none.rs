//! Stands in for the TSC source where it is not implemented (anything but
//! x86 Linux), so that the clock decides the source in one place.

/// Uninhabited: no value exists, so every method is unreachable.
pub(crate) enum TscClock {}

impl TscClock {
    pub(crate) fn calibrate() -> Result<TscClock, String> {
        Err("the TSC is only used on x86 and x86_64 Linux".into())
    }

    pub(crate) fn ticks_per_nano(&self) -> f64 {
        match *self {}
    }

    pub(crate) fn calibrated_cpus(&self) -> Vec<usize> {
        match *self {}
    }

    pub(crate) fn now(&self) -> u64 {
        match *self {}
    }

    pub(crate) fn now_unordered(&self) -> u64 {
        match *self {}
    }
}
