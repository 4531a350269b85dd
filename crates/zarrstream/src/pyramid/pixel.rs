//! Pixel types a frame can be reduced in, with their block arithmetic.

/// Pixel types a frame can be reduced in.
pub(super) trait Px: bytemuck::Pod + PartialOrd {
    fn mean4(a: Self, b: Self, c: Self, d: Self) -> Self;
    fn mean2(a: Self, b: Self) -> Self;

    /// Writes the 2×2 means of a prefix of `out` from rows `r0` and `r1` with SIMD and
    /// returns how many it wrote (the scalar loop does the rest).
    fn mean4_simd(_r0: &[Self], _r1: &[Self], _out: &mut [Self]) -> usize {
        0
    }

    /// The mean of `px` (1 to 8 pixels), rounded as [`mean4`](Px::mean4) rounds: the
    /// z reduction's 2×2×2 blocks, which are fewer at the array's edges.
    fn mean_of(px: &[Self]) -> Self;
}

/// Integer means round half up: `>>` and `div_euclid` floor (also for negative sums), so
/// `floor((s + n/2) / n)`. The accumulator is wide enough for 8 pixels of the type
/// (`i128` for the 64-bit types), so no mean overflows.
macro_rules! int_px {
    ($($t:ty => $acc:ty),*) => {$(
        impl Px for $t {
            #[inline(always)]
            fn mean4(a: Self, b: Self, c: Self, d: Self) -> Self {
                ((a as $acc + b as $acc + c as $acc + d as $acc + 2) >> 2) as $t
            }
            #[inline(always)]
            fn mean2(a: Self, b: Self) -> Self {
                ((a as $acc + b as $acc + 1) >> 1) as $t
            }
            fn mean_of(px: &[Self]) -> Self {
                let n = px.len().max(1) as i128;
                let s: i128 = px.iter().map(|&v| v as i128).sum();
                (s + n / 2).div_euclid(n) as $t
            }
        }
    )*};
}
int_px!(i8 => i32, u8 => u32, i16 => i32, i32 => i64, u32 => u64, i64 => i128, u64 => u128);

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
    fn mean_of(px: &[Self]) -> Self {
        let n = px.len().max(1) as u32;
        let s: u32 = px.iter().map(|&v| u32::from(v)).sum();
        ((s + n / 2) / n) as u16
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
    fn mean_of(px: &[Self]) -> Self {
        let s: f64 = px.iter().map(|&v| f64::from(v)).sum();
        (s / px.len().max(1) as f64) as f32
    }
}

/// `float64` has no wider type to sum in: the sum of finite pixels near `f64::MAX`
/// overflows, so then each pixel is divided first (exact for the power-of-two counts
/// of the blocks, short of subnormals) and the means of finite pixels stay finite.
impl Px for f64 {
    #[inline(always)]
    fn mean4(a: Self, b: Self, c: Self, d: Self) -> Self {
        Self::mean_of(&[a, b, c, d])
    }
    #[inline(always)]
    fn mean2(a: Self, b: Self) -> Self {
        Self::mean_of(&[a, b])
    }
    #[inline(always)]
    fn mean_of(px: &[Self]) -> Self {
        let n = px.len().max(1) as f64;
        let s: f64 = px.iter().sum();
        if s.is_finite() || px.iter().any(|v| !v.is_finite()) {
            s / n
        } else {
            px.iter().map(|v| v / n).sum()
        }
    }
}

#[inline(always)]
pub(super) fn lo<T: PartialOrd>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

#[inline(always)]
pub(super) fn hi<T: PartialOrd>(a: T, b: T) -> T {
    if b > a { b } else { a }
}
