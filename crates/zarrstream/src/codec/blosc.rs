//! The `blosc` codec with `cname: "lz4"` and byte shuffle: a Blosc1 (format version 2)
//! frame built around raw LZ4 blocks.
//!
//! Readers (numcodecs, tensorstore, zarrs) all decode with c-blosc 1.x, and no maintained
//! pure-Rust crate writes compressed Blosc1 frames, so the container is written here.
//!
//! The LZ4 blocks come from liblz4 (the `lz4` crate), not `lz4_flex`: c-blosc maps
//! `clevel` to LZ4's *acceleration* (`10 - clevel`, so 9 at clevel 1), which skips
//! quickly over incompressible input such as the noisy low-byte plane of camera data.
//! `lz4_flex` has no acceleration parameter and was 4× slower than c-blosc at clevel 1
//! on camera chunks (BENCHMARKS.md); with the same acceleration our frames match
//! c-blosc's speed and ratio. `lz4_flex` still decodes (`read::blosc`), in safe Rust.
//! Layout and rules, those of c-blosc 1.x frames: 16-byte header, a table of
//! absolute block offsets, then per block one LZ4 stream per byte plane ("split") or one
//! stream (leftover block, or small blocks), each prefixed by its int32 length; a stream
//! that does not shrink is stored raw with length = its input length; a frame that would
//! exceed `nbytes + 16` becomes a "memcpyed" frame of the unshuffled input.

use std::ops::Range;

use lz4::block::{CompressionMode, compress_to_buffer};

use super::shuffle::shuffle_source;

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
pub(crate) const FLAG_DONT_SPLIT: u8 = 0x10;
const FLAG_LZ4: u8 = 1 << 5;
pub(crate) const VERSION: u8 = 2;
pub(crate) const VERSION_LZ4: u8 = 1;

/// Worst case of a frame: never larger than the input plus the header.
pub(crate) fn bound(raw: usize) -> usize {
    raw + HEADER
}

/// LZ4 acceleration c-blosc 1.x uses at `clevel` (`get_accel` in blosc.c).
pub(crate) fn acceleration(clevel: u8) -> i32 {
    10 - i32::from(clevel.min(9))
}

/// c-blosc's split rule (FORWARD_COMPAT mode, its default).
fn split_block(typesize: usize, blocksize: usize) -> bool {
    typesize <= MAX_SPLITS && blocksize / typesize >= MIN_BUFFERSIZE
}

/// The block size c-blosc 1.x (`compute_blocksize`) picks for LZ4 at `clevel`, so our
/// frames look like the ones readers already meet.
pub fn blocksize(clevel: u8, typesize: usize, nbytes: usize) -> usize {
    if nbytes < typesize {
        return 1;
    }
    let mut bs = nbytes;
    if nbytes >= 32 * 1024 {
        // 32 KiB × {1/4, 1/2, 1, 2, 4, 4, 8, 8, 8, 8}[clevel]
        const EIGHTHS: [usize; 10] = [2, 4, 8, 16, 32, 32, 64, 64, 64, 64];
        bs = 4 * 1024 * EIGHTHS[usize::from(clevel.min(9))];
    }
    if clevel > 0 && split_block(typesize, bs) {
        bs = (bs.min(256 * 1024) * typesize).clamp(64 * 1024, 1024 * 1024);
    }
    bs = bs.min(nbytes);
    if bs > typesize {
        bs -= bs % typesize;
    }
    bs
}

fn put_i32(out: &mut [u8], at: usize, v: usize) {
    // Every value written is ≤ nbytes + 16 ≤ i32::MAX (checked by the spec builder).
    out[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
}

fn header(
    out: &mut [u8],
    flags: u8,
    typesize: usize,
    nbytes: usize,
    blocksize: usize,
    cbytes: usize,
) {
    out[0] = VERSION;
    out[1] = VERSION_LZ4;
    out[2] = flags;
    out[3] = typesize as u8;
    put_i32(out, 4, nbytes);
    put_i32(out, 8, blocksize);
    put_i32(out, 12, cbytes);
}

/// Encodes `src` into `out` (at least `bound(src.len())` bytes); returns the frame length.
/// `accel` is LZ4's acceleration ([`acceleration`] of `clevel` to match c-blosc).
/// `scratch` is reused between calls (one shuffled block). `read` is told each block's
/// byte range of `src` right after the block was read (see
/// [`ChunkEncoder::encode_observed`](super::ChunkEncoder::encode_observed)).
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode(
    src: &ChunkSource<'_>,
    typesize: usize,
    clevel: u8,
    accel: i32,
    scratch: &mut Vec<u8>,
    out: &mut [u8],
    read: &mut dyn FnMut(Range<usize>),
) -> usize {
    let nbytes = src.len();
    let bs = blocksize(clevel, typesize, nbytes);
    let split = split_block(typesize, bs);
    let flags = FLAG_LZ4 | FLAG_SHUFFLE | if split { 0 } else { FLAG_DONT_SPLIT };
    let limit = nbytes + HEADER;
    if clevel > 0
        && nbytes >= MIN_BUFFERSIZE
        && let Some(cbytes) =
            encode_blocks(src, typesize, bs, split, accel, limit, scratch, out, read)
    {
        header(out, flags, typesize, nbytes, bs, cbytes);
        return cbytes;
    }
    src.copy_range(0, nbytes, &mut out[HEADER..limit]);
    header(out, flags | FLAG_MEMCPYED, typesize, nbytes, bs, limit);
    limit
}

/// Writes the offset table and the blocks; `None` when the frame would exceed `limit`.
#[allow(clippy::too_many_arguments)]
fn encode_blocks(
    src: &ChunkSource<'_>,
    ts: usize,
    bs: usize,
    split: bool,
    accel: i32,
    limit: usize,
    scratch: &mut Vec<u8>,
    out: &mut [u8],
    read: &mut dyn FnMut(Range<usize>),
) -> Option<usize> {
    let nbytes = src.len();
    let nblocks = nbytes.div_ceil(bs);
    let mut pos = HEADER + 4 * nblocks;
    if pos > limit {
        return None;
    }
    super::grow_exact(scratch, bs);
    for j in 0..nblocks {
        let start = j * bs;
        let bsize = bs.min(nbytes - start);
        put_i32(out, HEADER + 4 * j, pos);
        let block: &[u8] = match (ts, src.as_contiguous()) {
            (1, Some(all)) => &all[start..start + bsize],
            _ => {
                shuffle_source(src, start, ts, &mut scratch[..bsize]);
                &scratch[..bsize]
            }
        };
        read(start..start + bsize);
        // The leftover block is never split (the decoder re-derives this).
        let nsplits = if split && bsize == bs { ts } else { 1 };
        let neblock = bsize / nsplits;
        for stream in block.chunks_exact(neblock) {
            let dst = pos + 4;
            if dst > limit {
                return None;
            }
            // A stream is raw iff csize == neblock, so a compressed one must be shorter:
            // liblz4 gets exactly that much room (and no more than the frame has left),
            // writes in place and gives up (0) when it does not fit, as c-blosc does.
            let room = (neblock - 1).min(limit - dst);
            let clen = compress_to_buffer(
                stream,
                Some(CompressionMode::FAST(accel)),
                false,
                &mut out[dst..dst + room],
            )
            .unwrap_or(0);
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
        // c-blosc's block sizes for LZ4 at these clevels, type and chunk sizes.
        assert_eq!(blocksize(1, 2, 524288), 65536);
        assert_eq!(blocksize(5, 2, 524288), 262144);
        assert_eq!(blocksize(9, 2, 524288), 524288);
        assert_eq!(blocksize(1, 2, 131072), 65536);
        assert_eq!(blocksize(5, 2, 131072), 131072);
        assert_eq!(blocksize(1, 2, 180000), 65536);
        assert_eq!(blocksize(5, 2, 180000), 180000);
        assert_eq!(blocksize(1, 2, 1000), 1000);
        assert_eq!(blocksize(0, 2, 131072), 8192);
    }
}
