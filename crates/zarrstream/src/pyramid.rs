//! Multiscale pyramid: 2×2 reduction of frames in y and x, and the level arrays' specs.
//!
//! Level `k` (k ≥ 1) is the reduction of level `k - 1`: each output pixel `(i, j)` is
//! computed from the input pixels `(2i..2i+2, 2j..2j+2)` that exist. A frame of odd
//! height or width gives `ceil(n / 2)` rows or columns; the last one is reduced over the
//! one or two input rows/columns that exist (averaged over 2 or 1 pixels, not padded).
//!
//! Methods ([`Downsample`]):
//! - `Mean`: integer types round the exact mean half up, `floor(sum / n + 1/2)` with `n`
//!   the number of existing pixels (4, 2 or 1); `float32` sums in `f64` and rounds the
//!   mean to the nearest `f32`. Each level rounds once, from the previous level's values.
//! - `Decimate`: the top-left pixel of each block (`level[i, j] = prev[2i, 2j]`).
//! - `Min`, `Max`: the smallest / largest existing pixel (NaN handling is unspecified).

use crate::dtype::DataType;
use crate::error::OmeError;
use crate::spec::ArraySpec;

/// How level `k` is computed from level `k - 1` (2×2 blocks in y and x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Downsample {
    /// Block mean (integers: rounded half up; see the module docs).
    #[default]
    Mean,
    /// The top-left pixel of each block.
    Decimate,
    /// The block minimum.
    Min,
    /// The block maximum.
    Max,
}

impl Downsample {
    /// The name written into `multiscales[0].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Downsample::Mean => "mean",
            Downsample::Decimate => "decimate",
            Downsample::Min => "min",
            Downsample::Max => "max",
        }
    }

    /// Whether a level's pixel is centred on its block (shifted by half a block), as
    /// opposed to on the block's first pixel (decimation).
    pub(crate) fn centred(self) -> bool {
        self != Downsample::Decimate
    }
}

impl std::str::FromStr for Downsample {
    type Err = crate::error::ParseError;
    /// Parses `mean`, `decimate`, `min`, `max`, the names [`Display`](std::fmt::Display)
    /// prints.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mean" => Ok(Downsample::Mean),
            "decimate" => Ok(Downsample::Decimate),
            "min" => Ok(Downsample::Min),
            "max" => Ok(Downsample::Max),
            _ => Err(crate::error::ParseError::new(
                "downsampling method",
                s,
                "mean, decimate, min, max",
            )),
        }
    }
}

impl std::fmt::Display for Downsample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Number of pyramid levels, level 0 included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Levels {
    /// Exactly this many (1 = level 0 only, the default).
    Count(usize),
    /// Until a level's frame fits in one inner chunk (that level is the last).
    Auto,
}

impl Default for Levels {
    fn default() -> Self {
        Levels::Count(1)
    }
}

/// Most levels an image may have.
pub const MAX_LEVELS: usize = 16;

/// The number of levels `levels` gives for an image whose level 0 is `spec`.
pub(crate) fn level_count(spec: &ArraySpec, levels: Levels) -> Result<usize, OmeError> {
    match levels {
        Levels::Count(n) if (1..=MAX_LEVELS).contains(&n) => Ok(n),
        Levels::Count(n) => Err(OmeError::Levels {
            got: n,
            max: MAX_LEVELS,
        }),
        Levels::Auto => {
            let r = spec.rank();
            let (mut h, mut w) = (spec.shape[r - 2], spec.shape[r - 1]);
            let mut n = 1;
            while (h > spec.chunk[r - 2] || w > spec.chunk[r - 1]) && n < MAX_LEVELS {
                h = h.div_ceil(2);
                w = w.div_ceil(2);
                n += 1;
            }
            Ok(n)
        }
    }
}

/// The spec of the level below `prev`: y and x (and axis `z`, if given) halved (rounded
/// up), inner chunk edges capped to the level's size, shard edges to the chunk-rounded
/// size; everything else as `prev`.
pub(crate) fn next_level_spec(
    prev: &ArraySpec,
    z: Option<usize>,
) -> Result<ArraySpec, crate::SpecError> {
    let r = prev.rank();
    let (mut shape, mut chunk, mut shard) =
        (prev.shape.clone(), prev.chunk.clone(), prev.shard.clone());
    for a in z.into_iter().chain(r - 2..r) {
        let size = prev.shape[a].div_ceil(2);
        chunk[a] = prev.chunk[a].min(size);
        shard[a] = prev.shard[a].min(size.div_ceil(chunk[a]) * chunk[a]);
        shape[a] = size;
    }
    let mut b = ArraySpec::builder()
        .shape(shape)
        .chunk_shape(chunk)
        .shard_shape(shard)
        .dtype(prev.dtype)
        .fill_value(prev.fill_value)
        .codec(prev.codec)
        .crc32c(prev.crc32c)
        .index_location(prev.index_location)
        .attributes(prev.attributes.clone());
    if let Some(n) = &prev.dimension_names {
        b = b.dimension_names(n.iter().cloned());
    }
    b.build()
}

/// Pixel types a frame can be reduced in.
trait Px: bytemuck::Pod + PartialOrd {
    fn mean4(a: Self, b: Self, c: Self, d: Self) -> Self;
    fn mean2(a: Self, b: Self) -> Self;

    /// Writes the 2×2 means of a prefix of `out` from rows `r0` and `r1` with SIMD and
    /// returns how many it wrote (the scalar loop does the rest).
    fn mean4_simd(_r0: &[Self], _r1: &[Self], _out: &mut [Self]) -> usize {
        0
    }

    /// Exact for every pixel type (integers up to 32 bits, and sums of 8 of them).
    fn to_f64(self) -> f64;

    /// The pixel for the exact mean `m` of `n` pixels (`n` a power of two, so `m` is
    /// exact in `f64`), rounded as [`mean4`](Px::mean4) rounds.
    fn from_mean(m: f64) -> Self;
}

macro_rules! int_px {
    ($($t:ty => $acc:ty),*) => {$(
        impl Px for $t {
            #[inline(always)]
            fn mean4(a: Self, b: Self, c: Self, d: Self) -> Self {
                // `>>` floors (also for negative sums): floor((s + 2) / 4) = round half up.
                ((a as $acc + b as $acc + c as $acc + d as $acc + 2) >> 2) as $t
            }
            #[inline(always)]
            fn mean2(a: Self, b: Self) -> Self {
                ((a as $acc + b as $acc + 1) >> 1) as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_mean(m: f64) -> Self {
                (m + 0.5).floor() as $t
            }
        }
    )*};
}
int_px!(u8 => u32, i16 => i32, u32 => u64);

impl Px for u16 {
    #[inline(always)]
    fn mean4(a: Self, b: Self, c: Self, d: Self) -> Self {
        ((a as u32 + b as u32 + c as u32 + d as u32 + 2) >> 2) as u16
    }
    #[inline(always)]
    fn mean2(a: Self, b: Self) -> Self {
        ((a as u32 + b as u32 + 1) >> 1) as u16
    }
    fn mean4_simd(r0: &[u16], r1: &[u16], out: &mut [u16]) -> usize {
        mean4_u16_sse2(r0, r1, out)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_mean(m: f64) -> Self {
        (m + 0.5).floor() as u16
    }
}

/// `out[j] = (r0[2j] + r0[2j+1] + r1[2j] + r1[2j+1] + 2) >> 2` for 8 outputs at a time,
/// exact (sums in 32-bit lanes). `uint16` is the camera type, and the scalar loop ran
/// at about a third of the speed of the byte shuffle over the same frame, which made the
/// reduction a quarter of a 4-level pyramid's extra work (perf, BENCHMARKS.md).
/// SSE2 is part of the x86-64 baseline; `safe_arch` keeps this free of `unsafe`.
#[cfg(target_arch = "x86_64")]
fn mean4_u16_sse2(r0: &[u16], r1: &[u16], out: &mut [u16]) -> usize {
    use safe_arch::{
        add_i32_m128i, bitxor_m128i, load_unaligned_m128i, mul_i16_horizontal_add_m128i,
        pack_i32_to_i16_m128i, set_splat_i16_m128i, set_splat_i32_m128i, shr_imm_i32_m128i,
        store_unaligned_m128i,
    };
    // Flipping the sign bit maps u16 `v` to i16 `v - 32768`, so `madd` with ones gives
    // each horizontal pair's sum minus 65536 in an i32 lane. With both rows that is
    // `s - 131072`, and `(s - 131072 + 2) >> 2` (arithmetic) is the rounded mean minus
    // 32768: already in i16 range for the signed-saturating pack; flipping the sign bit
    // back gives the u16.
    let flip = set_splat_i16_m128i(i16::MIN);
    let ones = set_splat_i16_m128i(1);
    let two = set_splat_i32_m128i(2);
    let (a, _) = bytemuck::cast_slice::<u16, u8>(r0).as_chunks::<16>();
    let (b, _) = bytemuck::cast_slice::<u16, u8>(r1).as_chunks::<16>();
    let (o, _) = bytemuck::cast_slice_mut::<u16, u8>(out).as_chunks_mut::<16>();
    let pairs = a.chunks_exact(2).zip(b.chunks_exact(2));
    let mut n = 0;
    for ((a, b), o) in pairs.zip(o) {
        let pair_sums = |x: &[u8; 16]| {
            mul_i16_horizontal_add_m128i(bitxor_m128i(load_unaligned_m128i(x), flip), ones)
        };
        let half = |x: &[u8; 16], y: &[u8; 16]| {
            shr_imm_i32_m128i::<2>(add_i32_m128i(
                add_i32_m128i(pair_sums(x), pair_sums(y)),
                two,
            ))
        };
        let packed = pack_i32_to_i16_m128i(half(&a[0], &b[0]), half(&a[1], &b[1]));
        store_unaligned_m128i(o, bitxor_m128i(packed, flip));
        n += 8;
    }
    n
}

#[cfg(not(target_arch = "x86_64"))]
fn mean4_u16_sse2(_r0: &[u16], _r1: &[u16], _out: &mut [u16]) -> usize {
    0
}

impl Px for f32 {
    #[inline(always)]
    fn mean4(a: Self, b: Self, c: Self, d: Self) -> Self {
        ((a as f64 + b as f64 + c as f64 + d as f64) / 4.0) as f32
    }
    #[inline(always)]
    fn mean2(a: Self, b: Self) -> Self {
        ((a as f64 + b as f64) / 2.0) as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_mean(m: f64) -> Self {
        m as f32
    }
}

#[inline(always)]
fn lo<T: PartialOrd>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

#[inline(always)]
fn hi<T: PartialOrd>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

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
                    let (sum, n) = px.fold((0.0, 0.0), |(s, n), v| (s + v.to_f64(), n + 1.0));
                    T::from_mean(sum / n)
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

/// A rectangle of a reduced frame: output rows `rows` and columns `cols`, where output
/// row `rows.start + i` starts at element `i * stride` of the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Region {
    pub rows: std::ops::Range<usize>,
    pub cols: std::ops::Range<usize>,
    pub stride: usize,
}

impl Region {
    /// Output rows `first..first + n` of the whole width of an `h × w` frame's reduction,
    /// in a destination holding just those rows (a band).
    pub(crate) fn band((h, w): (usize, usize), first: usize, n: usize) -> Region {
        let w2 = w.div_ceil(2);
        Region {
            rows: first..(first + n).min(h.div_ceil(2)),
            cols: 0..w2,
            stride: w2,
        }
    }

    /// The part of the reduction that input rows `y` and columns `x` of an `h × w`
    /// frame reduce to, with the stride of the whole reduced frame. Both ranges must
    /// start on even pixels, so that no 2×2 block straddles two regions.
    pub(crate) fn of_input(
        (_, w): (usize, usize),
        y: std::ops::Range<usize>,
        x: std::ops::Range<usize>,
    ) -> Region {
        debug_assert!(y.start.is_multiple_of(2) && x.start.is_multiple_of(2));
        Region {
            rows: y.start / 2..y.end.div_ceil(2),
            cols: x.start / 2..x.end.div_ceil(2),
            stride: w.div_ceil(2),
        }
    }

    /// Byte offset of the region's first pixel in the whole reduced frame.
    pub(crate) fn offset_in_frame(&self, es: usize) -> usize {
        (self.rows.start * self.stride + self.cols.start) * es
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
        DataType::UInt8 => reduce_bytes::<u8>(method, src, hw, region, dst),
        DataType::UInt16 => reduce_bytes::<u16>(method, src, hw, region, dst),
        DataType::Int16 => reduce_bytes::<i16>(method, src, hw, region, dst),
        DataType::UInt32 => reduce_bytes::<u32>(method, src, hw, region, dst),
        DataType::Float32 => reduce_bytes::<f32>(method, src, hw, region, dst),
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
        DataType::UInt8 => reduce_pair_bytes::<u8>(method, planes, hw, region, dst),
        DataType::UInt16 => reduce_pair_bytes::<u16>(method, planes, hw, region, dst),
        DataType::Int16 => reduce_pair_bytes::<i16>(method, planes, hw, region, dst),
        DataType::UInt32 => reduce_pair_bytes::<u32>(method, planes, hw, region, dst),
        DataType::Float32 => reduce_pair_bytes::<f32>(method, planes, hw, region, dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(method: Downsample, src: &[i64], h: usize, w: usize) -> Vec<i64> {
        let mut out = Vec::new();
        for i in 0..h.div_ceil(2) {
            for j in 0..w.div_ceil(2) {
                let mut v = Vec::new();
                for y in 2 * i..(2 * i + 2).min(h) {
                    for x in 2 * j..(2 * j + 2).min(w) {
                        v.push(src[y * w + x]);
                    }
                }
                let n = v.len() as i64;
                out.push(match method {
                    Downsample::Decimate => v[0],
                    Downsample::Min => *v.iter().min().unwrap(),
                    Downsample::Max => *v.iter().max().unwrap(),
                    Downsample::Mean => (2 * v.iter().sum::<i64>() + n).div_euclid(2 * n),
                });
            }
        }
        out
    }

    const METHODS: [Downsample; 4] = [
        Downsample::Mean,
        Downsample::Decimate,
        Downsample::Min,
        Downsample::Max,
    ];

    /// Reduces `vals` (`T` widened to i64 for the comparison) whole and in bands of
    /// `band` output rows, and checks both against [`naive`].
    fn check<T: bytemuck::Pod + Into<i64>>(dtype: DataType, vals: &[T], h: usize, w: usize) {
        let wide: Vec<i64> = vals.iter().map(|&v| v.into()).collect();
        let size = std::mem::size_of::<T>();
        let row = w.div_ceil(2) * size;
        for m in METHODS {
            let want = naive(m, &wide, h, w);
            let src: &[u8] = bytemuck::cast_slice(vals);
            let widen = |d: &[u8]| -> Vec<i64> {
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

    /// Two z planes reduced together against the 2×2×2 definition, odd sizes included,
    /// and a plane without a partner against the 2×2 one.
    #[test]
    fn z_pairs_match_a_naive_reduction() {
        for (h, w) in [(1usize, 1usize), (3, 5), (4, 4), (5, 2)] {
            let plane = |seed: usize| -> Vec<i16> {
                (0..h * w)
                    .map(|i| ((i * 7919 + seed * 104729) % 2001) as i16 - 1000)
                    .collect()
            };
            let (a, b) = (plane(1), plane(2));
            // The pixels of block (i, j) that exist, plane a first.
            let block = |i: usize, j: usize| -> Vec<i64> {
                let mut v = Vec::new();
                for p in [&a, &b] {
                    for y in 2 * i..(2 * i + 2).min(h) {
                        for x in 2 * j..(2 * j + 2).min(w) {
                            v.push(p[y * w + x].into());
                        }
                    }
                }
                v
            };
            for m in METHODS {
                let mut want = Vec::new();
                for i in 0..h.div_ceil(2) {
                    for j in 0..w.div_ceil(2) {
                        let v = block(i, j);
                        let n = v.len() as i64;
                        want.push(match m {
                            Downsample::Decimate => a[2 * i * w + 2 * j].into(),
                            Downsample::Min => *v.iter().min().unwrap(),
                            Downsample::Max => *v.iter().max().unwrap(),
                            Downsample::Mean => (2 * v.iter().sum::<i64>() + n).div_euclid(2 * n),
                        });
                    }
                }
                let mut dst = vec![0u8; h.div_ceil(2) * w.div_ceil(2) * 2];
                let region = Region::band((h, w), 0, h.div_ceil(2));
                let planes = (bytemuck::cast_slice(&a), bytemuck::cast_slice(&b));
                reduce_pair(DataType::Int16, m, planes, (h, w), &region, &mut dst);
                let got: Vec<i64> = copy_to_vec::<i16>(&dst)
                    .into_iter()
                    .map(i64::from)
                    .collect();
                assert_eq!(got, want, "{m:?} {h}x{w}");
            }
        }
    }

    #[test]
    fn level_specs_cap_chunks_and_shards() {
        let s = ArraySpec::builder()
            .shape([0, 1000, 300])
            .chunk_shape([1, 256, 256])
            .shard_shape([4, 512, 512])
            .build()
            .unwrap();
        let l1 = next_level_spec(&s, None).unwrap();
        assert_eq!(l1.shape(), [0, 500, 150]);
        assert_eq!(l1.chunk_shape(), [1, 256, 150]);
        assert_eq!(l1.shard_shape(), [4, 512, 150]);
        assert_eq!(l1.frame_bytes(), 500 * 150 * 2);
        assert_eq!(level_count(&s, Levels::Auto).unwrap(), 3);
        assert!(level_count(&s, Levels::Count(0)).is_err());
    }
}
