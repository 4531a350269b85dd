//! Work over every shard of a store in parallel, telling a caller's callback as shards
//! finish (the `zarrstream` tool draws a progress bar with it, a binding may forward it).

use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use super::Shard;

/// Maps `f` over `shards` in parallel, results in shard order, calling
/// `progress(done, total)` once before the first shard (`done` 0) and once after each.
///
/// The calls are serialised by a lock, so `done` only grows and the callback need not be
/// `Sync` (a binding's callback rarely is); it runs on whichever thread finished the
/// shard. One call per shard is cheap next to reading the shard.
pub(super) fn map_shards<T, F>(
    shards: &[Shard],
    mut progress: impl FnMut(u64, u64) + Send,
    f: F,
) -> Vec<T>
where
    T: Send,
    F: Fn(&Shard) -> T + Sync,
{
    let total = shards.len() as u64;
    progress(0, total);
    let tally = Mutex::new((0u64, progress));
    shards
        .par_iter()
        .map(|shard| {
            let result = f(shard);
            // A callback that panicked poisons the lock; that panic already ends the
            // whole walk, so the tally need not be refused to the other threads.
            let mut guard = tally.lock().unwrap_or_else(PoisonError::into_inner);
            let (done, callback) = &mut *guard;
            *done += 1;
            callback(*done, total);
            result
        })
        .collect()
}
