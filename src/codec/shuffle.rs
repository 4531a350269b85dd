//! Blosc's byte shuffle (a transpose of an n×T byte matrix to T×n), fused with tiling:
//! it reads the chunk's rows straight from the source, so no whole-chunk copy is made.

use crate::tile::{ChunkSource, Segment};

/// Shuffles bytes `start..start + dst.len()` of `src` into `dst`, with element size `ts`;
/// `start` is a multiple of `ts`.
pub(crate) fn shuffle_source(src: &ChunkSource<'_>, start: usize, ts: usize, dst: &mut [u8]) {
    let len = dst.len();
    debug_assert!(start % ts == 0);
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

/// Scatters the elements of `d` to positions `e..` of each of the `ts` byte planes of `dst`.
fn shuffle_run(d: &[u8], ts: usize, n: usize, e: usize, dst: &mut [u8]) {
    let k = d.len() / ts;
    match ts {
        2 => {
            let (p0, p1) = dst.split_at_mut(n);
            let (p0, p1) = (&mut p0[e..e + k], &mut p1[e..e + k]);
            for ((a, b), x) in p0.iter_mut().zip(p1.iter_mut()).zip(d.chunks_exact(2)) {
                *a = x[0];
                *b = x[1];
            }
        }
        4 => {
            let (p01, p23) = dst.split_at_mut(2 * n);
            let (p0, p1) = p01.split_at_mut(n);
            let (p2, p3) = p23.split_at_mut(n);
            let planes = p0[e..e + k]
                .iter_mut()
                .zip(&mut p1[e..e + k])
                .zip(&mut p2[e..e + k])
                .zip(&mut p3[e..e + k]);
            for ((((a, b), c), f), x) in planes.zip(d.chunks_exact(4)) {
                *a = x[0];
                *b = x[1];
                *c = x[2];
                *f = x[3];
            }
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
}
