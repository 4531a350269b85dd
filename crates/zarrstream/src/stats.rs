//! What a finished acquisition reports.

use hdrhistogram::Histogram;

use crate::sink::SinkKind;

/// Statistics returned by [`Writer::finish`](crate::Writer::finish).
///
/// Always `frames_pushed == frames_written + frames_dropped`.
#[derive(Debug, Clone)]
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
    pub push_latency_ns: Histogram<u64>,
    /// From each frame's scheduled (camera) time to all its chunks being in their slots,
    /// in nanoseconds.
    pub frame_latency_ns: Histogram<u64>,
    /// The sink used.
    pub sink: SinkKind,
    /// Bytes of the frame pool.
    pub pool_bytes: usize,
    /// Bytes of staging buffers for chunks deeper than one frame.
    pub staging_bytes: usize,
}

pub(crate) fn histogram() -> Histogram<u64> {
    // Invariant: `new` fails only for more than 5 significant digits.
    #[allow(clippy::expect_used)]
    let mut h = Histogram::new(3).expect("3 significant digits are valid");
    h.auto(true);
    h
}
