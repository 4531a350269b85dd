//! A defensive decoder of Blosc1 frames (format version 2) with the LZ4 or zstd
//! compressor: byte shuffle, bit shuffle or none, memcpyed frames, split and unsplit
//! blocks, leftover blocks.
//! It applies every check c-blosc 1.x makes before decompressing plus the bounds
//! checks that keep it from panicking on any input, and allocates only after the header
//! has been validated against the caller's limit.

use super::ReadError;

const CODEC: &str = "blosc";
/// `BLOSC_MAX_BUFFERSIZE`: the largest `nbytes` c-blosc 1.x accepts.
pub use crate::codec::blosc::MAX_NBYTES as MAX_BUFFERSIZE;
use crate::codec::blosc::{
    FLAG_BITSHUFFLE, FLAG_DONT_SPLIT, FLAG_MEMCPYED, FLAG_SHUFFLE, FORMAT_LZ4, FORMAT_ZSTD, HEADER,
    MAX_SPLITS, MIN_BUFFERSIZE, VERSION, VERSION_LZ4, VERSION_ZSTD,
};
use crate::codec::shuffle::{bitunshuffle_block, unshuffle_bytes};
use zstd::zstd_safe::DCtx;
/// `BLOSC_MAX_BLOCKSIZE`: the largest block c-blosc 1.x accepts.
pub const MAX_BLOCKSIZE: usize = 715_827_542;

const FLAG_RESERVED: u8 = 0x08;

/// The validated 16-byte header of a Blosc1 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `versionlz` (1 for LZ4 and zstd; not checked for memcpyed frames).
    pub versionlz: u8,
    /// The flags byte.
    pub flags: u8,
    /// Element size (1..=255).
    pub typesize: usize,
    /// Decoded size.
    pub nbytes: usize,
    /// Block size (0 only when `nbytes` is 0).
    pub blocksize: usize,
    /// Frame length, header included (equals the buffer length).
    pub cbytes: usize,
}

impl Header {
    /// Whether the payload is a plain copy of the input.
    pub fn memcpyed(&self) -> bool {
        self.flags & FLAG_MEMCPYED != 0
    }
    /// Whether blocks were byte-shuffled (acted on only for `typesize > 1`).
    pub fn shuffled(&self) -> bool {
        self.flags & FLAG_SHUFFLE != 0
    }
    /// Whether blocks were bit-shuffled (acted on only when no byte shuffle is, and for
    /// blocks of at least one element).
    pub fn bitshuffled(&self) -> bool {
        self.flags & FLAG_BITSHUFFLE != 0
    }
}

/// How one frame's streams decode.
enum Decompressor {
    Lz4,
    Zstd(DCtx<'static>),
}

impl Decompressor {
    /// Decodes `stream` into all of `dst`, as c-blosc's wrappers do (`LZ4_decompress_safe`,
    /// `ZSTD_decompress`: the stream must produce exactly `dst.len()` bytes).
    fn decompress(&mut self, stream: &[u8], dst: &mut [u8]) -> Result<usize, String> {
        match self {
            Decompressor::Lz4 => {
                lz4_flex::block::decompress_into(stream, dst).map_err(|e| format!("lz4: {e}"))
            }
            Decompressor::Zstd(ctx) => ctx
                .decompress(dst, stream)
                .map_err(|code| format!("zstd: {}", zstd::zstd_safe::get_error_name(code))),
        }
    }
}

fn invalid(what: &'static str) -> ReadError {
    ReadError::InvalidHeader { codec: CODEC, what }
}

fn truncated(what: &'static str) -> ReadError {
    ReadError::Truncated { codec: CODEC, what }
}

fn corrupt(what: impl Into<String>) -> ReadError {
    ReadError::Corrupt {
        codec: CODEC,
        what: what.into(),
    }
}

/// A little-endian int32 at `at` as c-blosc reads it; `None` if out of the buffer or
/// negative.
fn read_i32(frame: &[u8], at: usize) -> Option<usize> {
    let b = frame.get(at..at.checked_add(4)?)?;
    let v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    usize::try_from(v).ok()
}

/// Reads and validates the header: version 2, reserved bit clear, typesize ≥ 1,
/// non-negative sizes, `cbytes` equal to the buffer length, `nbytes` within c-blosc's
/// limit and the caller's `max_nbytes`, and (for non-empty frames) `0 < blocksize ≤
/// nbytes`, `blocksize ≤ MAX_BLOCKSIZE`.
pub fn header(frame: &[u8], max_nbytes: usize) -> Result<Header, ReadError> {
    if frame.len() < HEADER {
        return Err(truncated("frame shorter than the 16-byte header"));
    }
    if frame[0] != VERSION {
        return Err(invalid("format version is not 2"));
    }
    let flags = frame[2];
    if flags & FLAG_RESERVED != 0 {
        return Err(invalid("reserved flag bit 0x08 is set"));
    }
    let typesize = usize::from(frame[3]);
    if typesize == 0 {
        return Err(invalid("typesize is 0"));
    }
    let field = |at, what| read_i32(frame, at).ok_or_else(|| invalid(what));
    let nbytes = field(4, "nbytes is negative")?;
    let blocksize = field(8, "blocksize is negative")?;
    let cbytes = field(12, "cbytes is negative")?;
    if cbytes > frame.len() {
        return Err(truncated("frame shorter than its cbytes"));
    }
    if cbytes != frame.len() {
        return Err(invalid("cbytes does not match the frame length"));
    }
    if nbytes > MAX_BUFFERSIZE {
        return Err(invalid("nbytes exceeds BLOSC_MAX_BUFFERSIZE"));
    }
    if nbytes > max_nbytes {
        return Err(ReadError::TooLarge {
            codec: CODEC,
            nbytes: nbytes as u64,
            limit: max_nbytes as u64,
        });
    }
    if nbytes > 0 {
        if blocksize == 0 {
            return Err(invalid("blocksize is 0"));
        }
        if blocksize > nbytes {
            return Err(invalid("blocksize exceeds nbytes"));
        }
        if blocksize > MAX_BLOCKSIZE {
            return Err(invalid("blocksize exceeds BLOSC_MAX_BLOCKSIZE"));
        }
    }
    Ok(Header {
        versionlz: frame[1],
        flags,
        typesize,
        nbytes,
        blocksize,
        cbytes,
    })
}

/// Decodes one Blosc1 frame whose declared decoded size is at most `max_nbytes`.
///
/// Never panics; allocates only after validating the header, at most `nbytes` for the
/// output plus one block (`blocksize ≤ nbytes`) of unshuffle scratch.
pub fn decompress(frame: &[u8], max_nbytes: usize) -> Result<Vec<u8>, ReadError> {
    let h = header(frame, max_nbytes)?;
    if h.nbytes == 0 {
        return Ok(Vec::new());
    }
    if h.memcpyed() {
        if h.cbytes != h.nbytes + HEADER {
            return Err(invalid("memcpyed frame with cbytes != nbytes + 16"));
        }
        return Ok(frame[HEADER..].to_vec());
    }
    let mut streams = decompressor(&h)?;
    let (ts, bs, nbytes) = (h.typesize, h.blocksize, h.nbytes);
    let nblocks = nbytes.div_ceil(bs);
    let leftover = nbytes % bs;
    if nblocks > (h.cbytes - HEADER) / 4 {
        return Err(truncated("block offset table"));
    }
    // c-blosc's `blosc_d`: a byte shuffle for elements above one byte, else a bit shuffle
    // for blocks of at least one element.
    let unshuffle = h.shuffled() && ts > 1;
    let unbitshuffle = !unshuffle && h.bitshuffled();
    let mut out = vec![0u8; nbytes];
    let mut scratch = if unshuffle || unbitshuffle {
        vec![0u8; bs]
    } else {
        Vec::new()
    };
    let mut planes = Vec::new();
    for j in 0..nblocks {
        let is_leftover = j == nblocks - 1 && leftover > 0;
        let bsize = if is_leftover { leftover } else { bs };
        let start = j * bs;
        let bits = unbitshuffle && bsize >= ts;
        let dst = if unshuffle || bits {
            &mut scratch[..bsize]
        } else {
            &mut out[start..start + bsize]
        };
        decompress_block(frame, &h, &mut streams, j, is_leftover, dst)?;
        let out = &mut out[start..start + bsize];
        if unshuffle {
            // A trailing partial element is copied unchanged.
            let whole = bsize - bsize % ts;
            unshuffle_bytes(&scratch[..whole], ts, &mut out[..whole]);
            out[whole..].copy_from_slice(&scratch[whole..bsize]);
        } else if bits {
            bitunshuffle_block(&scratch[..bsize], ts, &mut planes, out);
        }
    }
    Ok(out)
}

/// The streams' decompressor, or an error for what this reader does not implement:
/// compressors other than LZ4 and zstd, other format versions of theirs.
fn decompressor(h: &Header) -> Result<Decompressor, ReadError> {
    match h.flags >> 5 {
        FORMAT_LZ4 if h.versionlz == VERSION_LZ4 => Ok(Decompressor::Lz4),
        FORMAT_LZ4 => Err(invalid("lz4 format version is not 1")),
        FORMAT_ZSTD if h.versionlz == VERSION_ZSTD => DCtx::try_create()
            .map(Decompressor::Zstd)
            .ok_or_else(|| corrupt("zstd: cannot create a decompression context")),
        FORMAT_ZSTD => Err(invalid("zstd format version is not 1")),
        _ => Err(ReadError::Unsupported {
            codec: CODEC,
            what: "compressor other than lz4 or zstd",
        }),
    }
}

/// Decodes block `j` of the frame into `dst` (its size), stream by stream.
fn decompress_block(
    frame: &[u8],
    h: &Header,
    streams: &mut Decompressor,
    j: usize,
    is_leftover: bool,
    dst: &mut [u8],
) -> Result<(), ReadError> {
    let (ts, bsize) = (h.typesize, dst.len());
    let mut pos = read_i32(frame, HEADER + 4 * j)
        .ok_or_else(|| corrupt(format!("block {j}: negative offset")))?;
    // The decoder's rule (c-blosc `blosc_d`): the leftover block is never split, and
    // frames from before the split flag split only blocks of ≥ 128 elements.
    let split = h.flags & FLAG_DONT_SPLIT == 0
        && ts <= MAX_SPLITS
        && bsize / ts >= MIN_BUFFERSIZE
        && !is_leftover;
    let nsplits = if split { ts } else { 1 };
    let neblock = bsize / nsplits;
    if neblock * nsplits != bsize {
        return Err(invalid("split block size is not a multiple of typesize"));
    }
    for (s, d) in dst.chunks_exact_mut(neblock).enumerate() {
        let csize = read_i32(frame, pos)
            .ok_or_else(|| corrupt(format!("block {j} stream {s}: bad length prefix")))?;
        pos += 4;
        let stream = frame
            .get(pos..)
            .and_then(|rest| rest.get(..csize))
            .ok_or_else(|| corrupt(format!("block {j} stream {s}: runs past the frame")))?;
        if csize == neblock {
            d.copy_from_slice(stream);
        } else {
            match streams.decompress(stream, d) {
                Ok(n) if n == neblock => {}
                Ok(n) => {
                    return Err(corrupt(format!(
                        "block {j} stream {s}: decoded {n} bytes, expected {neblock}"
                    )));
                }
                Err(e) => return Err(corrupt(format!("block {j} stream {s}: {e}"))),
            }
        }
        pos += csize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{ChunkEncoder, Codec};

    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|i| {
                if (i / 512) % 3 == 0 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                } else {
                    (i / 7) as u8
                }
            })
            .collect()
    }

    fn encode_with(codec: Codec, data: &[u8], ts: usize) -> Vec<u8> {
        let mut enc = ChunkEncoder::new(codec, ts, crate::Checksum::None).unwrap();
        let mut out = vec![0u8; enc.slot_bound(data.len())];
        let n = enc.encode_slice(data, &mut out).unwrap();
        out.truncate(n);
        out
    }

    fn encode(data: &[u8], ts: usize, clevel: u8) -> Vec<u8> {
        encode_with(Codec::blosc_lz4(clevel), data, ts)
    }

    #[test]
    fn round_trips_zstd_and_every_shuffle() {
        use crate::BloscShuffle::{BitShuffle, NoShuffle, Shuffle};
        // Leftover blocks whose element count is and is not a multiple of 8, partial
        // trailing elements, typesizes 1..8, both compressors.
        for (len, ts) in [
            (524288, 2),
            (180000, 2),
            (131073, 2),
            (100_004, 4),
            (70_001, 8),
            (65536, 1),
            (40_003, 1),
            (1001, 2),
        ] {
            let data = sample(len, len as u64 + 7);
            for codec in [
                Codec::blosc_zstd(1),
                Codec::blosc_zstd(5),
                Codec::blosc_lz4(1),
            ] {
                for shuffle in [NoShuffle, Shuffle, BitShuffle] {
                    let codec = codec.with_shuffle(shuffle);
                    let frame = encode_with(codec, &data, ts);
                    if len > 2000 {
                        assert_eq!(frame[2] & FLAG_MEMCPYED, 0, "{codec} len {len} ts {ts}");
                    }
                    assert_eq!(
                        decompress(&frame, len).unwrap(),
                        data,
                        "{codec} len {len} ts {ts}"
                    );
                }
            }
        }
    }

    #[test]
    fn damaged_zstd_streams_are_errors() {
        let data = sample(70000, 9);
        let frame = encode_with(Codec::blosc_zstd(3), &data, 2);
        assert_eq!(frame[2] >> 5, FORMAT_ZSTD);
        let first = read_i32(&frame, HEADER).unwrap();
        let mut d = frame.clone();
        // The zstd magic of the first stream.
        d[first + 4] ^= 0xff;
        assert!(matches!(
            decompress(&d, 70000),
            Err(ReadError::Corrupt { .. })
        ));
        let mut d = frame.clone();
        d[1] = 2;
        assert!(matches!(
            decompress(&d, 70000),
            Err(ReadError::InvalidHeader { .. })
        ));
        // LZ4 streams read as zstd ones.
        let mut d = encode(&data, 2, 1);
        d[2] = (d[2] & 0x1f) | (FORMAT_ZSTD << 5);
        assert!(matches!(
            decompress(&d, 70000),
            Err(ReadError::Corrupt { .. })
        ));
    }

    #[test]
    fn round_trips_our_frames() {
        // Split and unsplit blocks, leftovers, odd lengths, memcpyed (small, clevel 0,
        // incompressible), typesizes 1..4.
        for (len, ts, clevel) in [
            (524288, 2, 1),
            (524288, 2, 5),
            (180000, 2, 1),
            (131073, 2, 1),
            (1001, 2, 1),
            (100, 2, 1),
            (65536, 1, 1),
            (65536, 4, 9),
            (40000, 4, 0),
            (3, 1, 1),
        ] {
            let data = sample(len, len as u64);
            let frame = encode(&data, ts, clevel);
            assert_eq!(
                decompress(&frame, len).unwrap(),
                data,
                "len {len} ts {ts} clevel {clevel}"
            );
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let frame = encode(&noise, 2, 1);
        assert_eq!(frame[2] & FLAG_MEMCPYED, FLAG_MEMCPYED);
        assert_eq!(decompress(&frame, 4096).unwrap(), noise);
    }

    #[test]
    fn enforces_the_limit_before_allocating() {
        let data = sample(8192, 1);
        let frame = encode(&data, 2, 1);
        assert_eq!(
            decompress(&frame, 8191),
            Err(ReadError::TooLarge {
                codec: "blosc",
                nbytes: 8192,
                limit: 8191
            })
        );
        // A header claiming 2 GiB is refused before any allocation.
        let mut big = frame.clone();
        big[4..8].copy_from_slice(&(MAX_BUFFERSIZE as u32).to_le_bytes());
        assert!(matches!(
            decompress(&big, 1 << 20),
            Err(ReadError::TooLarge { .. })
        ));
    }

    #[test]
    fn header_checks_follow_c_blosc() {
        let data = sample(8192, 2);
        let frame = encode(&data, 2, 1);
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut d = frame.clone();
            f(&mut d);
            decompress(&d, 1 << 20).unwrap_err()
        };
        assert!(matches!(
            bad(&|d| d[0] = 1),
            ReadError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad(&|d| d[2] |= FLAG_RESERVED),
            ReadError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad(&|d| d[3] = 0),
            ReadError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad(&|d| d[1] = 2),
            ReadError::InvalidHeader { .. }
        ));
        // Snappy and zlib are not read.
        for format in [2, 3] {
            assert!(matches!(
                bad(&|d| d[2] = (d[2] & 0x1f) | (format << 5)),
                ReadError::Unsupported { .. }
            ));
        }
        assert!(matches!(
            bad(&|d| d[8..12].copy_from_slice(&0u32.to_le_bytes())),
            ReadError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad(&|d| d[8..12].copy_from_slice(&16384u32.to_le_bytes())),
            ReadError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad(&|d| d[8..12].copy_from_slice(&u32::MAX.to_le_bytes())),
            ReadError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad(&|d| d.push(0)),
            ReadError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad(&|d| {
                d.pop();
            }),
            ReadError::Truncated { .. }
        ));
        assert!(matches!(
            decompress(&frame[..10], 1 << 20),
            Err(ReadError::Truncated { .. })
        ));
        // Memcpyed flag on a compressed frame: cbytes != nbytes + 16.
        assert!(matches!(
            bad(&|d| d[2] |= FLAG_MEMCPYED),
            ReadError::InvalidHeader { .. }
        ));
    }

    #[test]
    fn empty_frame_decodes_to_nothing() {
        let mut f = vec![2, 1, 0x33, 2];
        f.extend(0u32.to_le_bytes());
        f.extend(1u32.to_le_bytes());
        f.extend(16u32.to_le_bytes());
        assert_eq!(decompress(&f, 0).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn damaged_streams_are_errors_not_panics() {
        let data = sample(70000, 3);
        let frame = encode(&data, 2, 1);
        assert_eq!(frame[2] & FLAG_MEMCPYED, 0, "want a compressed frame");
        // Every single-byte change past the header either decodes (to something) or is
        // an error; none panics. Changes in the offsets and lengths must be noticed.
        let stride = frame.len() / 400 + 1;
        let picks = (HEADER..HEADER + 96).chain((HEADER..frame.len()).step_by(stride));
        for i in picks {
            for v in [0u8, 0xff, frame[i] ^ 0x40] {
                let mut d = frame.clone();
                d[i] = v;
                let _ = decompress(&d, 70000);
            }
        }
        // Truncations at every length.
        for n in (0..frame.len()).step_by(stride) {
            assert!(decompress(&frame[..n], 70000).is_err(), "length {n}");
        }
        // A stream length pointing past the frame.
        let mut d = frame.clone();
        let first = read_i32(&d, HEADER).unwrap();
        d[first..first + 4].copy_from_slice(&(i32::MAX as u32).to_le_bytes());
        assert!(matches!(
            decompress(&d, 70000),
            Err(ReadError::Corrupt { .. })
        ));
        // A negative block offset.
        let mut d = frame.clone();
        d[HEADER..HEADER + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decompress(&d, 70000),
            Err(ReadError::Corrupt { .. })
        ));
    }
}
