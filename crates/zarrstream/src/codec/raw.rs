//! The `none` codec: the chunk's bytes, tiled straight from the source into the slot.

use crate::tile::ChunkSource;

pub(crate) fn encode(src: &ChunkSource<'_>, out: &mut [u8]) -> usize {
    let n = src.len();
    src.copy_range(0, n, &mut out[..n]);
    n
}
