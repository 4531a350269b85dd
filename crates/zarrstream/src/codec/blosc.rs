//! The `blosc` codec: a Blosc1 (format version 2) frame around raw LZ4 or zstd blocks,
//! after a byte shuffle, a bit shuffle or none.
//!
//! Readers (numcodecs, tensorstore, zarrs) all decode with c-blosc 1.x, and no maintained
//! pure-Rust crate writes compressed Blosc1 frames, so the container is written here.
//! Our frames are c-blosc's frames byte for byte (same block size, split rule, shuffles,
//! and the same LZ4 or zstd library at the same settings; `tests/writer/codec_reference.rs`
//! compares them), so they look like the ones readers already meet.
//!
//! The LZ4 blocks come from liblz4 (the `lz4` crate), not `lz4_flex`: c-blosc maps
//! `clevel` to LZ4's *acceleration* (`10 - clevel`, so 9 at clevel 1), which skips
//! quickly over incompressible input such as the noisy low-byte plane of camera data.
//! `lz4_flex` has no acceleration parameter and was 4× slower than c-blosc at clevel 1
//! on camera chunks (BENCHMARKS.md); with the same acceleration our frames match
//! c-blosc's speed and ratio. `lz4_flex` still decodes (`read::blosc`), in safe Rust.
//! The zstd blocks come from libzstd (the `zstd` crate, one context per encoder, reused)
//! at c-blosc's level for the clevel.
//!
//! Layout and rules, those of c-blosc 1.x frames: 16-byte header, a table of
//! absolute block offsets, then per block one stream per byte plane ("split"; LZ4 only)
//! or one stream (zstd, a leftover block, or small blocks), each prefixed by its int32
//! length; a stream that does not shrink is stored raw with length = its input length; a
//! frame that would exceed `nbytes + 16` becomes a "memcpyed" frame of the unshuffled
//! input.

use std::ops::Range;

use lz4::block::{CompressionMode, compress_to_buffer};

use super::shuffle::{bitshuffle_source, shuffle_source};
use super::zstd::ZstdEncoder;
use super::{BloscCompressor, BloscShuffle};

use crate::tile::ChunkSource;

// Format constants, shared with the decoder in `read::blosc`.

/// Largest input c-blosc 1.x accepts (`BLOSC_MAX_BUFFERSIZE`).
pub const MAX_NBYTES: usize = i32::MAX as usize - HEADER;
pub(crate) const HEADER: usize = 16;
/// Inputs below this are always stored memcpyed (`MIN_BUFFERSIZE`).
pub(crate) const MIN_BUFFERSIZE: usize = 128;
pub(crate) const MAX_SPLITS: usize = 16;

pub(crate) const FLAG_SHUFFLE: u8 = 0x01;
pub(crate) const FLAG_MEMCPYED: u8 = 0x02;
pub(crate) const FLAG_BITSHUFFLE: u8 = 0x04;
pub(crate) const FLAG_DONT_SPLIT: u8 = 0x10;
pub(crate) const VERSION: u8 = 2;
/// The compressor format (flag bits 5..7) of LZ4 and of zstd (`BLOSC_*_FORMAT`).
pub(crate) const FORMAT_LZ4: u8 = 1;
pub(crate) const FORMAT_ZSTD: u8 = 4;
/// The `versionlz` byte of both compressors (`BLOSC_LZ4_VERSION_FORMAT`,
/// `BLOSC_ZSTD_VERSION_FORMAT`).
pub(crate) const VERSION_LZ4: u8 = 1;
pub(crate) const VERSION_ZSTD: u8 = 1;

impl BloscCompressor {
    /// The compressor format written in flag bits 5..7.
    const fn format(self) -> u8 {
        match self {
            BloscCompressor::Lz4 => FORMAT_LZ4,
            BloscCompressor::Zstd => FORMAT_ZSTD,
        }
    }
    /// The `versionlz` header byte.
    const fn version(self) -> u8 {
        match self {
            BloscCompressor::Lz4 => VERSION_LZ4,
            BloscCompressor::Zstd => VERSION_ZSTD,
        }
    }
    /// c-blosc's "high compression ratio" codecs (`HCR`): zstd gets larger blocks.
    const fn hcr(self) -> bool {
        matches!(self, BloscCompressor::Zstd)
    }
}

/// Worst case of a frame: never larger than the input plus the header.
pub(crate) fn bound(raw: usize) -> usize {
    raw + HEADER
}

/// LZ4 acceleration c-blosc 1.x uses at `clevel` (`get_accel` in blosc.c).
pub(crate) fn acceleration(clevel: u8) -> i32 {
    10 - i32::from(clevel.min(9))
}

/// zstd level c-blosc 1.x uses at `clevel` (`zstd_wrap_compress`: `2 clevel - 1`, and
/// `ZSTD_maxCLevel()` at 9; its special case for level 8 never fires, since `2 clevel
/// - 1` is odd). Never called at clevel 0, which stores the data memcpyed.
pub(crate) fn zstd_level(clevel: u8) -> i32 {
    match clevel {
        0..=8 => 2 * i32::from(clevel) - 1,
        _ => zstd::zstd_safe::max_c_level(),
    }
}

/// c-blosc's split rule (FORWARD_COMPAT mode, its default): never for zstd, whose
/// support came with the split flag.
fn split_block(compressor: BloscCompressor, typesize: usize, blocksize: usize) -> bool {
    compressor != BloscCompressor::Zstd
        && typesize <= MAX_SPLITS
        && blocksize / typesize >= MIN_BUFFERSIZE
}

/// The block size c-blosc 1.x (`compute_blocksize`) picks for `compressor` at `clevel`,
/// so our frames look like the ones readers already meet.
///
/// ```
/// use zarrstream::BloscCompressor::{Lz4, Zstd};
/// use zarrstream::codec::blosc::blocksize;
/// assert_eq!(blocksize(Lz4, 1, 2, 524288), 65536);
/// assert_eq!(blocksize(Zstd, 1, 2, 524288), 32768);
/// assert_eq!(blocksize(Zstd, 3, 2, 524288), 131072);
/// ```
pub fn blocksize(compressor: BloscCompressor, clevel: u8, typesize: usize, nbytes: usize) -> usize {
    if nbytes < typesize {
        return 1;
    }
    let mut bs = nbytes;
    if nbytes >= 32 * 1024 {
        // 32 KiB × {1/4, 1/2, 1, 2, 4, 4, 8, 8, 8, 8}[clevel], twice that for zstd
        // and once more twice at clevel 9.
        const EIGHTHS: [usize; 10] = [2, 4, 8, 16, 32, 32, 64, 64, 64, 64];
        let clevel = clevel.min(9);
        bs = 4 * 1024 * EIGHTHS[usize::from(clevel)];
        if compressor.hcr() {
            bs *= if clevel == 9 { 4 } else { 2 };
        }
    }
    if clevel > 0 && split_block(compressor, typesize, bs) {
        bs = (bs.min(256 * 1024) * typesize).clamp(64 * 1024, 1024 * 1024);
    }
    bs = bs.min(nbytes);
    if bs > typesize {
        bs -= bs % typesize;
    }
    bs
}

/// How a frame's streams are compressed: LZ4 at an acceleration, or zstd with the
/// encoder's context (set to its level).
pub(crate) enum Streams<'a> {
    /// liblz4's `LZ4_compress_fast` at this acceleration.
    Lz4(i32),
    /// libzstd through a reused context.
    Zstd(&'a mut ZstdEncoder),
}

impl Streams<'_> {
    fn compressor(&self) -> BloscCompressor {
        match self {
            Streams::Lz4(_) => BloscCompressor::Lz4,
            Streams::Zstd(_) => BloscCompressor::Zstd,
        }
    }

    /// Compresses `stream` into `dst`, returning its length, or 0 when it does not fit
    /// (as c-blosc's wrappers do).
    fn compress(&mut self, stream: &[u8], dst: &mut [u8]) -> usize {
        match self {
            Streams::Lz4(accel) => {
                compress_to_buffer(stream, Some(CompressionMode::FAST(*accel)), false, dst)
                    .unwrap_or(0)
            }
            Streams::Zstd(z) => z.compress_block(stream, dst).unwrap_or(0),
        }
    }
}

/// What a frame is made of besides its data: element size, level, shuffle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub(crate) typesize: usize,
    pub(crate) clevel: u8,
    pub(crate) shuffle: BloscShuffle,
}

/// Reusable block buffers: the shuffled block, and a bit shuffle's byte planes.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    block: Vec<u8>,
    planes: Vec<u8>,
}

impl Scratch {
    /// Bytes the buffers hold (for the writer's memory count).
    pub(crate) fn held_bytes(&self) -> usize {
        self.block.capacity() + self.planes.capacity()
    }
}

fn put_i32(out: &mut [u8], at: usize, v: usize) {
    // Every value written is ≤ nbytes + 16 ≤ i32::MAX (checked by the spec builder).
    out[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
}

fn header(
    out: &mut [u8],
    versionlz: u8,
    flags: u8,
    p: Params,
    nbytes: usize,
    bs: usize,
    cbytes: usize,
) {
    out[0] = VERSION;
    out[1] = versionlz;
    out[2] = flags;
    out[3] = p.typesize as u8;
    put_i32(out, 4, nbytes);
    put_i32(out, 8, bs);
    put_i32(out, 12, cbytes);
}

/// Encodes `src` into `out` (at least `bound(src.len())` bytes); returns the frame length.
/// `streams` compresses each stream (LZ4 at [`acceleration`] of `clevel`, or zstd at
/// [`zstd_level`], to match c-blosc). `scratch` is reused between calls. `read` is told
/// each block's byte range of `src` right after the block was read (see
/// [`ChunkEncoder::encode_observed`](super::ChunkEncoder::encode_observed)).
pub(crate) fn encode(
    src: &ChunkSource<'_>,
    p: Params,
    streams: &mut Streams<'_>,
    scratch: &mut Scratch,
    out: &mut [u8],
    read: &mut dyn FnMut(Range<usize>),
) -> usize {
    let compressor = streams.compressor();
    let nbytes = src.len();
    let bs = blocksize(compressor, p.clevel, p.typesize, nbytes);
    let split = split_block(compressor, p.typesize, bs);
    let flags =
        compressor.format() << 5 | p.shuffle.flag() | if split { 0 } else { FLAG_DONT_SPLIT };
    let versionlz = compressor.version();
    let limit = nbytes + HEADER;
    if p.clevel > 0
        && nbytes >= MIN_BUFFERSIZE
        && let Some(cbytes) = encode_blocks(src, p, bs, split, streams, limit, scratch, out, read)
    {
        header(out, versionlz, flags, p, nbytes, bs, cbytes);
        return cbytes;
    }
    src.copy_range(0, nbytes, &mut out[HEADER..limit]);
    header(out, versionlz, flags | FLAG_MEMCPYED, p, nbytes, bs, limit);
    limit
}

/// Block `start..start + bsize` of `src` as c-blosc hands it to the compressor
/// (`blosc_c`): byte-shuffled when the element size is above 1, bit-shuffled, or as is.
fn prepare_block<'b>(
    src: &'b ChunkSource<'_>,
    p: Params,
    start: usize,
    bsize: usize,
    scratch: &'b mut Scratch,
) -> &'b [u8] {
    let ts = p.typesize;
    match p.shuffle {
        BloscShuffle::Shuffle if ts > 1 => {
            shuffle_source(src, start, ts, &mut scratch.block[..bsize]);
            &scratch.block[..bsize]
        }
        BloscShuffle::BitShuffle => {
            bitshuffle_source(
                src,
                start,
                ts,
                &mut scratch.planes,
                &mut scratch.block[..bsize],
            );
            &scratch.block[..bsize]
        }
        _ => match src.as_contiguous() {
            Some(all) => &all[start..start + bsize],
            None => {
                src.copy_range(start, start + bsize, &mut scratch.block[..bsize]);
                &scratch.block[..bsize]
            }
        },
    }
}

/// Writes the offset table and the blocks; `None` when the frame would exceed `limit`.
#[allow(clippy::too_many_arguments)]
fn encode_blocks(
    src: &ChunkSource<'_>,
    p: Params,
    bs: usize,
    split: bool,
    streams: &mut Streams<'_>,
    limit: usize,
    scratch: &mut Scratch,
    out: &mut [u8],
    read: &mut dyn FnMut(Range<usize>),
) -> Option<usize> {
    let nbytes = src.len();
    let nblocks = nbytes.div_ceil(bs);
    let mut pos = HEADER + 4 * nblocks;
    if pos > limit {
        return None;
    }
    super::grow_exact(&mut scratch.block, bs);
    for j in 0..nblocks {
        let start = j * bs;
        let bsize = bs.min(nbytes - start);
        put_i32(out, HEADER + 4 * j, pos);
        let block = prepare_block(src, p, start, bsize, scratch);
        read(start..start + bsize);
        // The leftover block is never split (the decoder re-derives this).
        let nsplits = if split && bsize == bs { p.typesize } else { 1 };
        let neblock = bsize / nsplits;
        for stream in block.chunks_exact(neblock) {
            let dst = pos + 4;
            if dst > limit {
                return None;
            }
            // A stream is raw iff csize == neblock, so a compressed one must be shorter:
            // the compressor gets exactly that much room (and no more than the frame has
            // left), writes in place and gives up (0) when it does not fit, as c-blosc's
            // does (given `neblock` bytes, it stores a stream of exactly that length raw).
            let room = (neblock - 1).min(limit - dst);
            let clen = streams.compress(stream, &mut out[dst..dst + room]);
            let csize = if clen == 0 { neblock } else { clen };
            if dst + csize > limit {
                return None;
            }
            if clen == 0 {
                out[dst..dst + neblock].copy_from_slice(stream);
            }
            put_i32(out, pos, csize);
            pos = dst + csize;
        }
    }
    Some(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocksize_matches_c_blosc_table() {
        use BloscCompressor::{Lz4, Zstd};
        // c-blosc's block sizes for LZ4 at these clevels, type and chunk sizes.
        assert_eq!(blocksize(Lz4, 1, 2, 524288), 65536);
        assert_eq!(blocksize(Lz4, 5, 2, 524288), 262144);
        assert_eq!(blocksize(Lz4, 9, 2, 524288), 524288);
        assert_eq!(blocksize(Lz4, 1, 2, 131072), 65536);
        assert_eq!(blocksize(Lz4, 5, 2, 131072), 131072);
        assert_eq!(blocksize(Lz4, 1, 2, 180000), 65536);
        assert_eq!(blocksize(Lz4, 5, 2, 180000), 180000);
        assert_eq!(blocksize(Lz4, 1, 2, 1000), 1000);
        assert_eq!(blocksize(Lz4, 0, 2, 131072), 8192);
        // zstd: twice LZ4's base (four times at clevel 9) and no split enlargement.
        let mib = 1 << 20;
        let zstd: Vec<usize> = (0..=9).map(|c| blocksize(Zstd, c, 2, 4 * mib)).collect();
        assert_eq!(
            zstd,
            [
                16384, 32768, 65536, 131072, 262144, 262144, 524288, 524288, 524288, mib
            ]
        );
        assert_eq!(blocksize(Zstd, 1, 8, 4 * mib), 32768);
        assert_eq!(blocksize(Zstd, 3, 2, 100_000), 100_000);
        assert_eq!(blocksize(Zstd, 3, 4, 100_001), 100_000);
    }

    #[test]
    fn zstd_levels_follow_c_blosc() {
        let levels: Vec<i32> = (1..=9).map(zstd_level).collect();
        assert_eq!(levels, [1, 3, 5, 7, 9, 11, 13, 15, 22]);
    }
}
