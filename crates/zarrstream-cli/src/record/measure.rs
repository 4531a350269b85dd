//! Measurements around a run: latency percentiles, bytes on disk, resident memory.

use std::io;
use std::path::Path;

use serde_json::{Value, json};
use zarrstream::LatencySummary;

/// `{p50, p90, p99, p999, max}` in microseconds from a summary in nanoseconds.
pub(crate) fn percentiles_us(h: &LatencySummary) -> Value {
    json!({
        "p50": us(h.p50),
        "p90": us(h.p90),
        "p99": us(h.p99),
        "p999": us(h.p999),
        "max": us(h.max),
    })
}

/// Nanoseconds to microseconds.
pub(crate) fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Sizes of everything under a directory.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DiskUsage {
    /// Sum of the lengths of all files.
    pub bytes: u64,
    /// Sum of the blocks allocated to them (less than `bytes` for sparse files).
    pub allocated: u64,
    pub files: u64,
}

/// Walks `dir` (without following symbolic links) and sums the sizes of its files.
pub(crate) fn disk_usage(dir: &Path) -> io::Result<DiskUsage> {
    let mut total = DiskUsage::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total.bytes += meta.len();
                total.allocated +=
                    zarrstream::store::allocated_bytes(&entry.path()).map_err(io::Error::other)?;
                total.files += 1;
            }
        }
    }
    Ok(total)
}

/// Bytes in MiB.
pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Rounds for the report (JSON numbers with a sensible number of digits).
pub(crate) fn round(v: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    if v.is_finite() {
        (v * k).round() / k
    } else {
        0.0
    }
}
