//! The per-thread chunk encoder: compression contexts, scratch space and the optional
//! crc32c trailer.

use super::{BloscCompressor, BloscShuffle, Codec, blosc, raw, zstd};
use crate::error::Error;
use crate::tile::ChunkSource;

/// Whether each encoded chunk ends with a checksum (the `crc32c` codec of Zarr v3).
///
/// ```
/// use zarrstream::{Checksum, ChunkEncoder, Codec};
/// let plain = ChunkEncoder::new(Codec::none(), 1, Checksum::None)?;
/// let checked = ChunkEncoder::new(Codec::none(), 1, Checksum::Crc32c)?;
/// assert_eq!(checked.slot_bound(100), plain.slot_bound(100) + 4);
/// # Ok::<(), zarrstream::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Checksum {
    /// No checksum.
    None,
    /// A little-endian CRC-32C (Castagnoli) of the encoded chunk, 4 bytes.
    #[default]
    Crc32c,
}

impl Checksum {
    /// [`Crc32c`](Self::Crc32c) if `on`, else [`None`](Self::None): for a flag such as
    /// [`ArraySpecBuilder::crc32c`](crate::ArraySpecBuilder::crc32c).
    pub const fn crc32c_if(on: bool) -> Self {
        if on { Checksum::Crc32c } else { Checksum::None }
    }

    /// Bytes the checksum adds to each chunk.
    pub const fn size(self) -> usize {
        match self {
            Checksum::None => 0,
            Checksum::Crc32c => 4,
        }
    }
}

/// Per-thread encoder state (compression contexts and scratch space).
pub struct ChunkEncoder {
    codec: Codec,
    typesize: usize,
    checksum: Checksum,
    zstd: Option<zstd::ZstdEncoder>,
    scratch: Vec<u8>,
    blosc_scratch: blosc::Scratch,
    blosc_shuffle: BloscShuffle,
    lz4_acceleration: Option<i32>,
}

impl ChunkEncoder {
    /// An encoder for `codec` over elements of `typesize` bytes (1..=255), appending
    /// `checksum` to each chunk.
    pub fn new(codec: Codec, typesize: usize, checksum: Checksum) -> Result<Self, Error> {
        if !(1..=255).contains(&typesize) {
            // The Blosc1 header stores the element size in one byte.
            let message = format!("element size {typesize} is outside 1..=255");
            return Err(Error::Codec {
                codec: "blosc",
                message,
            });
        }
        let zstd = match codec {
            Codec::Zstd { level, checksum } => Some(zstd::ZstdEncoder::new(level, checksum)?),
            Codec::Blosc {
                compressor: BloscCompressor::Zstd,
                clevel,
                ..
            } => Some(zstd::ZstdEncoder::for_blosc(blosc::zstd_level(clevel))?),
            _ => None,
        };
        Ok(ChunkEncoder {
            codec,
            typesize,
            checksum,
            zstd,
            scratch: Vec::new(),
            blosc_scratch: blosc::Scratch::default(),
            blosc_shuffle: match codec {
                Codec::Blosc {
                    shuffle: Some(s), ..
                } => s,
                _ => BloscShuffle::default_for_size(typesize),
            },
            lz4_acceleration: None,
        })
    }

    /// Compresses the LZ4 blocks of [`Codec::Blosc`] with LZ4 acceleration `accel` (≥ 1)
    /// instead of the one c-blosc uses at the codec's `clevel` (`10 - clevel`). The frames
    /// stay standard Blosc1 that every reader decodes; only speed and compression ratio
    /// change (higher is faster and compresses less). No effect on other codecs (nor on
    /// Blosc with zstd).
    ///
    /// ```
    /// use zarrstream::{Checksum, ChunkEncoder, Codec};
    /// let mut enc = ChunkEncoder::new(Codec::blosc_lz4(1), 2, Checksum::None)?.lz4_acceleration(32);
    /// let data: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    /// let mut out = vec![0u8; enc.slot_bound(data.len())];
    /// assert!(enc.encode_slice(&data, &mut out)? < data.len());
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn lz4_acceleration(mut self, accel: i32) -> Self {
        self.lz4_acceleration = Some(accel.max(1));
        self
    }

    /// Bytes this encoder holds now: its scratch and its compression context (zstd's
    /// own figure for its context). For the writer's memory count.
    pub(crate) fn held_bytes(&self) -> usize {
        self.scratch.capacity()
            + self.blosc_scratch.held_bytes()
            + self.zstd.as_ref().map_or(0, zstd::ZstdEncoder::held_bytes)
    }

    /// Slot size needed for a chunk of `raw` bytes, crc32c included.
    pub fn slot_bound(&self, raw: usize) -> usize {
        self.codec.bound(raw) + self.checksum.size()
    }

    /// Encodes one contiguous chunk of `data` (C order, little-endian elements) into
    /// `out`, which must hold at least [`slot_bound`](Self::slot_bound) bytes.
    ///
    /// ```
    /// use zarrstream::{Checksum, ChunkEncoder, Codec};
    /// let mut enc = ChunkEncoder::new(Codec::blosc_lz4(1), 2, Checksum::Crc32c)?;
    /// let data = vec![7u8; 4096];
    /// let mut out = vec![0u8; enc.slot_bound(data.len())];
    /// let n = enc.encode_slice(&data, &mut out)?;
    /// assert!(n < data.len());
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn encode_slice(&mut self, data: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        let fill = crate::dtype::FillPattern::new(&[0]);
        self.encode(&ChunkSource::contiguous(data, fill), out)
    }

    /// For the `none` codec and a chunk already contiguous in memory (a staged deep
    /// chunk), the encoded chunk without copying it: the chunk's bytes and the crc32c to
    /// append, if enabled. `None` otherwise ([`encode`](Self::encode) then gathers).
    pub(crate) fn raw_contiguous<'a>(
        &self,
        src: &ChunkSource<'a>,
    ) -> Option<(&'a [u8], Option<[u8; 4]>)> {
        if self.codec != Codec::None {
            return None;
        }
        let data = src.as_contiguous()?;
        Some((
            data,
            (self.checksum == Checksum::Crc32c).then(|| crc32c::crc32c(data).to_le_bytes()),
        ))
    }

    /// Encodes `src` into `out` (at least [`slot_bound`](Self::slot_bound) bytes) and
    /// appends the crc32c when enabled; returns the bytes used.
    pub(crate) fn encode(&mut self, src: &ChunkSource<'_>, out: &mut [u8]) -> Result<usize, Error> {
        self.encode_observed(src, out, &mut |_| {})
    }

    /// [`encode`](Self::encode), telling `read` the byte ranges of `src` it has read,
    /// as it reads them: each block of the Blosc codec right after its shuffle, while
    /// those bytes are still in cache, so a caller can make a second use of them (the
    /// writer reduces the tile into a pyramid level) without reading memory again. Other
    /// codecs report nothing; a caller must not rely on every byte being reported.
    pub(crate) fn encode_observed(
        &mut self,
        src: &ChunkSource<'_>,
        out: &mut [u8],
        read: &mut dyn FnMut(std::ops::Range<usize>),
    ) -> Result<usize, Error> {
        let n = match self.codec {
            Codec::None => raw::encode(src, out),
            Codec::Zstd { .. } => match &mut self.zstd {
                Some(z) => z.encode(src, &mut self.scratch, out)?,
                None => return Err(Error::Internal("zstd encoder missing".into())),
            },
            Codec::Blosc {
                compressor, clevel, ..
            } => {
                let mut streams = match (compressor, &mut self.zstd) {
                    (BloscCompressor::Zstd, Some(z)) => blosc::Streams::Zstd(z),
                    (BloscCompressor::Zstd, None) => {
                        return Err(Error::Internal("blosc zstd context missing".into()));
                    }
                    _ => blosc::Streams::Lz4(
                        self.lz4_acceleration
                            .unwrap_or_else(|| blosc::acceleration(clevel)),
                    ),
                };
                let params = blosc::Params {
                    typesize: self.typesize,
                    clevel,
                    shuffle: self.blosc_shuffle,
                };
                let scratch = &mut self.blosc_scratch;
                blosc::encode(src, params, &mut streams, scratch, out, read)
            }
        };
        if self.checksum == Checksum::Crc32c {
            let crc = crc32c::crc32c(&out[..n]);
            out[n..n + 4].copy_from_slice(&crc.to_le_bytes());
            Ok(n + 4)
        } else {
            Ok(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_is_appended_little_endian() {
        let mut enc = ChunkEncoder::new(Codec::None, 1, Checksum::Crc32c).unwrap();
        let data = b"123456789";
        let fill = crate::dtype::FillPattern::new(&[0]);
        let mut out = vec![0u8; enc.slot_bound(data.len())];
        let n = enc
            .encode(&ChunkSource::contiguous(data, fill), &mut out)
            .unwrap();
        assert_eq!(n, 13);
        // The RFC 3720 check value.
        assert_eq!(&out[9..13], &0xE306_9283u32.to_le_bytes());
    }

    #[test]
    fn raw_contiguous_is_the_encoded_chunk_in_parts() {
        let fill = crate::dtype::FillPattern::new(&[0]);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for crc in [false, true] {
            let mut enc = ChunkEncoder::new(Codec::None, 2, Checksum::crc32c_if(crc)).unwrap();
            let src = ChunkSource::contiguous(&data, fill);
            let (bytes, tail) = enc.raw_contiguous(&src).unwrap();
            let mut whole = bytes.to_vec();
            whole.extend(tail.iter().flatten());
            let mut out = vec![0u8; enc.slot_bound(data.len())];
            let n = enc.encode(&src, &mut out).unwrap();
            assert_eq!(whole, &out[..n]);
        }
        let enc = ChunkEncoder::new(Codec::blosc_lz4(1), 2, Checksum::Crc32c).unwrap();
        assert!(
            enc.raw_contiguous(&ChunkSource::contiguous(&data, fill))
                .is_none()
        );
    }
}
