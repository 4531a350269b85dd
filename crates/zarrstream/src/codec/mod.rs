//! Inner-chunk codecs. Each encodes one chunk straight into a caller-provided slot of at
//! least [`Codec::bound`] bytes and reports how many bytes it used.

pub mod blosc;
mod encoder;
mod name;
mod raw;
pub(crate) mod shuffle;
mod zstd;

pub use encoder::{Checksum, ChunkEncoder};

use crate::document::{BloscConfiguration, Endian, Named, ZstdConfiguration};
use crate::dtype::DataType;
use crate::error::SpecError;

/// The inner codec of every chunk.
///
/// Its text form (`none`, `zstd:3`, `blosc-lz4:1`, `blosc-zstd:3:bitshuffle`) parses
/// with [`str::parse`] and is what [`Display`](std::fmt::Display) prints:
///
/// ```
/// use zarrstream::{BloscCompressor, BloscShuffle, Codec};
/// assert_eq!("blosc-lz4:1".parse::<Codec>()?, Codec::blosc_lz4(1));
/// assert_eq!("lz4:1".parse::<Codec>()?, Codec::blosc_lz4(1)); // an alias
/// assert_eq!(Codec::blosc_lz4(1).to_string(), "blosc-lz4:1");
/// assert_eq!("zstd".parse::<Codec>()?, Codec::zstd(1));
/// let bits = Codec::blosc_zstd(5).with_shuffle(BloscShuffle::BitShuffle);
/// assert_eq!(bits.to_string(), "blosc-zstd:5:bitshuffle");
/// assert_eq!("blosc-zstd:5:bitshuffle".parse::<Codec>()?, bits);
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
    /// The `blosc` codec: a Blosc1 container, which every Blosc reader decodes, around
    /// LZ4 or zstd blocks, with a byte or bit shuffle (or none) before compression.
    Blosc {
        /// The compressor inside the Blosc container (`cname`).
        compressor: BloscCompressor,
        /// Blosc compression level 0..=9 (0 stores the data uncompressed); it picks the
        /// block size (and zstd's level) the way c-blosc does.
        clevel: u8,
        /// The shuffle before compression; `None` is the default for the element size,
        /// [`BloscShuffle::default_for`] (byte shuffle). An explicit shuffle that does
        /// nothing for the element size is refused by the spec builder
        /// ([`SpecError::ShuffleDoesNotFit`]).
        shuffle: Option<BloscShuffle>,
    },
}

/// The compressor inside a [`Codec::Blosc`] container (Blosc's `cname`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BloscCompressor {
    /// LZ4 (`cname: "lz4"`), at c-blosc's acceleration `10 - clevel`.
    Lz4,
    /// zstd (`cname: "zstd"`), at c-blosc's zstd level for the clevel
    /// (`2 clevel - 1`, 22 at clevel 9).
    Zstd,
}

impl BloscCompressor {
    /// The `cname` written into the `blosc` codec's configuration.
    pub const fn cname(self) -> &'static str {
        match self {
            BloscCompressor::Lz4 => "lz4",
            BloscCompressor::Zstd => "zstd",
        }
    }
}

/// The shuffle a [`Codec::Blosc`] container applies to each block before compressing
/// it (the `shuffle` of the `blosc` codec's configuration).
///
/// ```
/// use zarrstream::{BloscShuffle, DataType};
/// assert_eq!(BloscShuffle::default_for(DataType::UInt16), BloscShuffle::Shuffle);
/// assert!(!BloscShuffle::Shuffle.fits(DataType::UInt8));
/// assert!(BloscShuffle::BitShuffle.fits(DataType::UInt8));
/// assert_eq!("bitshuffle".parse::<BloscShuffle>()?, BloscShuffle::BitShuffle);
/// # Ok::<(), zarrstream::ParseError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BloscShuffle {
    /// No shuffle (`noshuffle`).
    NoShuffle,
    /// Byte shuffle (`shuffle`): byte `j` of every element together, for each `j`.
    /// It groups the slowly varying high bytes of camera data, so they compress well.
    Shuffle,
    /// Bit shuffle (`bitshuffle`): bit `b` of byte `j` of every element together. Often
    /// smaller than byte shuffle on noisy data, at a higher cost per byte.
    BitShuffle,
}

impl BloscShuffle {
    /// The name written into the `blosc` codec's configuration and used in text forms.
    pub const fn name(self) -> &'static str {
        match self {
            BloscShuffle::NoShuffle => "noshuffle",
            BloscShuffle::Shuffle => "shuffle",
            BloscShuffle::BitShuffle => "bitshuffle",
        }
    }

    /// The shuffle of a [`Codec::Blosc`] whose `shuffle` is `None`: byte shuffle.
    ///
    /// For 1-byte elements byte shuffle changes nothing; it stays the default there
    /// because that is what this library has always written (`"shuffle": "shuffle"`),
    /// so arrays written before keep the same codec when resumed.
    pub const fn default_for(dtype: DataType) -> BloscShuffle {
        Self::default_for_size(dtype.size())
    }

    /// [`default_for`](Self::default_for) by element size, for encoders built from one.
    pub(crate) const fn default_for_size(_typesize: usize) -> BloscShuffle {
        BloscShuffle::Shuffle
    }

    /// Whether this shuffle does something for elements of `dtype`: byte shuffle needs
    /// elements of 2 bytes or more; bit shuffle and no shuffle fit every size.
    pub const fn fits(self, dtype: DataType) -> bool {
        !matches!(self, BloscShuffle::Shuffle) || dtype.size() > 1
    }

    /// The `flags` bits of a Blosc1 header.
    pub(crate) const fn flag(self) -> u8 {
        match self {
            BloscShuffle::NoShuffle => 0,
            BloscShuffle::Shuffle => blosc::FLAG_SHUFFLE,
            BloscShuffle::BitShuffle => blosc::FLAG_BITSHUFFLE,
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
    /// Blosc with LZ4 at `clevel` (0..=9), with the default shuffle (byte shuffle).
    pub const fn blosc_lz4(clevel: u8) -> Self {
        Codec::Blosc {
            compressor: BloscCompressor::Lz4,
            clevel,
            shuffle: None,
        }
    }
    /// Blosc with zstd at `clevel` (0..=9), with the default shuffle (byte shuffle).
    /// c-blosc maps `clevel` to zstd level `2 clevel - 1` (22 at clevel 9) and uses
    /// blocks twice the size LZ4 gets.
    ///
    /// ```
    /// use zarrstream::Codec;
    /// assert_eq!("blosc-zstd:3".parse::<Codec>()?, Codec::blosc_zstd(3));
    /// # Ok::<(), zarrstream::ParseError>(())
    /// ```
    pub const fn blosc_zstd(clevel: u8) -> Self {
        Codec::Blosc {
            compressor: BloscCompressor::Zstd,
            clevel,
            shuffle: None,
        }
    }
    /// This Blosc codec with an explicit `shuffle`; other codecs are returned unchanged.
    pub const fn with_shuffle(self, shuffle: BloscShuffle) -> Self {
        match self {
            Codec::Blosc {
                compressor, clevel, ..
            } => Codec::Blosc {
                compressor,
                clevel,
                shuffle: Some(shuffle),
            },
            other => other,
        }
    }

    /// The shuffle a Blosc codec applies to elements of `dtype` (the explicit one, or
    /// [`BloscShuffle::default_for`]); `None` for other codecs.
    pub const fn blosc_shuffle(self, dtype: DataType) -> Option<BloscShuffle> {
        match self {
            Codec::Blosc {
                shuffle: Some(s), ..
            } => Some(s),
            Codec::Blosc { shuffle: None, .. } => Some(BloscShuffle::default_for(dtype)),
            _ => None,
        }
    }

    /// The codec as it acts on elements of `dtype`, with a shuffle equal to the default
    /// spelled as the default: two codecs that write the same `zarr.json` compare equal
    /// after this (a resumed array is compared so).
    pub(crate) fn canonical(self, dtype: DataType) -> Self {
        match self {
            Codec::Blosc {
                compressor,
                clevel,
                shuffle: Some(s),
            } if s == BloscShuffle::default_for(dtype) => Codec::Blosc {
                compressor,
                clevel,
                shuffle: None,
            },
            other => other,
        }
    }

    pub(crate) fn validate(self, dtype: DataType) -> Result<(), SpecError> {
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
            Codec::Blosc { clevel, .. } if clevel > 9 => Err(SpecError::LevelOutOfRange {
                codec: "blosc",
                level: i32::from(clevel),
                min: 0,
                max: 9,
            }),
            Codec::Blosc {
                compressor,
                shuffle: Some(shuffle),
                ..
            } if !shuffle.fits(dtype) => Err(SpecError::ShuffleDoesNotFit {
                compressor,
                shuffle,
                dtype,
            }),
            Codec::Blosc { .. } => Ok(()),
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

    /// Short name for reports (`none`, `zstd:1`, `lz4:1`, `blosc-zstd:3`): the spelling
    /// of the `record` example's `--codec`, which also parses. [`Display`](std::fmt::Display)
    /// gives the canonical name (`blosc-lz4:1`).
    pub fn label(self) -> String {
        match self {
            Codec::Blosc {
                compressor: BloscCompressor::Lz4,
                ..
            } => self.to_string().replacen("blosc-", "", 1),
            _ => self.to_string(),
        }
    }

    /// The inner `codecs` list of `sharding_indexed`: `bytes` (little-endian), then the
    /// compressor, then `crc32c` when chunks carry one.
    pub(crate) fn zarr_codecs(self, dtype: DataType, crc32c: bool) -> Vec<Named> {
        let mut v = vec![Named::bytes(Endian::Little)];
        match self {
            Codec::None => {}
            Codec::Zstd { level, checksum } => {
                v.push(Named::with("zstd", &ZstdConfiguration { level, checksum }));
            }
            Codec::Blosc {
                compressor, clevel, ..
            } => {
                let shuffle = self
                    .blosc_shuffle(dtype)
                    .unwrap_or(BloscShuffle::Shuffle)
                    .name();
                v.push(Named::with(
                    "blosc",
                    &BloscConfiguration {
                        cname: compressor.cname().into(),
                        clevel,
                        shuffle: shuffle.into(),
                        typesize: Some(dtype.size()),
                        blocksize: 0,
                    },
                ));
            }
        }
        if crc32c {
            v.push(Named::new("crc32c"));
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
    use serde_json::json;

    #[test]
    fn metadata_matches_the_checklist() {
        let c = Codec::blosc_lz4(1).zarr_codecs(DataType::UInt16, true);
        assert_eq!(
            serde_json::to_value(c).unwrap(),
            json!([{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle",
                                                       "typesize": 2, "blocksize": 0}},
                   {"name": "crc32c"}])
        );
        let z = Codec::zstd(3).zarr_codecs(DataType::UInt8, false);
        assert_eq!(
            serde_json::to_value(&z[1]).unwrap(),
            json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}})
        );
        assert_eq!(z.len(), 2);
    }

    #[test]
    fn zstd_and_shuffles_in_metadata() {
        let c = Codec::blosc_zstd(3).zarr_codecs(DataType::UInt8, false);
        assert_eq!(
            serde_json::to_value(&c[1]).unwrap(),
            json!({"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3,
                   "shuffle": "shuffle", "typesize": 1, "blocksize": 0}})
        );
        for (s, name) in [
            (BloscShuffle::NoShuffle, "noshuffle"),
            (BloscShuffle::Shuffle, "shuffle"),
            (BloscShuffle::BitShuffle, "bitshuffle"),
        ] {
            let c = Codec::blosc_lz4(1)
                .with_shuffle(s)
                .zarr_codecs(DataType::UInt32, false);
            let c = serde_json::to_value(c).unwrap();
            assert_eq!(c[1]["configuration"]["shuffle"], json!(name));
            assert_eq!(c[1]["configuration"]["typesize"], json!(4));
        }
    }

    #[test]
    fn shuffles_that_do_nothing_are_refused() {
        let explicit = Codec::blosc_zstd(1).with_shuffle(BloscShuffle::Shuffle);
        assert_eq!(
            explicit.validate(DataType::UInt8),
            Err(SpecError::ShuffleDoesNotFit {
                compressor: BloscCompressor::Zstd,
                shuffle: BloscShuffle::Shuffle,
                dtype: DataType::UInt8
            })
        );
        assert_eq!(explicit.validate(DataType::UInt16), Ok(()));
        assert_eq!(Codec::blosc_zstd(1).validate(DataType::UInt8), Ok(()));
        for s in [BloscShuffle::NoShuffle, BloscShuffle::BitShuffle] {
            assert_eq!(
                Codec::blosc_lz4(1)
                    .with_shuffle(s)
                    .validate(DataType::UInt8),
                Ok(())
            );
        }
        // The level is checked first.
        assert!(matches!(
            Codec::blosc_zstd(10)
                .with_shuffle(BloscShuffle::Shuffle)
                .validate(DataType::UInt8),
            Err(SpecError::LevelOutOfRange { .. })
        ));
    }

    #[test]
    fn canonical_spells_the_default_shuffle_as_none() {
        let explicit = Codec::blosc_zstd(1).with_shuffle(BloscShuffle::Shuffle);
        assert_eq!(explicit.canonical(DataType::UInt16), Codec::blosc_zstd(1));
        let bits = Codec::blosc_zstd(1).with_shuffle(BloscShuffle::BitShuffle);
        assert_eq!(bits.canonical(DataType::UInt16), bits);
        assert_eq!(
            Codec::zstd(1).with_shuffle(BloscShuffle::BitShuffle),
            Codec::zstd(1)
        );
    }

    #[test]
    fn labels_keep_the_short_spelling() {
        assert_eq!(Codec::blosc_lz4(1).label(), "lz4:1");
        assert_eq!(
            Codec::blosc_lz4(1)
                .with_shuffle(BloscShuffle::NoShuffle)
                .label(),
            "lz4:1:noshuffle"
        );
        assert_eq!(Codec::blosc_zstd(3).label(), "blosc-zstd:3");
        assert_eq!(Codec::zstd(-5).label(), "zstd:-5");
        assert_eq!(Codec::none().label(), "none");
    }
}
