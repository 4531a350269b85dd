//! Blosc's byte shuffle (a transpose of an n×T byte matrix to T×n), fused with tiling:
//! it reads the chunk's rows straight from the source, so no whole-chunk copy is made;
//! and Blosc's bit shuffle, which is a byte shuffle followed by a transpose of each byte
//! plane's bits, with the inverses the decoder in `read::blosc` uses.
//!
//! The bit shuffle is written here from c-blosc's definition (`bitshuffle-generic.c`:
//! `bshuf_trans_byte_elem`, `bshuf_trans_bit_byte`, `bshuf_trans_bitrow_eight`) rather
//! than taken from a crate: the `bitshuffle` crates wrap the C library of the same name
//! (another C build, and its blocked layout differs from the one Blosc applies per
//! block), and c-blosc's own entry point is not exposed by `blosc-src` outside a frame.

use crate::tile::{ChunkSource, Segment};

/// Shuffles bytes `start..start + dst.len()` of `src` into `dst`, with element size `ts`;
/// `start` is a multiple of `ts`.
pub(crate) fn shuffle_source(src: &ChunkSource<'_>, start: usize, ts: usize, dst: &mut [u8]) {
    let len = dst.len();
    debug_assert!(start.is_multiple_of(ts));
    // A trailing partial element (only in a last block whose length is not a multiple
    // of the element size) is copied unchanged, as c-blosc does.
    let whole = len - len % ts;
    if ts == 1 || whole < len {
        src.copy_range(start + whole, start + len, &mut dst[whole..]);
    }
    if ts == 1 {
        src.copy_range(start, start + whole, &mut dst[..whole]);
        return;
    }
    let dst = &mut dst[..whole];
    let n = whole / ts;
    let fill = src.fill();
    let mut e = 0;
    src.segments(start, start + whole, |seg| match seg {
        Segment::Data(d) => {
            let k = d.len() / ts;
            shuffle_run(d, ts, n, e, dst);
            e += k;
        }
        Segment::Fill(bytes) => {
            let k = bytes / ts;
            for j in 0..ts {
                dst[j * n + e..j * n + e + k].fill(fill.byte(j));
            }
            e += k;
        }
    });
}

/// Bit shuffle of bytes `start..start + dst.len()` of `src` into `dst`, as c-blosc's
/// `blosc_internal_bitshuffle` does one block: when the block's whole elements number a
/// multiple of 8, their bits are transposed (bit `b` of byte `j` of element `i` goes to
/// bit `i % 8` of byte `i / 8` of row `8 j + b`) and a trailing partial element is copied;
/// any other block is copied unchanged. `planes` is scratch for the byte planes.
pub(crate) fn bitshuffle_source(
    src: &ChunkSource<'_>,
    start: usize,
    ts: usize,
    planes: &mut Vec<u8>,
    dst: &mut [u8],
) {
    let len = dst.len();
    let n = len / ts;
    let whole = if n.is_multiple_of(8) { n * ts } else { 0 };
    src.copy_range(start + whole, start + len, &mut dst[whole..]);
    if whole == 0 {
        return;
    }
    super::grow_exact(planes, whole);
    shuffle_source(src, start, ts, &mut planes[..whole]);
    for (plane, rows) in planes[..whole]
        .chunks_exact(n)
        .zip(dst[..whole].chunks_exact_mut(n))
    {
        transpose_bits(plane, rows);
    }
}

/// Inverse of [`bitshuffle_source`] on one decoded block: `src` (bit rows) to `dst`
/// (elements), through the byte planes in `planes`.
pub(crate) fn bitunshuffle_block(src: &[u8], ts: usize, planes: &mut Vec<u8>, dst: &mut [u8]) {
    let len = src.len();
    let n = len / ts;
    let whole = if n.is_multiple_of(8) { n * ts } else { 0 };
    dst[whole..].copy_from_slice(&src[whole..]);
    if whole == 0 {
        return;
    }
    planes.resize(whole, 0);
    for (rows, plane) in src[..whole]
        .chunks_exact(n)
        .zip(planes[..whole].chunks_exact_mut(n))
    {
        untranspose_bits(rows, plane);
    }
    unshuffle_bytes(&planes[..whole], ts, &mut dst[..whole]);
}

/// Inverse byte shuffle of a whole number of elements: byte `j n + i` of `src` is byte
/// `j` of element `i` of `dst`.
pub(crate) fn unshuffle_bytes(src: &[u8], ts: usize, dst: &mut [u8]) {
    let n = src.len() / ts;
    if n == 0 {
        return;
    }
    for (j, plane) in src.chunks_exact(n).enumerate() {
        for (i, &b) in plane.iter().enumerate() {
            dst[i * ts + j] = b;
        }
    }
}

/// c-blosc's `TRANS_BIT_8X8`: transposes the 8×8 bit matrix whose row `m` is byte `m`
/// of `x` (little-endian), so byte `k` of the result holds bit `k` of every byte, byte
/// `m`'s at bit `m`. Its own inverse.
#[inline(always)]
const fn trans_bit_8x8(mut x: u64) -> u64 {
    let mut t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x = x ^ t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x = x ^ t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

/// One byte plane (`n` bytes, a multiple of 8) to its 8 bit rows of `n / 8` bytes:
/// bit `k` of byte `i` of `plane` is bit `i % 8` of byte `i / 8` of row `k`.
///
/// On x86-64, 16 bytes at a time with SSE2 as c-blosc's `bshuf_trans_bit_byte_sse2`
/// does: `movemask` gathers the top bit of each byte, and a shift brings up the next.
fn transpose_bits(plane: &[u8], rows: &mut [u8]) {
    let r = plane.len() / 8;
    #[allow(unused_mut)]
    let mut g = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use safe_arch::{load_unaligned_m128i, move_mask_i8_m128i, shl_imm_u16_m128i};
        let (src, _) = plane.as_chunks::<16>();
        for x in src {
            let mut v = load_unaligned_m128i(x);
            for k in (0..8).rev() {
                let m = move_mask_i8_m128i(v) as u16;
                let [lo, hi] = m.to_le_bytes();
                rows[k * r + g] = lo;
                rows[k * r + g + 1] = hi;
                v = shl_imm_u16_m128i::<1>(v);
            }
            g += 2;
        }
    }
    for (i, x) in plane.chunks_exact(8).enumerate().skip(g) {
        let t = trans_bit_8x8(u64::from_le_bytes([
            x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
        ]));
        for (k, b) in t.to_le_bytes().into_iter().enumerate() {
            rows[k * r + i] = b;
        }
    }
}

/// Inverse of [`transpose_bits`].
fn untranspose_bits(rows: &[u8], plane: &mut [u8]) {
    let r = rows.len() / 8;
    for (i, x) in plane.chunks_exact_mut(8).enumerate() {
        let t = trans_bit_8x8(u64::from_le_bytes(std::array::from_fn(|k| rows[k * r + i])));
        x.copy_from_slice(&t.to_le_bytes());
    }
}

/// Scatters the elements of `d` to positions `e..` of each of the `ts` byte planes of `dst`.
fn shuffle_run(d: &[u8], ts: usize, n: usize, e: usize, dst: &mut [u8]) {
    let k = d.len() / ts;
    match ts {
        2 => {
            let (p0, p1) = dst.split_at_mut(n);
            split2(d, &mut p0[e..e + k], &mut p1[e..e + k]);
        }
        4 => {
            let (p01, p23) = dst.split_at_mut(2 * n);
            let (p0, p1) = p01.split_at_mut(n);
            let (p2, p3) = p23.split_at_mut(n);
            split4(
                d,
                [
                    &mut p0[e..e + k],
                    &mut p1[e..e + k],
                    &mut p2[e..e + k],
                    &mut p3[e..e + k],
                ],
            );
        }
        _ => {
            for (i, x) in d.chunks_exact(ts).enumerate() {
                for (j, &byte) in x.iter().enumerate() {
                    dst[j * n + e + i] = byte;
                }
            }
        }
    }
}

/// Low and high bytes of the 2-byte elements of `d` into `p0` and `p1`.
///
/// On x86-64 this runs 16 elements at a time with SSE2 (part of the x86-64 baseline, so
/// no runtime detection), as c-blosc's `shuffle2_sse2` does: the scalar loop ran at about
/// a tenth of the speed and made the shuffle a third of the blosc-lz4 encode time.
/// `safe_arch` wraps the intrinsics in safe functions, so this module needs no `unsafe`.
fn split2(d: &[u8], p0: &mut [u8], p1: &mut [u8]) {
    #[allow(unused_mut)]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use safe_arch::{
            bitand_m128i, load_unaligned_m128i, pack_i16_to_u8_m128i, set_splat_i16_m128i,
            shr_imm_u16_m128i, store_unaligned_m128i,
        };
        let low = set_splat_i16_m128i(0xff);
        let (src, _) = d.as_chunks::<16>();
        let (a0, _) = p0.as_chunks_mut::<16>();
        let (a1, _) = p1.as_chunks_mut::<16>();
        for ((x, a), b) in src.chunks_exact(2).zip(a0).zip(a1) {
            let v0 = load_unaligned_m128i(&x[0]);
            let v1 = load_unaligned_m128i(&x[1]);
            let lo = pack_i16_to_u8_m128i(bitand_m128i(v0, low), bitand_m128i(v1, low));
            let hi = pack_i16_to_u8_m128i(shr_imm_u16_m128i::<8>(v0), shr_imm_u16_m128i::<8>(v1));
            store_unaligned_m128i(a, lo);
            store_unaligned_m128i(b, hi);
            i += 16;
        }
    }
    let rest = d[2 * i..].chunks_exact(2);
    for ((a, b), x) in p0[i..].iter_mut().zip(&mut p1[i..]).zip(rest) {
        *a = x[0];
        *b = x[1];
    }
}

/// The four byte planes of the 4-byte elements of `d`; SSE2 on x86-64 as in [`split2`].
fn split4(d: &[u8], p: [&mut [u8]; 4]) {
    let [p0, p1, p2, p3] = p;
    #[allow(unused_mut)]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use safe_arch::{load_unaligned_m128i, m128i, shr_imm_u32_m128i, store_unaligned_m128i};
        let (src, _) = d.as_chunks::<16>();
        let (a0, _) = p0.as_chunks_mut::<16>();
        let (a1, _) = p1.as_chunks_mut::<16>();
        let (a2, _) = p2.as_chunks_mut::<16>();
        let (a3, _) = p3.as_chunks_mut::<16>();
        let planes = a0.iter_mut().zip(a1).zip(a2).zip(a3);
        for (x, (((b0, b1), b2), b3)) in src.chunks_exact(4).zip(planes) {
            let v: [m128i; 4] = std::array::from_fn(|q| load_unaligned_m128i(&x[q]));
            store_unaligned_m128i(b0, byte_plane4(v, |w| w));
            store_unaligned_m128i(b1, byte_plane4(v, shr_imm_u32_m128i::<8>));
            store_unaligned_m128i(b2, byte_plane4(v, shr_imm_u32_m128i::<16>));
            store_unaligned_m128i(b3, byte_plane4(v, shr_imm_u32_m128i::<24>));
            i += 16;
        }
    }
    let planes = p0[i..]
        .iter_mut()
        .zip(&mut p1[i..])
        .zip(&mut p2[i..])
        .zip(&mut p3[i..]);
    for ((((a, b), c), f), x) in planes.zip(d[4 * i..].chunks_exact(4)) {
        *a = x[0];
        *b = x[1];
        *c = x[2];
        *f = x[3];
    }
}

/// One byte of each of 16 u32 lanes: `shift` moves it to the low byte, then the lanes are
/// narrowed 32 → 16 → 8 bits (the values are below 256, so the saturating packs are exact).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn byte_plane4(
    v: [safe_arch::m128i; 4],
    shift: impl Fn(safe_arch::m128i) -> safe_arch::m128i,
) -> safe_arch::m128i {
    use safe_arch::{
        bitand_m128i, pack_i16_to_u8_m128i, pack_i32_to_i16_m128i, set_splat_i32_m128i,
    };
    let low = set_splat_i32_m128i(0xff);
    let b = |q: usize| bitand_m128i(shift(v[q]), low);
    pack_i16_to_u8_m128i(
        pack_i32_to_i16_m128i(b(0), b(1)),
        pack_i32_to_i16_m128i(b(2), b(3)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::FillPattern;

    /// The definition from c-blosc's `shuffle_generic_inline`.
    fn reference(input: &[u8], ts: usize) -> Vec<u8> {
        let n = input.len() / ts;
        let mut out = vec![0u8; input.len()];
        for i in 0..n {
            for j in 0..ts {
                out[j * n + i] = input[i * ts + j];
            }
        }
        out
    }

    #[test]
    fn fused_shuffle_equals_reference_on_padded_tiles() {
        for ts in [1usize, 2, 3, 4] {
            // A 5x7-element plane, tile of 4x4 elements at (2, 4): 3 valid rows, 3 valid cols.
            let plane: Vec<u8> = (0..5 * 7 * ts).map(|i| (i * 7 + 3) as u8).collect();
            let fill: Vec<u8> = (0..ts).map(|j| 0xa0 + j as u8).collect();
            let f = FillPattern::new(&fill);
            let off = (2 * 7 + 4) * ts;
            let src = ChunkSource::strided(&plane[off..], 7 * ts, 4, 4 * ts, 3, 3 * ts, f);
            let mut whole = vec![0u8; src.len()];
            src.copy_range(0, src.len(), &mut whole);
            for (start, len) in [(0, 16 * ts), (4 * ts, 8 * ts), (ts, 13 * ts)] {
                let mut got = vec![0u8; len];
                shuffle_source(&src, start, ts, &mut got);
                assert_eq!(
                    got,
                    reference(&whole[start..start + len], ts),
                    "ts {ts} {start}+{len}"
                );
            }
        }
    }

    /// Bit shuffle by its definition: bit `b` of byte `j` of element `i` goes to bit
    /// `i % 8` of byte `i / 8` of row `8 j + b` (rows of `n / 8` bytes).
    fn bit_reference(input: &[u8], ts: usize) -> Vec<u8> {
        let n = input.len() / ts;
        if !n.is_multiple_of(8) {
            return input.to_vec();
        }
        let mut out = input.to_vec(); // the trailing partial element stays in place
        out[..n * ts].fill(0);
        for i in 0..n {
            for j in 0..ts {
                for b in 0..8 {
                    let bit = (input[i * ts + j] >> b) & 1;
                    out[(8 * j + b) * (n / 8) + i / 8] |= bit << (i % 8);
                }
            }
        }
        out
    }

    #[test]
    fn bitshuffle_equals_its_definition_and_inverts() {
        let mut planes = Vec::new();
        let fill = FillPattern::new(&[0]);
        for ts in [1usize, 2, 3, 4, 8] {
            let data: Vec<u8> = (0..300 * ts + 5).map(|i| (i * 151 + i / 7) as u8).collect();
            // Element counts around the 16-byte vector step, multiples of 8 and not,
            // with and without a trailing partial element.
            for n in [0usize, 1, 7, 8, 16, 24, 40, 128, 136, 257, 296] {
                for extra in [0, ts.min(3) - 1] {
                    let bytes = &data[..n * ts + extra];
                    let src = ChunkSource::contiguous(bytes, fill);
                    let mut got = vec![0u8; bytes.len()];
                    bitshuffle_source(&src, 0, ts, &mut planes, &mut got);
                    assert_eq!(got, bit_reference(bytes, ts), "ts {ts} n {n} +{extra}");
                    let mut back = vec![0u8; bytes.len()];
                    bitunshuffle_block(&got, ts, &mut planes, &mut back);
                    assert_eq!(back, bytes, "ts {ts} n {n} +{extra}");
                }
            }
        }
    }

    #[test]
    fn vector_and_scalar_paths_equal_reference_at_every_length() {
        // Lengths around the 16-element vector steps, with odd starts, so both the SIMD
        // body and every scalar tail are checked.
        for ts in [2usize, 4] {
            let data: Vec<u8> = (0..300 * ts).map(|i| (i * 151 + i / 7) as u8).collect();
            for n in 0..100 {
                for first in [0usize, 1, 17] {
                    let bytes = &data[first * ts..(first + n) * ts];
                    let mut planes = vec![0u8; bytes.len()];
                    shuffle_run(bytes, ts, n, 0, &mut planes);
                    assert_eq!(planes, reference(bytes, ts), "ts {ts} n {n} first {first}");
                }
            }
        }
    }
}
