//! The statistics `zs_writer_finish` hands back, as JSON with the field names of the Rust
//! `Stats` (latency summaries as percentiles in nanoseconds).

use serde::Serialize;
use zarrstream::{LatencySummary, Stats};

/// `Stats` in JSON form; a struct rather than a map so the key order is fixed.
#[derive(Debug, Serialize)]
struct StatsJson {
    frames_pushed: u64,
    frames_written: u64,
    frames_dropped: u64,
    bytes_in: u64,
    bytes_stored: u64,
    shards: u64,
    seconds: f64,
    push_latency_ns: Percentiles,
    frame_latency_ns: Percentiles,
    sink: &'static str,
    pool_bytes: usize,
    staging_bytes: usize,
}

#[derive(Debug, Serialize)]
struct Percentiles {
    count: u64,
    p50: u64,
    p90: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

impl Percentiles {
    fn of(s: &LatencySummary) -> Self {
        Percentiles {
            count: s.count,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
            p999: s.p999,
            max: s.max,
        }
    }
}

/// The statistics as one line of JSON.
pub fn to_json(s: &Stats) -> Result<String, serde_json::Error> {
    serde_json::to_string(&StatsJson {
        frames_pushed: s.frames_pushed,
        frames_written: s.frames_written,
        frames_dropped: s.frames_dropped,
        bytes_in: s.bytes_in,
        bytes_stored: s.bytes_stored,
        shards: s.shards,
        seconds: s.seconds,
        push_latency_ns: Percentiles::of(&s.push_latency_ns),
        frame_latency_ns: Percentiles::of(&s.frame_latency_ns),
        sink: s.sink.as_str(),
        pool_bytes: s.pool_bytes,
        staging_bytes: s.staging_bytes,
    })
}
