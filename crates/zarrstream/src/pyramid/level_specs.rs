//! How many levels an image has, and the array spec of each.

use crate::error::OmeError;
use crate::spec::ArraySpec;

/// Number of pyramid levels, level 0 included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Levels {
    /// Exactly this many (1 = level 0 only, the default).
    Count(usize),
    /// Until a level's frame fits in one inner chunk (that level is the last).
    Auto,
}

impl Default for Levels {
    fn default() -> Self {
        Levels::Count(1)
    }
}

/// Most levels an image may have.
pub const MAX_LEVELS: usize = 16;

/// The number of levels `levels` gives for an image whose level 0 is `spec`.
pub(crate) fn level_count(spec: &ArraySpec, levels: Levels) -> Result<usize, OmeError> {
    match levels {
        Levels::Count(n) if (1..=MAX_LEVELS).contains(&n) => Ok(n),
        Levels::Count(n) => Err(OmeError::Levels {
            got: n,
            max: MAX_LEVELS,
        }),
        Levels::Auto => {
            let r = spec.rank();
            let (mut h, mut w) = (spec.shape[r - 2], spec.shape[r - 1]);
            let mut n = 1;
            while (h > spec.chunk[r - 2] || w > spec.chunk[r - 1]) && n < MAX_LEVELS {
                h = h.div_ceil(2);
                w = w.div_ceil(2);
                n += 1;
            }
            Ok(n)
        }
    }
}

/// The spec of the level below `prev`: y and x (and axis `z`, if given) halved (rounded
/// up), inner chunk edges capped to the level's size, shard edges to the chunk-rounded
/// size; everything else as `prev`.
pub(crate) fn next_level_spec(
    prev: &ArraySpec,
    z: Option<usize>,
) -> Result<ArraySpec, crate::SpecError> {
    let r = prev.rank();
    let (mut shape, mut chunk, mut shard) =
        (prev.shape.clone(), prev.chunk.clone(), prev.shard.clone());
    for a in z.into_iter().chain(r - 2..r) {
        let size = prev.shape[a].div_ceil(2);
        chunk[a] = prev.chunk[a].min(size);
        shard[a] = prev.shard[a].min(size.div_ceil(chunk[a]) * chunk[a]);
        shape[a] = size;
    }
    let mut b = ArraySpec::builder()
        .shape(shape)
        .chunk_shape(chunk)
        .shard_shape(shard)
        .dtype(prev.dtype)
        .fill_value(prev.fill_value)
        .codec(prev.codec)
        .crc32c(prev.crc32c)
        .index_location(prev.index_location)
        .attributes(prev.attributes.clone());
    if let Some(n) = &prev.dimension_names {
        b = b.dimension_names(n.iter().cloned());
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_specs_cap_chunks_and_shards() {
        let s = ArraySpec::builder()
            .shape([0, 1000, 300])
            .chunk_shape([1, 256, 256])
            .shard_shape([4, 512, 512])
            .build()
            .unwrap();
        let l1 = next_level_spec(&s, None).unwrap();
        assert_eq!(l1.shape(), [0, 500, 150]);
        assert_eq!(l1.chunk_shape(), [1, 256, 150]);
        assert_eq!(l1.shard_shape(), [4, 512, 150]);
        assert_eq!(l1.frame_bytes(), 500 * 150 * 2);
        assert_eq!(level_count(&s, Levels::Auto).unwrap(), 3);
        assert!(level_count(&s, Levels::Count(0)).is_err());
    }
}
