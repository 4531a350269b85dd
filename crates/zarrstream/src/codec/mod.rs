//! Inner-chunk codecs. Each encodes one chunk straight into a caller-provided slot of at
//! least [`Codec::bound`] bytes and reports how many bytes it used.

pub mod blosc;
mod encoder;
mod name;
mod raw;
mod shuffle;
mod zstd;

use serde_json::{Value, json};

pub use encoder::{Checksum, ChunkEncoder};

use crate::dtype::DataType;
use crate::error::SpecError;

/// The inner codec of every chunk.
///
/// Its text form (`none`, `zstd:3`, `blosc-lz4:1`) parses with [`str::parse`] and is
/// what [`Display`](std::fmt::Display) prints:
///
/// ```
/// use zarrstream::Codec;
/// assert_eq!("blosc-lz4:1".parse::<Codec>()?, Codec::blosc_lz4(1));
/// assert_eq!("lz4:1".parse::<Codec>()?, Codec::blosc_lz4(1)); // an alias
/// assert_eq!(Codec::blosc_lz4(1).to_string(), "blosc-lz4:1");
/// assert_eq!("zstd".parse::<Codec>()?, Codec::zstd(1));
/// # Ok::<(), zarrstream::ParseError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Codec {
    /// No compression (`bytes` only).
    None,
    /// One zstd frame per chunk, with the content size in its header.
    Zstd {
        /// Compression level (-131072..=22; 0 = library default).
        level: i32,
        /// Whether the frame carries zstd's own content checksum.
        checksum: bool,
    },
    /// The `blosc` codec with byte shuffle, in a Blosc1 container that every Blosc
    /// reader decodes.
    Blosc {
        /// The compressor inside the Blosc container (`cname`).
        compressor: BloscCompressor,
        /// Blosc compression level 0..=9 (0 stores the data uncompressed); it picks the
        /// block size the way c-blosc does.
        clevel: u8,
    },
}

/// The compressor inside a [`Codec::Blosc`] container (Blosc's `cname`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BloscCompressor {
    /// LZ4 (`cname: "lz4"`).
    Lz4,
}

impl BloscCompressor {
    /// The `cname` written into the `blosc` codec's configuration.
    pub const fn cname(self) -> &'static str {
        match self {
            BloscCompressor::Lz4 => "lz4",
        }
    }
}

impl Codec {
    /// No compression.
    pub const fn none() -> Self {
        Codec::None
    }
    /// zstd at `level`, without zstd's own checksum.
    pub const fn zstd(level: i32) -> Self {
        Codec::Zstd {
            level,
            checksum: false,
        }
    }
    /// Blosc with LZ4 and byte shuffle at `clevel` (0..=9).
    pub const fn blosc_lz4(clevel: u8) -> Self {
        Codec::Blosc {
            compressor: BloscCompressor::Lz4,
            clevel,
        }
    }

    pub(crate) fn validate(self) -> Result<(), SpecError> {
        match self {
            Codec::None => Ok(()),
            Codec::Zstd { level, .. } => {
                let (min, max) = (-131072, 22);
                if (min..=max).contains(&level) {
                    Ok(())
                } else {
                    Err(SpecError::LevelOutOfRange {
                        codec: "zstd",
                        level,
                        min,
                        max,
                    })
                }
            }
            Codec::Blosc { clevel, .. } if clevel <= 9 => Ok(()),
            Codec::Blosc { clevel, .. } => Err(SpecError::LevelOutOfRange {
                codec: "blosc",
                level: i32::from(clevel),
                min: 0,
                max: 9,
            }),
        }
    }

    /// Worst-case encoded size of a chunk of `raw` bytes, without the crc32c.
    pub fn bound(self, raw: usize) -> usize {
        match self {
            Codec::None => raw,
            Codec::Zstd { .. } => zstd::bound(raw),
            Codec::Blosc { .. } => blosc::bound(raw),
        }
    }

    /// [`bound`](Self::bound), or `None` where it does not fit in `usize` (zstd reports
    /// inputs it cannot bound with an error code, which must not be mistaken for a size).
    pub(crate) fn checked_bound(self, raw: usize) -> Option<usize> {
        match self {
            Codec::None => Some(raw),
            Codec::Zstd { .. } => Some(zstd::bound(raw)).filter(|&b| b >= raw),
            Codec::Blosc { .. } => raw.checked_add(16),
        }
    }

    /// Short name for reports (`none`, `zstd:1`, `lz4:1`): the spelling of the `record`
    /// example's `--codec`, which also parses. [`Display`](std::fmt::Display) gives the
    /// canonical name (`blosc-lz4:1`).
    pub fn label(self) -> String {
        match self {
            Codec::None => "none".into(),
            Codec::Zstd { level, .. } => format!("zstd:{level}"),
            Codec::Blosc { compressor, clevel } => format!("{}:{clevel}", compressor.cname()),
        }
    }

    /// The inner `codecs` list of `sharding_indexed`: `bytes` (little-endian), then the
    /// compressor, then `crc32c` when chunks carry one.
    pub(crate) fn zarr_codecs(self, dtype: DataType, crc32c: bool) -> Vec<Value> {
        let mut v = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
        match self {
            Codec::None => {}
            Codec::Zstd { level, checksum } => {
                v.push(json!({"name": "zstd", "configuration": {"level": level, "checksum": checksum}}));
            }
            Codec::Blosc { compressor, clevel } => {
                v.push(json!({"name": "blosc", "configuration": {
                "cname": compressor.cname(), "clevel": clevel, "shuffle": "shuffle",
                "typesize": dtype.size(), "blocksize": 0}}))
            }
        }
        if crc32c {
            v.push(json!({"name": "crc32c"}));
        }
        v
    }
}

/// See `ZstdEncoder::context_bytes`.
pub(crate) fn zstd_context_bytes(level: i32, chunk: usize) -> Result<usize, crate::Error> {
    zstd::ZstdEncoder::context_bytes(level, chunk)
}

/// Resizes a scratch buffer to `len` bytes, growing its capacity to exactly what the
/// largest chunk needs (not doubling), so the memory estimate can bound it.
pub(crate) fn grow_exact(scratch: &mut Vec<u8>, len: usize) {
    if let Some(more) = len.checked_sub(scratch.len()).filter(|&m| m > 0) {
        scratch.reserve_exact(more);
    }
    scratch.resize(len, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_matches_the_checklist() {
        let c = Codec::blosc_lz4(1).zarr_codecs(DataType::UInt16, true);
        assert_eq!(
            Value::Array(c),
            json!([{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle",
                                                       "typesize": 2, "blocksize": 0}},
                   {"name": "crc32c"}])
        );
        let z = Codec::zstd(3).zarr_codecs(DataType::UInt8, false);
        assert_eq!(
            z[1],
            json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}})
        );
        assert_eq!(z.len(), 2);
    }

    #[test]
    fn labels_keep_the_short_spelling() {
        assert_eq!(Codec::blosc_lz4(1).label(), "lz4:1");
        assert_eq!(Codec::zstd(-5).label(), "zstd:-5");
        assert_eq!(Codec::none().label(), "none");
    }
}
