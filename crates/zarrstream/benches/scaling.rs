//! How the writer scales with its encoding threads (BENCHMARKS.md, issue 31; run on a
//! workstation with `tools/scaling/run`).
//!
//! ```text
//! cargo bench -p zarrstream --bench scaling -- [--threads 1,2,4] [--cases LIST]
//!     [--paths copy,zero-copy] [--tmpfs DIR] [--no-tmpfs] [--disk DIR] [--no-disk]
//!     [--frames N] [--seconds 2] [--quick] [--no-confine] [--out DIR] [--commit HASH]
//!     [--durability shard|none|periodic:MS] [--sink auto|mmap|pwrite|direct] [--paired R]
//! ```
//!
//! One process renders the synthetic camera frames once; then, for each case and each
//! thread count n (default 1, 2, 4, … up to all cores, and all cores), back to back:
//! - the **encode ceiling** on n threads: the inner chunks cut from the frames encoded
//!   memory to memory with our `ChunkEncoder` (as `throughput` measures it), the fastest
//!   of three passes;
//! - the **memory-copy ceiling**: n threads each copying frames into a reused buffer
//!   (once per n, before the cases, the fastest of three passes), given per core;
//! - the **writer**, per destination (tmpfs: the engine alone; the disk) and per push
//!   path: `copy` pushes with `push_bytes` (the caller's copy inside `push`), `zero-copy`
//!   with `buffer` + `push_buffer`, each pool buffer filled once when first lent and then
//!   pushed with what it holds, as a camera's DMA fills it without the CPU (`fill`, not
//!   run by default, copies every frame into the lent buffer as `latency --feed
//!   zero-copy` does). `n` is the writer's `threads` (pinned, as by default).
//!
//! At thread count n the whole process (the writer's workers, its finisher and preparer,
//! the pushing threads, the ceilings' threads) is confined to the first n CPUs it may run
//! on (`sched_setaffinity`), so that n is the number of cores: with the direct sink the
//! writer starts two write-behind threads per thread besides its worker (a direct write
//! waits for the device), which unconfined would run on other cores at `threads(1)`.
//! `--no-confine` leaves the CPUs alone (then n is only the writer's `threads`).
//!
//! The **disk ceiling** is measured once, after the encode ceilings: sequential writes of
//! as many bytes as the largest disk cell stores (128 MiB to 4 GiB), the best of one
//! file with one `fsync`, shard-sized files each `fsync`ed and `O_DIRECT` (as
//! `throughput` does); a cell's disk ceiling is that times its compression ratio.
//!
//! The disk's throughput drifts (on a shared cloud disk by ±30 % within minutes), so a
//! cell compared with a ceiling measured minutes before reads high or low by chance.
//! The CPU's speed drifts too on a shared virtual machine. `--paired R` runs each cell R
//! times, each run directly between two ceiling measurements (one encode pass on the
//! cell's n CPUs and, on the disk, one write by the method that was fastest for the
//! run's disk ceiling, of as many bytes as the cell stores, at most 1 GiB), compares
//! each run with the mean of the two around it, and reports the run with the median
//! fraction (for an even R the lower of the two middle runs; all R fractions are listed). One pass each, since a run is one sample too:
//! the best of several noisy passes against one run would favour the ceiling.
//!
//! Cases (`--cases`): `c1-lz4`, `c1-zstd`, `c1-none` (C1 with `lz4:1`, `zstd:1`, `none`),
//! `c2-lz4` (C2, 16-frame chunks) and `rec-lz4` (one `Recording` of two C1 `lz4:1`
//! arrays, each pushed from its own thread, as instrument software drives two cameras).
//!
//! Per cell: MiB/s (raw frame bytes / first push until `finish` returned), efficiency
//! `MiB/s(n) / (n × MiB/s(1))` (against the smallest n measured when 1 is not), the
//! marginal gain of the last step `(MiB/s(n) − MiB/s(m)) / ((n − m) × MiB/s(1))`, CPU
//! seconds (process user + system, `getrusage`) per GiB of frames, push latency p99 and
//! p99.9, the compression ratio, and "of ceiling": writer / encode ceiling(n) on tmpfs,
//! writer / min(encode ceiling(n), disk ceiling × ratio) on the disk.
//!
//! Every cell's store is read back with zarrs (frame count, and the first, middle and last
//! frames against what was pushed) before it is removed; a cell that fails prints
//! FAILED instead of its figures, and the benchmark exits with status 1.
//!
//! Each cell pushes a fixed number of frames, chosen so that it takes about `--seconds`
//! (2 s; 0.25 s with `--quick`, which also renders fewer frames) at the rate expected from
//! its ceiling and the cells before it (`expected_rate`), in whole shards, at most 2048
//! frames; `--frames` fixes it. Writes `scaling.md`,
//! `scaling.json` and `scaling.svg` to `--out` (default `target/bench-out/scaling`).

mod support;

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use plotters::prelude::*;
use serde_json::{Value, json};
use support::{Args, Feed, Run, Workload, mib};
use zarrstream::{
    ArrayConfig, Backpressure, Codec, Durability, Recording, SinkChoice, WriterOptions,
};

/// A measured workload: a layout and codec, in one array or in a two-array recording.
#[derive(Debug, Clone, Copy)]
struct Case {
    key: &'static str,
    label: &'static str,
    workload: Workload,
    codec: &'static str,
    /// 1: a `Writer`; 2: a `Recording` of two arrays, each pushed from its own thread.
    arrays: usize,
}

const CASES: [Case; 5] = [
    Case {
        key: "c1-lz4",
        label: "C1 lz4:1",
        workload: support::C1,
        codec: "lz4:1",
        arrays: 1,
    },
    Case {
        key: "c1-zstd",
        label: "C1 zstd:1",
        workload: support::C1,
        codec: "zstd:1",
        arrays: 1,
    },
    Case {
        key: "c1-none",
        label: "C1 none",
        workload: support::C1,
        codec: "none",
        arrays: 1,
    },
    Case {
        key: "c2-lz4",
        label: "C2 lz4:1",
        workload: support::C2,
        codec: "lz4:1",
        arrays: 1,
    },
    Case {
        key: "rec-lz4",
        label: "2-camera recording, C1 lz4:1",
        workload: support::C1,
        codec: "lz4:1",
        arrays: 2,
    },
];

/// The push paths by their command-line names.
fn feed_of(name: &str) -> Feed {
    match name {
        "copy" => Feed::Copy,
        "zero-copy" => Feed::Lent,
        "fill" => Feed::ZeroCopy,
        other => panic!("--paths: unknown {other:?} (copy, zero-copy, fill)"),
    }
}

/// Where the cells write.
struct Dest {
    name: &'static str,
    dir: PathBuf,
}

/// One measured cell.
struct Cell {
    case: Case,
    path: String,
    dest: &'static str,
    threads: usize,
    frames: usize,
    /// `Err`: what the read-back found wrong; the figures are not shown.
    verdict: Result<(), String>,
    run: Run,
    encode_ceiling: f64,
    /// Disk ceiling in raw MiB/s (stored MiB/s × this cell's ratio); tmpfs: infinite.
    disk_ceiling: f64,
    /// Filled once a series is complete.
    efficiency: f64,
    marginal: f64,
    /// With `--paired R`: each repeat's fraction of its own ceiling, in run
    /// order (the cell is the median one); empty otherwise.
    repeats: Vec<f64>,
}

impl Cell {
    fn ceiling(&self) -> f64 {
        self.encode_ceiling.min(self.disk_ceiling)
    }
    fn of_ceiling(&self) -> f64 {
        self.run.mib_s() / self.ceiling()
    }
    fn cpu_s_per_gib(&self) -> f64 {
        self.run.cpu_seconds / (self.run.raw_bytes as f64 / (1u64 << 30) as f64)
    }
}

/// The command-line options.
struct Config {
    threads: Vec<usize>,
    cases: Vec<Case>,
    paths: Vec<String>,
    dests: Vec<Dest>,
    frames: Option<usize>,
    seconds: f64,
    quick: bool,
    out: PathBuf,
    commit: String,
    /// The CPUs to confine each thread count to (its first n), unless `--no-confine`.
    cpus: Option<Vec<usize>>,
    /// The writers' durability (`--durability`).
    durability: Durability,
    /// The writers' sink (`--sink`).
    sink: SinkChoice,
    /// `--paired R`: each disk cell runs R times, each run between two disk-ceiling
    /// measurements of its own size (0: one run against the run's single disk ceiling).
    paired: usize,
}

impl Config {
    fn from_args(args: &Args) -> Config {
        let allowed = allowed_cpus();
        let cores = allowed.as_ref().map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            Vec::len,
        );
        let threads = match args.get("--threads") {
            Some(list) => list
                .split(',')
                .map(|t| {
                    t.parse()
                        .unwrap_or_else(|_| panic!("--threads: cannot parse {t:?}"))
                })
                .collect(),
            None => default_threads(cores),
        };
        let cases = args
            .list("--cases", "c1-lz4,c1-zstd,c1-none,c2-lz4,rec-lz4")
            .iter()
            .map(|k| {
                *CASES
                    .iter()
                    .find(|c| c.key == k)
                    .unwrap_or_else(|| panic!("--cases: unknown {k:?}"))
            })
            .collect();
        let paths = args.list("--paths", "copy,zero-copy");
        for p in &paths {
            let _ = feed_of(p);
        }
        let mut dests = Vec::new();
        if !args.flag("--no-tmpfs") {
            let dir = args.get("--tmpfs").map_or_else(
                || {
                    PathBuf::from(format!(
                        "/dev/shm/zarrstream-scaling-{}",
                        std::process::id()
                    ))
                },
                PathBuf::from,
            );
            dests.push(Dest { name: "tmpfs", dir });
        }
        if !args.flag("--no-disk") {
            let dir = args
                .get("--disk")
                .map_or_else(|| support::out_dir().join("scaling-disk"), PathBuf::from);
            dests.push(Dest { name: "disk", dir });
        }
        let quick = args.flag("--quick");
        Config {
            threads,
            cases,
            paths,
            dests,
            frames: args.get("--frames").map(|_| args.num("--frames", 0usize)),
            seconds: args.num("--seconds", if quick { 0.25 } else { 2.0 }),
            quick,
            out: args
                .get("--out")
                .map_or_else(|| support::out_dir().join("scaling"), PathBuf::from),
            commit: args
                .get("--commit")
                .or(option_env!("ZARRSTREAM_COMMIT"))
                .unwrap_or("unknown")
                .to_owned(),
            cpus: allowed.filter(|_| !args.flag("--no-confine")),
            durability: args
                .get("--durability")
                .unwrap_or("shard")
                .parse()
                .unwrap_or_else(|e| panic!("--durability: {e}")),
            paired: args.num("--paired", 0usize),
            sink: args
                .get("--sink")
                .unwrap_or("auto")
                .parse()
                .unwrap_or_else(|e| panic!("--sink: {e}")),
        }
    }

    /// Frames in a cell that runs at about `rate` MiB/s: about `seconds` long, whole
    /// shards (at least one), at most 2048 frames (16 GiB of C1 frames; tmpfs holds the
    /// stored bytes in memory).
    fn frames_for(&self, case: &Case, rate: f64) -> usize {
        let depth = case.workload.shard[0] as usize * case.arrays;
        if let Some(n) = self.frames {
            return n.max(case.arrays);
        }
        let frame_mib = mib(case.workload.frame_bytes() as u64);
        let want = (self.seconds * rate / frame_mib) as usize;
        (want.div_ceil(depth) * depth).clamp(depth, 2048)
    }
}

/// 1, 2, 4, … below `cores`, then `cores`.
fn default_threads(cores: usize) -> Vec<usize> {
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
        .take_while(|&n| n < cores)
        .collect();
    v.push(cores);
    v
}

/// The CPUs this thread may run on, in order (`sched_getaffinity`); `None` where the
/// call fails.
fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array, for which all-zero bytes are the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    (rc == 0).then(|| {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: c < CPU_SETSIZE, the set's size in bits.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    })
}

/// Confines this thread, and the threads it starts from now on (the writer's workers,
/// finisher and preparer, the camera threads, the ceilings' threads), to `cpus`.
fn confine(cpus: &[usize]) {
    // SAFETY: as in `allowed_cpus`, all-zero bytes are the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: c < CPU_SETSIZE, the set's size in bits.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        eprintln!(
            "cannot confine the benchmark to CPUs {cpus:?}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Runs `f` confined to the first `n` of `cpus` (all of them when `None`: `--no-confine`),
/// then lets this thread run on all of `cpus` again.
fn on_cpus<T>(cpus: Option<&[usize]>, n: usize, f: impl FnOnce() -> T) -> T {
    let Some(cpus) = cpus else {
        return f();
    };
    confine(&cpus[..n.clamp(1, cpus.len())]);
    let out = f();
    confine(cpus);
    out
}

/// Passes of each ceiling measurement, the fastest kept.
const CEILING_PASSES: usize = 3;

/// The highest of [`CEILING_PASSES`] rates `f` measures (the first pass pays for page
/// faults of fresh buffers, and for writeback left by whatever ran before).
fn best_of(f: impl Fn() -> f64) -> f64 {
    (0..CEILING_PASSES).map(|_| f()).fold(0.0, f64::max)
}

/// Memory-copy ceiling on `n` threads, each copying every rendered frame once into its
/// own reused buffer: aggregate MiB/s.
fn copy_ceiling(frames: &[Vec<u8>], n: usize) -> f64 {
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    let t = Instant::now();
    std::thread::scope(|s| {
        for k in 0..n {
            s.spawn(move || {
                let mut buf = vec![0u8; frames[0].len()];
                for i in 0..frames.len() {
                    let f = &frames[(i + k) % frames.len()];
                    buf.copy_from_slice(f);
                    std::hint::black_box(&mut buf);
                }
            });
        }
    });
    mib(bytes * n as u64) / t.elapsed().as_secs_f64()
}

/// The ways the disk ceiling writes (as `throughput` measures it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiskMethod {
    /// One file, one `fsync`.
    OneFile,
    /// Shard-sized files, each `fsync`ed.
    PerShard,
    /// `O_DIRECT` writes, several in flight, into one reserved file.
    Direct,
}

/// Stored MiB/s of writing `bytes` into `dir` by `method` (0 where `O_DIRECT` is refused).
fn disk_write(method: DiskMethod, dir: &Path, bytes: u64, shard_bytes: u64, data: &[u8]) -> f64 {
    let secs = match method {
        DiskMethod::OneFile => support::disk_write(dir, bytes, 1, data),
        DiskMethod::PerShard => support::disk_write(dir, bytes, (bytes / shard_bytes).max(1), data),
        DiskMethod::Direct => support::disk_write_direct(dir, bytes, data).unwrap_or(f64::INFINITY),
    };
    mib(bytes) / secs
}

/// Disk ceiling in stored MiB/s: the best of the three [`DiskMethod`]s, and which it was.
fn disk_ceiling(dir: &Path, bytes: u64, shard_bytes: u64, data: &[u8]) -> (f64, DiskMethod) {
    [
        DiskMethod::OneFile,
        DiskMethod::PerShard,
        DiskMethod::Direct,
    ]
    .into_iter()
    .map(|m| (disk_write(m, dir, bytes, shard_bytes, data), m))
    .fold((0.0, DiskMethod::OneFile), |best, m| {
        if m.0 > best.0 { m } else { best }
    })
}

/// A cell's expected MiB/s, which sets its frame count: its ceiling, but no more than
/// the same series' previous thread count scaled by the threads added, or 1.5 times the
/// best cell of this case and thread count so far; with neither, the ceiling times the
/// median fraction of their ceilings the earlier cells reached (the writer falls well
/// short of the encode ceiling on few cores, and a cell sized by the ceiling alone ran
/// for 10 s or more).
fn expected_rate(
    cells: &[Cell],
    case: &Case,
    dest: &str,
    path: &str,
    n: usize,
    ceiling: f64,
) -> f64 {
    let ok = || cells.iter().filter(|c| c.verdict.is_ok());
    let previous = ok()
        .rev()
        .find(|c| c.case.key == case.key && c.dest == dest && c.path == path && c.threads < n)
        .map(|c| c.run.mib_s() * n as f64 / c.threads as f64);
    let sibling = ok()
        .filter(|c| c.case.key == case.key && c.threads == n)
        .map(|c| 1.5 * c.run.mib_s())
        .reduce(f64::max);
    match (previous, sibling) {
        (None, None) => {
            let mut fractions: Vec<f64> = ok().map(|c| c.run.mib_s() / c.ceiling()).collect();
            let fraction = if fractions.is_empty() {
                1.0
            } else {
                support::median(&mut fractions).clamp(0.1, 1.0)
            };
            ceiling * fraction
        }
        (p, s) => ceiling
            .min(p.unwrap_or(f64::INFINITY))
            .min(s.unwrap_or(f64::INFINITY)),
    }
}

impl Config {
    /// The writers' options at `threads` threads: `--durability` and `--sink`, and
    /// `Block`, since the benchmark measures throughput and may drop no frame.
    fn options(&self, threads: usize) -> WriterOptions {
        WriterOptions::default()
            .threads(threads)
            .backpressure(Backpressure::Block)
            .durability(self.durability)
            .sink(self.sink)
    }
}

/// What one run of a cell writes, and how.
struct CellRun<'a> {
    /// The destination directory (the store is made in it and removed after).
    dir: &'a Path,
    case: &'a Case,
    codec: Codec,
    options: WriterOptions,
    /// The rendered frames, cycled.
    frames: &'a [Vec<u8>],
    /// Frames to push.
    count: usize,
    feed: Feed,
}

/// One cell of a single-array case.
fn run_array(cell: &CellRun) -> (Run, Result<(), String>) {
    let CellRun {
        dir,
        case,
        codec,
        frames,
        count,
        feed,
        ..
    } = *cell;
    let path = dir.join(format!("{}.zarr", case.key));
    let mut verdict = Err("not checked".to_owned());
    let run = support::run_writer_checked(
        &path,
        case.workload.spec(codec),
        None,
        cell.options.clone(),
        frames,
        (count, 0.0),
        feed,
        |root, carried| verdict = support::check_frames(root, "/", frames, carried),
    );
    (run, verdict)
}

/// One cell of the recording case: `case.arrays` arrays of one `Recording`, each pushed
/// `count / arrays` frames from a thread of its own.
fn run_recording(cell: &CellRun) -> (Run, Result<(), String>) {
    let CellRun {
        dir,
        case,
        codec,
        frames,
        count,
        feed,
        ..
    } = *cell;
    let root = dir.join(format!("{}.zarr", case.key));
    let _ = std::fs::remove_dir_all(&root);
    let keys: Vec<String> = (0..case.arrays).map(|i| format!("camera{i}")).collect();
    let arrays = keys
        .iter()
        .map(|k| ArrayConfig::new(k.clone(), case.workload.spec(codec)))
        .collect();
    let per_array = count / case.arrays;
    let base = support::status_bytes("VmRSS");
    support::reset_peak();
    let cpu0 = support::cpu_seconds();
    let rec = Recording::create(&root, arrays, cell.options.clone()).expect("create the recording");
    let t0 = Instant::now();
    let carried: Vec<Vec<Option<usize>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..case.arrays)
            .map(|i| {
                let rec = &rec;
                s.spawn(move || {
                    let mut feeder = support::Feeder::new(feed, frames, per_array);
                    for k in 0..per_array {
                        let mut array = rec.array(i).expect("an array of the recording");
                        feeder.push(&mut array, k, Instant::now());
                    }
                    feeder.carried
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a camera thread completes"))
            .collect()
    });
    let stats = rec.finish().expect("finish the recording");
    let seconds = t0.elapsed().as_secs_f64();
    let cpu_seconds = support::cpu_seconds() - cpu0;
    let extra_rss = support::status_bytes("VmHWM").saturating_sub(base);
    let stored = support::stored_bytes(&root);
    let verdict = keys.iter().zip(&carried).try_for_each(|(key, carried)| {
        support::check_frames(&root, &format!("/{key}"), frames, carried)
    });
    let _ = std::fs::remove_dir_all(&root);
    let run = Run {
        seconds,
        raw_bytes: stats.total.bytes_in,
        stored_bytes: stored,
        extra_rss,
        stats: stats.total,
        late: 0,
        cpu_seconds,
    };
    (run, verdict)
}

fn main() {
    support::fixed_malloc_threshold();
    let started = Instant::now();
    let args = Args::parse();
    let cfg = Config::from_args(&args);
    let cpus = cfg.cpus.as_deref();
    for d in &cfg.dests {
        std::fs::create_dir_all(&d.dir)
            .unwrap_or_else(|e| panic!("create {}: {e}", d.dir.display()));
    }
    std::fs::create_dir_all(&cfg.out)
        .unwrap_or_else(|e| panic!("create {}: {e}", cfg.out.display()));
    let cells_total =
        cfg.cases.len() * cfg.threads.len() * cfg.paths.len() * cfg.dests.len().max(1);
    eprintln!(
        "{} · threads {:?} · {cells_total} cells of about {} s: expect about {:.0} s with the ceilings",
        support::machine(),
        cfg.threads,
        cfg.seconds,
        // A cell also creates, checks and removes its store; the ceilings add about a
        // third (measured here at 1 and 2 threads).
        cells_total as f64 * (cfg.seconds + 0.7) * 1.35
    );

    let rendered = if cfg.quick { 16 } else { 32 };
    let t = Instant::now();
    let [h, w] = support::C1.frame;
    let pool = support::render(rendered, h, w);
    eprintln!(
        "rendered {rendered} frames {h}x{w} u16 in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let copy: Vec<(usize, f64)> = cfg
        .threads
        .iter()
        .map(|&n| (n, on_cpus(cpus, n, || best_of(|| copy_ceiling(&pool, n)))))
        .collect();
    for (n, c) in &copy {
        eprintln!(
            "memory copy, {n} threads: {:.0} MiB/s ({:.2} GiB/s per core)",
            c,
            c / *n as f64 / 1024.0
        );
    }

    let codecs: Vec<Codec> = cfg
        .cases
        .iter()
        .map(|case| {
            case.codec
                .parse()
                .unwrap_or_else(|e| panic!("codec {}: {e}", case.codec))
        })
        .collect();
    // Encode ceilings first: they choose each cell's frame count.
    let mut encode: Vec<(&'static str, usize, f64, f64)> = Vec::new();
    // With `--paired`, each case's chunks are kept for the passes around its cells.
    let mut kept_chunks: Vec<(&'static str, Vec<Vec<u8>>)> = Vec::new();
    for (case, &codec) in cfg.cases.iter().zip(&codecs) {
        let chunks = support::cut_chunks(&case.workload, &pool);
        let chunk_raw: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        for &n in &cfg.threads {
            // The fastest of three passes: the first also pays for each thread's fresh
            // output buffer and encoder, and any writeback left by what ran before.
            let (secs, stored) = on_cpus(cpus, n, || {
                (0..CEILING_PASSES)
                    .map(|_| {
                        support::encode_all(&chunks, n, |c, out| {
                            support::ours_encode(codec, c, out)
                        })
                    })
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .expect("at least one pass")
            });
            let (e, r) = (mib(chunk_raw) / secs, chunk_raw as f64 / stored as f64);
            eprintln!(
                "{} encode ceiling, {n} threads: {e:.0} MiB/s (ratio {r:.2})",
                case.label
            );
            encode.push((case.key, n, e, r));
        }
        if cfg.paired > 0 {
            kept_chunks.push((case.key, chunks));
        }
    }
    let ceiling_of = |key: &str, n: usize| {
        encode
            .iter()
            .find(|e| e.0 == key && e.1 == n)
            .map_or((f64::INFINITY, 1.0), |e| (e.2, e.3))
    };
    // One disk ceiling for the run (the device does not depend on the case): as many
    // bytes as the largest disk cell stores, between 128 MiB and 4 GiB (more only
    // lengthens the run: with the page cache flushed by fsync, 4 GiB measures the device).
    let disk = cfg.dests.iter().find(|d| d.name == "disk").map(|d| {
        let bytes = cfg
            .cases
            .iter()
            .flat_map(|case| {
                cfg.threads.iter().map(|&n| {
                    let (e, r) = ceiling_of(case.key, n);
                    cfg.frames_for(case, e) as f64 * case.workload.frame_bytes() as f64 / r
                })
            })
            .fold(0.0, f64::max)
            .clamp((1u64 << 27) as f64, (1u64 << 32) as f64) as u64;
        let shard_bytes = support::C1.shard.iter().product::<u64>() * 2;
        let (rate, method) = disk_ceiling(&d.dir, bytes, shard_bytes, &pool[0]);
        eprintln!(
            "disk ceiling: {rate:.0} MiB/s stored ({:.0} MiB written, best by {method:?})",
            mib(bytes)
        );
        (rate, bytes, method)
    });

    let mut cells: Vec<Cell> = Vec::new();
    for (case, &codec) in cfg.cases.iter().zip(&codecs) {
        for &n in &cfg.threads {
            let (enc, est_ratio) = ceiling_of(case.key, n);
            for dest in &cfg.dests {
                let disk_stored = match (dest.name, disk) {
                    ("disk", Some((rate, ..))) => rate,
                    _ => f64::INFINITY,
                };
                for path in &cfg.paths {
                    let feed = feed_of(path);
                    let ceiling = enc.min(disk_stored * est_ratio);
                    let rate = expected_rate(&cells, case, dest.name, path, n, ceiling);
                    let count = cfg.frames_for(case, rate);
                    let run_cell: fn(&CellRun) -> _ = if case.arrays > 1 {
                        run_recording
                    } else {
                        run_array
                    };
                    let cell_run = CellRun {
                        dir: &dest.dir,
                        case,
                        codec,
                        options: cfg.options(n),
                        frames: &pool,
                        count,
                        feed,
                    };
                    let run_once = || {
                        let out = on_cpus(cpus, n, || run_cell(&cell_run));
                        if dest.name == "disk" {
                            rustix::fs::sync();
                        }
                        out
                    };
                    let (run, verdict, enc, disk_stored, repeats) = if cfg.paired > 0 {
                        // One pass of the encode ceiling and, on the disk, the disk
                        // ceiling (as many bytes as the cell is expected to store, at most
                        // 1 GiB), measured around each run.
                        let chunks = kept_chunks
                            .iter()
                            .find(|k| k.0 == case.key)
                            .map(|k| &k.1[..])
                            .unwrap_or_default();
                        let chunk_raw: u64 = chunks.iter().map(|c| c.len() as u64).sum();
                        let bytes = ((count * case.workload.frame_bytes()) as f64 / est_ratio)
                            .clamp((1u64 << 27) as f64, (1u64 << 30) as f64)
                            as u64;
                        let shard_bytes = case.workload.shard.iter().product::<u64>() * 2;
                        let measure = || {
                            let (secs, _) = on_cpus(cpus, n, || {
                                support::encode_all(chunks, n, |c, out| {
                                    support::ours_encode(codec, c, out)
                                })
                            });
                            // One sample by the run's best method, as a run is one sample.
                            let disk = match (dest.name, disk) {
                                ("disk", Some((.., method))) => {
                                    disk_write(method, &dest.dir, bytes, shard_bytes, &pool[0])
                                }
                                _ => f64::INFINITY,
                            };
                            (mib(chunk_raw) / secs, disk)
                        };
                        let p = paired(cfg.paired, run_once, measure);
                        (p.run, p.verdict, p.encode, p.disk_stored, p.fractions)
                    } else {
                        let (run, verdict) = run_once();
                        (run, verdict, enc, disk_stored, Vec::new())
                    };
                    let cell = Cell {
                        case: *case,
                        path: path.clone(),
                        dest: dest.name,
                        threads: n,
                        frames: count,
                        disk_ceiling: disk_stored * run.ratio(),
                        verdict,
                        run,
                        encode_ceiling: enc,
                        efficiency: f64::NAN,
                        marginal: f64::NAN,
                        repeats,
                    };
                    match &cell.verdict {
                        Ok(()) => eprintln!(
                            "{} {path} {} {n} threads, {count} frames: {:.0} MiB/s, {:.2} of ceiling, {:.1} CPU s/GiB",
                            case.label,
                            dest.name,
                            cell.run.mib_s(),
                            cell.of_ceiling(),
                            cell.cpu_s_per_gib()
                        ),
                        Err(e) => eprintln!(
                            "{} {path} {} {n} threads: FAILED: {e}",
                            case.label, dest.name
                        ),
                    }
                    cells.push(cell);
                }
            }
        }
    }
    for d in &cfg.dests {
        let _ = std::fs::remove_dir(&d.dir);
    }
    efficiencies(&mut cells);

    let wall = started.elapsed().as_secs_f64();
    let disk_report = disk.map(|(rate, bytes, _)| (rate, bytes));
    let md = report(&cfg, &cells, &copy, &encode, disk_report, wall);
    println!("{md}");
    let failed = cells.iter().filter(|c| c.verdict.is_err()).count();
    let json = to_json(&cfg, &cells, &copy, &encode, disk_report, wall);
    let written = [
        write(&cfg.out.join("scaling.md"), md.as_bytes()),
        write(
            &cfg.out.join("scaling.json"),
            serde_json::to_string_pretty(&json)
                .expect("plain values serialise")
                .as_bytes(),
        ),
        plot(&cfg, &cells, &cfg.out.join("scaling.svg")).map_err(|e| format!("scaling.svg: {e}")),
    ];
    let mut ok = failed == 0;
    for w in written {
        if let Err(e) = w {
            eprintln!("{e}");
            ok = false;
        }
    }
    eprintln!(
        "scaling: {} cells, {failed} failed; outputs in {}; total wall time {wall:.0} s",
        cells.len(),
        cfg.out.display()
    );
    if !ok {
        std::process::exit(1);
    }
}

/// The run a `--paired` cell reports, with the ceilings around it.
struct Paired {
    run: Run,
    verdict: Result<(), String>,
    /// The mean of the encode-ceiling samples before and after the run (MiB/s raw).
    encode: f64,
    /// The mean of the disk-ceiling samples before and after it (MiB/s stored).
    disk_stored: f64,
    /// Every run's fraction of its ceilings, in run order.
    fractions: Vec<f64>,
}

/// Runs a cell `repeats` times (at least once), each run between two samples of
/// `measure` (encode ceiling MiB/s raw, disk ceiling MiB/s stored; each sample after a
/// run is the sample before the next), compares each run with the mean of the two
/// samples around it, and returns the run with the median fraction (with an even count,
/// the lower of the two middle runs: the benchmark should not round in its own favour).
fn paired(
    repeats: usize,
    mut run_once: impl FnMut() -> (Run, Result<(), String>),
    mut measure: impl FnMut() -> (f64, f64),
) -> Paired {
    let mut before = measure();
    let mut runs = Vec::new();
    for _ in 0..repeats.max(1) {
        let (run, verdict) = run_once();
        let after = measure();
        let encode = (before.0 + after.0) / 2.0;
        let disk_stored = (before.1 + after.1) / 2.0;
        let of = run.mib_s() / encode.min(disk_stored * run.ratio());
        eprintln!(
            "  paired: encode {:.0} / {:.0}, disk {:.0} / {:.0} MiB/s stored, around {:.0} MiB/s: {of:.2}",
            before.0,
            after.0,
            before.1,
            after.1,
            run.mib_s()
        );
        runs.push((of, run, verdict, encode, disk_stored));
        before = after;
    }
    let fractions: Vec<f64> = runs.iter().map(|r| r.0).collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (_, run, verdict, encode, disk_stored) = runs.swap_remove((runs.len() - 1) / 2);
    Paired {
        run,
        verdict,
        encode,
        disk_stored,
        fractions,
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Fills each cell's efficiency and marginal gain from its series (same case, path and
/// destination; thread counts ascending), against the series' smallest thread count.
fn efficiencies(cells: &mut [Cell]) {
    let key = |c: &Cell| (c.case.key, c.path.clone(), c.dest);
    for i in 0..cells.len() {
        let mut series: Vec<(usize, f64)> = cells
            .iter()
            .filter(|c| key(c) == key(&cells[i]) && c.verdict.is_ok())
            .map(|c| (c.threads, c.run.mib_s()))
            .collect();
        series.sort_by_key(|s| s.0);
        let Some(&(n0, r0)) = series.first() else {
            continue;
        };
        let per_core = r0 / n0 as f64;
        let (n, r) = (cells[i].threads, cells[i].run.mib_s());
        cells[i].efficiency = r / (n as f64 * per_core);
        if let Some(&(m, rm)) = series.iter().rev().find(|s| s.0 < n) {
            cells[i].marginal = (r - rm) / ((n - m) as f64 * per_core);
        }
    }
}

fn fmt(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "–".to_owned()
    }
}

fn report(
    cfg: &Config,
    cells: &[Cell],
    copy: &[(usize, f64)],
    encode: &[(&str, usize, f64, f64)],
    disk: Option<(f64, u64)>,
    wall: f64,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### Scaling with encoding threads\n");
    let _ = writeln!(
        s,
        "{} · commit {} · threads {:?} · {} · cells of about {} s · sink {} · durability {}{} · total wall time {wall:.0} s · `cargo bench -p zarrstream --bench scaling` (`tools/scaling/run`)\n",
        support::machine(),
        cfg.commit,
        cfg.threads,
        confinement(cfg),
        cfg.seconds,
        cfg.sink,
        cfg.durability,
        if cfg.paired > 0 {
            format!(" · cells paired ×{}", cfg.paired)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "**Zero-copy C1 against the ceiling** (issue 31's target ≥ 0.9 of min(encode, disk × ratio)):\n"
    );
    for c in cells.iter().filter(|c| {
        c.path == "zero-copy" && matches!(c.case.key, "c1-lz4" | "c1-zstd") && c.verdict.is_ok()
    }) {
        let _ = writeln!(
            s,
            "- {} {} {} threads: **{:.2}** of ceiling ({:.0} of {:.0} MiB/s){}",
            c.case.label,
            c.dest,
            c.threads,
            c.of_ceiling(),
            c.run.mib_s(),
            c.ceiling(),
            repeats_note(&c.repeats)
        );
    }
    let _ = writeln!(s, "\n#### Ceilings\n");
    let _ = writeln!(s, "| threads | memory copy MiB/s (per core) |");
    let _ = writeln!(s, "|---|---|");
    for (n, c) in copy {
        let _ = writeln!(s, "| {n} | {c:.0} ({:.0}) |", c / *n as f64);
    }
    let _ = writeln!(
        s,
        "\n| case | threads | encode ceiling MiB/s (per core) | ratio |"
    );
    let _ = writeln!(s, "|---|---|---|---|");
    for (key, n, e, r) in encode {
        let _ = writeln!(
            s,
            "| {key} | {n} | {e:.0} ({:.0}) | {r:.2} |",
            e / *n as f64
        );
    }
    if let Some((rate, bytes)) = disk {
        let _ = writeln!(
            s,
            "\ndisk ceiling: {rate:.0} MiB/s stored (the best of one file + fsync, shard-sized files each fsynced, O_DIRECT; {:.0} MiB written), × each cell's ratio",
            mib(bytes)
        );
    }
    let _ = writeln!(s, "\n#### Writer\n");
    let _ = writeln!(
        s,
        "| case | path | dest | threads | frames | sink | **MiB/s** | efficiency | marginal | CPU s/GiB | push p99 / p99.9 ms | ratio | ceiling MiB/s | **of ceiling** |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for c in cells {
        let head = format!(
            "| {} | {} | {} | {} | {} |",
            c.case.label, c.path, c.dest, c.threads, c.frames
        );
        match &c.verdict {
            Err(e) => {
                let _ = writeln!(s, "{head} FAILED: {} |||||||||", e.replace('|', "/"));
            }
            Ok(()) => {
                let p = &c.run.stats.push_latency_ns;
                let _ = writeln!(
                    s,
                    "{head} {} | **{:.0}** | {} | {} | {:.2} | {:.2} / {:.2} | {:.3} | {:.0} | **{:.2}** |",
                    c.run.stats.sink.as_str(),
                    c.run.mib_s(),
                    fmt(c.efficiency, 2),
                    fmt(c.marginal, 2),
                    c.cpu_s_per_gib(),
                    p.p99 as f64 / 1e6,
                    p.p999 as f64 / 1e6,
                    c.run.ratio(),
                    c.ceiling(),
                    c.of_ceiling(),
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "\nefficiency = MiB/s(n) / (n × MiB/s(1)); marginal = (MiB/s(n) − MiB/s(m)) / ((n − m) × MiB/s(1)), m the previous thread count; ceiling = encode(n) on tmpfs, min(encode(n), disk × ratio) on the disk; zero-copy = `buffer` + `push_buffer`, each pool buffer filled once (as by a camera's DMA)."
    );
    s
}

/// `--paired` runs' fractions of their own ceilings, for the reports.
fn repeats_note(repeats: &[f64]) -> String {
    if repeats.is_empty() {
        return String::new();
    }
    let list: Vec<String> = repeats.iter().map(|f| format!("{f:.2}")).collect();
    format!(
        ", the median of {} paired runs: {}",
        repeats.len(),
        list.join(", ")
    )
}

/// How the thread counts map to CPUs, for the reports.
fn confinement(cfg: &Config) -> String {
    match &cfg.cpus {
        Some(cpus) => format!(
            "n threads run on the first n of CPUs {cpus:?} (the whole process: workers, caller, finisher)"
        ),
        None => "not confined to CPUs (--no-confine)".to_owned(),
    }
}

fn finite(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}

fn to_json(
    cfg: &Config,
    cells: &[Cell],
    copy: &[(usize, f64)],
    encode: &[(&str, usize, f64, f64)],
    disk: Option<(f64, u64)>,
    wall: f64,
) -> Value {
    let cells: Vec<Value> = cells
        .iter()
        .map(|c| {
            let p = &c.run.stats.push_latency_ns;
            json!({
                "case": c.case.key,
                "label": c.case.label,
                "path": c.path,
                "dest": c.dest,
                "threads": c.threads,
                "frames": c.frames,
                "ok": c.verdict.is_ok(),
                "error": c.verdict.as_ref().err(),
                "sink": c.run.stats.sink.as_str(),
                "seconds": c.run.seconds,
                "raw_bytes": c.run.raw_bytes,
                "stored_bytes": c.run.stored_bytes,
                "mib_s": c.run.mib_s(),
                "efficiency": finite(c.efficiency),
                "marginal": finite(c.marginal),
                "cpu_seconds": c.run.cpu_seconds,
                "cpu_s_per_gib": c.cpu_s_per_gib(),
                "push_p50_ms": p.p50 as f64 / 1e6,
                "push_p99_ms": p.p99 as f64 / 1e6,
                "push_p999_ms": p.p999 as f64 / 1e6,
                "push_max_ms": p.max as f64 / 1e6,
                "ratio": c.run.ratio(),
                "encode_ceiling_mib_s": c.encode_ceiling,
                "disk_ceiling_mib_s": finite(c.disk_ceiling),
                "ceiling_mib_s": c.ceiling(),
                "of_ceiling": c.of_ceiling(),
                "paired_of_ceiling": c.repeats,
                "extra_rss_bytes": c.run.extra_rss,
                "stats": c.run.stats,
            })
        })
        .collect();
    json!({
        "machine": support::machine(),
        "commit": cfg.commit,
        "threads": cfg.threads,
        "cpus": confinement(cfg),
        "seconds_per_cell": cfg.seconds,
        "sink": cfg.sink.as_str(),
        "durability": cfg.durability.to_string(),
        "paired": cfg.paired,
        "wall_seconds": wall,
        "memory_copy": copy.iter().map(|(n, c)| json!({"threads": n, "mib_s": c, "per_core_mib_s": c / *n as f64})).collect::<Vec<_>>(),
        "encode": encode.iter().map(|(k, n, e, r)| json!({"case": k, "threads": n, "mib_s": e, "ratio": r})).collect::<Vec<_>>(),
        "disk": disk.map(|(rate, bytes)| json!({"stored_mib_s": rate, "bytes": bytes})),
        "cells": cells,
    })
}

const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// Throughput (top) and efficiency (bottom) against threads, tmpfs left and disk right;
/// one line per case and path (zero-copy solid, copy dashed).
fn plot(cfg: &Config, cells: &[Cell], path: &Path) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (1200, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("zarrstream scaling · {}", support::machine()),
        ("sans-serif", 18),
    )?;
    let panels = root.split_evenly((2, 2));
    let max_n = cfg.threads.iter().copied().max().unwrap_or(1) as f64;
    for (col, dest) in ["tmpfs", "disk"].iter().enumerate() {
        let ok: Vec<&Cell> = cells
            .iter()
            .filter(|c| c.dest == *dest && c.verdict.is_ok())
            .collect();
        let top = ok.iter().map(|c| c.run.mib_s()).fold(1.0, f64::max) * 1.1;
        for (row, (what, y_max)) in [("MiB/s", top), ("efficiency", 1.2)].iter().enumerate() {
            let area = &panels[row * 2 + col];
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{what} · {dest}"), ("sans-serif", 15))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(55)
                .build_cartesian_2d(0.5..max_n + 0.5, 0.0..*y_max)?;
            chart
                .configure_mesh()
                .x_desc("threads (cores)")
                .y_desc(*what)
                .x_labels(max_n as usize + 1)
                .x_label_formatter(&|x| {
                    if x.fract() == 0.0 {
                        format!("{x:.0}")
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| {
                    if row == 0 {
                        format!("{y:.0}")
                    } else {
                        format!("{y:.1}")
                    }
                })
                .draw()?;
            for (ci, case) in cfg.cases.iter().enumerate() {
                for p in &cfg.paths {
                    let mut pts: Vec<(f64, f64)> = ok
                        .iter()
                        .filter(|c| c.case.key == case.key && &c.path == p)
                        .map(|c| {
                            let y = if row == 0 {
                                c.run.mib_s()
                            } else {
                                c.efficiency
                            };
                            (c.threads as f64, y)
                        })
                        .filter(|pt| pt.1.is_finite())
                        .collect();
                    if pts.is_empty() {
                        continue;
                    }
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let color = COLORS[ci % COLORS.len()];
                    let label = format!("{} {p}", case.label);
                    let style = color.stroke_width(2);
                    if p == "copy" {
                        chart
                            .draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style))?
                            .label(label)
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 20, y)], color)
                            });
                    } else {
                        chart
                            .draw_series(LineSeries::new(pts.clone(), style))?
                            .label(label)
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                            });
                    }
                    chart.draw_series(pts.iter().map(|&pt| Circle::new(pt, 3, color.filled())))?;
                }
            }
            if row == 0 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperLeft)
                    .border_style(BLACK)
                    .background_style(WHITE.mix(0.85))
                    .label_font(("sans-serif", 11))
                    .draw()?;
            }
        }
    }
    root.present()?;
    Ok(())
}
