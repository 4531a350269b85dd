//! The order in which a shard's inner chunks lie in its file.
//!
//! The shard index is always in C order of the inner chunk coordinates (the Zarr
//! sharding codec's index); only where each chunk's bytes sit changes. Readers follow
//! the index, so the order is not recorded anywhere.

use std::sync::Arc;

use super::ShardLayout;
use crate::error::ParseError;
use crate::spec::ArraySpec;

/// The order of the inner chunks' bytes inside a shard file.
///
/// Parses from and prints as `c` and `morton`:
///
/// ```
/// use zarrstream::{ArraySpec, ChunkOrder};
/// assert_eq!("morton".parse::<ChunkOrder>()?, ChunkOrder::Morton);
/// // A shard of 2 x 2 x 2 inner chunks: axis 0 varies fastest along the Z curve.
/// let spec = ArraySpec::builder()
///     .shape([0, 8, 8])
///     .chunk_shape([1, 4, 4])
///     .shard_shape([2, 8, 8])
///     .build()?;
/// assert_eq!(ChunkOrder::C.sequence(&spec), [0, 1, 2, 3, 4, 5, 6, 7]);
/// assert_eq!(ChunkOrder::Morton.sequence(&spec), [0, 4, 2, 6, 1, 5, 3, 7]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum ChunkOrder {
    /// C order of the inner chunk coordinates (the last axis varies fastest), the
    /// order of the shard index: the slot sinks' order. The appending sinks (pwrite,
    /// direct) leave the chunks in the order they were encoded.
    #[default]
    C,
    /// Morton (Z-order) of the inner chunk coordinates, as zarr-python writes shards:
    /// the chunks of any block of 2ᵏ along every axis lie together, so reading a
    /// spatial region needs fewer, larger byte ranges. The code interleaves the
    /// coordinates' bits from the lowest, axis 0 first within each bit; an axis of `n`
    /// chunks contributes `⌈log₂ n⌉` bits, so grids that are not powers of two keep
    /// the order of the Z curve over the enclosing power-of-two grid, skipping the
    /// codes outside the shard.
    Morton,
}

impl ChunkOrder {
    /// `c` or `morton`, as [`FromStr`](std::str::FromStr) accepts it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkOrder::C => "c",
            ChunkOrder::Morton => "morton",
        }
    }

    /// The inner chunks of one shard of `spec`, each as its C-order index (its place in
    /// the shard index), in the order their bytes lie in the file.
    pub fn sequence(self, spec: &ArraySpec) -> Vec<u64> {
        let grid = chunk_grid(spec);
        let n: u64 = grid.iter().product();
        match self {
            ChunkOrder::C => (0..n).collect(),
            ChunkOrder::Morton => {
                let bits: Vec<u32> = grid
                    .iter()
                    .map(|&n| u64::BITS - n.saturating_sub(1).leading_zeros())
                    .collect();
                let mut keyed: Vec<(u64, u64)> =
                    (0..n).map(|i| (morton_code(&grid, &bits, i), i)).collect();
                keyed.sort_unstable();
                keyed.into_iter().map(|(_, i)| i).collect()
            }
        }
    }
}

impl std::str::FromStr for ChunkOrder {
    type Err = ParseError;
    /// Parses `c` or `morton`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "c" => Ok(ChunkOrder::C),
            "morton" => Ok(ChunkOrder::Morton),
            _ => Err(ParseError::new("chunk order", s, "c, morton")),
        }
    }
}

impl std::fmt::Display for ChunkOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Inner chunks per shard along each axis.
fn chunk_grid(spec: &ArraySpec) -> Vec<u64> {
    spec.shard
        .iter()
        .zip(&spec.chunk)
        .map(|(s, c)| s / c)
        .collect()
}

/// The Morton code of the chunk with C-order index `i` in a shard of `grid` chunks,
/// axis `a` taking `bits[a] = ⌈log₂ grid[a]⌉` bits (zarr-python's "compressed" code:
/// an axis stops contributing once its bits are used up).
///
/// Written here rather than taken from a Morton crate: those interleave a fixed number
/// of axes with the same bits each, where this needs up to 31 axes with bits of their
/// own, in zarr-python's exact order. The builder caps a shard at 2³⁰ chunks, and
/// `⌈log₂ n⌉ ≤ 2 log₂ n` for every `n ≥ 2`, so the code has at most 60 bits.
fn morton_code(grid: &[u64], bits: &[u32], mut i: u64) -> u64 {
    let mut coords = vec![0u64; grid.len()];
    for (c, n) in coords.iter_mut().zip(grid).rev() {
        *c = i % n;
        i /= n;
    }
    let levels = bits.iter().copied().max().unwrap_or(0);
    let mut code = 0u64;
    let mut out = 0u32;
    for level in 0..levels {
        for (c, &b) in coords.iter().zip(bits) {
            if level < b {
                code |= ((c >> level) & 1) << out;
                out += 1;
            }
        }
    }
    code
}

/// Where each inner chunk's slot lies in a shard being written, and the order the
/// finished shard keeps: slot position `p` holds the chunk `sequence[p]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotOrder {
    order: ChunkOrder,
    /// `sequence[p]`: the chunk at position `p` (empty for C order: the identity).
    sequence: Arc<[u32]>,
    /// `position[i]`: the position of chunk `i` (empty for C order).
    position: Arc<[u32]>,
}

impl SlotOrder {
    /// The slot order of `spec`'s shards in `order`.
    pub(crate) fn new(order: ChunkOrder, spec: &ArraySpec) -> Self {
        if order == ChunkOrder::C {
            return SlotOrder::c();
        }
        // The builder caps a shard at 2^30 chunks, so indexes fit in u32.
        let sequence = order.sequence(spec).into_iter().map(|i| i as u32).collect();
        SlotOrder::with_sequence(order, sequence)
    }

    /// `order` given as the chunk at each position (a permutation of `0..n`).
    fn with_sequence(order: ChunkOrder, sequence: Vec<u32>) -> Self {
        let mut position = vec![0u32; sequence.len()];
        for (p, &i) in sequence.iter().enumerate() {
            position[i as usize] = p as u32;
        }
        SlotOrder {
            order,
            sequence: sequence.into(),
            position: position.into(),
        }
    }

    /// Any permutation of `0..n` as the chunk at each position (labelled Morton: it has
    /// tables like it).
    #[cfg(test)]
    pub(crate) fn from_sequence(sequence: Vec<u32>) -> Self {
        SlotOrder::with_sequence(ChunkOrder::Morton, sequence)
    }

    /// C order: chunk `i` at position `i`.
    pub(crate) fn c() -> Self {
        SlotOrder {
            order: ChunkOrder::C,
            sequence: Arc::from([]),
            position: Arc::from([]),
        }
    }

    /// The order in which a writer laid out a temporary shard whose index (working or
    /// final) holds `entries` (`(offset, nbytes)` per chunk as read, `u64::MAX` when
    /// empty), given the array's `morton` order: Morton when some entry points at its
    /// chunk's Morton slot (which is not its C slot; one such entry suffices, even if
    /// others are torn), or when the offsets increase along the Morton order but not
    /// along C order (a compacted shard); C otherwise. Where neither holds, the chunks
    /// present lie alike in both orders.
    pub(crate) fn infer(layout: &ShardLayout, morton: &SlotOrder, entries: &[(u64, u64)]) -> Self {
        let present = |i: &usize| entries[*i].0 != u64::MAX;
        let in_morton_slot = (0..entries.len()).filter(present).any(|i| {
            let p = morton.position(i);
            p != i && entries[i].0 == layout.slot_offset(p as u64)
        });
        let increasing = |chunks: &mut dyn Iterator<Item = usize>| {
            let offsets: Vec<u64> = chunks.filter(present).map(|i| entries[i].0).collect();
            offsets.windows(2).all(|w| w[0] < w[1])
        };
        let along_morton = increasing(&mut (0..entries.len()).map(|p| morton.chunk_at(p)));
        let along_c = increasing(&mut (0..entries.len()));
        if in_morton_slot || (along_morton && !along_c) {
            morton.clone()
        } else {
            SlotOrder::c()
        }
    }

    /// The order this holds.
    pub(crate) fn order(&self) -> ChunkOrder {
        self.order
    }

    /// The position of chunk `i`'s slot.
    pub(crate) fn position(&self, i: usize) -> usize {
        self.position.get(i).map_or(i, |&p| p as usize)
    }

    /// The chunk whose slot is at position `p`.
    pub(crate) fn chunk_at(&self, p: usize) -> usize {
        self.sequence.get(p).map_or(p, |&i| i as usize)
    }

    /// The position of every chunk, or `None` for C order (the identity).
    pub(crate) fn positions(&self) -> Option<Arc<[u32]>> {
        (self.order != ChunkOrder::C).then(|| Arc::clone(&self.position))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(grid: &[u64]) -> ArraySpec {
        let chunk: Vec<u64> = grid.iter().map(|_| 2).collect();
        let shard: Vec<u64> = grid.iter().map(|g| 2 * g).collect();
        let mut shape = shard.clone();
        shape[0] = 0;
        ArraySpec::builder()
            .shape(shape)
            .chunk_shape(chunk)
            .shard_shape(shard)
            .build()
            .unwrap()
    }

    fn coords(grid: &[u64], mut i: u64) -> Vec<u64> {
        let mut c = vec![0; grid.len()];
        for a in (0..grid.len()).rev() {
            c[a] = i % grid[a];
            i /= grid[a];
        }
        c
    }

    #[test]
    fn names_round_trip() {
        for o in [ChunkOrder::C, ChunkOrder::Morton] {
            assert_eq!(o.to_string().parse::<ChunkOrder>(), Ok(o));
        }
        let e = "z".parse::<ChunkOrder>().unwrap_err();
        assert_eq!((e.what, e.input.as_str()), ("chunk order", "z"));
        assert_eq!(e.to_string(), "\"z\" is not a chunk order (c, morton)");
    }

    /// A 1 x 4 x 4 grid is the textbook Z curve over (y, x), y taking the lower bit.
    #[test]
    fn morton_of_a_square_is_the_z_curve() {
        let got: Vec<Vec<u64>> = ChunkOrder::Morton
            .sequence(&spec(&[1, 4, 4]))
            .into_iter()
            .map(|i| coords(&[1, 4, 4], i)[1..].to_vec())
            .collect();
        let z = [
            [0, 0],
            [1, 0],
            [0, 1],
            [1, 1],
            [2, 0],
            [3, 0],
            [2, 1],
            [3, 1],
            [0, 2],
            [1, 2],
            [0, 3],
            [1, 3],
            [2, 2],
            [3, 2],
            [2, 3],
            [3, 3],
        ];
        assert_eq!(got, z.map(|c| c.to_vec()).to_vec());
    }

    /// Non-powers of two: the order of the enclosing power-of-two curve, skipping
    /// coordinates outside the grid (3 x 1 x 3 inside 4 x 1 x 4).
    #[test]
    fn morton_skips_codes_outside_the_grid() {
        let grid = [3, 1, 3];
        let got: Vec<Vec<u64>> = ChunkOrder::Morton
            .sequence(&spec(&grid))
            .into_iter()
            .map(|i| coords(&grid, i))
            .collect();
        let mut want = Vec::new();
        for code in 0..16u64 {
            // Axis 0 takes bits 0 and 2, axis 2 bits 1 and 3 (axis 1 has none).
            let a = (code & 1) | ((code >> 1) & 2);
            let c = ((code >> 1) & 1) | ((code >> 2) & 2);
            if a < 3 && c < 3 {
                want.push(vec![a, 0, c]);
            }
        }
        assert_eq!(got, want);
    }

    #[test]
    fn every_order_is_a_permutation_with_its_inverse() {
        for grid in [
            &[1, 1, 1][..],
            &[8, 4, 4],
            &[3, 5, 2],
            &[1, 8, 8],
            &[2, 3, 1, 7, 5],
        ] {
            let s = spec(grid);
            let n = s.chunks_per_shard;
            for order in [ChunkOrder::C, ChunkOrder::Morton] {
                let seq = order.sequence(&s);
                let mut sorted = seq.clone();
                sorted.sort_unstable();
                assert_eq!(
                    sorted,
                    (0..n as u64).collect::<Vec<_>>(),
                    "{grid:?} {order}"
                );
                let slots = SlotOrder::new(order, &s);
                for (p, &i) in seq.iter().enumerate() {
                    assert_eq!(slots.position(i as usize), p);
                    assert_eq!(slots.chunk_at(p), i as usize);
                }
            }
        }
    }

    #[test]
    fn c_slot_order_is_the_identity_without_tables() {
        let s = SlotOrder::new(ChunkOrder::C, &spec(&[2, 2, 2]));
        assert_eq!(s, SlotOrder::c());
        assert_eq!((s.position(5), s.chunk_at(5)), (5, 5));
        assert!(s.positions().is_none());
    }
}
