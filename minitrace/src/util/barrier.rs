//! An asymmetric memory barrier: a traced thread's side costs nothing (a
//! compiler fence), the collector's side a system call that makes every
//! running thread of the process execute a full barrier (Linux's
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`).
//!
//! With it, a traced thread can store a flag and then load another one
//! (store-load, the one order x86 does not keep by itself) without paying a
//! fence on every request, while the collector, which runs a few hundred
//! times a second, pays the expensive half: the pattern of Dekker's mutual
//! exclusion split unevenly, as userspace RCU and folly's
//! `asymmetricHeavyBarrier` split it. Where the system call is missing or
//! refused (other systems, old kernels, some sandboxes, emulators), both
//! sides fall back to a full fence (`SeqCst`), which is correct everywhere
//! and costs the traced thread one fence.
//!
//! The guarantee, for a traced thread T and the collector C:
//!
//! ```text
//! T: X = 1; light(); r1 = Y        C: Y = 1; heavy(); r2 = X
//! ```
//!
//! never ends with `r1 == 0 && r2 == 0`.

use std::sync::atomic::AtomicBool;

#[cfg(not(feature = "loom"))]
use std::sync::atomic::fence;
use std::sync::atomic::Ordering;

/// Whether the heavy side has the system call: then the light side needs no
/// fence. Set once, before the first heavy barrier that relies on it (never
/// under loom, where both sides fence and the model checker sees them).
static EXPEDITED: AtomicBool = AtomicBool::new(false);

/// The traced thread's side. A stale `false` only makes it fence needlessly.
#[cfg(not(feature = "loom"))]
#[inline(always)]
pub(crate) fn light() {
    if EXPEDITED.load(Ordering::Relaxed) {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The collector's side.
#[cfg(not(feature = "loom"))]
pub(crate) fn heavy() {
    if EXPEDITED.load(Ordering::Relaxed) && system::barrier() {
        return;
    }
    fence(Ordering::SeqCst);
}

/// Under loom, both sides are a read-modify-write of one location, which
/// orders them as the barrier pair does (and loom models in full: it
/// treats `SeqCst` accesses as `AcqRel`, and its fences less completely).
#[cfg(feature = "loom")]
pub(crate) fn light_on(location: &crate::util::sync::atomic::AtomicU64) {
    location.fetch_add(0, Ordering::AcqRel);
}

/// The collector's side, under loom: see [`light_on`].
#[cfg(feature = "loom")]
pub(crate) fn heavy_on(location: &crate::util::sync::atomic::AtomicU64) {
    location.fetch_add(0, Ordering::AcqRel);
}

/// Registers the process for expedited barriers, once; until then (and
/// where that fails) both sides fence.
pub(crate) fn prepare() {
    if system::register() {
        EXPEDITED.store(true, Ordering::Relaxed);
    }
}

#[cfg(all(target_os = "linux", not(feature = "loom")))]
mod system {
    // From the kernel's uapi (linux/membarrier.h).
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn membarrier(command: libc::c_int) -> bool {
        // SAFETY: membarrier takes two integers and a CPU id, reads and
        // writes no memory of ours; an unknown command fails with EINVAL.
        unsafe { libc::syscall(libc::SYS_membarrier, command, 0, 0) == 0 }
    }

    pub(super) fn register() -> bool {
        membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
    }

    pub(super) fn barrier() -> bool {
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
    }
}

#[cfg(any(not(target_os = "linux"), feature = "loom"))]
#[cfg_attr(feature = "loom", allow(dead_code))]
mod system {
    pub(super) fn register() -> bool {
        false
    }

    pub(super) fn barrier() -> bool {
        false
    }
}
