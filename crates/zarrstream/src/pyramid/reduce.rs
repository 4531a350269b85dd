//! The reduction kernels: rows, planes and z pairs of planes, for every data type.

use super::Downsample;
use super::pixel::{Px, hi, lo};
use super::region::Region;
use crate::dtype::DataType;

/// Reduces one output row from input rows `r0` and (if it exists) `r1`.
fn reduce_row<T: Px>(method: Downsample, r0: &[T], r1: Option<&[T]>, out: &mut [T]) {
    let w = r0.len();
    let pairs = w / 2;
    let (body, tail) = out.split_at_mut(pairs);
    let p0 = r0.chunks_exact(2);
    match (method, r1) {
        (Downsample::Decimate, _) => {
            for (o, p) in body.iter_mut().zip(p0) {
                *o = p[0];
            }
        }
        (Downsample::Mean, Some(r1)) => {
            // `body` has `w / 2` outputs, so the SIMD prefix reads whole pairs only.
            let done = T::mean4_simd(r0, r1, body);
            let rest = body[done..].iter_mut().zip(p0.skip(done));
            for ((o, p), q) in rest.zip(r1.chunks_exact(2).skip(done)) {
                *o = T::mean4(p[0], p[1], q[0], q[1]);
            }
        }
        (Downsample::Mean, None) => {
            for (o, p) in body.iter_mut().zip(p0) {
                *o = T::mean2(p[0], p[1]);
            }
        }
        (Downsample::Min, Some(r1)) => {
            for ((o, p), q) in body.iter_mut().zip(p0).zip(r1.chunks_exact(2)) {
                *o = lo(lo(p[0], p[1]), lo(q[0], q[1]));
            }
        }
        (Downsample::Min, None) => {
            for (o, p) in body.iter_mut().zip(p0) {
                *o = lo(p[0], p[1]);
            }
        }
        (Downsample::Max, Some(r1)) => {
            for ((o, p), q) in body.iter_mut().zip(p0).zip(r1.chunks_exact(2)) {
                *o = hi(hi(p[0], p[1]), hi(q[0], q[1]));
            }
        }
        (Downsample::Max, None) => {
            for (o, p) in body.iter_mut().zip(p0) {
                *o = hi(p[0], p[1]);
            }
        }
    }
    // An odd width: the last column reduces over its one column.
    if let Some(o) = tail.first_mut() {
        let a = r0[w - 1];
        *o = match (method, r1.map(|r| r[w - 1])) {
            (Downsample::Decimate, _) | (_, None) => a,
            (Downsample::Mean, Some(b)) => T::mean2(a, b),
            (Downsample::Min, Some(b)) => lo(a, b),
            (Downsample::Max, Some(b)) => hi(a, b),
        };
    }
}

fn reduce_typed<T: Px>(
    method: Downsample,
    src: &[T],
    (h, w): (usize, usize),
    region: &Region,
    dst: &mut [T],
) {
    let cols = region.cols.clone();
    let (x0, x1) = (2 * cols.start, (2 * cols.end).min(w));
    for (i, oy) in region.rows.clone().enumerate() {
        let r0 = &src[2 * oy * w..][x0..x1];
        let r1 = (2 * oy + 1 < h && method != Downsample::Decimate)
            .then(|| &src[(2 * oy + 1) * w..][x0..x1]);
        reduce_row(method, r0, r1, &mut dst[i * region.stride..][..cols.len()]);
    }
}

/// The 2×2×2 reduction of two consecutive z planes `a` (even z) and `b`: each output
/// pixel from the up to 8 input pixels that exist. Per pixel and scalar: z reduction is
/// an option for z stacks, not the camera-rate path.
fn reduce_pair_typed<T: Px>(
    method: Downsample,
    (a, b): (&[T], &[T]),
    (h, w): (usize, usize),
    region: &Region,
    dst: &mut [T],
) {
    for (i, oy) in region.rows.clone().enumerate() {
        let out = &mut dst[i * region.stride..][..region.cols.len()];
        let ys = 2 * oy..(2 * oy + 2).min(h);
        for (o, ox) in out.iter_mut().zip(region.cols.clone()) {
            let (x0, x1) = (2 * ox, (2 * ox + 2).min(w));
            let px = [a, b]
                .into_iter()
                .flat_map(|p| ys.clone().flat_map(move |y| &p[y * w + x0..y * w + x1]))
                .copied();
            let first = a[2 * oy * w + 2 * ox];
            *o = match method {
                Downsample::Decimate => first,
                Downsample::Min => px.fold(first, lo),
                Downsample::Max => px.fold(first, hi),
                Downsample::Mean => {
                    let mut block = [first; 8];
                    let mut n = 0;
                    for (b, v) in block.iter_mut().zip(px) {
                        *b = v;
                        n += 1;
                    }
                    T::mean_of(&block[..n])
                }
            };
        }
    }
}

/// Reinterprets bytes as `T`s, copying only if the buffer is misaligned.
fn typed<T: bytemuck::Pod>(bytes: &[u8]) -> std::borrow::Cow<'_, [T]> {
    match bytemuck::try_cast_slice(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => std::borrow::Cow::Owned(copy_to_vec(bytes)),
    }
}

fn copy_to_vec<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    let mut v = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>()];
    bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
    v
}

fn reduce_bytes<T: Px>(
    method: Downsample,
    src: &[u8],
    hw: (usize, usize),
    region: &Region,
    dst: &mut [u8],
) {
    let src = typed::<T>(src);
    match bytemuck::try_cast_slice_mut::<u8, T>(dst) {
        Ok(d) => reduce_typed(method, &src, hw, region, d),
        Err(_) => {
            let mut d = copy_to_vec::<T>(dst);
            reduce_typed(method, &src, hw, region, &mut d);
            dst.copy_from_slice(bytemuck::cast_slice(&d));
        }
    }
}

fn reduce_pair_bytes<T: Px>(
    method: Downsample,
    (a, b): (&[u8], &[u8]),
    hw: (usize, usize),
    region: &Region,
    dst: &mut [u8],
) {
    let (a, b) = (typed::<T>(a), typed::<T>(b));
    match bytemuck::try_cast_slice_mut::<u8, T>(dst) {
        Ok(d) => reduce_pair_typed(method, (&a, &b), hw, region, d),
        Err(_) => {
            let mut d = copy_to_vec::<T>(dst);
            reduce_pair_typed(method, (&a, &b), hw, region, &mut d);
            dst.copy_from_slice(bytemuck::cast_slice(&d));
        }
    }
}

/// Reduces the `hw` = `h × w` frame of `dtype` (little-endian bytes) in `src` into
/// `region` of its `ceil(h/2) × ceil(w/2)` reduction, laid out in `dst` as the region
/// says (a band of whole rows, or a tile's rectangle of the whole reduced frame), so
/// that bands or tiles can be reduced in parallel.
pub(crate) fn reduce(
    dtype: DataType,
    method: Downsample,
    src: &[u8],
    hw: (usize, usize),
    region: &Region,
    dst: &mut [u8],
) {
    match dtype {
        DataType::Int8 => reduce_bytes::<i8>(method, src, hw, region, dst),
        DataType::UInt8 => reduce_bytes::<u8>(method, src, hw, region, dst),
        DataType::Int16 => reduce_bytes::<i16>(method, src, hw, region, dst),
        DataType::UInt16 => reduce_bytes::<u16>(method, src, hw, region, dst),
        DataType::Int32 => reduce_bytes::<i32>(method, src, hw, region, dst),
        DataType::UInt32 => reduce_bytes::<u32>(method, src, hw, region, dst),
        DataType::Int64 => reduce_bytes::<i64>(method, src, hw, region, dst),
        DataType::UInt64 => reduce_bytes::<u64>(method, src, hw, region, dst),
        DataType::Float32 => reduce_bytes::<f32>(method, src, hw, region, dst),
        DataType::Float64 => reduce_bytes::<f64>(method, src, hw, region, dst),
    }
}

/// Like [`reduce`], over the 2×2×2 blocks of two consecutive z planes: `a` (even z) and
/// `b` (the next). An odd z count leaves the last plane without a partner: it is
/// reduced alone with [`reduce`].
pub(crate) fn reduce_pair(
    dtype: DataType,
    method: Downsample,
    planes: (&[u8], &[u8]),
    hw: (usize, usize),
    region: &Region,
    dst: &mut [u8],
) {
    match dtype {
        DataType::Int8 => reduce_pair_bytes::<i8>(method, planes, hw, region, dst),
        DataType::UInt8 => reduce_pair_bytes::<u8>(method, planes, hw, region, dst),
        DataType::Int16 => reduce_pair_bytes::<i16>(method, planes, hw, region, dst),
        DataType::UInt16 => reduce_pair_bytes::<u16>(method, planes, hw, region, dst),
        DataType::Int32 => reduce_pair_bytes::<i32>(method, planes, hw, region, dst),
        DataType::UInt32 => reduce_pair_bytes::<u32>(method, planes, hw, region, dst),
        DataType::Int64 => reduce_pair_bytes::<i64>(method, planes, hw, region, dst),
        DataType::UInt64 => reduce_pair_bytes::<u64>(method, planes, hw, region, dst),
        DataType::Float32 => reduce_pair_bytes::<f32>(method, planes, hw, region, dst),
        DataType::Float64 => reduce_pair_bytes::<f64>(method, planes, hw, region, dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(method: Downsample, src: &[i128], h: usize, w: usize) -> Vec<i128> {
        let mut out = Vec::new();
        for i in 0..h.div_ceil(2) {
            for j in 0..w.div_ceil(2) {
                let mut v = Vec::new();
                for y in 2 * i..(2 * i + 2).min(h) {
                    for x in 2 * j..(2 * j + 2).min(w) {
                        v.push(src[y * w + x]);
                    }
                }
                out.push(naive_block(method, v[0], &v));
            }
        }
        out
    }

    /// One block's output by definition; integer means rounded half up.
    fn naive_block(method: Downsample, first: i128, v: &[i128]) -> i128 {
        let n = v.len() as i128;
        match method {
            Downsample::Decimate => first,
            Downsample::Min => *v.iter().min().unwrap(),
            Downsample::Max => *v.iter().max().unwrap(),
            Downsample::Mean => (2 * v.iter().sum::<i128>() + n).div_euclid(2 * n),
        }
    }

    const METHODS: [Downsample; 4] = [
        Downsample::Mean,
        Downsample::Decimate,
        Downsample::Min,
        Downsample::Max,
    ];

    /// Reduces `vals` (`T` widened to i128 for the comparison) whole and in bands of
    /// `band` output rows, and checks both against [`naive`].
    fn check<T: bytemuck::Pod + Into<i128>>(dtype: DataType, vals: &[T], h: usize, w: usize) {
        let wide: Vec<i128> = vals.iter().map(|&v| v.into()).collect();
        let size = std::mem::size_of::<T>();
        let row = w.div_ceil(2) * size;
        for m in METHODS {
            let want = naive(m, &wide, h, w);
            let src: &[u8] = bytemuck::cast_slice(vals);
            let widen = |d: &[u8]| -> Vec<i128> {
                copy_to_vec::<T>(d).into_iter().map(Into::into).collect()
            };
            for band in [h.div_ceil(2), 1, 3] {
                let mut dst = vec![0u8; h.div_ceil(2) * row];
                for (b, rows) in dst.chunks_mut(band * row).enumerate() {
                    let region = Region::band((h, w), b * band, band);
                    reduce(dtype, m, src, (h, w), &region, rows);
                }
                assert_eq!(widen(&dst), want, "{m:?} {h}x{w} {dtype:?} bands of {band}");
            }
            // Tiles of even edges, as the encoding workers reduce them.
            for (ty, tx) in [(2usize, 2usize), (4, 6), (2, 16)] {
                let mut dst = vec![0u8; h.div_ceil(2) * row];
                for y0 in (0..h).step_by(ty) {
                    for x0 in (0..w).step_by(tx) {
                        let region =
                            Region::of_input((h, w), y0..(y0 + ty).min(h), x0..(x0 + tx).min(w));
                        let at = region.offset_in_frame(size);
                        reduce(dtype, m, src, (h, w), &region, &mut dst[at..]);
                    }
                }
                assert_eq!(widen(&dst), want, "{m:?} {h}x{w} {dtype:?} tiles {ty}x{tx}");
            }
        }
    }

    #[test]
    fn matches_a_naive_reduction_for_odd_and_even_sizes() {
        for (h, w) in [(1usize, 1usize), (1, 5), (4, 4), (5, 7), (6, 3), (3, 8)] {
            let vals: Vec<i16> = (0..h * w)
                .map(|i| ((i * 7919 + 13) % 2001) as i16 - 1000)
                .collect();
            check(DataType::Int16, &vals, h, w);
        }
    }

    /// Widths past the 16-pixel SIMD step, odd and even, with values near `u16::MAX`
    /// (sums that overflow 16 bits) and rounding ties.
    #[test]
    fn uint16_mean_simd_matches_the_naive_reduction() {
        for (h, w) in [
            (2usize, 16usize),
            (3, 17),
            (4, 33),
            (5, 64),
            (2, 47),
            (7, 100),
        ] {
            let vals: Vec<u16> = (0..h * w)
                .map(|i| match i % 5 {
                    0 => u16::MAX,
                    1 => u16::MAX - 1,
                    _ => ((i * 40503 + 7) % 65536) as u16,
                })
                .collect();
            check(DataType::UInt16, &vals, h, w);
        }
    }

    /// Values of every integer type near both ends of its range and in between, so
    /// sums overflow the type (and, for the 64-bit types, 64 bits).
    fn extremes<T: TryFrom<i128> + Copy>(n: usize, lo: i128, hi: i128) -> Vec<T> {
        (0..n)
            .map(|i| {
                let v = match i % 4 {
                    0 => hi,
                    1 => lo,
                    2 => hi - (i as i128 % 3),
                    _ => lo + (hi - lo) / 7 * (i as i128 % 7),
                };
                T::try_from(v).ok().unwrap()
            })
            .collect()
    }

    #[test]
    fn every_integer_type_matches_the_naive_reduction_at_its_extremes() {
        for (h, w) in [(1usize, 3usize), (4, 6), (5, 7), (3, 17)] {
            let n = h * w;
            check(DataType::Int8, &extremes::<i8>(n, -128, 127), h, w);
            check(DataType::UInt8, &extremes::<u8>(n, 0, 255), h, w);
            let (lo, hi) = (i32::MIN.into(), i32::MAX.into());
            check(DataType::Int32, &extremes::<i32>(n, lo, hi), h, w);
            check(
                DataType::UInt32,
                &extremes::<u32>(n, 0, u32::MAX.into()),
                h,
                w,
            );
            let (lo, hi) = (i64::MIN.into(), i64::MAX.into());
            check(DataType::Int64, &extremes::<i64>(n, lo, hi), h, w);
            check(
                DataType::UInt64,
                &extremes::<u64>(n, 0, u64::MAX.into()),
                h,
                w,
            );
        }
    }

    /// Float means: `float32` through f64, `float64` without overflow near `f64::MAX`.
    #[test]
    fn float_means_stay_finite_and_exact_where_they_can() {
        let region = Region::band((2, 2), 0, 1);
        let mean = |vals: [f64; 4]| {
            let mut dst = [0u8; 8];
            let src = bytemuck::cast_slice(&vals);
            reduce(
                DataType::Float64,
                Downsample::Mean,
                src,
                (2, 2),
                &region,
                &mut dst,
            );
            f64::from_le_bytes(dst)
        };
        assert_eq!(mean([f64::MAX; 4]), f64::MAX);
        assert_eq!(mean([1.0, 2.0, 3.0, 4.0]), 2.5);
        assert_eq!(mean([-f64::MAX, f64::MAX, 1.0, -1.0]), 0.0);
        assert!(mean([f64::NAN, 1.0, 1.0, 1.0]).is_nan());
        let vals = [f32::MAX, f32::MAX, 1.5, -0.5];
        let mut dst = [0u8; 4];
        let src = bytemuck::cast_slice(&vals);
        reduce(
            DataType::Float32,
            Downsample::Mean,
            src,
            (2, 2),
            &region,
            &mut dst,
        );
        let want = ((f64::from(f32::MAX) * 2.0 + 1.0) / 4.0) as f32;
        assert_eq!(f32::from_le_bytes(dst), want);
    }

    /// Two z planes `a` and `b` of `T` reduced together against the 2×2×2 definition.
    fn check_pairs<T: bytemuck::Pod + Into<i128>>(
        dtype: DataType,
        a: &[T],
        b: &[T],
        h: usize,
        w: usize,
    ) {
        // The pixels of block (i, j) that exist, plane a first.
        let block = |i: usize, j: usize| -> Vec<i128> {
            let mut v = Vec::new();
            for p in [a, b] {
                for y in 2 * i..(2 * i + 2).min(h) {
                    for x in 2 * j..(2 * j + 2).min(w) {
                        v.push(p[y * w + x].into());
                    }
                }
            }
            v
        };
        let size = std::mem::size_of::<T>();
        for m in METHODS {
            let mut want = Vec::new();
            for i in 0..h.div_ceil(2) {
                for j in 0..w.div_ceil(2) {
                    want.push(naive_block(m, a[2 * i * w + 2 * j].into(), &block(i, j)));
                }
            }
            let mut dst = vec![0u8; h.div_ceil(2) * w.div_ceil(2) * size];
            let region = Region::band((h, w), 0, h.div_ceil(2));
            let planes = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
            reduce_pair(dtype, m, planes, (h, w), &region, &mut dst);
            let got: Vec<i128> = copy_to_vec::<T>(&dst).into_iter().map(Into::into).collect();
            assert_eq!(got, want, "{m:?} {h}x{w} {dtype:?}");
        }
    }

    /// Two z planes reduced together against the 2×2×2 definition, odd sizes included.
    #[test]
    fn z_pairs_match_a_naive_reduction() {
        for (h, w) in [(1usize, 1usize), (3, 5), (4, 4), (5, 2)] {
            let plane = |seed: usize| -> Vec<i16> {
                (0..h * w)
                    .map(|i| ((i * 7919 + seed * 104729) % 2001) as i16 - 1000)
                    .collect()
            };
            check_pairs(DataType::Int16, &plane(1), &plane(2), h, w);
            let n = h * w;
            let (lo, hi) = (i64::MIN.into(), i64::MAX.into());
            let (a, b) = (extremes::<i64>(n, lo, hi), extremes::<i64>(n + 1, lo, hi));
            check_pairs(DataType::Int64, &a, &b[1..], h, w);
            let hi = u64::MAX.into();
            let (a, b) = (extremes::<u64>(n, 0, hi), extremes::<u64>(n + 2, 0, hi));
            check_pairs(DataType::UInt64, &a, &b[2..], h, w);
        }
    }
}
