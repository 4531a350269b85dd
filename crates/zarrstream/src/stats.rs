//! What a finished acquisition reports.

use std::fmt;

use hdrhistogram::Histogram;

use crate::meter::MemoryUsage;
use crate::sink::SinkKind;

/// Statistics returned by [`Writer::finish`](crate::Writer::finish).
///
/// Always `frames_pushed == frames_written + frames_dropped`. It serialises (serde) to
/// the object the bindings hand out (the C API's `stats_json`, Python's `Stats`): these
/// field names, `sink` as its name, latencies as [`LatencySummary`] objects.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// Frames offered to `push`.
    pub frames_pushed: u64,
    /// Frames accepted and written.
    pub frames_written: u64,
    /// Frames dropped by the `Drop` back-pressure policy.
    pub frames_dropped: u64,
    /// Raw bytes of the written frames.
    pub bytes_in: u64,
    /// Bytes of all shard files as finished.
    pub bytes_stored: u64,
    /// Shard files written.
    pub shards: u64,
    /// Seconds from the first push until `finish` returned.
    pub seconds: f64,
    /// Time spent inside `push`, in nanoseconds.
    pub push_latency_ns: LatencySummary,
    /// From each frame's scheduled (camera) time to all its chunks being in their slots,
    /// in nanoseconds.
    pub frame_latency_ns: LatencySummary,
    /// The sink used.
    #[serde(serialize_with = "sink_name")]
    pub sink: SinkKind,
    /// Bytes of the frame pool.
    pub pool_bytes: usize,
    /// Bytes of staging buffers for chunks deeper than one frame.
    pub staging_bytes: usize,
    /// Bytes held by the writer's own buffers (as
    /// [`Writer::memory_in_use`](crate::Writer::memory_in_use) counts them): `peak`
    /// over the whole run, `current` after `finish` freed them (0 unless something
    /// outlived the writer). In a recording, an array's figure covers its own buffers
    /// (pools, staging, mapped shards, levels); the total's adds the shared workers'.
    pub memory: MemoryUsage,
}

fn sink_name<S: serde::Serializer>(sink: &SinkKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(sink.as_str())
}

/// The distribution of a latency over an acquisition, in nanoseconds.
///
/// Serialises (serde) to `{count, min, mean, max, p50, p90, p99, p999}`.
///
/// Values are recorded with 3 significant digits: a quantile is exact to 0.1 % of its
/// value. With nothing recorded every figure is 0.
///
/// ```no_run
/// # fn run() -> zarrstream::Result<()> {
/// # let writer: zarrstream::Writer = unimplemented!();
/// let stats = writer.finish()?;
/// let push = &stats.push_latency_ns;
/// println!("p99 push {:.3} ms over {} pushes", push.p99 as f64 / 1e6, push.count);
/// println!("p99.99 push {} ns", push.quantile(0.9999));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, serde::Serialize)]
#[non_exhaustive]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// The smallest value.
    pub min: u64,
    /// The mean value.
    pub mean: f64,
    /// The largest value.
    pub max: u64,
    /// The median.
    pub p50: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// The 99th percentile.
    pub p99: u64,
    /// The 99.9th percentile.
    pub p999: u64,
    /// Kept for [`quantile`](Self::quantile); private so that the histogram library is
    /// not part of this crate's API.
    #[serde(skip)]
    histogram: Histogram<u64>,
}

impl LatencySummary {
    pub(crate) fn from_histogram(h: &Histogram<u64>) -> Self {
        LatencySummary {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            max: h.max(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            histogram: h.clone(),
        }
    }

    /// The summary of this one's values and `other`'s together.
    pub(crate) fn merged(&self, other: &LatencySummary) -> LatencySummary {
        let mut h = self.histogram.clone();
        // Both come from `histogram()`, with the same bounds: adding cannot fail.
        let _ = h.add(&other.histogram);
        LatencySummary::from_histogram(&h)
    }

    /// The value at quantile `q` (0..=1; 0.99 is the 99th percentile): the fraction `q`
    /// of the recorded values are at or below it. 0 if nothing was recorded.
    pub fn quantile(&self, q: f64) -> u64 {
        self.histogram.value_at_quantile(q.clamp(0.0, 1.0))
    }
}

impl fmt::Debug for LatencySummary {
    // The histogram's buckets would drown the figures.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencySummary")
            .field("count", &self.count)
            .field("min", &self.min)
            .field("mean", &self.mean)
            .field("max", &self.max)
            .field("p50", &self.p50)
            .field("p90", &self.p90)
            .field("p99", &self.p99)
            .field("p999", &self.p999)
            .finish_non_exhaustive()
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    // Invariant: hdrhistogram accepts 0..=5 significant digits, so 3 cannot fail.
    #[allow(clippy::expect_used)]
    let mut h = Histogram::new(3).expect("3 significant digits are valid");
    h.auto(true);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_the_histogram() {
        let mut h = histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let s = LatencySummary::from_histogram(&h);
        assert_eq!(s.count, 1000);
        assert_eq!(s.p50, h.value_at_quantile(0.5));
        assert_eq!(s.p999, h.value_at_quantile(0.999));
        assert_eq!((s.min, s.max), (h.min(), h.max()));
        assert_eq!(s.quantile(0.99), s.p99);
        assert_eq!(s.quantile(2.0), h.value_at_quantile(1.0));
        assert!((s.mean - 500_500.0).abs() < 500.0, "{}", s.mean);
        assert!(format!("{s:?}").starts_with("LatencySummary { count: 1000, min: "));
    }

    #[test]
    fn an_empty_summary_is_zero() {
        let s = LatencySummary::from_histogram(&histogram());
        assert_eq!(
            (s.count, s.min, s.max, s.p50, s.quantile(0.5)),
            (0, 0, 0, 0, 0)
        );
        assert_eq!(s.mean, 0.0);
    }
}
