//! Display windows estimated from the frames recorded: a bounded sample of each
//! channel's pixel values and its robust low and high quantiles.
//!
//! The sample is taken on the encoding workers, a few thousand pixels of a frame (or
//! staging group) at most every [`DISPLAY_SAMPLE_INTERVAL`] per channel, while the
//! frame's bytes are still in the cache; the quantiles are computed when the writer
//! republishes the image's `zarr.json`. A full histogram per channel (65,536 bins for
//! `u16`) would be exact but would cost a pass over every pixel on the hot path, and
//! would not serve floating-point data; quantiles of a uniform sample are within a
//! fraction of a percent of the true ones, which is all a display window needs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::dtype::DataType;

/// The quantile of a channel's sampled values that becomes its window's `start`.
pub const DISPLAY_LOW_QUANTILE: f64 = 0.001;
/// The quantile that becomes its window's `end`: the brightest 0.1 % (hot pixels,
/// cosmic rays) saturate rather than darken everything else.
pub const DISPLAY_HIGH_QUANTILE: f64 = 0.999;
/// How often, at most, a channel's frames are sampled (the first frame of each channel
/// a worker finishes always is; with several workers that need not be frame 0).
pub const DISPLAY_SAMPLE_INTERVAL: Duration = Duration::from_millis(20);

/// Pixels read from one sampled frame or staging group.
pub(crate) const SAMPLES_PER_BATCH: usize = 4096;
/// Values kept per channel: when full, every other one is dropped, so the sample stays
/// spread over the whole recording (with the recent frames weighing somewhat more).
const CAPACITY: usize = 16 * 1024;

/// The golden ratio's fractional part: the step of the Weyl sequence that picks the
/// pixels of a sample, spread over the frame without lining up with its rows or tiles.
const WEYL_STEP: f64 = 0.618_033_988_749_894_9;

/// Each channel's sampled values, for the channels whose window follows the data.
#[derive(Debug)]
pub(crate) struct DisplayEstimate {
    dtype: DataType,
    channels: Box<[Channel]>,
    epoch: Instant,
    /// Bumped by every sample taken: the publisher recomputes only after a change.
    changes: AtomicU64,
    /// Where the next sample's Weyl sequence starts (`f64` bits), so successive
    /// samples of the same frame layout read different pixels.
    phase: AtomicU64,
}

#[derive(Debug)]
struct Channel {
    /// `false`: the user gave this channel's window; nothing is sampled.
    from_data: bool,
    /// When (nanoseconds after `epoch`) the channel's next frame is due for sampling.
    due: AtomicU64,
    sample: Mutex<Sample>,
}

#[derive(Debug, Default)]
struct Sample {
    values: Vec<f32>,
}

impl DisplayEstimate {
    /// An estimate for data of `dtype` whose channel `i` is sampled when `from_data[i]`.
    pub(crate) fn new(dtype: DataType, from_data: &[bool]) -> Self {
        DisplayEstimate {
            dtype,
            channels: from_data
                .iter()
                .map(|&from_data| Channel {
                    from_data,
                    due: AtomicU64::new(0),
                    sample: Mutex::new(Sample::default()),
                })
                .collect(),
            epoch: Instant::now(),
            changes: AtomicU64::new(0),
            phase: AtomicU64::new(0),
        }
    }

    /// Whether a frame of `channel` completed at `now` is to be sampled; at most one
    /// caller per [`DISPLAY_SAMPLE_INTERVAL`] and channel is told yes.
    pub(crate) fn claim(&self, channel: usize, now: Instant) -> bool {
        let Some(c) = self.channels.get(channel).filter(|c| c.from_data) else {
            return false;
        };
        let now =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let due = c.due.load(Ordering::Relaxed);
        let next = now.saturating_add(DISPLAY_SAMPLE_INTERVAL.as_nanos() as u64);
        now >= due
            && c.due
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Samples up to [`SAMPLES_PER_BATCH`] of the `n` elements of `bytes` (values of the
    /// estimate's data type): `pick(i)` is `Some(channel)` for an element that is a pixel
    /// of a recorded frame, `None` for padding or a frame that never arrived.
    pub(crate) fn sample(&self, bytes: &[u8], n: usize, pick: impl Fn(usize) -> Option<usize>) {
        let es = self.dtype.size();
        let n = n.min(bytes.len() / es);
        if n == 0 {
            return;
        }
        let mut taken: Vec<(usize, f32)> = Vec::with_capacity(SAMPLES_PER_BATCH);
        // Two workers sampling at once may start from the same phase: harmless.
        let mut u = f64::from_bits(self.phase.load(Ordering::Relaxed));
        for _ in 0..SAMPLES_PER_BATCH.min(n) {
            u = (u + WEYL_STEP).fract();
            let i = ((u * n as f64) as usize).min(n - 1);
            let Some(ch) = pick(i) else { continue };
            let v = self.dtype.value_f64(&bytes[i * es..(i + 1) * es]);
            if v.is_finite() && self.channels.get(ch).is_some_and(|c| c.from_data) {
                taken.push((ch, v as f32));
            }
        }
        self.phase.store(u.to_bits(), Ordering::Relaxed);
        taken.sort_unstable_by_key(|&(ch, _)| ch);
        for group in taken.chunk_by(|a, b| a.0 == b.0) {
            let mut s = lock(&self.channels[group[0].0].sample);
            for &(_, v) in group {
                if s.values.len() == CAPACITY {
                    thin(&mut s.values);
                }
                s.values.push(v);
            }
        }
        if !taken.is_empty() {
            self.changes.fetch_add(1, Ordering::Release);
        }
    }

    /// How many samples have been taken so far (a change count, not a pixel count).
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Each channel's `(start, end)` from its samples so far: `None` for a channel whose
    /// window was given, or that has no sample yet.
    pub(crate) fn windows(&self) -> Vec<Option<(f64, f64)>> {
        self.channels
            .iter()
            .map(|c| {
                if !c.from_data {
                    return None;
                }
                let mut values = lock(&c.sample).values.clone();
                window_of(&mut values, self.dtype)
            })
            .collect()
    }
}

fn lock(m: &Mutex<Sample>) -> std::sync::MutexGuard<'_, Sample> {
    // A sample left half-updated by a panic is still a sample.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keeps every other value.
fn thin(values: &mut Vec<f32>) {
    let mut k = 0;
    values.retain(|_| {
        k += 1;
        k % 2 == 1
    });
}

/// The [`DISPLAY_LOW_QUANTILE`] and [`DISPLAY_HIGH_QUANTILE`] of `values` (reordered),
/// widened to at least one step of an integer type so the window is never empty.
fn window_of(values: &mut [f32], dtype: DataType) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let last = values.len() - 1;
    let at = |q: f64| ((q * last as f64).round() as usize).min(last);
    let (lo_i, hi_i) = (at(DISPLAY_LOW_QUANTILE), at(DISPLAY_HIGH_QUANTILE));
    let by = |a: &f32, b: &f32| a.total_cmp(b);
    let lo = f64::from(*values.select_nth_unstable_by(lo_i, by).1);
    let hi = f64::from(*values.select_nth_unstable_by(hi_i, by).1);
    if hi > lo {
        return Some((lo, hi));
    }
    // A flat channel (all one value): a window of one step around it.
    Some(if dtype.is_float() {
        (lo - 0.5, lo + 0.5)
    } else {
        (lo, lo + 1.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u16_bytes(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A 256 × 256 frame: background 100..=109, a bright square of 2000 (4 % of it),
    /// and 3 hot pixels at 60000.
    fn pattern() -> Vec<u16> {
        let mut f: Vec<u16> = (0..256 * 256).map(|i| 100 + (i * 7 % 10) as u16).collect();
        for y in 100..151 {
            for x in 100..151 {
                f[y * 256 + x] = 2000;
            }
        }
        for i in [5, 40_000, 65_000] {
            f[i] = 60_000;
        }
        f
    }

    #[test]
    fn the_window_spans_background_to_feature_and_ignores_hot_pixels() {
        let e = DisplayEstimate::new(DataType::UInt16, &[true]);
        let f = u16_bytes(&pattern());
        for _ in 0..8 {
            e.sample(&f, 256 * 256, |_| Some(0));
        }
        let (start, end) = e.windows()[0].expect("sampled");
        assert!((100.0..=101.0).contains(&start), "start {start}");
        assert_eq!(end, 2000.0);
    }

    #[test]
    fn samples_go_to_the_channel_picked_and_given_windows_are_not_sampled() {
        let e = DisplayEstimate::new(DataType::UInt16, &[true, false, true]);
        // Element i belongs to channel i % 3; channel 0 reads 10, channel 2 reads 30.
        let v: Vec<u16> = (0..30_000).map(|i| [10, 20, 30][i % 3]).collect();
        e.sample(&u16_bytes(&v), v.len(), |i| Some(i % 3));
        let w = e.windows();
        assert_eq!(w[0], Some((10.0, 11.0)));
        assert_eq!(w[1], None);
        assert_eq!(w[2], Some((30.0, 31.0)));
        // Elements `pick` refuses (padding, missing frames) are never read.
        let e = DisplayEstimate::new(DataType::UInt16, &[true]);
        e.sample(&u16_bytes(&v), v.len(), |i| (v[i] == 20).then_some(0));
        assert_eq!(e.windows()[0], Some((20.0, 21.0)));
    }

    #[test]
    fn a_channel_is_claimed_once_per_interval() {
        let e = DisplayEstimate::new(DataType::UInt8, &[true, false]);
        let t = Instant::now();
        assert!(e.claim(0, t));
        assert!(!e.claim(0, t));
        assert!(!e.claim(1, t), "a given window is never sampled");
        assert!(e.claim(0, t + DISPLAY_SAMPLE_INTERVAL * 2));
        assert!(!e.claim(7, t), "no such channel");
    }

    #[test]
    fn the_sample_stays_bounded_and_follows_new_data() {
        let e = DisplayEstimate::new(DataType::Float32, &[true]);
        let low: Vec<u8> = (0..100_000)
            .flat_map(|i| (i as f32).to_le_bytes())
            .collect();
        for _ in 0..20 {
            e.sample(&low, 100_000, |_| Some(0));
        }
        assert!(lock(&e.channels[0].sample).values.len() <= CAPACITY);
        let (start, end) = e.windows()[0].unwrap();
        assert!(start < 1000.0 && end > 99_000.0, "{start}..{end}");
        let nan: Vec<u8> = (0..1000).flat_map(|_| f32::NAN.to_le_bytes()).collect();
        let before = e.changes();
        e.sample(&nan, 1000, |_| Some(0));
        assert_eq!(e.changes(), before, "NaN is not a value to display");
    }
}
