//! The shapes `zarrstream record` derives when they are not given: the inner chunk, the
//! shard and the number of frames.

/// Elements per shard when the shard shape is derived (32 frames of 2048 x 2048).
const SHARD_ELEMENTS: u64 = 1 << 27;
/// Elements pushed by default (128 frames of 2048 x 2048: 1 GiB of `u16`).
const DEFAULT_ELEMENTS: u64 = 1 << 29;
/// Largest inner chunk edge (y, x) when the chunk shape is derived.
const CHUNK_EDGE: u64 = 512;

/// `1,2,3`, the form the shape options take.
pub(crate) fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// Leading axes 1; y and x split into near-equal chunks of at most `CHUNK_EDGE`.
pub(super) fn derive_chunk(shape: &[u64]) -> Vec<u64> {
    let rank = shape.len();
    let mut c = vec![1; rank];
    for a in rank - 2..rank {
        let n = shape[a].div_ceil(CHUNK_EDGE);
        c[a] = shape[a].div_ceil(n);
    }
    c
}

/// Leading axes 1; y and x: the largest divisor of the shard edge that is at most
/// `CHUNK_EDGE` (or the whole edge if that divisor would be tiny).
pub(super) fn derive_chunk_from_shard(shard: &[u64]) -> Vec<u64> {
    let rank = shard.len();
    let mut c = vec![1; rank];
    for a in rank - 2..rank {
        let s = shard[a];
        let best = (s.div_ceil(CHUNK_EDGE)..=s)
            .find(|n| s.is_multiple_of(*n))
            .map_or(s, |n| s / n);
        c[a] = if best < 32 && s > CHUNK_EDGE { s } else { best };
    }
    c
}

/// The whole frame (rounded up to chunks) on y and x; about `SHARD_ELEMENTS` per shard,
/// spread over the leading axes from the innermost outwards.
pub(super) fn derive_shard(shape: &[u64], chunk: &[u64]) -> Vec<u64> {
    let rank = shape.len();
    let mut s = vec![0; rank];
    for a in rank - 2..rank {
        s[a] = shape[a].div_ceil(chunk[a]) * chunk[a];
    }
    let plane = s[rank - 2].saturating_mul(s[rank - 1]);
    let mut budget = (SHARD_ELEMENTS / plane.max(1)).max(1);
    let round_up = |v: u64, c: u64| v.div_ceil(c).saturating_mul(c);
    for a in (1..rank - 2).rev() {
        let whole = round_up(shape[a], chunk[a]);
        if whole <= budget {
            s[a] = whole;
            budget /= whole;
        } else {
            // Near-equal shards no larger than the budget.
            let n = shape[a].div_ceil(budget.max(1));
            s[a] = round_up(shape[a].div_ceil(n), chunk[a]);
            budget = 1;
        }
    }
    if rank == 2 {
        // A single frame: one shard row of the whole frame.
        return s;
    }
    s[0] = round_up(budget.max(1), chunk[0]);
    if shape[0] > 0 {
        s[0] = s[0].min(round_up(shape[0], chunk[0]));
    }
    s
}

/// Frames pushed when `--frames` is not given and there is no input file.
pub(crate) fn default_frames(shape: &[u64]) -> u64 {
    let rank = shape.len();
    if rank == 2 {
        return 1;
    }
    let plane = shape[rank - 2].saturating_mul(shape[rank - 1]).max(1);
    (DEFAULT_ELEMENTS / plane).clamp(1, 1 << 20)
}
