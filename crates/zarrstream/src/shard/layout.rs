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
    pub(crate) n: u64,
    /// Bytes reserved for one encoded chunk (codec bound + crc32c, aligned).
    pub(crate) slot_size: u64,
    /// Offset of slot 0.
    pub(crate) data_start: u64,
    /// Offset of the working index.
    pub(crate) index_offset: u64,
    /// Encoded index size: `16 n + 4`.
    pub(crate) index_size: u64,
    /// Size the file is reserved at.
    pub(crate) file_size: u64,
    /// Where the final index goes.
    pub(crate) location: IndexLocation,
}

/// A size of the shard layout does not fit in a `u64` (the codec's bound times the
/// chunks per shard is too large).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the shard layout overflows u64")]
pub struct LayoutOverflow;

fn round_up(v: u64, to: u64) -> Option<u64> {
    v.checked_add(to - 1).map(|x| x / to * to)
}

impl ShardLayout {
    /// The layout for `spec`.
    pub fn new(spec: &ArraySpec) -> Result<Self, LayoutOverflow> {
        let crc = if spec.crc32c { 4 } else { 0 };
        let raw = spec
            .codec
            .checked_bound(spec.chunk_bytes)
            .and_then(|b| (b as u64).checked_add(crc));
        let raw = raw.ok_or(LayoutOverflow)?;
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

    /// Inner chunks per shard.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Bytes reserved for one encoded chunk (codec bound + crc32c, aligned).
    pub fn slot_size(&self) -> u64 {
        self.slot_size
    }

    /// Offset of slot 0.
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    /// Offset of the working index.
    pub fn index_offset(&self) -> u64 {
        self.index_offset
    }

    /// Encoded index size: `16 n + 4`.
    pub fn index_size(&self) -> u64 {
        self.index_size
    }

    /// Size the file is reserved at.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Where the final index goes.
    pub fn location(&self) -> IndexLocation {
        self.location
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
        let l = ShardLayout::new(&spec(IndexLocation::Start, Codec::blosc_lz4(1), false)).unwrap();
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

#[cfg(test)]
pub(crate) mod proptests {
    //! Properties of the slot layout over random valid specifications.

    use proptest::prelude::*;

    use super::*;
    use crate::codec::Codec;
    use crate::dtype::DataType;

    /// Any codec the builder accepts.
    pub(crate) fn arb_codec() -> impl Strategy<Value = Codec> {
        prop_oneof![
            Just(Codec::None),
            (-7i32..=22, any::<bool>())
                .prop_map(|(level, checksum)| Codec::Zstd { level, checksum }),
            (0u8..=9).prop_map(Codec::blosc_lz4),
        ]
    }

    pub(crate) fn arb_dtype() -> impl Strategy<Value = DataType> {
        proptest::sample::select(DataType::ALL.to_vec())
    }

    /// A valid spec of rank 3-5: leading chunk extents up to `lead`, plane chunk extents
    /// up to `plane`, up to `per` inner chunks per shard along each axis; all codecs, crc
    /// on/off, both index locations, bounded or unbounded append axis.
    pub(crate) fn arb_spec(lead: u64, plane: u64, per: u64) -> impl Strategy<Value = ArraySpec> {
        (3usize..=5)
            .prop_flat_map(move |rank| {
                let axes = (0..rank)
                    .map(|a| {
                        let max = if a + 2 >= rank { plane } else { lead };
                        // (chunk, chunks per shard, shape as a fraction of 3 shards)
                        (1..=max, 1..=per, 1u64..=300)
                    })
                    .collect::<Vec<_>>();
                (
                    axes,
                    any::<bool>(),
                    arb_dtype(),
                    arb_codec(),
                    any::<bool>(),
                    any::<bool>(),
                )
            })
            .prop_map(|(axes, unbounded, dtype, codec, crc, start)| {
                let chunk: Vec<u64> = axes.iter().map(|a| a.0).collect();
                let shard: Vec<u64> = axes.iter().map(|a| a.0 * a.1).collect();
                let mut shape: Vec<u64> = axes
                    .iter()
                    .map(|a| (a.0 * a.1 * 3 * a.2).div_ceil(100))
                    .collect();
                if unbounded {
                    shape[0] = 0;
                }
                let loc = if start {
                    IndexLocation::Start
                } else {
                    IndexLocation::End
                };
                ArraySpec::builder()
                    .shape(shape)
                    .chunk_shape(chunk)
                    .shard_shape(shard)
                    .dtype(dtype)
                    .codec(codec)
                    .crc32c(crc)
                    .index_location(loc)
                    .build()
                    .expect("generated spec is valid")
            })
    }

    /// Every property of a layout that the writer, the finisher and recovery rely on.
    pub(crate) fn check_layout(spec: &ArraySpec, l: &ShardLayout) -> Result<(), TestCaseError> {
        let crc = if spec.crc32c { 4 } else { 0 };
        let raw = spec.codec.bound(spec.chunk_bytes) as u64 + crc;
        prop_assert_eq!(l.n, spec.chunks_per_shard as u64);
        prop_assert_eq!(l.location, spec.index_location);
        prop_assert_eq!(l.index_size, 16 * l.n + 4);
        // Each slot holds the codec's worst case plus the crc32c, cache-line aligned
        // (page aligned when large), so no two workers share a cache line.
        prop_assert!(l.slot_size >= raw, "slot {} < bound {raw}", l.slot_size);
        prop_assert_eq!(l.slot_size % 64, 0);
        prop_assert_eq!(l.data_start % 64, 0);
        if raw >= PAGE_ALIGN_FROM {
            prop_assert_eq!(l.slot_size % 4096, 0);
            prop_assert_eq!(l.data_start % 4096, 0);
        }
        prop_assert!(l.slot_size - raw < 4096, "slot wastes a page or more");
        // Slots are disjoint, in order, and inside the file.
        let work = (l.index_offset, l.index_offset + 16 * l.n);
        for i in 0..l.n {
            let (a, b) = (l.slot_offset(i), l.slot_offset(i) + l.slot_size);
            prop_assert_eq!(a, l.data_start + i * l.slot_size);
            if i + 1 < l.n {
                prop_assert!(
                    b <= l.slot_offset(i + 1),
                    "slot {i} overlaps slot {}",
                    i + 1
                );
            }
            prop_assert!(
                b <= l.file_size,
                "slot {i} ends at {b} > file {}",
                l.file_size
            );
            // The working index is disjoint from every slot.
            prop_assert!(
                b <= work.0 || work.1 <= a,
                "slot {i} [{a}, {b}) overlaps the working index [{}, {})",
                work.0,
                work.1
            );
        }
        // The working index, and the final index written at the same place, fit.
        prop_assert!(l.index_offset + l.index_size <= l.file_size);
        match l.location {
            IndexLocation::Start => {
                prop_assert_eq!(l.index_offset, 0);
                prop_assert!(l.index_size <= l.data_start);
                prop_assert_eq!(l.file_size, l.data_start + l.n * l.slot_size);
            }
            IndexLocation::End => {
                prop_assert_eq!(l.data_start, 0);
                prop_assert_eq!(l.index_offset, l.n * l.slot_size);
                prop_assert_eq!(l.file_size, l.index_offset + l.index_size);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Small chunks: cache-line aligned slots, up to 4^5 chunks per shard.
        #[test]
        fn small_slots_are_disjoint_and_fit(spec in arb_spec(3, 24, 4)) {
            check_layout(&spec, &ShardLayout::new(&spec).unwrap())?;
        }

        /// Large chunks: page-aligned slots.
        #[test]
        fn large_slots_are_disjoint_and_fit(spec in arb_spec(2, 700, 3)) {
            check_layout(&spec, &ShardLayout::new(&spec).unwrap())?;
        }

        /// Huge shapes: the builder either rejects the spec or yields a consistent
        /// layout; nothing panics or wraps. Chunk extents stay below 2^20 per axis so
        /// the chunk size stays far from u64::MAX (see `huge_chunk_near_u64_max`).
        #[test]
        fn huge_specs_are_rejected_or_consistent(
            chunk in proptest::collection::vec(1u64..(1 << 20), 3..=5),
            per in proptest::collection::vec(1u64..(1 << 12), 5),
            dtype in arb_dtype(),
            codec in arb_codec(),
            crc in any::<bool>(),
            start in any::<bool>(),
        ) {
            let rank = chunk.len();
            let shard: Vec<u64> = chunk.iter().zip(&per).map(|(c, p)| c * p).collect();
            let mut shape = shard.clone();
            shape[0] = 0;
            let loc = if start { IndexLocation::Start } else { IndexLocation::End };
            let built = ArraySpec::builder()
                .shape(&shape)
                .chunk_shape(&chunk)
                .shard_shape(&shard[..rank])
                .dtype(dtype)
                .codec(codec)
                .crc32c(crc)
                .index_location(loc)
                .build();
            if let Ok(spec) = built {
                check_layout(&spec, &ShardLayout::new(&spec).unwrap())?;
            }
        }
    }

    /// A chunk of exactly u64::MAX bytes (3·5·17 × 257·641 × 65537·6700417 u8 elements)
    /// passes the builder's checked products; `bound + crc` then overflowed (and zstd's
    /// bound is an error code for such sizes). Now the spec is refused, or its layout valid.
    #[test]
    fn huge_chunk_near_u64_max() {
        let chunk = [3 * 5 * 17, 257 * 641, 65537 * 6_700_417];
        assert_eq!(
            chunk.iter().try_fold(1u64, |a, &b| a.checked_mul(b)),
            Some(u64::MAX)
        );
        for codec in [Codec::None, Codec::zstd(1)] {
            let built = ArraySpec::builder()
                .shape([0, 1, 1])
                .chunk_shape(chunk)
                .shard_shape(chunk)
                .dtype(DataType::UInt8)
                .codec(codec)
                .build();
            if let Ok(spec) = built {
                let l = ShardLayout::new(&spec).unwrap();
                check_layout(&spec, &l).unwrap();
            }
        }
    }
}
