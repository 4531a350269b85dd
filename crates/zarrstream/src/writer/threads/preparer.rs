//! The preparer thread creates, reserves, maps and prefaults shard files ahead of need,
//! so neither the pushing thread nor the workers pay for it.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::error::{Error, Result};
use crate::sink;
use crate::store;
use crate::writer::api::options::Durability;
use crate::writer::api::order;
use crate::writer::state::grid::Grid;
use crate::writer::state::shared::{OpenShard, Shared};

/// Shard sets that may wait for the finisher beyond those that must be open together.
const SPARE_UNFINISHED_SETS: usize = 3;

/// The most shards of `grid` that are reserved and not yet finished at once: the
/// preparer waits before creating more. Each is mapped until finished (mmap, direct).
pub(in crate::writer) fn max_unfinished(grid: &Grid) -> usize {
    grid.open_sets
        .saturating_add(SPARE_UNFINISHED_SETS)
        .saturating_mul(grid.shard_tiles)
}

/// Refuses an acquisition order whose shard sets open at once exceed
/// `max_open_shards` (set when the writer is created, before any file is made).
pub(in crate::writer) fn check_open_shards(grid: &Grid, max_open_shards: usize) -> Result<()> {
    let needed = max_unfinished(grid);
    if needed > max_open_shards {
        return Err(Error::WorkingSet {
            what: "shards",
            needed: needed as u64,
            limit: "max_open_shards",
            budget: max_open_shards as u64,
            advice: "raise max_open_shards, or acquire in an order closer to storage order",
        });
    }
    Ok(())
}

/// All shards (one per `(y, x)` shard tile) at one point of the leading shard grid.
pub(crate) struct PreparedSet {
    pub coords: Vec<u64>,
    pub shards: Vec<Arc<OpenShard>>,
}

/// Prepares shard sets in the order frames will need them (the acquisition's loop order
/// over the leading shard coordinates, which is the order of the sets' first frames; C
/// order when appending): creates and reserves the files and maps them, hands the set over when
/// the writer needs it, then prefaults it front to back while the workers start filling
/// it, so that neither the caller nor the workers wait for page population.
pub(crate) fn run(shared: Arc<Shared>, tx: Sender<Result<PreparedSet>>) {
    let g = &shared.grid;
    let n = shared.spec.chunks_per_shard;
    let counts: Vec<u64> = g
        .extent
        .iter()
        .zip(&g.shard_lead)
        .map(|(e, s)| e.div_ceil(*s))
        .collect();
    // A resumed array starts at the shard set holding its next frame.
    let mut coords = Grid::box_of(&g.coords(shared.start.frame), &g.shard_lead);
    let first_row = shared.start.first_row(g);
    // Sets that must be open together, plus a few finished ones waiting for the finisher.
    let max_unfinished = max_unfinished(g);
    let outer = g.order[0];
    while coords[outer] < counts[outer] {
        // Bounds the shards that are reserved but not yet finished (e.g. while a slow
        // flush holds the finisher back): beyond it the writer waits here, not in memory.
        while shared.unfinished_shards.load(Ordering::Acquire) >= max_unfinished {
            std::thread::sleep(Duration::from_millis(1));
        }
        let set = open_set(&shared, &coords, coords[0] == first_row);
        let shards = match set {
            Ok(shards) => shards,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        // Weak references: a shard that finishes during its prefault is not held back.
        let weak: Vec<Weak<OpenShard>> = shards.iter().map(Arc::downgrade).collect();
        if tx
            .send(Ok(PreparedSet {
                coords: coords.clone(),
                shards,
            }))
            .is_err()
        {
            return;
        }
        // Slots fill in C order, one frame's tiles (cpy × cpx slots per shard) at a time.
        let step = (g.cpy * g.cpx).max(1);
        for first in (0..n).step_by(step) {
            for s in weak.iter().filter_map(Weak::upgrade) {
                s.sink.prefault(first, first + step);
            }
        }
        order::next_in_order(&mut coords, &counts, &g.order);
    }
}

/// Creates, reserves and maps the shards of the set at leading shard coordinates
/// `coords`, counting each in `shared.unfinished_shards`. In the `first_row` of a
/// resumed array, each shard starts with the chunks of the finished shard it replaces.
fn open_set(shared: &Shared, coords: &[u64], first_row: bool) -> Result<Vec<Arc<OpenShard>>> {
    let g = &shared.grid;
    let n = shared.spec.chunks_per_shard;
    (0..g.shard_tiles)
        .map(|s| {
            let key = g.shard_key(coords, s);
            // Directories are made here, before the reservation, so that running out
            // of space for them refuses a frame instead of failing a finished shard.
            let dst = shared.dir.join(&key);
            if let Some(parent) = dst.parent() {
                let mut changed = BTreeSet::new();
                store::create_dirs(parent, &mut changed)?;
                if shared.durability != Durability::None {
                    changed.iter().try_for_each(|d| store::sync_dir(d))?;
                }
            }
            let path = shared.tmp_dir.join(crate::store::partial_file_name(&key));
            let sink = sink::open(
                shared.sink,
                &path,
                shared.layout,
                &shared.order,
                &shared.meter,
            )?;
            shared.unfinished_shards.fetch_add(1, Ordering::AcqRel);
            let shard = OpenShard::new(sink, n, key, coords[0], shared);
            if first_row {
                shared
                    .start
                    .carry_over(g, &shard.key, shard.sink.as_ref(), &shard.entries)?;
            }
            Ok(Arc::new(shard))
        })
        .collect()
}
