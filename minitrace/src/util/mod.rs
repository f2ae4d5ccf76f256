//! Small helpers shared by the crate; the public one renders span records
//! as a tree, for tests.
//!
//! ```
//! use minitrace::collector::{SpanId, SpanRecord};
//!
//! let records = vec![SpanRecord { span_id: SpanId(1), name: "root".into(), ..Default::default() }];
//! assert_eq!(minitrace::util::tree::tree_str_from_span_records(records), "\nroot []\n");
//! ```

pub(crate) mod barrier;
pub(crate) mod id_hasher;
pub(crate) mod lazy_box;
pub(crate) mod pool;
pub(crate) mod prefetch;
pub(crate) mod rand;
#[cfg_attr(feature = "enable", allow(dead_code))]
pub(crate) mod recording;
pub(crate) mod sync;
#[doc(hidden)]
pub mod tree;

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex of this crate. A panic elsewhere while holding one (each
/// critical section is a single push, take or swap) leaves the data
/// consistent, so a poisoned lock is used as it is.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
