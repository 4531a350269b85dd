//! The preparer thread creates, reserves, maps and prefaults shard files ahead of need,
//! so neither the pushing thread nor the workers pay for it.

use std::sync::Arc;

use crossbeam_channel::Sender;

use super::shared::Shared;
use crate::error::Result;
use crate::sink::{self, SlotSink};

/// All shards (one per `(y, x)` shard tile) at one point of the leading shard grid.
pub(crate) struct PreparedSet {
    pub coords: Vec<u64>,
    pub shards: Vec<(String, Box<dyn SlotSink>)>,
}

/// Prepares shard sets in the order frames will need them (C order of the leading shard
/// coordinates), blocking while the channel is full; stops when the writer hangs up.
pub(crate) fn run(shared: Arc<Shared>, tx: Sender<Result<PreparedSet>>) {
    let g = &shared.grid;
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
                sink::open(shared.sink, &path, shared.layout).map(|sink| (key, sink))
            })
            .collect::<Result<Vec<_>>>();
        let failed = set.is_err();
        let msg = set.map(|shards| PreparedSet {
            coords: coords.clone(),
            shards,
        });
        if tx.send(msg).is_err() || failed {
            return;
        }
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
