//! A long acquisition at full speed: throughput, memory and the page
//! cache held by finished shards, sampled every second, must stay flat.
//!
//! ```text
//! cargo bench --bench longrun -- [--frames 10000] [--size 512] [--chunk 1,128,128]
//!     [--shard 32,512,512] [--codec lz4:1] [--sink auto]
//!     [--durability shard|periodic:MS|none] [--dir DIR] [--mover MS] [--md FILE]
//! ```
//!
//! C1's chunking scaled down to 512×512 frames: a chunk is a quarter of the frame edge,
//! a shard 32 frames. A sampler thread records each second: frames pushed, the process
//! RSS, the kernel's dirty + writeback pages, the page cache held by the store's files
//! (`fincore` from util-linux on every file under the store), this process's open
//! descriptors (all, on finished shards, on deleted files), its mappings of store
//! files, and the space used on the store's file system. Flatness is judged by
//! comparing the first and last thirds of the run.
//!
//! `--dir` puts the store in a directory of its own (a file system of its own shows the
//! space used by the store alone); `--mover MS` runs a data mover beside the writer: a
//! thread that deletes every finished shard MS milliseconds after it appeared, and the
//! directories it empties, as a transfer to a file server does in a days-long
//! acquisition. With one-frame shards this runs hundreds of thousands of shards in
//! minutes (BENCHMARKS.md, the long run).

use zarrstream_testkit::mover;
mod support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use support::{Args, median, mib};
use zarrstream::{ArraySpec, Codec, DataType, Durability, SinkChoice, Writer, WriterOptions};

/// One second of the run.
#[derive(Debug, Clone, Copy)]
struct Sample {
    t: f64,
    frames: u64,
    rss: u64,
    dirty: u64,
    cached_store: u64,
    fds: u64,
    /// Descriptors on files under `c/` (finished shards).
    fds_shards: u64,
    /// Descriptors on deleted files.
    fds_deleted: u64,
    /// Mappings of files under the store.
    maps: u64,
    /// Bytes used on the store's file system.
    fs_used: u64,
    /// Shards the mover has deleted so far.
    moved: u64,
}

fn main() {
    support::fixed_malloc_threshold();
    let args = Args::parse();
    let frames: u64 = args.num("--frames", 10_000);
    let size: u64 = args.num("--size", 512);
    let chunk = parse3(args.get("--chunk").unwrap_or("1,128,128"));
    let shard = parse3(args.get("--shard").unwrap_or("32,512,512"));
    let codec: Codec = args
        .get("--codec")
        .unwrap_or("lz4:1")
        .parse()
        .expect("codec");
    let sink: SinkChoice = args.get("--sink").unwrap_or("auto").parse().expect("sink");
    let durability: Durability = args
        .get("--durability")
        .unwrap_or("shard")
        .parse()
        .unwrap_or_else(|e| panic!("--durability: {e}"));
    let mover_ms: Option<u64> = args.get("--mover").map(|m| m.parse().expect("--mover MS"));
    let md_path = args
        .get("--md")
        .map(PathBuf::from)
        .unwrap_or_else(|| support::out_dir().join("longrun.md"));

    // 256 distinct frames (128 MiB at 512×512), cycled.
    let pool = support::render(256, size, size);
    let frame_bytes = pool[0].len() as u64;
    let spec = ArraySpec::builder()
        .shape([0, size, size])
        .chunk_shape(chunk)
        .shard_shape(shard)
        .dtype(DataType::UInt16)
        .codec(codec)
        .build()
        .expect("valid spec");
    let parent = args
        .get("--dir")
        .map(PathBuf::from)
        .unwrap_or_else(support::out_dir);
    let store = parent.join("longrun.zarr");
    let _ = std::fs::remove_dir_all(&store);

    let pushed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let moved = Arc::new(AtomicU64::new(0));
    let base_rss = support::status_bytes("VmRSS");
    let base_used = fs_used(&parent);
    let mover_thread = mover_ms.map(|ms| {
        let (done, store, moved) = (done.clone(), store.clone(), moved.clone());
        std::thread::spawn(move || mover::run(&store, Duration::from_millis(ms), &done, &moved))
    });
    let sampler = {
        let (pushed, done, store, moved) =
            (pushed.clone(), done.clone(), store.clone(), moved.clone());
        std::thread::spawn(move || sample(&pushed, &done, &store, &moved))
    };
    let options = WriterOptions::default().sink(sink).durability(durability);
    let mut w = Writer::create(&store, spec, options).expect("create the store");
    let t0 = Instant::now();
    for k in 0..frames {
        let _ = w
            .push_bytes(&pool[(k % pool.len() as u64) as usize], Instant::now())
            .expect("push");
        pushed.store(k + 1, Ordering::Relaxed);
    }
    let stats = w.finish().expect("finish");
    let seconds = t0.elapsed().as_secs_f64();
    // One more sample after the end shows what the finished store keeps cached.
    std::thread::sleep(Duration::from_millis(1500));
    done.store(true, Ordering::Relaxed);
    let samples = sampler.join().expect("sampler");
    if let Some(m) = mover_thread {
        m.join().expect("mover");
    }
    let final_cached = fincore(&store);
    let stored = support::stored_bytes(&store);
    let _ = std::fs::remove_dir_all(&store);

    let md = report(&Summary {
        frames,
        size,
        chunk,
        shard,
        codec,
        sink: stats.sink,
        durability,
        seconds,
        frame_bytes,
        stored,
        base_rss,
        pool_bytes: stats.pool_bytes as u64,
        final_cached,
        shards: stats.shards,
        moved: moved.load(Ordering::Relaxed),
        mover_ms,
        base_used,
        samples,
    });
    println!("{md}");
    match std::fs::write(&md_path, &md) {
        Ok(()) => eprintln!("written to {}", md_path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", md_path.display()),
    }
}

fn parse3(s: &str) -> [u64; 3] {
    let v: Vec<u64> = s.split(',').map(|x| x.parse().expect("number")).collect();
    v.try_into().expect("three numbers")
}

fn sample(pushed: &AtomicU64, done: &AtomicBool, store: &Path, moved: &AtomicU64) -> Vec<Sample> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut next = t0;
    while !done.load(Ordering::Relaxed) {
        next += Duration::from_secs(1);
        support::spin_until(next);
        let fds = descriptors(store);
        out.push(Sample {
            t: t0.elapsed().as_secs_f64(),
            frames: pushed.load(Ordering::Relaxed),
            rss: support::status_bytes("VmRSS"),
            dirty: support::meminfo_bytes("Dirty") + support::meminfo_bytes("Writeback"),
            cached_store: fincore(store),
            fds: fds.all,
            fds_shards: fds.shards,
            fds_deleted: fds.deleted,
            maps: mappings(store),
            fs_used: store.parent().map_or(0, fs_used),
            moved: moved.load(Ordering::Relaxed),
        });
    }
    out
}

/// This process's open descriptors: all, those on regular files under the store's
/// `c/` (finished shards), and those on deleted files.
struct Fds {
    all: u64,
    shards: u64,
    deleted: u64,
}

fn descriptors(store: &Path) -> Fds {
    let chunks = store.join("c");
    let mut fds = Fds {
        all: 0,
        shards: 0,
        deleted: 0,
    };
    for e in std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
    {
        fds.all += 1;
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let text = target.to_string_lossy();
        if text.ends_with(" (deleted)") {
            fds.deleted += 1;
        } else if target.starts_with(&chunks) && target.is_file() {
            fds.shards += 1;
        }
    }
    fds
}

/// Mappings of files under the store (`/proc/self/maps`).
fn mappings(store: &Path) -> u64 {
    let store = store.to_string_lossy();
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().filter(|l| l.contains(store.as_ref())).count() as u64)
        .unwrap_or(0)
}

/// Bytes used on the file system holding `dir`.
fn fs_used(dir: &Path) -> u64 {
    rustix::fs::statvfs(dir)
        .map(|st| st.f_blocks.saturating_sub(st.f_bfree) * st.f_frsize)
        .unwrap_or(0)
}

/// Bytes of the files under `dir` resident in the page cache (`fincore`, util-linux).
fn fincore(dir: &Path) -> u64 {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    if files.is_empty() {
        return 0;
    }
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .args(&files)
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.trim().parse::<u64>().ok())
            .sum(),
        Err(_) => 0,
    }
}

struct Summary {
    frames: u64,
    size: u64,
    chunk: [u64; 3],
    shard: [u64; 3],
    codec: Codec,
    sink: zarrstream::SinkKind,
    durability: Durability,
    seconds: f64,
    frame_bytes: u64,
    stored: u64,
    base_rss: u64,
    pool_bytes: u64,
    final_cached: u64,
    shards: u64,
    moved: u64,
    mover_ms: Option<u64>,
    base_used: u64,
    samples: Vec<Sample>,
}

fn report(s: &Summary) -> String {
    let mut md = String::new();
    let raw = s.frames * s.frame_bytes;
    let _ = writeln!(md, "### Long run\n");
    let _ = writeln!(
        md,
        "{} · {} frames {}×{} u16 ({:.2} GiB raw) · chunk {:?} shard {:?} · {} · sink {} · durability {}\n",
        support::machine(),
        s.frames,
        s.size,
        s.size,
        raw as f64 / (1u64 << 30) as f64,
        s.chunk,
        s.shard,
        s.codec.label(),
        s.sink,
        s.durability,
    );
    let _ = writeln!(
        md,
        "Total: {:.1} s, **{:.0} MiB/s** raw, compression ratio {:.3}, frame pool {:.0} MiB.\n",
        s.seconds,
        mib(raw) / s.seconds,
        raw as f64 / s.stored.max(1) as f64,
        mib(s.pool_bytes),
    );
    // Per-second rates from consecutive samples; the last samples (after the end) have
    // no pushes and are left out of the rate statistics.
    let mut rows = Vec::new();
    let mut prev = (0.0, 0u64);
    for x in &s.samples {
        let rate = mib((x.frames - prev.1) * s.frame_bytes) / (x.t - prev.0);
        rows.push((x, rate));
        prev = (x.t, x.frames);
    }
    let active: Vec<_> = rows
        .iter()
        .filter(|(x, _)| x.frames < s.frames)
        .copied()
        .collect();
    let third = (active.len() / 3).max(1);
    if active.len() >= 3 {
        let part = |r: &[(&Sample, f64)], f: &dyn Fn(&(&Sample, f64)) -> f64| {
            let mut v: Vec<f64> = r.iter().map(f).collect();
            median(&mut v)
        };
        let (first, last) = (&active[..third], &active[active.len() - third..]);
        let rss = |r: &(&Sample, f64)| mib(r.0.rss.saturating_sub(s.base_rss));
        let cache = |r: &(&Sample, f64)| mib(r.0.cached_store);
        let dirty = |r: &(&Sample, f64)| mib(r.0.dirty);
        let rate = |r: &(&Sample, f64)| r.1;
        let max = |f: &dyn Fn(&(&Sample, f64)) -> f64| active.iter().map(f).fold(0.0f64, f64::max);
        let _ = writeln!(
            md,
            "| per-second median | first third | last third | last / first | max over the run |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|");
        let fds = |r: &(&Sample, f64)| r.0.fds as f64;
        let fds_shards = |r: &(&Sample, f64)| r.0.fds_shards as f64;
        let fds_deleted = |r: &(&Sample, f64)| r.0.fds_deleted as f64;
        let maps = |r: &(&Sample, f64)| r.0.maps as f64;
        let used = |r: &(&Sample, f64)| mib(r.0.fs_used.saturating_sub(s.base_used));
        for (name, f) in [
            ("throughput MiB/s", &rate as &dyn Fn(&(&Sample, f64)) -> f64),
            ("extra RSS MiB", &rss),
            ("page cache of the store MiB", &cache),
            ("dirty + writeback MiB (system)", &dirty),
            ("open descriptors", &fds),
            ("descriptors on finished shards", &fds_shards),
            ("descriptors on deleted files", &fds_deleted),
            ("mappings of store files", &maps),
            ("file-system use over the start MiB", &used),
        ] {
            let (a, b) = (part(first, f), part(last, f));
            let _ = writeln!(
                md,
                "| {name} | {a:.0} | {b:.0} | {:.2} | {:.0} |",
                if a > 0.0 { b / a } else { f64::NAN },
                max(f)
            );
        }
        let _ = writeln!(md);
    }
    if let Some(ms) = s.mover_ms {
        let _ = writeln!(
            md,
            "Data mover: deleted {} of {} shards, each {ms} ms after it appeared.\n",
            s.moved, s.shards
        );
    }
    let _ = writeln!(
        md,
        "Page cache held by the finished store right after `finish`: {:.1} MiB of {:.0} MiB stored.\n",
        mib(s.final_cached),
        mib(s.stored)
    );
    let _ = writeln!(
        md,
        "<details><summary>every second</summary>\n\n| t s | frames | MiB/s | extra RSS MiB | store cache MiB | dirty+wb MiB | fds | on shards | deleted | maps | fs use MiB | moved |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (x, rate) in &rows {
        let _ = writeln!(
            md,
            "| {:.0} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {:.0} | {} |",
            x.t,
            x.frames,
            rate,
            mib(x.rss.saturating_sub(s.base_rss)),
            mib(x.cached_store),
            mib(x.dirty),
            x.fds,
            x.fds_shards,
            x.fds_deleted,
            x.maps,
            mib(x.fs_used.saturating_sub(s.base_used)),
            x.moved
        );
    }
    let _ = writeln!(md, "\n</details>");
    md
}
