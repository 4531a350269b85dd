//! The atomics of the lock-free per-chunk path ([`crate::slots`], the sinks' offset
//! bump), from `std`, or from `loom` when the model tests are built (`--features loom`), so
//! that loom explores every interleaving and memory ordering of exactly this code.

#[cfg(not(all(feature = "loom", test)))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[cfg(all(feature = "loom", test))]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Where a kill may stop a worker between two stores the crash model cares about
/// (between a working-index entry's offset and its length): a no-op, except under the
/// loom model, which stops a "killed" worker there.
#[inline(always)]
pub(crate) fn kill_point() {
    #[cfg(all(feature = "loom", test))]
    crate::model::kill_point();
}
