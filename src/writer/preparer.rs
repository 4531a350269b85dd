//! The preparer thread creates, reserves, maps and prefaults shard files ahead of need,
//! so neither the pushing thread nor the workers pay for it.

use std::sync::Arc;

use crossbeam_channel::Sender;

use super::shared::{OpenShard, Shared};
use crate::error::Result;
use crate::sink;

/// All shards (one per `(y, x)` shard tile) at one point of the leading shard grid.
pub(crate) struct PreparedSet {
    pub coords: Vec<u64>,
    pub shards: Vec<Arc<OpenShard>>,
}

/// Prepares shard sets in the order frames will need them (C order of the leading shard
/// coordinates): creates and reserves the files and maps them, hands the set over when
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
    let mut coords = vec![0u64; counts.len()];
    while coords[0] < counts[0] {
        let set = (0..g.shard_tiles)
            .map(|s| {
                let key = g.shard_key(&coords, s);
                let path = shared
                    .tmp_dir
                    .join(format!("{}.partial", key.replace('/', ".")));
                let sink = sink::open(shared.sink, &path, shared.layout)?;
                Ok(Arc::new(OpenShard::new(sink, n, key, coords[0])))
            })
            .collect::<Result<Vec<_>>>();
        let shards = match set {
            Ok(shards) => shards,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        if tx
            .send(Ok(PreparedSet {
                coords: coords.clone(),
                shards: shards.clone(),
            }))
            .is_err()
        {
            return;
        }
        // Slots fill in C order, one frame's tiles (cpy × cpx slots per shard) at a time.
        let step = (g.cpy * g.cpx).max(1);
        for first in (0..n).step_by(step) {
            for s in &shards {
                s.sink.prefault(first, first + step);
            }
        }
        drop(shards);
        // Next point in C order.
        for i in (0..coords.len()).rev() {
            coords[i] += 1;
            if i == 0 || coords[i] < counts[i] {
                break;
            }
            coords[i] = 0;
        }
    }
}
