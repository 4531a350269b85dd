//! Fixed positions of a shard's slots and index, from the codec's worst-case bound.

use crate::spec::{ArraySpec, IndexLocation};

/// Slots at or above this size are page-aligned (so prefaulting and hole punching work
/// on whole pages); smaller ones are cache-line aligned so that two workers never write
/// the same cache line.
const PAGE_ALIGN_FROM: u64 = 64 * 1024;

/// Byte layout of a shard file while it is being written (the "worst case" file).
///
/// Slot `i` (inner chunk `i` in C order within the shard) starts at
/// `data_start + i * slot_size`. The working index (16 bytes per chunk, filled as chunks
/// land, so that a crashed shard can be recovered) sits at `index_offset`: at the start
/// of the file for [`IndexLocation::Start`], after the last slot for
/// [`IndexLocation::End`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardLayout {
    /// Inner chunks per shard.
    pub n: u64,
    /// Bytes reserved for one encoded chunk (codec bound + crc32c, aligned).
    pub slot_size: u64,
    /// Offset of slot 0.
    pub data_start: u64,
    /// Offset of the working index.
    pub index_offset: u64,
    /// Encoded index size: `16 n + 4`.
    pub index_size: u64,
    /// Size the file is reserved at.
    pub file_size: u64,
    /// Where the final index goes.
    pub location: IndexLocation,
}

/// A layout size overflowed u64.
#[derive(Debug)]
pub struct LayoutOverflow;

fn round_up(v: u64, to: u64) -> Option<u64> {
    v.checked_add(to - 1).map(|x| x / to * to)
}

impl ShardLayout {
    /// The layout for `spec`.
    pub fn new(spec: &ArraySpec) -> Result<Self, LayoutOverflow> {
        let crc = if spec.crc32c { 4 } else { 0 };
        let raw = spec.codec.bound(spec.chunk_bytes) as u64 + crc;
        let align = if raw >= PAGE_ALIGN_FROM { 4096 } else { 64 };
        let slot_size = round_up(raw, align).ok_or(LayoutOverflow)?;
        let n = spec.chunks_per_shard as u64;
        let index_size = 16 * n + 4;
        let slots = n.checked_mul(slot_size).ok_or(LayoutOverflow)?;
        let (data_start, index_offset) = match spec.index_location {
            IndexLocation::Start => (round_up(index_size, align).ok_or(LayoutOverflow)?, 0),
            IndexLocation::End => (0, slots),
        };
        let file_size = match spec.index_location {
            IndexLocation::Start => data_start.checked_add(slots),
            IndexLocation::End => slots.checked_add(index_size),
        }
        .ok_or(LayoutOverflow)?;
        Ok(ShardLayout {
            n,
            slot_size,
            data_start,
            index_offset,
            index_size,
            file_size,
            location: spec.index_location,
        })
    }

    /// Offset of slot `i`.
    pub fn slot_offset(&self, i: u64) -> u64 {
        self.data_start + i * self.slot_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Codec;

    fn spec(loc: IndexLocation, codec: Codec, crc: bool) -> ArraySpec {
        ArraySpec::builder()
            .shape([0, 2048, 2048])
            .chunk_shape([1, 512, 512])
            .shard_shape([32, 2048, 2048])
            .codec(codec)
            .crc32c(crc)
            .index_location(loc)
            .build()
            .unwrap()
    }

    #[test]
    fn end_layout_puts_index_after_slots() {
        let l = ShardLayout::new(&spec(IndexLocation::End, Codec::none(), true)).unwrap();
        assert_eq!(l.n, 512);
        // 524288 + 4 rounded to a page.
        assert_eq!(l.slot_size, 524288 + 4096);
        assert_eq!(l.data_start, 0);
        assert_eq!(l.index_offset, 512 * l.slot_size);
        assert_eq!(l.index_size, 16 * 512 + 4);
        assert_eq!(l.file_size, l.index_offset + l.index_size);
        assert_eq!(l.slot_offset(3), 3 * l.slot_size);
    }

    #[test]
    fn start_layout_puts_data_after_aligned_index() {
        let l = ShardLayout::new(&spec(IndexLocation::Start, Codec::lz4(1), false)).unwrap();
        assert_eq!(l.slot_size, 524288 + 4096); // 524288 + 16 rounded up
        assert_eq!(l.index_offset, 0);
        assert_eq!(l.data_start, 12288); // 8196 rounded to pages
        assert_eq!(l.file_size, l.data_start + 512 * l.slot_size);
    }

    #[test]
    fn small_slots_are_cache_line_aligned() {
        let s = ArraySpec::builder()
            .shape([0, 8, 8])
            .chunk_shape([1, 4, 4])
            .shard_shape([2, 8, 8])
            .build()
            .unwrap();
        let l = ShardLayout::new(&s).unwrap();
        assert_eq!(l.slot_size, 64); // 32 + 16 + 4 -> 64
        assert_eq!(l.n, 8);
    }
}
