//! Inner-chunk codecs. Each encodes one chunk straight into a caller-provided slot of at
//! least [`Codec::bound`] bytes and reports how many bytes it used.

pub mod blosc;
mod raw;
mod shuffle;
mod zstd;

use serde_json::{Value, json};

use crate::dtype::DataType;
use crate::error::{Error, SpecError};
use crate::tile::ChunkSource;

/// The inner codec of every chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The `blosc` codec with `cname: "lz4"` and byte shuffle (a Blosc1 container).
    Lz4 {
        /// Blosc compression level 0..=9 (0 stores the data uncompressed); it picks the
        /// block size the way c-blosc does.
        clevel: u8,
    },
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
    /// blosc-lz4 with byte shuffle at `clevel`.
    pub const fn lz4(clevel: u8) -> Self {
        Codec::Lz4 { clevel }
    }

    /// Parses `none`, `zstd[:LEVEL]`, `lz4[:CLEVEL]` (defaults: zstd 1, lz4 1).
    pub fn parse(s: &str) -> Option<Self> {
        let (name, level) = match s.split_once(':') {
            Some((n, l)) => (n, Some(l.parse::<i32>().ok()?)),
            None => (s, None),
        };
        match name {
            "none" if level.is_none() => Some(Codec::None),
            "zstd" => Some(Codec::zstd(level.unwrap_or(1))),
            "lz4" => Some(Codec::lz4(u8::try_from(level.unwrap_or(1)).ok()?)),
            _ => None,
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
            Codec::Lz4 { clevel } if clevel <= 9 => Ok(()),
            Codec::Lz4 { clevel } => Err(SpecError::LevelOutOfRange {
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
            Codec::Lz4 { .. } => blosc::bound(raw),
        }
    }

    /// [`bound`](Self::bound), or `None` where it does not fit in `usize` (zstd reports
    /// inputs it cannot bound with an error code, which must not be mistaken for a size).
    pub(crate) fn checked_bound(self, raw: usize) -> Option<usize> {
        match self {
            Codec::None => Some(raw),
            Codec::Zstd { .. } => Some(zstd::bound(raw)).filter(|&b| b >= raw),
            Codec::Lz4 { .. } => raw.checked_add(16),
        }
    }

    /// Short name for reports (`none`, `zstd:1`, `lz4:1`).
    pub fn label(self) -> String {
        match self {
            Codec::None => "none".into(),
            Codec::Zstd { level, .. } => format!("zstd:{level}"),
            Codec::Lz4 { clevel } => format!("lz4:{clevel}"),
        }
    }

    /// The inner `codecs` list of `sharding_indexed` (digest §11.1–2).
    pub(crate) fn zarr_codecs(self, dtype: DataType, crc32c: bool) -> Vec<Value> {
        let mut v = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
        match self {
            Codec::None => {}
            Codec::Zstd { level, checksum } => {
                v.push(json!({"name": "zstd", "configuration": {"level": level, "checksum": checksum}}));
            }
            Codec::Lz4 { clevel } => v.push(json!({"name": "blosc", "configuration": {
                "cname": "lz4", "clevel": clevel, "shuffle": "shuffle",
                "typesize": dtype.size(), "blocksize": 0}})),
        }
        if crc32c {
            v.push(json!({"name": "crc32c"}));
        }
        v
    }
}

/// Per-thread encoder state (compression contexts and scratch space).
pub struct ChunkEncoder {
    codec: Codec,
    typesize: usize,
    crc32c: bool,
    zstd: Option<zstd::ZstdEncoder>,
    scratch: Vec<u8>,
    lz4_acceleration: Option<i32>,
}

impl ChunkEncoder {
    /// An encoder for `codec` over elements of `typesize` bytes (1..=255).
    pub fn new(codec: Codec, typesize: usize, crc32c: bool) -> Result<Self, Error> {
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
            _ => None,
        };
        Ok(ChunkEncoder {
            codec,
            typesize,
            crc32c,
            zstd,
            scratch: Vec::new(),
            lz4_acceleration: None,
        })
    }

    /// Compresses `lz4` blocks with LZ4 acceleration `accel` (≥ 1) instead of the one
    /// c-blosc uses at the codec's `clevel` (`10 - clevel`). The frames stay standard
    /// Blosc1 that every reader decodes; only speed and compression ratio change (higher
    /// is faster and compresses less). No effect on other codecs.
    ///
    /// ```
    /// use zarrstream::{ChunkEncoder, Codec};
    /// let mut enc = ChunkEncoder::new(Codec::lz4(1), 2, false)?.lz4_acceleration(32);
    /// let data: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    /// let mut out = vec![0u8; enc.slot_bound(data.len())];
    /// assert!(enc.encode_slice(&data, &mut out)? < data.len());
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn lz4_acceleration(mut self, accel: i32) -> Self {
        self.lz4_acceleration = Some(accel.max(1));
        self
    }

    /// Slot size needed for a chunk of `raw` bytes, crc32c included.
    pub fn slot_bound(&self, raw: usize) -> usize {
        self.codec.bound(raw) + if self.crc32c { 4 } else { 0 }
    }

    /// Encodes one contiguous chunk of `data` (C order, little-endian elements) into
    /// `out`, which must hold at least [`slot_bound`](Self::slot_bound) bytes.
    ///
    /// ```
    /// use zarrstream::{ChunkEncoder, Codec};
    /// let mut enc = ChunkEncoder::new(Codec::lz4(1), 2, true)?;
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
            self.crc32c.then(|| crc32c::crc32c(data).to_le_bytes()),
        ))
    }

    /// Encodes `src` into `out` (at least [`slot_bound`](Self::slot_bound) bytes) and
    /// appends the crc32c when enabled; returns the bytes used.
    pub fn encode(&mut self, src: &ChunkSource<'_>, out: &mut [u8]) -> Result<usize, Error> {
        self.encode_observed(src, out, &mut |_| {})
    }

    /// [`encode`](Self::encode), telling `read` the byte ranges of `src` it has read,
    /// as it reads them: each block of the `lz4` codec right after its shuffle, while
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
            Codec::Lz4 { clevel } => {
                let accel = self
                    .lz4_acceleration
                    .unwrap_or_else(|| blosc::acceleration(clevel));
                let scratch = &mut self.scratch;
                blosc::encode(src, self.typesize, clevel, accel, scratch, out, read)
            }
        };
        if self.crc32c {
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
    fn parse_codec_names() {
        assert_eq!(Codec::parse("none"), Some(Codec::None));
        assert_eq!(Codec::parse("zstd"), Some(Codec::zstd(1)));
        assert_eq!(Codec::parse("zstd:-5"), Some(Codec::zstd(-5)));
        assert_eq!(Codec::parse("lz4:5"), Some(Codec::lz4(5)));
        assert_eq!(Codec::parse("lz4:-1"), None);
        assert_eq!(Codec::parse("gzip"), None);
    }

    #[test]
    fn metadata_matches_the_checklist() {
        let c = Codec::lz4(1).zarr_codecs(DataType::UInt16, true);
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
    fn crc32c_is_appended_little_endian() {
        let mut enc = ChunkEncoder::new(Codec::None, 1, true).unwrap();
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
            let mut enc = ChunkEncoder::new(Codec::None, 2, crc).unwrap();
            let src = ChunkSource::contiguous(&data, fill);
            let (bytes, tail) = enc.raw_contiguous(&src).unwrap();
            let mut whole = bytes.to_vec();
            whole.extend(tail.iter().flatten());
            let mut out = vec![0u8; enc.slot_bound(data.len())];
            let n = enc.encode(&src, &mut out).unwrap();
            assert_eq!(whole, &out[..n]);
        }
        let enc = ChunkEncoder::new(Codec::lz4(1), 2, true).unwrap();
        assert!(
            enc.raw_contiguous(&ChunkSource::contiguous(&data, fill))
                .is_none()
        );
    }
}
