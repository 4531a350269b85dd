//! A synthetic sCMOS-like camera: a Rust port of the model in `peers/make_frames.py`,
//! shared by `zarrstream record`, the `record` example, the benchmarks and the tests, so
//! that all of them push (and check) the same frames.
//!
//! Expected photoelectrons = a smooth background (7-15 e-, weak vignetting) plus a few
//! hundred gaussian blobs (log-uniform peak 20..3000 e-, sigma 1.5-8 px) that drift with a
//! random-walk velocity and flicker by +-10 %. Counts = expected + variance-matched
//! gaussian noise (sd = sqrt(expected + read_noise^2), i.e. shot noise + read noise in one
//! draw) + the camera offset, rounded half to even and clipped to the data type.
//!
//! Data types other than `u16` see the same model:
//! - `i16`, `u32`: the same counts as `u16` (offset 90), clipped to the type's range;
//! - `u8`: an 8-bit readout, gain 0.25 counts/e- and offset 10 (bright blobs saturate);
//! - `f32`: offset-subtracted photoelectrons, unrounded (so slightly negative values occur).
//!
//! Everything is deterministic in the seed: blob tracks come from one sequential stream,
//! and each frame's noise from its own stream, so the result does not depend on how many
//! threads render.

use rayon::prelude::*;
use zarrstream::DataType;

use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// The seed `zarrstream record` uses unless told otherwise (`--seed`).
pub const DEFAULT_SEED: u64 = 20240611;

/// Largest total size of the distinct frames [`Camera::pool`] renders: a longer recording
/// cycles through them, so memory stays bounded whatever the frame count.
pub const POOL_BYTES: u64 = 1 << 30;

/// Camera offset (counts).
pub const OFFSET: f32 = 90.0;
/// Gaussian read noise (counts rms).
pub const READ_NOISE: f32 = 1.5;

/// The parameters of the synthetic camera.
#[derive(Debug, Clone, Copy)]
pub struct Camera {
    /// Frame height (y) in pixels.
    pub height: usize,
    /// Frame width (x) in pixels.
    pub width: usize,
    /// Number of gaussian blobs.
    pub blobs: usize,
    /// Seed of every random stream: the same seed renders the same frames.
    pub seed: u64,
    /// Element type of the rendered frames.
    pub dtype: DataType,
}

/// The reference's 400 blobs per 2048 x 2048 frame, scaled with the frame area so that
/// smaller or larger frames look (and compress) alike; at least one.
pub fn default_blobs(height: usize, width: usize) -> usize {
    let area = height as f64 * width as f64;
    ((400.0 * area / (2048.0 * 2048.0)).round() as usize).max(1)
}

/// SplitMix64: small, fast, and good enough for synthetic data.
struct Rng(u64);

impl Rng {
    /// A generator for the stream named by `parts` (e.g. `[seed, 1, frame]`).
    fn seeded(parts: &[u64]) -> Self {
        let mut s = 0x243F_6A88_85A3_08D3u64;
        for &p in parts {
            s = mix(s ^ mix(p));
        }
        Rng(s)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn uniform_in(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Standard normal (Marsaglia's polar method, double precision).
    fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.uniform() - 1.0;
            let v = 2.0 * self.uniform() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// Two independent standard normals in single precision (polar method, one 64-bit
    /// draw per attempt); the hot loop of frame rendering.
    #[inline]
    fn normal_pair_f32(&mut self) -> (f32, f32) {
        const SCALE: f32 = 1.0 / (1u32 << 23) as f32;
        loop {
            let r = self.next_u64();
            // 24 bits each, mapped to [-1, 1).
            let u = (r >> 40) as f32 * SCALE - 1.0;
            let v = ((r >> 8) & 0xFF_FFFF) as f32 * SCALE - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let m = (-2.0 * s.ln() / s).sqrt();
                return (u * m, v * m);
            }
        }
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Blob positions and brightness of one frame.
struct Track {
    pos: Vec<[f32; 2]>,
    amp: Vec<f32>,
}

impl Camera {
    /// The camera `zarrstream record` uses by default for `height` x `width` frames of
    /// `dtype`: [`DEFAULT_SEED`] and [`default_blobs`].
    pub fn new(height: usize, width: usize, dtype: DataType) -> Camera {
        Camera {
            height,
            width,
            blobs: default_blobs(height, width),
            seed: DEFAULT_SEED,
            dtype,
        }
    }

    /// Bytes of one frame.
    pub fn frame_bytes(&self) -> usize {
        self.height * self.width * self.dtype.size()
    }

    /// Renders `n` distinct frames in parallel, each as little-endian bytes of the
    /// camera's data type.
    pub fn render(&self, n: usize) -> Vec<Vec<u8>> {
        self.render_at(&(0..n as u64).collect::<Vec<_>>())
    }

    /// Renders the frames with these indices in the camera's sequence (each as
    /// `render` would render it, in the order given), in parallel.
    pub fn render_at(&self, frames: &[u64]) -> Vec<Vec<u8>> {
        let (sigma, tracks) = self.tracks(frames);
        let background = self.background();
        let pixels = self.height * self.width;
        tracks
            .par_iter()
            .zip(frames)
            .map_init(
                || vec![0f32; pixels],
                |scratch, (track, &t)| self.render_frame(t, track, &sigma, &background, scratch),
            )
            .collect()
    }

    /// Blob positions and brightness of the frames with these indices (cheap;
    /// sequential, like the reference: the walk runs up to the last frame asked for).
    fn tracks(&self, frames: &[u64]) -> (Vec<f32>, Vec<Track>) {
        let (h, w) = (self.height as f64, self.width as f64);
        let mut rng = Rng::seeded(&[self.seed, 0]);
        let b = self.blobs;
        let mut pos: Vec<[f32; 2]> = (0..b).map(|_| [0.0; 2]).collect();
        for p in pos.iter_mut() {
            p[0] = rng.uniform_in(0.0, h) as f32;
        }
        for p in pos.iter_mut() {
            p[1] = rng.uniform_in(0.0, w) as f32;
        }
        let sigma: Vec<f32> = (0..b).map(|_| rng.uniform_in(1.5, 8.0) as f32).collect();
        // Log-uniform brightness (photoelectrons at the peak): many dim, few bright.
        let (lo, hi) = (20f64.ln(), 3000f64.ln());
        let amp: Vec<f32> = (0..b)
            .map(|_| rng.uniform_in(lo, hi).exp() as f32)
            .collect();
        let mut vel: Vec<[f32; 2]> = (0..b)
            .map(|_| [0.3 * rng.normal() as f32, 0.3 * rng.normal() as f32])
            .collect();
        // Where each frame asked for goes, in the order of the walk.
        let mut order: Vec<usize> = (0..frames.len()).collect();
        order.sort_by_key(|&i| frames[i]);
        let mut next = order.iter().peekable();
        let mut tracks: Vec<Option<Track>> = (0..frames.len()).map(|_| None).collect();
        let steps = frames.iter().max().map_or(0, |&m| m + 1);
        let mut flicker = vec![0f32; b];
        for t in 0..steps {
            for (f, a) in flicker.iter_mut().zip(&amp) {
                *f = a * rng.uniform_in(0.9, 1.1) as f32;
            }
            while let Some(&&i) = next.peek()
                && frames[i] == t
            {
                tracks[i] = Some(Track {
                    pos: pos.clone(),
                    amp: flicker.clone(),
                });
                next.next();
            }
            // Slow drift: random-walk velocity, wrapping around the field of view.
            for (p, v) in pos.iter_mut().zip(vel.iter_mut()) {
                v[0] += 0.05 * rng.normal() as f32;
                v[1] += 0.05 * rng.normal() as f32;
                p[0] = wrap(p[0] + v[0], self.height as f32);
                p[1] = wrap(p[1] + v[1], self.width as f32);
            }
        }
        (sigma, tracks.into_iter().flatten().collect())
    }

    /// Smooth background in photoelectrons: weak illumination fall-off, 7 to 15 e-.
    fn background(&self) -> Vec<f32> {
        let lin = |n: usize| -> Vec<f32> {
            let step = if n > 1 { 2.0 / (n - 1) as f32 } else { 0.0 };
            (0..n).map(|i| -1.0 + step * i as f32).collect()
        };
        let (ys, xs) = (lin(self.height), lin(self.width));
        let mut bg = Vec::with_capacity(self.height * self.width);
        for y in &ys {
            for x in &xs {
                bg.push(7.0 + 8.0 * (-(y * y + x * x) / 1.5).exp());
            }
        }
        bg
    }

    fn render_frame(
        &self,
        t: u64,
        track: &Track,
        sigma: &[f32],
        bg: &[f32],
        img: &mut [f32],
    ) -> Vec<u8> {
        let (h, w) = (self.height, self.width);
        img.copy_from_slice(bg);
        let mut gy = Vec::new();
        let mut gx = Vec::new();
        for ((&[y, x], &s), &a) in track.pos.iter().zip(sigma).zip(&track.amp) {
            // The gaussian is separable: a * exp(-dy^2 / 2s^2) * exp(-dx^2 / 2s^2).
            let r = (4.0 * s).ceil() as i64;
            let (yi, xi) = (y as i64, x as i64);
            let (y0, y1) = ((yi - r).max(0), (yi + r + 1).min(h as i64));
            let (x0, x1) = ((xi - r).max(0), (xi + r + 1).min(w as i64));
            if y0 >= y1 || x0 >= x1 {
                continue;
            }
            let k = 1.0 / (2.0 * s * s);
            gy.clear();
            gy.extend((y0..y1).map(|j| a * (-(j as f32 - y).powi(2) * k).exp()));
            gx.clear();
            gx.extend((x0..x1).map(|i| (-(i as f32 - x).powi(2) * k).exp()));
            for (j, gyj) in (y0 as usize..y1 as usize).zip(&gy) {
                let row = &mut img[j * w + x0 as usize..j * w + x1 as usize];
                for (p, gxi) in row.iter_mut().zip(&gx) {
                    *p += gyj * gxi;
                }
            }
        }
        // An independent, deterministic noise stream per frame.
        let mut rng = Rng::seeded(&[self.seed, 1, t]);
        let rn2 = READ_NOISE * READ_NOISE;
        let mut pairs = img.chunks_exact_mut(2);
        for p in pairs.by_ref() {
            let (z0, z1) = rng.normal_pair_f32();
            p[0] += z0 * (p[0] + rn2).sqrt();
            p[1] += z1 * (p[1] + rn2).sqrt();
        }
        for p in pairs.into_remainder() {
            *p += rng.normal_pair_f32().0 * (*p + rn2).sqrt();
        }
        encode(self.dtype, img)
    }
}

impl Camera {
    /// How many distinct frames a pool holds: as many as fit in [`POOL_BYTES`], at least
    /// one.
    pub fn pool_period(&self) -> u64 {
        (POOL_BYTES / self.frame_bytes().max(1) as u64).max(1)
    }

    /// The distinct frames a recording of `frames` frames that starts at the camera's
    /// frame `first` cycles through: pushed frame `k` is `pool[k % pool.len()]`.
    ///
    /// The camera's frame `g` is its frame `g % P` ([`pool_period`](Self::pool_period)),
    /// so a recording resumed after `first` frames continues an uninterrupted one
    /// exactly.
    pub fn pool(&self, frames: u64, first: u64) -> Vec<Vec<u8>> {
        let period = self.pool_period();
        let distinct = frames.clamp(1, period);
        if first == 0 {
            return self.render(distinct as usize);
        }
        let at: Vec<u64> = (0..distinct)
            .map(|j| (first % period + j) % period)
            .collect();
        self.render_at(&at)
    }
}

/// Writes `frames` frames cycling through `pool` (what a recording pushes) as headerless
/// little-endian raw bytes, frame-major, and returns the bytes written. It goes through
/// `PATH.partial`, synced and renamed into place, so an interrupted run never leaves a
/// short file that a later `--input` would take for whole.
pub fn save_frames(path: &Path, pool: &[Vec<u8>], frames: u64) -> io::Result<u64> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let named = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{what}: {e}"));
    let what = format!("write frames to {}", tmp.display());
    let file = File::create(&tmp).map_err(|e| named(e, &what))?;
    let mut out = io::BufWriter::with_capacity(1 << 22, file);
    let mut bytes = 0u64;
    if !pool.is_empty() {
        for k in 0..frames {
            let frame = &pool[(k % pool.len() as u64) as usize];
            out.write_all(frame).map_err(|e| named(e, &what))?;
            bytes += frame.len() as u64;
        }
    }
    let file = out.into_inner().map_err(|e| named(e.into_error(), &what))?;
    file.sync_all().map_err(|e| named(e, &what))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let what = format!("rename {} to {}", tmp.display(), path.display());
        named(e, &what)
    })?;
    Ok(bytes)
}

/// `v` wrapped into [0, n).
fn wrap(v: f32, n: f32) -> f32 {
    let r = v.rem_euclid(n);
    if r >= n { 0.0 } else { r }
}

/// Offset-subtracted counts (photoelectrons plus noise) to little-endian bytes of `dtype`.
fn encode(dtype: DataType, counts: &[f32]) -> Vec<u8> {
    let q = |c: f32, gain: f32, offset: f32, lo: f32, hi: f32| {
        (c * gain + offset).round_ties_even().clamp(lo, hi)
    };
    let mut out = Vec::with_capacity(counts.len() * dtype.size());
    // Each type's sensor model: the gain and offset a camera of that depth would use,
    // clamped to the type. f32 holds every value these produce exactly, so the casts of
    // the wider integers are exact.
    let ints = |out: &mut Vec<u8>,
                gain: f32,
                offset: f32,
                lo: f32,
                hi: f32,
                put: &dyn Fn(&mut Vec<u8>, f32)| {
        for &c in counts {
            put(out, q(c, gain, offset, lo, hi));
        }
    };
    match dtype {
        DataType::Int8 => ints(&mut out, 0.25, -100.0, -128.0, 127.0, &|o, v| {
            o.push(v as i8 as u8)
        }),
        DataType::UInt8 => ints(&mut out, 0.25, 10.0, 0.0, 255.0, &|o, v| o.push(v as u8)),
        DataType::Int16 => ints(&mut out, 1.0, OFFSET, -32768.0, 32767.0, &|o, v| {
            o.extend_from_slice(&(v as i16).to_le_bytes())
        }),
        DataType::UInt16 => ints(&mut out, 1.0, OFFSET, 0.0, 65535.0, &|o, v| {
            o.extend_from_slice(&(v as u16).to_le_bytes())
        }),
        // `as` saturates, so values beyond what f32 rounds to the type's maximum are safe.
        DataType::Int32 => ints(
            &mut out,
            16.0,
            -OFFSET,
            i32::MIN as f32,
            i32::MAX as f32,
            &|o, v| o.extend_from_slice(&(v as i32).to_le_bytes()),
        ),
        DataType::UInt32 => ints(&mut out, 1.0, OFFSET, 0.0, u32::MAX as f32, &|o, v| {
            o.extend_from_slice(&(v as u32).to_le_bytes())
        }),
        DataType::Int64 => ints(
            &mut out,
            256.0,
            -OFFSET,
            i64::MIN as f32,
            i64::MAX as f32,
            &|o, v| o.extend_from_slice(&(v as i64).to_le_bytes()),
        ),
        DataType::UInt64 => ints(&mut out, 256.0, OFFSET, 0.0, u64::MAX as f32, &|o, v| {
            o.extend_from_slice(&(v as u64).to_le_bytes())
        }),
        DataType::Float32 => {
            for &c in counts {
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
        DataType::Float64 => {
            for &c in counts {
                out.extend_from_slice(&f64::from(c).to_le_bytes());
            }
        }
        // A data type this simulator has no sensor model for: dark frames.
        _ => out.resize(counts.len() * dtype.size(), 0),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cam(dtype: DataType) -> Camera {
        Camera {
            height: 96,
            width: 80,
            blobs: 20,
            seed: 7,
            dtype,
        }
    }

    fn pixels(frame: &[u8]) -> Vec<u16> {
        frame
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    }

    #[test]
    fn rendering_is_deterministic_and_plausible() {
        let a = cam(DataType::UInt16).render(3);
        let b = cam(DataType::UInt16).render(3);
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
        // Blobs reach far above the background.
        assert!(pixels(&a[0]).iter().any(|&p| p > 300));
        // Without blobs: offset 90 + 7..15 e- of background, noise sd about 3.5.
        let bg = Camera {
            blobs: 0,
            ..cam(DataType::UInt16)
        }
        .render(1);
        let mut px = pixels(&bg[0]);
        px.sort_unstable();
        let (lo, median, hi) = (
            px[px.len() / 100],
            px[px.len() / 2],
            px[px.len() * 99 / 100],
        );
        assert!((98..=106).contains(&median), "median {median}");
        assert!(lo >= 85 && hi <= 120, "1% {lo}, 99% {hi}");
    }

    #[test]
    fn frames_render_alike_wherever_they_start() {
        let c = cam(DataType::UInt16);
        let all = c.render(7);
        assert_eq!(c.render_at(&[4, 5, 6]), all[4..]);
        assert_eq!(c.render_at(&[6, 2]), [all[6].clone(), all[2].clone()]);
        assert!(c.render_at(&[]).is_empty());
    }

    #[test]
    fn a_pool_resumed_later_continues_the_sequence() {
        let c = cam(DataType::UInt16);
        let all = c.pool(7, 0);
        assert_eq!(all.len(), 7);
        assert_eq!(c.pool(3, 4), all[4..]);
        assert_eq!(c.pool(0, 0).len(), 1, "one frame keeps a push loop uniform");
    }

    #[test]
    fn saved_frames_cycle_through_the_pool() {
        let dir = std::env::temp_dir().join(format!("zarrstream-camera-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("frames.raw");
        let pool = cam(DataType::UInt8).render(2);
        let bytes = save_frames(&path, &pool, 5).unwrap();
        let saved = std::fs::read(&path).unwrap();
        assert_eq!(saved.len() as u64, bytes);
        assert_eq!(
            saved,
            [&pool[0][..], &pool[1], &pool[0], &pool[1], &pool[0]].concat()
        );
        assert!(!dir.join("frames.raw.partial").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn normals_have_unit_variance() {
        let mut rng = Rng::seeded(&[1]);
        let n = 200_000;
        let (mut s, mut s2) = (0f64, 0f64);
        for _ in 0..n / 2 {
            let (a, b) = rng.normal_pair_f32();
            for z in [a as f64, b as f64] {
                s += z;
                s2 += z * z;
            }
        }
        let mean = s / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.01,
            "{mean} {var}"
        );
    }

    #[test]
    fn every_dtype_has_the_right_size_and_is_not_dark() {
        for d in DataType::ALL {
            let f = cam(d).render(1);
            assert_eq!(f[0].len(), 96 * 80 * d.size());
            let values = f[0]
                .chunks(d.size())
                .collect::<std::collections::HashSet<_>>();
            assert!(values.len() > 10, "{d}: {} distinct values", values.len());
        }
    }
}
