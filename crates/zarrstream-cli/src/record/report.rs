//! What `record` tells of a run: the JSON report (`--report`, DESIGN.md §5 and the extra
//! keys) and the summary on stdout.

use std::time::Duration;

use serde_json::{Value, json};
use zarrstream::{MemoryEstimate, Stats};

use super::Options;
use super::args::join;
use super::measure::{self, DiskUsage, mib, round};

/// What a run measured, for [`json`] and [`print_summary`].
pub(super) struct Measured {
    /// The array's, or with `--arrays` the recording's total.
    pub stats: Stats,
    /// With `--arrays`: each array's key, statistics and disk usage.
    pub arrays: Option<Vec<(String, Stats, DiskUsage)>>,
    /// With `--resume`: the frames each array held before this run.
    pub resumed_from: Option<Vec<u64>>,
    pub seconds: f64,
    pub usage: DiskUsage,
    pub threads: usize,
    pub peak_rss_kib: Option<u64>,
    pub baseline_rss_kib: Option<u64>,
    pub peak_reset: bool,
    pub late_frames: u64,
    pub max_lateness: Duration,
    pub distinct_frames: usize,
    pub prep_seconds: f64,
    pub source: String,
    /// The memory estimate made before the writer was created.
    pub estimate: MemoryEstimate,
}

impl Measured {
    fn throughput_mib_s(&self) -> f64 {
        if self.seconds > 0.0 {
            mib(self.stats.bytes_in) / self.seconds
        } else {
            0.0
        }
    }

    fn ratio(&self) -> f64 {
        if self.usage.bytes > 0 {
            self.stats.bytes_in as f64 / self.usage.bytes as f64
        } else {
            0.0
        }
    }
}

/// The report: DESIGN.md §5's keys, then the extras.
pub(super) fn json(o: &Options, m: &Measured) -> Value {
    let s = &m.stats;
    let kib_to_mib = |k: Option<u64>| k.map(|k| round(k as f64 / 1024.0, 1));
    let extra_rss = match (m.peak_rss_kib, m.baseline_rss_kib) {
        (Some(p), Some(b)) => Some(round(p.saturating_sub(b) as f64 / 1024.0, 1)),
        _ => None,
    };
    let mut doc = json!({
        "frames": s.frames_pushed,
        "dropped": s.frames_dropped,
        "raw_bytes": s.bytes_in,
        "stored_bytes": m.usage.bytes,
        "seconds": round(m.seconds, 6),
        "throughput_mib_s": round(m.throughput_mib_s(), 2),
        "push_latency_us": measure::percentiles_us(&s.push_latency_ns),
        "frame_latency_us": measure::percentiles_us(&s.frame_latency_ns),
        "peak_rss_mib": kib_to_mib(m.peak_rss_kib),
        // Extras.
        "frames_written": s.frames_written,
        "compression_ratio": round(m.ratio(), 4),
        "codec": o.codec.label(),
        "crc32c": o.crc32c,
        "sink": s.sink.as_str(),
        "threads": m.threads,
        "dtype": o.dtype.zarr_name(),
        "shape": o.shape,
        "chunk": o.chunk,
        "shard": o.shard,
        "index_location": o.index_location.as_str(),
        "packing": o.packing.to_string(),
        "chunk_order": o.chunk_order.as_str(),
        "durability": o.durability.to_string(),
        "backpressure": o.backpressure.as_str(),
        "fps": o.fps,
        "late_frames": m.late_frames,
        "max_lateness_us": round(m.max_lateness.as_secs_f64() * 1e6, 3),
        "pool_mib": round(mib(s.pool_bytes as u64), 1),
        "staging_mib": round(mib(s.staging_bytes as u64), 1),
        "shards": s.shards,
        "shard_bytes": s.bytes_stored,
        "stored_files": m.usage.files,
        "stored_allocated_bytes": m.usage.allocated,
        "baseline_rss_mib": kib_to_mib(m.baseline_rss_kib),
        "extra_rss_mib": extra_rss,
        "peak_rss_reset_after_frames": m.peak_reset,
        "writer_seconds": round(s.seconds, 6),
        "distinct_frames": m.distinct_frames,
        "prepare_seconds": round(m.prep_seconds, 3),
        "source": m.source,
        "out": o.out.display().to_string(),
    });
    if let Value::Object(map) = &mut doc {
        map.insert("memory_estimate_mib".into(), memory_json(&m.estimate));
        map.insert(
            "writer_memory_peak_mib".into(),
            json!(round(mib(s.memory.peak), 1)),
        );
        if let Some(arrays) = &m.arrays {
            map.insert(
                "arrays".into(),
                arrays_json(arrays, m.resumed_from.as_deref()),
            );
            map.insert(
                "total".into(),
                json!({
                    "frames": s.frames_pushed,
                    "frames_written": s.frames_written,
                    "frames_dropped": s.frames_dropped,
                    "bytes_in": s.bytes_in,
                    "bytes_stored": s.bytes_stored,
                    "stored_bytes": m.usage.bytes,
                    "seconds": round(m.seconds, 6),
                    "throughput_mib_s": round(m.throughput_mib_s(), 2),
                    "push_latency_us": measure::percentiles_us(&s.push_latency_ns),
                    "frame_latency_us": measure::percentiles_us(&s.frame_latency_ns),
                }),
            );
            map.insert("camera_threads".into(), json!(o.camera_threads));
        }
        if let Some((rows, columns)) = o.plate {
            map.insert(
                "plate".into(),
                json!({"rows": rows, "columns": columns, "fields": o.fields,
                       "images": m.arrays.as_ref().map_or(0, Vec::len)}),
            );
        }
        if let Some(counts) = &m.resumed_from {
            map.insert("resumed_from".into(), json!(counts.iter().sum::<u64>()));
        }
    }
    doc
}

/// The estimate's parts in MiB, with `resident` (the bound on the extra RSS) and
/// `total` (with the page cache).
fn memory_json(e: &MemoryEstimate) -> Value {
    let m = |b: u64| round(mib(b), 1);
    json!({
        "resident": m(e.resident()),
        "total": m(e.total()),
        "frame_pool": m(e.frame_pool),
        "staging": m(e.staging),
        "encoders": m(e.encoders),
        "mapped_shards": m(e.mapped_shards),
        "pyramid": m(e.pyramid),
        "bookkeeping": m(e.bookkeeping),
        "page_cache": m(e.page_cache),
    })
}

/// The `"arrays"` list of the report: one entry per array of `--arrays`.
fn arrays_json(arrays: &[(String, Stats, DiskUsage)], resumed: Option<&[u64]>) -> Value {
    let entries = arrays
        .iter()
        .enumerate()
        .map(|(a, (key, s, usage))| {
            let mut entry = json!({
                "key": key,
                "frames": s.frames_pushed,
                "frames_written": s.frames_written,
                "frames_dropped": s.frames_dropped,
                "bytes_in": s.bytes_in,
                "bytes_stored": s.bytes_stored,
                "stored_bytes": usage.bytes,
                "shards": s.shards,
                "writer_seconds": round(s.seconds, 6),
                "push_latency_us": measure::percentiles_us(&s.push_latency_ns),
                "frame_latency_us": measure::percentiles_us(&s.frame_latency_ns),
            });
            if let (Some(r), Value::Object(map)) = (resumed, &mut entry) {
                map.insert("resumed_from".into(), json!(r.get(a).copied().unwrap_or(0)));
            }
            entry
        })
        .collect();
    Value::Array(entries)
}

/// The summary on stdout (unless `--quiet`).
pub(super) fn print_summary(o: &Options, m: &Measured) {
    let s = &m.stats;
    let rank = o.shape.len();
    let ms = |h: &zarrstream::LatencySummary| h.p99 as f64 / 1e6;
    println!(
        "record: {} frame(s) of {}x{} {} ({} dropped) -> {}",
        s.frames_pushed,
        o.shape[rank - 2],
        o.shape[rank - 1],
        o.dtype,
        s.frames_dropped,
        o.out.display()
    );
    println!(
        "  codec {}, sink {}, {} thread(s), chunk {}, shard {}",
        o.codec.label(),
        s.sink.as_str(),
        m.threads,
        join(&o.chunk),
        join(&o.shard)
    );
    println!(
        "  {:.1} MiB raw in {:.3} s = {:.1} MiB/s; stored {:.1} MiB in {} file(s), ratio {:.3}",
        mib(s.bytes_in),
        m.seconds,
        m.throughput_mib_s(),
        mib(m.usage.bytes),
        m.usage.files,
        m.ratio()
    );
    let rss = match (m.peak_rss_kib, m.baseline_rss_kib) {
        (Some(p), Some(b)) => format!(
            "; peak RSS {:.0} MiB ({:.0} MiB over the loaded frames)",
            p as f64 / 1024.0,
            p.saturating_sub(b) as f64 / 1024.0
        ),
        _ => String::new(),
    };
    println!(
        "  p99 push latency {:.3} ms, p99 frame latency {:.3} ms{rss}",
        ms(&s.push_latency_ns),
        ms(&s.frame_latency_ns)
    );
    for (key, a, usage) in m.arrays.iter().flatten() {
        println!(
            "  {key}: {} frame(s) ({} dropped), {:.1} MiB raw, stored {:.1} MiB, p99 push {:.3} ms, p99 frame {:.3} ms",
            a.frames_pushed,
            a.frames_dropped,
            mib(a.bytes_in),
            mib(usage.bytes),
            ms(&a.push_latency_ns),
            ms(&a.frame_latency_ns)
        );
    }
    if let Some(counts) = &m.resumed_from {
        println!("  resumed after {} frame(s)", join(counts));
    }
    if o.estimate_memory {
        let e = m.estimate.resident();
        let measured = match (m.peak_rss_kib, m.baseline_rss_kib) {
            (Some(p), Some(b)) => {
                let extra = p.saturating_sub(b) * 1024;
                format!(
                    "measured peak {:.1} MiB over the loaded frames ({:.3} of the estimate), ",
                    mib(extra),
                    extra as f64 / e.max(1) as f64
                )
            }
            _ => String::new(),
        };
        println!(
            "  memory: estimate {:.1} MiB resident (+{:.1} MiB page cache), {measured}writer's own count peaked at {:.1} MiB",
            mib(e),
            mib(m.estimate.page_cache),
            mib(s.memory.peak)
        );
    }
    if o.fps > 0.0 {
        println!(
            "  paced at {} fps: {} frame(s) pushed more than one period late (max {:.3} ms)",
            o.fps,
            m.late_frames,
            m.max_lateness.as_secs_f64() * 1e3
        );
    }
}
