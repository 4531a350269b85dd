//! The memory estimate against the measured peak (BENCHMARKS.md §14).
//!
//! For every C1/C2 workload × codec (`lz4:1`, `zstd:1`, `none`) × sink (`direct`,
//! `pwrite`, `mmap`), and the pyramid (C1 `lz4:1`, 4 levels, direct), one child process
//! renders the camera frames, reads its RSS, resets `VmHWM`, then creates the writer,
//! pushes the frames as fast as it takes them, finishes, and reads `VmHWM`. The measured
//! peak is `VmHWM` minus the RSS before the writer: what the writer added to the
//! process's resident set (anonymous buffers, mapped shard pages, stacks, heap). It is
//! compared with [`MemoryEstimate::resident`] (every part but the page cache, which RSS
//! does not count); the writer's own count of its buffers (`Stats::memory.peak`) is
//! printed beside them. A child per configuration, so no run inherits another's heap.
//!
//! Options (after `cargo bench --bench memory --`): `--frames N` frames per run per
//! shard row (default 4 shards: 128 frames for C1, 256 for C2), `--threads N` (default
//! 0: one per core), `--workloads C1,C2`, `--codecs lz4:1,zstd:1,none`, `--sinks
//! direct,pwrite,mmap`, `--no-pyramid`.

mod support;

use std::process::Command;

use support::{Args, C1, Workload, mib, out_dir, render, reset_peak, status_bytes};
use zarrstream::{
    Codec, Levels, Ome, SinkChoice, Writer, WriterOptions, estimate_memory, estimate_memory_ome,
};

/// Frames rendered once and cycled (as the other benchmarks do).
const RENDERED: usize = 16;

struct Config {
    workload: Workload,
    codec: String,
    sink: SinkChoice,
    levels: usize,
}

impl Config {
    fn args(&self) -> Vec<String> {
        vec![
            "--child".into(),
            self.workload.name.into(),
            self.codec.clone(),
            self.sink.as_str().into(),
            self.levels.to_string(),
        ]
    }

    fn ome(&self) -> Option<Ome> {
        (self.levels > 1).then(|| Ome::new().levels(Levels::Count(self.levels)))
    }
}

/// One run's figures, as the child prints them.
struct Figures {
    estimate: u64,
    measured: u64,
    counted: u64,
    page_cache: u64,
    seconds: f64,
}

fn main() {
    let args = Args::parse();
    let threads: usize = args
        .get("--threads")
        .map_or(0, |v| v.parse().expect("--threads N"));
    if args.flag("--child") {
        child(&args, threads);
        return;
    }
    let list = |key: &str, default: &str| -> Vec<String> {
        args.get(key)
            .unwrap_or(default)
            .split(',')
            .map(str::to_string)
            .collect()
    };
    let workloads: Vec<Workload> = list("--workloads", "C1,C2")
        .iter()
        .map(|w| Workload::by_name(w).expect("--workloads C1,C2"))
        .collect();
    let mut configs = Vec::new();
    for w in &workloads {
        for codec in list("--codecs", "lz4:1,zstd:1,none") {
            for sink in list("--sinks", "direct,pwrite,mmap") {
                configs.push(Config {
                    workload: *w,
                    codec: codec.clone(),
                    sink: sink.parse().expect("--sinks direct,pwrite,mmap"),
                    levels: 1,
                });
            }
        }
    }
    if !args.flag("--no-pyramid") {
        configs.push(Config {
            workload: C1,
            codec: "lz4:1".into(),
            sink: SinkChoice::Direct,
            levels: 4,
        });
    }
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mut rows = Vec::new();
    for c in &configs {
        let mut cmd = Command::new(&exe);
        cmd.args(c.args());
        for key in ["--frames", "--threads"] {
            if let Some(v) = args.get(key) {
                cmd.args([key, v]);
            }
        }
        let out = cmd.output().expect("run a configuration");
        assert!(
            out.status.success(),
            "{} {} {} failed: {}",
            c.workload.name,
            c.codec,
            c.sink,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let f = parse(&text).unwrap_or_else(|| panic!("unreadable child output: {text}"));
        rows.push((c, f));
    }
    let mut table = String::new();
    table.push_str(
        "| workload | codec | sink | levels | estimate MiB (resident) | measured peak MiB | **measured / estimate** | counted peak MiB | page cache allowed MiB | s |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let (mut within, mut bounded) = (0, 0);
    for (c, f) in &rows {
        let ratio = f.measured as f64 / f.estimate.max(1) as f64;
        bounded += usize::from(f.measured <= f.estimate);
        within += usize::from(f.measured <= f.estimate && ratio >= 0.75);
        table.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | **{:.3}** | {:.1} | {:.1} | {:.1} |\n",
            c.workload.name,
            c.codec,
            c.sink,
            c.levels,
            mib(f.estimate),
            mib(f.measured),
            ratio,
            mib(f.counted),
            mib(f.page_cache),
            f.seconds,
        ));
    }
    table.push_str(&format!(
        "\nestimate ≥ measured in {bounded} of {n}; also within 25 % (measured ≥ 0.75 × estimate) in {within} of {n}\n",
        n = rows.len()
    ));
    print!("{table}");
    let path = out_dir().join("memory.md");
    std::fs::write(&path, &table).expect("write the table");
    eprintln!("table written to {}", path.display());
}

fn parse(text: &str) -> Option<Figures> {
    let line = text.lines().find(|l| l.starts_with("figures "))?;
    let v: Vec<&str> = line.split_whitespace().skip(1).collect();
    Some(Figures {
        estimate: v.first()?.parse().ok()?,
        measured: v.get(1)?.parse().ok()?,
        counted: v.get(2)?.parse().ok()?,
        page_cache: v.get(3)?.parse().ok()?,
        seconds: v.get(4)?.parse().ok()?,
    })
}

/// One configuration in this process: `--child WORKLOAD CODEC SINK LEVELS`.
fn child(args: &Args, threads: usize) {
    let pos: Vec<String> = std::env::args().skip_while(|a| a != "--child").collect();
    let workload = Workload::by_name(&pos[1]).expect("workload");
    let codec: Codec = pos[2].parse().expect("codec");
    let sink: SinkChoice = pos[3].parse().expect("sink");
    let levels: usize = pos[4].parse().expect("levels");
    let config = Config {
        workload,
        codec: pos[2].clone(),
        sink,
        levels,
    };
    let shard_frames = workload.shard[0] as usize;
    let frames = args
        .get("--frames")
        .map_or(4 * shard_frames, |v| v.parse().expect("--frames N"));
    let spec = workload.spec(codec);
    let options = WriterOptions::default().threads(threads).sink(sink);
    let ome = config.ome();
    let estimate = match &ome {
        Some(o) => estimate_memory_ome(&spec, o, &options),
        None => estimate_memory(&spec, &options),
    }
    .expect("estimate");
    let rendered = render(RENDERED, workload.frame[0], workload.frame[1]);
    let path = out_dir().join(format!(
        "memory-{}-{}-{}-{}.zarr",
        workload.name,
        pos[2].replace(':', ""),
        sink,
        levels
    ));
    let _ = std::fs::remove_dir_all(&path);
    let base = status_bytes("VmRSS");
    reset_peak();
    let t0 = std::time::Instant::now();
    let mut w = match &ome {
        Some(o) => Writer::create_ome(&path, spec, o, options),
        None => Writer::create(&path, spec, options),
    }
    .expect("create the store");
    for k in 0..frames {
        let _ = w
            .push_bytes(&rendered[k % RENDERED], std::time::Instant::now())
            .expect("push");
    }
    let stats = w.finish().expect("finish");
    let seconds = t0.elapsed().as_secs_f64();
    let measured = status_bytes("VmHWM").saturating_sub(base);
    let _ = std::fs::remove_dir_all(&path);
    assert_eq!(stats.memory.current, 0, "buffers outlived the writer");
    println!(
        "figures {} {} {} {} {:.2}",
        estimate.resident(),
        measured,
        stats.memory.peak,
        estimate.page_cache,
        seconds
    );
    eprintln!("{estimate}");
}
