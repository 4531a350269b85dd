//! Counting what is on disk after recovery: the chunks present in every finished
//! shard, the frames all of whose chunks are present, and the append-axis extent.

use std::collections::{BTreeSet, HashMap};

use super::RecoverError;
use crate::spec::ArraySpec;
use crate::store::{Shard, StoreError, StoreReader};

/// Present inner chunks per shard (by shard coordinates) of every shard under `c/`;
/// shards whose index does not read are listed in `damaged` and count for nothing.
pub(super) fn present_chunks(
    store: &StoreReader,
    damaged: &mut Vec<String>,
) -> Result<HashMap<Vec<u64>, Vec<bool>>, RecoverError> {
    let mut present = HashMap::new();
    for shard in store.shards()? {
        match present_in(store, &shard)? {
            Some(bits) => {
                present.insert(shard.coords, bits);
            }
            None => damaged.push(shard.key),
        }
    }
    Ok(present)
}

/// Which chunks of a finished shard are present: listed in its index and inside its
/// data region. `None` if the index is invalid.
fn present_in(store: &StoreReader, shard: &Shard) -> Result<Option<Vec<bool>>, RecoverError> {
    let file = store.open_shard(shard)?;
    let entries = match store.read_index(shard, &file) {
        Ok(entries) => entries,
        Err(StoreError::Index { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let size = store.index_size();
    let (lo, hi) = match store.data_start() {
        0 => (0, shard.len - size),
        start => (start, shard.len),
    };
    Ok(Some(
        entries
            .iter()
            .map(|e| {
                e.is_some_and(|(o, b)| o >= lo && o.checked_add(b).is_some_and(|end| end <= hi))
            })
            .collect(),
    ))
}

pub(super) struct Tally {
    /// Append-axis extent covering every present chunk.
    pub extent0: u64,
    /// Frames all of whose chunks are present.
    pub committed: u64,
    /// Those among them with a chunk in a recovered shard.
    pub recovered: u64,
}

/// Counts the frames all of whose chunks are present, and those among them that need a
/// recovered shard; and the append-axis extent covering every present chunk.
pub(super) fn tally_frames(
    spec: &ArraySpec,
    present: &HashMap<Vec<u64>, Vec<bool>>,
    recovered: &BTreeSet<Vec<u64>>,
) -> Tally {
    // The grid works on the writer's axes: a single frame's keys gain its hidden axis.
    let present: HashMap<Vec<u64>, Vec<bool>> = present
        .iter()
        .map(|(k, v)| (spec.key_coords(k.clone()), v.clone()))
        .collect();
    let recovered: BTreeSet<Vec<u64>> = recovered
        .iter()
        .map(|k| spec.key_coords(k.clone()))
        .collect();
    let (present, recovered) = (&present, &recovered);
    let grid = ChunkGrid::new(spec, present);
    let extent0 = grid.extent0();
    let shape0 = spec.shape[0].max(extent0);
    let (mut committed, mut from_recovery) = (0u64, 0u64);
    for t in grid.steps(shape0) {
        for k in 0..spec.frames_per_step() {
            if let Some(needs_recovered) = grid.frame_complete(t, k, recovered) {
                committed += 1;
                from_recovery += u64::from(needs_recovered);
            }
        }
    }
    Tally {
        extent0,
        committed,
        recovered: from_recovery,
    }
}

/// The chunk grid of an array and which of its chunks are present.
struct ChunkGrid<'a> {
    spec: &'a ArraySpec,
    present: &'a HashMap<Vec<u64>, Vec<bool>>,
    /// Inner chunks per shard along each axis.
    per_shard: Vec<u64>,
    tiles_y: u64,
    tiles_x: u64,
}

impl<'a> ChunkGrid<'a> {
    fn new(spec: &'a ArraySpec, present: &'a HashMap<Vec<u64>, Vec<bool>>) -> Self {
        let rank = spec.shape.len();
        ChunkGrid {
            spec,
            present,
            per_shard: spec
                .shard
                .iter()
                .zip(&spec.chunk)
                .map(|(s, c)| s / c)
                .collect(),
            tiles_y: spec.shape[rank - 2].div_ceil(spec.chunk[rank - 2]),
            tiles_x: spec.shape[rank - 1].div_ceil(spec.chunk[rank - 1]),
        }
    }

    /// The append-axis extent covering every present chunk.
    fn extent0(&self) -> u64 {
        let cps = &self.per_shard;
        let mut extent0 = 0u64;
        for (sc, bits) in self.present {
            let last = bits.iter().rposition(|&b| b).map(|i| {
                // Axis-0 index of chunk i in C order within the shard.
                let inner: u64 = cps[1..].iter().product();
                (i as u64 / inner.max(1)) % cps[0]
            });
            // A shard index too large to address is left out (it cannot be a real shard).
            let end = last.and_then(|l| {
                sc[0]
                    .checked_mul(cps[0])?
                    .checked_add(l + 1)?
                    .checked_mul(self.spec.chunk[0])
            });
            if let Some(end) = end {
                extent0 = extent0.max(end);
            }
        }
        extent0
    }

    /// The append-axis steps below `shape0` that lie in a row holding a shard: only
    /// those can hold complete frames, so the tally costs what is on disk, not the
    /// (possibly huge) extent.
    fn steps(&self, shape0: u64) -> impl Iterator<Item = u64> {
        let shard0 = self.spec.shard[0];
        let mut rows: Vec<u64> = self.present.keys().map(|sc| sc[0]).collect();
        rows.sort_unstable();
        rows.dedup();
        rows.into_iter().flat_map(move |r| {
            let start = r.saturating_mul(shard0).min(shape0);
            start..start.saturating_add(shard0).min(shape0)
        })
    }

    /// Whether frame `k` of append step `t` has all its chunks present; if so, whether
    /// one of them is in a `recovered` shard.
    fn frame_complete(&self, t: u64, k: u64, recovered: &BTreeSet<Vec<u64>>) -> Option<bool> {
        let spec = self.spec;
        let rank = spec.shape.len();
        // Leading coordinates of frame (t, k) in C order.
        let mut c = vec![0u64; rank - 2];
        c[0] = t;
        let mut rest = k;
        for a in (1..rank - 2).rev() {
            c[a] = rest % spec.shape[a];
            rest /= spec.shape[a];
        }
        let mut needs_recovered = false;
        let mut key = Vec::with_capacity(rank);
        for ty in 0..self.tiles_y {
            for tx in 0..self.tiles_x {
                key.clear();
                let mut local = 0u64;
                let chunk_coords = c
                    .iter()
                    .zip(&spec.chunk)
                    .map(|(ci, ch)| ci / ch)
                    .chain([ty, tx]);
                for (g, per) in chunk_coords.zip(&self.per_shard) {
                    key.push(g / per);
                    local = local * per + g % per;
                }
                let here = self
                    .present
                    .get(&key)
                    .and_then(|bits| bits.get(local as usize).copied())
                    .unwrap_or(false);
                if !here {
                    return None;
                }
                needs_recovered |= recovered.contains(&key);
            }
        }
        Some(needs_recovered)
    }
}
