//! End-to-end throughput against the machine's ceilings, measured in the same run
//! (BENCHMARKS.md §2).
//!
//! ```text
//! cargo bench --bench throughput -- [--workloads C1,C2] [--codecs lz4:1,zstd:1,none]
//!     [--sinks mmap,pwrite,direct] [--frames 128] [--runs 3] [--threads 0] [--md FILE]
//!     [--pyramid-on C1:lz4:1] [--pyramid-levels 4] [--pyramid-frames 512]
//! ```
//!
//! One process renders the synthetic camera frames once; every measurement then uses
//! those frames and the same number of threads. For each workload × codec, each of
//! `--runs` rounds measures, back to back:
//! - the **encode ceiling**: the inner chunks (cut from the frames beforehand) encoded
//!   memory-to-memory on all threads with our `ChunkEncoder` (crc32c on, as the writer
//!   writes it) and with the reference C library (c-blosc for `lz4`, libzstd for `zstd`,
//!   `memcpy` for `none`);
//! - the **disk ceiling**: sequential 8 MiB `write`s of as many bytes as the codec
//!   stores, in the output directory, the fastest of one file + `fsync`, shard-sized
//!   files each `fsync`ed when complete (the writer's own pattern), and one file written
//!   with `O_DIRECT`, four writes in flight (the device without the page cache, which
//!   throttles buffered writes of a few GiB below the device's speed);
//! - the **writer**, once per sink: `Writer::create`, a push per frame, `finish`
//!   (durable); throughput = raw MiB / (first push → `finish` returned).
//!
//! - the **pyramid cost**, for each `--pyramid-on` workload:codec (`none` to skip): the
//!   default sink writing a plain array, then an OME-Zarr image with `--pyramid-levels`
//!   levels (2×2 mean), back to back, each `--pyramid-frames` frames long (cycling the
//!   rendered frames: a steady state, not the levels' start and drain); cost = 1 −
//!   pyramid / plain throughput, per round.
//!
//! Figure of merit: `writer / min(best encode ceiling, disk ceiling × compression ratio)`,
//! with medians over the rounds. The table also gives the extra peak RSS (VmHWM reset
//! before each run, minus the RSS before `Writer::create`) against the frame pool and
//! staging the writer allocated, and push / frame latency percentiles of the median run.

mod support;

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Instant;

use support::{Args, Run, Workload, median, mib, pct_ms};
use zarrstream::{Codec, Levels, Ome, SinkChoice, WriterOptions};

fn main() {
    support::fixed_malloc_threshold();
    let args = Args::parse();
    let workloads: Vec<Workload> = args
        .list("--workloads", "C1,C2")
        .iter()
        .map(|w| Workload::by_name(w).unwrap_or_else(|| panic!("unknown workload {w}")))
        .collect();
    let codecs: Vec<Codec> = args
        .list("--codecs", "lz4:1,zstd:1,none")
        .iter()
        .map(|c| {
            c.parse()
                .unwrap_or_else(|e| panic!("unknown codec {c}: {e}"))
        })
        .collect();
    let sinks: Vec<SinkChoice> = args
        .list("--sinks", "mmap,pwrite,direct")
        .iter()
        .map(|s| {
            s.parse()
                .unwrap_or_else(|e| panic!("unknown sink {s}: {e}"))
        })
        .collect();
    let frames: usize = args.num("--frames", 128);
    let runs: usize = args.num("--runs", 3);
    // The writer's own default when 0: a worker per core, three with the direct sink
    // (whose writes block their worker). The ceilings run one thread per core.
    let writer_threads = args.num("--threads", 0usize);
    let threads = match writer_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let md_path = args
        .get("--md")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| support::out_dir().join("throughput.md"));
    let out = support::out_dir();

    let t = Instant::now();
    let [h, w] = workloads[0].frame;
    let pool = support::render(frames, h, w);
    eprintln!(
        "rendered {frames} frames {h}x{w} u16 in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let pyramid_on = args.list("--pyramid-on", "C1:lz4:1");
    let levels: usize = args.num("--pyramid-levels", 4);
    let pyramid_frames: usize = args.num("--pyramid-frames", 512);
    let mut rows = Vec::new();
    let mut pyramids = Vec::new();
    for wl in &workloads {
        let chunks = support::cut_chunks(wl, &pool);
        for &codec in &codecs {
            rows.extend(measure(
                wl,
                codec,
                &sinks,
                &pool,
                &chunks,
                runs,
                (threads, writer_threads),
                &out,
            ));
            let key = format!("{}:{}", wl.name, codec.label());
            if pyramid_on.contains(&key) {
                let n = (levels, pyramid_frames);
                pyramids.push(pyramid_cost(
                    wl,
                    codec,
                    n,
                    &pool,
                    runs,
                    writer_threads,
                    &out,
                ));
            }
        }
    }

    let mut md = report(
        &rows,
        frames,
        runs,
        [threads, writer_threads],
        &workloads[0],
    );
    if !pyramids.is_empty() {
        md.push_str(&pyramid_report(&pyramids, pyramid_frames, runs));
    }
    println!("{md}");
    if let Err(e) = std::fs::write(&md_path, &md) {
        eprintln!("cannot write {}: {e}", md_path.display());
    } else {
        eprintln!("table written to {}", md_path.display());
    }
}

/// One table row: a workload × codec × sink with its ceilings.
struct Row {
    workload: &'static str,
    codec: Codec,
    sink: &'static str,
    writer: Vec<f64>,
    median_run: Run,
    max_extra_rss: u64,
    encode_ours: f64,
    encode_ref: f64,
    disk_raw: f64,
    ratio: f64,
}

impl Row {
    fn ceiling(&self) -> f64 {
        self.encode_ours.max(self.encode_ref).min(self.disk_raw)
    }
}

#[allow(clippy::too_many_arguments)]
fn measure(
    wl: &Workload,
    codec: Codec,
    sinks: &[SinkChoice],
    pool: &[Vec<u8>],
    chunks: &[Vec<u8>],
    runs: usize,
    (threads, writer_threads): (usize, usize),
    out: &std::path::Path,
) -> Vec<Row> {
    let raw: u64 = pool.iter().map(|f| f.len() as u64).sum();
    let chunk_raw: u64 = chunks.iter().map(|c| c.len() as u64).sum();
    let (mut ours, mut theirs, mut disk) = (Vec::new(), Vec::new(), Vec::new());
    let mut by_sink: Vec<Vec<Run>> = sinks.iter().map(|_| Vec::new()).collect();
    for round in 0..runs {
        let (secs, bytes) = support::encode_all(chunks, threads, |c, out| {
            support::ours_encode(codec, c, out)
        });
        ours.push(mib(chunk_raw) / secs);
        let stored = bytes;
        let (secs, _) =
            support::encode_all(chunks, threads, |c, out| reference_encode(codec, c, out));
        theirs.push(mib(chunk_raw) / secs);
        // The writer stores about the same bytes per raw byte as the chunk encoder.
        let disk_bytes = (stored as f64 * raw as f64 / chunk_raw as f64) as u64;
        // The best of one file + one fsync, shard-sized files each fsynced (what a
        // writer with per-shard durability has to do) and O_DIRECT, so the ceiling is
        // not set low.
        let shards = (raw / (wl.shard.iter().product::<u64>() * 2)).max(1);
        let one = support::disk_write(out, disk_bytes, 1, &pool[0]);
        let per_shard = support::disk_write(out, disk_bytes, shards, &pool[0]);
        let direct = support::disk_write_direct(out, disk_bytes, &pool[0]).unwrap_or(f64::INFINITY);
        disk.push(mib(raw) / one.min(per_shard).min(direct));
        for (i, &sink) in sinks.iter().enumerate() {
            let options = WriterOptions::default().threads(writer_threads).sink(sink);
            let path = out.join(format!("{}-{}.zarr", wl.name, support::sink_name(sink)));
            let run = support::run_writer(
                &path,
                wl.spec(codec),
                None,
                options,
                pool,
                pool.len(),
                0.0,
                support::Feed::Copy,
            );
            eprintln!(
                "{} {} {} round {round}: {:.0} MiB/s (encode {:.0} / ref {:.0}, disk x ratio {:.0})",
                wl.name,
                codec.label(),
                support::sink_name(sink),
                run.mib_s(),
                ours[round],
                theirs[round],
                disk[round],
            );
            by_sink[i].push(run);
        }
        std::io::stderr().flush().ok();
    }
    let encode_ours = median(&mut ours);
    let encode_ref = median(&mut theirs);
    let disk_raw = median(&mut disk);
    sinks
        .iter()
        .zip(by_sink)
        .map(|(_, mut runs)| {
            let max_extra_rss = runs.iter().map(|r| r.extra_rss).max().unwrap_or(0);
            let mut writer: Vec<f64> = runs.iter().map(Run::mib_s).collect();
            runs.sort_by(|a, b| a.mib_s().total_cmp(&b.mib_s()));
            let median_run = runs.swap_remove(runs.len() / 2);
            writer.sort_by(f64::total_cmp);
            Row {
                workload: wl.name,
                codec,
                // The sink actually used (the direct sink can fall back to pwrite).
                sink: median_run.stats.sink.as_str(),
                ratio: median_run.ratio(),
                writer,
                median_run,
                max_extra_rss,
                encode_ours,
                encode_ref,
                disk_raw,
            }
        })
        .collect()
}

/// Plain array vs OME-Zarr image with a pyramid, same frames, default sink.
struct PyramidRow {
    workload: &'static str,
    codec: Codec,
    levels: usize,
    /// Per round: plain and pyramid MiB/s.
    rounds: Vec<(f64, f64)>,
    /// Stored bytes of the median pyramid round (all levels) and of its plain round.
    stored: (u64, u64),
    extra_rss: u64,
}

fn pyramid_cost(
    wl: &Workload,
    codec: Codec,
    (levels, frames): (usize, usize),
    pool: &[Vec<u8>],
    runs: usize,
    threads: usize,
    out: &std::path::Path,
) -> PyramidRow {
    let ome = Ome::new().levels(Levels::Count(levels));
    let options = || WriterOptions::default().threads(threads);
    let mut rounds = Vec::new();
    let mut stored = Vec::new();
    let mut extra_rss = 0;
    for round in 0..runs {
        let run = |ome: Option<&Ome>| {
            let path = out.join(format!("{}-pyramid.zarr", wl.name));
            support::run_writer(
                &path,
                wl.spec(codec),
                ome,
                options(),
                pool,
                frames,
                0.0,
                support::Feed::Copy,
            )
        };
        let plain = run(None);
        let pyramid = run(Some(&ome));
        eprintln!(
            "{} {} pyramid round {round}: plain {:.0} MiB/s, {levels} levels {:.0} MiB/s",
            wl.name,
            codec.label(),
            plain.mib_s(),
            pyramid.mib_s()
        );
        extra_rss = extra_rss.max(pyramid.extra_rss);
        rounds.push((plain.mib_s(), pyramid.mib_s()));
        stored.push((pyramid.stored_bytes, plain.stored_bytes));
    }
    let mut order: Vec<usize> = (0..rounds.len()).collect();
    order.sort_by(|&a, &b| (rounds[a].1 / rounds[a].0).total_cmp(&(rounds[b].1 / rounds[b].0)));
    PyramidRow {
        workload: wl.name,
        codec,
        levels,
        stored: stored[order[order.len() / 2]],
        rounds,
        extra_rss,
    }
}

fn pyramid_report(rows: &[PyramidRow], frames: usize, runs: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n### Pyramid cost (OME-Zarr, 2×2 mean levels built while recording)\n"
    );
    let _ = writeln!(
        s,
        "{frames} frames (cycling the rendered ones) · default sink · plain array then image with levels, back to back, {runs} rounds · cost = 1 − pyramid / plain per round, median\n"
    );
    let _ = writeln!(
        s,
        "| workload | codec | levels | plain MiB/s (runs) | pyramid MiB/s (runs) | **cost** | stored MiB plain / pyramid | extra RSS MiB |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for r in rows {
        let list = |f: fn(&(f64, f64)) -> f64| -> String {
            let v: Vec<String> = r.rounds.iter().map(|x| format!("{:.0}", f(x))).collect();
            v.join(", ")
        };
        let mut costs: Vec<f64> = r.rounds.iter().map(|(p, y)| 1.0 - y / p).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | **{:.0} %** | {:.0} / {:.0} | {:.0} |",
            r.workload,
            r.codec.label(),
            r.levels,
            list(|x| x.0),
            list(|x| x.1),
            100.0 * median(&mut costs),
            mib(r.stored.1),
            mib(r.stored.0),
            mib(r.extra_rss),
        );
    }
    s
}

fn reference_encode(codec: Codec, chunk: &[u8], out: &mut Vec<u8>) -> usize {
    out.resize(chunk.len() + 1024, 0);
    match codec {
        Codec::Blosc {
            compressor, clevel, ..
        } => {
            let shuffle = match codec.blosc_shuffle(zarrstream::DataType::UInt16) {
                Some(zarrstream::BloscShuffle::NoShuffle) => 0,
                Some(zarrstream::BloscShuffle::BitShuffle) => 2,
                _ => 1,
            };
            let cname = match compressor {
                zarrstream::BloscCompressor::Zstd => c"zstd",
                _ => c"lz4",
            };
            support::c_blosc(chunk, out, cname, i32::from(clevel), shuffle)
        }
        Codec::Zstd { level, .. } => {
            zstd::bulk::compress_to_buffer(chunk, out, level).expect("libzstd compress")
        }
        _ => {
            out[..chunk.len()].copy_from_slice(chunk);
            chunk.len()
        }
    }
}

fn report(rows: &[Row], frames: usize, runs: usize, threads: [usize; 2], wl: &Workload) -> String {
    let [threads, writer_threads] = threads;
    let workers = match writer_threads {
        0 => "the writer's default workers (one per core, three with the direct sink)".into(),
        n => format!("{n} writer workers"),
    };
    let mut s = String::new();
    let _ = writeln!(s, "### End-to-end throughput vs ceilings\n");
    let _ = writeln!(
        s,
        "{} · {frames} frames {}×{} u16 · {threads} threads for the ceilings, {workers} · median of {runs} rounds · `cargo bench --bench throughput`\n",
        support::machine(),
        wl.frame[0],
        wl.frame[1]
    );
    let _ = writeln!(
        s,
        "| workload | codec | sink | writer MiB/s (runs) | encode ceiling ours / C ref | disk ceiling × ratio | **of ceiling** | ratio | extra RSS MiB (pool + staging) | push ms p50/p99/p99.9/max | frame ms p50/p99/p99.9/max |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let med = r.writer[r.writer.len() / 2];
        let all: Vec<String> = r.writer.iter().map(|v| format!("{v:.0}")).collect();
        let st = &r.median_run.stats;
        let _ = writeln!(
            s,
            "| {} | {} | {} | **{med:.0}** ({}) | {:.0} / {:.0} | {:.0} | **{:.2}** | {:.3} | {:.0} ({:.0} + {:.0}) | {} | {} |",
            r.workload,
            r.codec.label(),
            r.sink,
            all.join(", "),
            r.encode_ours,
            r.encode_ref,
            r.disk_raw,
            med / r.ceiling(),
            r.ratio,
            mib(r.max_extra_rss),
            mib(st.pool_bytes as u64),
            mib(st.staging_bytes as u64),
            pct_ms(&st.push_latency_ns),
            pct_ms(&st.frame_latency_ns),
        );
    }
    s
}
