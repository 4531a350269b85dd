//! `record`: the library's API on the synthetic sCMOS camera. It records 128 frames of
//! 2048 x 2048 `uint16` into `./record.zarr` (or the path given) as fast as the writer
//! takes them, then prints the throughput, the compression ratio and the latency
//! histograms the writer measured.
//!
//! ```text
//! cargo run --release --example record [-- OUT]
//! ```
//!
//! The recording tool with every option (other shapes, codecs, pacing, OME-Zarr, several
//! cameras, object stores, a JSON report) is `zarrstream record` (`crates/zarrstream-cli`).

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use zarrstream::{ArraySpec, Codec, DataType, LatencySummary, Writer, WriterOptions};
use zarrstream_camera::Camera;

/// 1 GiB of raw frames: enough for a few shards, a few seconds of recording.
const FRAMES: u64 = 128;
const EDGE: u64 = 2048;

fn main() -> Result<(), Box<dyn Error>> {
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("record.zarr"), PathBuf::from);
    // Replacing is for an earlier run's store only, never another directory.
    if out.exists() && !out.join("zarr.json").is_file() {
        return Err(format!("{} exists and is not a Zarr store", out.display()).into());
    }

    // The camera renders its frames before timing starts, so rendering is never what
    // limits the recording.
    let camera = Camera::new(EDGE as usize, EDGE as usize, DataType::UInt16);
    eprintln!("rendering {FRAMES} frames of the synthetic camera...");
    let frames = camera.pool(FRAMES, 0);

    // An unbounded time axis, 512 x 512 inner chunks, 32 frames per shard file.
    let spec = ArraySpec::builder()
        .shape([0, EDGE, EDGE])
        .chunk_shape([1, 512, 512])
        .shard_shape([32, EDGE, EDGE])
        .dtype(DataType::UInt16)
        .codec(Codec::blosc_lz4(1))
        .dimension_names(["t", "y", "x"])
        .build()?;
    let options = WriterOptions::default().overwrite(true);
    let mut writer = Writer::create(&out, spec, options)?;

    let started = Instant::now();
    for k in 0..FRAMES {
        let frame = &frames[(k % frames.len() as u64) as usize];
        // The scheduled time is when the camera delivered the frame: the frame latency
        // runs from it until the frame's chunks are in their shard.
        let _ = writer.push_bytes(frame, Instant::now())?;
    }
    // `finish` returns once every shard is durable and zarr.json is published.
    let stats = writer.finish()?;
    let seconds = started.elapsed().as_secs_f64();

    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    println!(
        "{} frames, {:.0} MiB in {seconds:.2} s: {:.0} MiB/s; {:.0} MiB stored in {} shards \
         (ratio {:.2}), sink {}, {} dropped -> {}",
        stats.frames_written,
        mib(stats.bytes_in),
        mib(stats.bytes_in) / seconds,
        mib(stats.bytes_stored),
        stats.shards,
        stats.bytes_in as f64 / stats.bytes_stored.max(1) as f64,
        stats.sink.as_str(),
        stats.frames_dropped,
        out.display()
    );
    histogram("push latency (time inside push)", &stats.push_latency_ns);
    histogram(
        "frame latency (camera time to chunks in the shard)",
        &stats.frame_latency_ns,
    );
    Ok(())
}

/// The latency's quantiles, each with a bar on a log scale (one `#` per doubling over the
/// smallest value), so a long tail stands out.
fn histogram(what: &str, h: &LatencySummary) {
    println!("{what}, {} values:", h.count);
    let floor = h.min.max(1) as f64;
    for (label, q) in [
        ("min", 0.0),
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p99.9", 0.999),
        ("max", 1.0),
    ] {
        let ns = h.quantile(q);
        let bar = (ns.max(1) as f64 / floor).log2().round().max(0.0) as usize;
        println!(
            "  {label:>6} {:>10.3} ms {}",
            ns as f64 / 1e6,
            "#".repeat(bar + 1)
        );
    }
}
