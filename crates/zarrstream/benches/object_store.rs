//! Object storage (BENCHMARKS.md §15): zarrstream recording into an S3 server on
//! loopback, Garage 2.5.0 started by `zarrstream_testkit::garage`, against baselines
//! measured in the same run.
//!
//! ```text
//! cargo bench -p zarrstream --bench object_store -- [--repeats 5] [--frames 128]
//!     [--codecs lz4:1,none] [--parts-frames 64] [--only single|parts]
//!     [--aqz-layouts c1,shard-chunk,chunk-objects|none] [--baseline-record BINARY]
//!     [--record BINARY] [--server-cpus LIST] [--writer-cpus LIST] [--split-cores]
//!     [--python target/peers-venv/bin/python] [--no-verify] [--md FILE]
//! ```
//!
//! - `--record BINARY`: the `zarrstream` binary whose `record` is measured (and which
//!   writes the frames file); by default it is built here with cargo, as the tests build
//!   it. A machine without cargo (the bench binary copied there) must give it.
//! - `--server-cpus LIST`, `--writer-cpus LIST` (LIST: `0-7`, `0,2,4`, `0-3,8-11`; CPUs
//!   this process may run on): Garage on the server's CPUs, every client (`record`, the
//!   ceiling's uploads, acquire-zarr, this process) on the writer's, so that neither takes
//!   the other's CPU, as with a store on another machine. Either alone: the other gets
//!   the remaining CPUs. `record` then runs with `--threads` = the number of writer CPUs
//!   and pins its workers as it does by default, within its CPU set (the library pins
//!   worker `i` to the `i`-th CPU the starting thread may run on); acquire-zarr gets as
//!   many threads. Without either: nothing pinned, 2 threads.
//! - `--split-cores`: shorthand for the lower half of the CPUs for the writer and the
//!   upper half for the server (`--writer-cpus 0 --server-cpus 1` on two cores).
//! - `ZARRSTREAM_GARAGE=PATH`: the Garage binary (else the test harness's cache, built
//!   with `cargo install` when missing, which needs the network). A `ZARRSTREAM_GARAGE`
//!   that cannot be run is an error (exit 1); a missing binary without it, a skip.
//!
//! The run's wall time is printed at the end and written under the table.
//!
//! **One node, C1** (2048 × 2048 `uint16`, chunk 1 × 512 × 512, shard 32 × 2048 × 2048,
//! the `--frames` synthetic camera frames of `tools/peers/`, `target/peers/frames-N.raw`,
//! written by `zarrstream record --save-frames` when missing). Each repeat starts a fresh
//! single-node Garage: Garage stores a 1 MiB block once per content hash, so a repeat's
//! shards, identical to the previous repeat's, would otherwise skip the server's disk.
//! Per codec, in an order that rotates with the repeat:
//! - **zarrstream**: `zarrstream record` (release, built here as the tests build it, or
//!   `--record`) with `--input` frames, 2 threads (or one per writer CPU) and `tools/peers/`'s other flags, `--out
//!   s3://BUCKET/PREFIX`, staging under `target/bench-out/object-store/`. Timed by its
//!   report: first push until `finish` returned, i.e. every shard and `zarr.json` in the
//!   bucket. Extra RSS from the report (VmHWM reset after loading the frames).
//! - **ceiling**: the objects zarrstream stored in this run (listed and downloaded
//!   afterwards, every byte XORed with 0x5A: the same sizes and the same
//!   compressibility for Garage's zstd, but not the same blocks for its deduplication),
//!   uploaded again by `object_store` alone, from memory: `WriteMultipart` with
//!   `RemoteOptions::default().part_size` (8 MiB) parts, 2 parts in flight per object,
//!   `uploads_in_flight` (4) objects at once, an object of one part a single PUT.
//! - **acquire-zarr**: acquire-zarr 0.10's S3 mode (`S3Settings`, credentials from
//!   `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`) in the peers' venv, run as
//!   `tools/peers/compare.py --child-write` runs it locally (same frames, chunk, shard,
//!   codec and `record`'s threads), timed as the peers are: stream creation until `close()`
//!   returned. Skipped, with a message, when the venv cannot import `acquire_zarr`
//!   (`tools/peers/run` creates it). Its S3 sink takes a shard's chunks only in order,
//!   so C1 (`c1`) fails in it (corrupt parts refused by the server, crashes); the
//!   table also gives the two nearest layouts it writes: one 32 × 2048 × 2048 chunk per
//!   shard (`shard-chunk`, C1's object sizes) and C1's chunks one per object
//!   (`chunk-objects`). A failed run is listed with acquire-zarr's first error.
//! - **baseline** (`--baseline-record BINARY`): another build of the `zarrstream` CLI (its
//!   `record`), run like
//!   zarrstream right before or after it, for before/after comparisons of a change.
//!
//! Ratios are taken within a repeat (its runs are adjacent in time), then the median over
//! repeats. "busy cores" is the whole machine's CPU time during the timed phase over its
//! wall time (the server, the writer and anything else running); "CPU s" that of the
//! writer (`record` less its loading of the frames; the ceiling's own process) and of
//! the Garage server. With `--server-cpus`/`--writer-cpus`, this process and every client
//! is started inside the writer's CPUs (`taskset`), each Garage server inside the
//! server's: started from a thread moved there first, since Garage sizes its runtime by
//! the CPUs it may run on at start, then every thread of it moved again (`taskset -a`).
//!
//! **Several PCs** (`--parts-frames M`, C1, `lz4:1`): a fresh 3-node Garage (replication
//! 3) per run. Three `record --part-of K/3` processes, started together, each pushes its
//! own camera's M frames (synthetic, seed 20240611 + K, so no two parts share a block);
//! then `publish_parts` (what `zarrstream publish URL` runs) writes the shared
//! `zarr.json`. Against one plain `record` process pushing the same 3 × M frames into a
//! fresh cluster of the same kind. Aggregate MiB/s = raw bytes of all processes / (first
//! process's "frames ready" line → last process's exit), for both. These `record`s get
//! `--no-pin` with writer CPUs: three processes each pinning its worker `i` to the set's
//! `i`-th CPU would stack their workers on the same CPUs.
//!
//! Every output is read back from the bucket with zarrs and compared with the frames
//! exactly (`--no-verify` skips it). Without the Garage binary (which the harness builds
//! once when missing) or a `record` it can build, the benchmark prints why and exits 0.
//!
//! Paths (the frames file `target/peers/frames-N.raw`, `tools/peers/compare.py`, the
//! venv, a relative `--md`) are taken from the repository root: where this bench was
//! compiled, or, for a binary copied to a machine where that directory does not exist,
//! the current directory. Scratch goes to `$ZARRSTREAM_BENCH_DIR/object-store` (default
//! `target/bench-out/object-store`).

mod support;

use zarrstream_testkit::cli as record_cli;
use zarrstream_testkit::garage;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use garage::Garage;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use serde_json::{Value, json};
use support::{Args, median, mib};
use zarrstream::remote::{RemoteOptions, publish_parts};

const H: usize = 2048;
const W: usize = 2048;
const FRAME_BYTES: usize = H * W * 2;
/// C1 (BENCHMARKS.md §2), as `record` flags.
const C1: [&str; 6] = [
    "--chunk",
    "1,512,512",
    "--shard",
    "32,2048,2048",
    "--shape",
    "0,2048,2048",
];
/// Shard depth of C1 (frames per shard).
const SHARD_T: u64 = 32;
/// Multipart parts in flight per object: the uploader's (`remote/mirror.rs`).
const PARTS_IN_FLIGHT: usize = 2;
/// Makes the ceiling's bytes differ from zarrstream's in every block.
const XOR: u8 = 0x5a;
/// `/proc` reports CPU times in USER_HZ, 100 on Linux/x86-64 (part of the ABI).
const USER_HZ: f64 = 100.0;
const SEED: u64 = 20_240_611;

fn main() {
    support::fixed_malloc_threshold();
    let started = Instant::now();
    let args = Args::parse();
    let repeats: usize = args.num("--repeats", 5);
    let frames: usize = args.num("--frames", 128);
    let parts_frames: usize = args.num("--parts-frames", 64);
    let codecs = args.list("--codecs", "lz4:1,none");
    let only = args.get("--only").map(str::to_owned);
    let verify = !args.flag("--no-verify");
    let root = repo_root();
    let out = std::env::var_os("ZARRSTREAM_BENCH_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| root.join("target/bench-out"), PathBuf::from);
    // cargo runs benchmarks in the package's directory: a relative --md is taken from
    // the repository root, where the command is typed.
    let md_path = args
        .get("--md")
        .map_or_else(|| out.join("object-store.md"), |p| root.join(p));
    let cpus = cpu_sets(&args).unwrap_or_else(|e| fail(2, &e));
    let layouts = aqz_layouts(&args).unwrap_or_else(|e| fail(2, &e));

    // The server's speed is part of what is measured: Garage as released, not the
    // tests' build.
    garage::use_release_build();
    if let Err(e) = garage::garage_binary() {
        if let Some(named) = std::env::var_os("ZARRSTREAM_GARAGE").filter(|p| !p.is_empty()) {
            // A binary named on purpose (a machine without network): a run that cannot
            // have it failed, it is not a skip.
            fail(
                1,
                &format!(
                    "no Garage S3 server: ZARRSTREAM_GARAGE={}: {e}",
                    Path::new(&named).display()
                ),
            );
        }
        println!(
            "object_store benchmark SKIPPED: no Garage S3 server: {e}\n\
             (ZARRSTREAM_GARAGE=/path/to/garage names a binary.)"
        );
        return;
    }
    let record = match args.get("--record") {
        Some(p) if Path::new(p).is_file() => PathBuf::from(p),
        Some(p) => fail(2, &format!("--record {p}: no such file")),
        None => match record_cli::binary() {
            Ok(p) => p,
            Err(e) => {
                println!(
                    "object_store benchmark SKIPPED: cannot build zarrstream record: {e}\n\
                     (--record PATH names a built `zarrstream` binary.)"
                );
                return;
            }
        },
    };
    let python = args
        .get("--python")
        .map_or_else(|| root.join("target/peers-venv/bin/python"), PathBuf::from);
    let python = if layouts.is_empty() {
        None
    } else {
        match peers_python(&python) {
            Ok(()) => Some(python),
            Err(e) => {
                println!(
                    "acquire-zarr rows SKIPPED: {} cannot import acquire_zarr ({e}); \
                     `tools/peers/run` creates that venv",
                    python.display()
                );
                None
            }
        }
    };
    let aqz_note = if layouts.is_empty() {
        "--aqz-layouts none"
    } else {
        "no peers venv"
    };
    // Before pinning: it counts the CPUs this process may run on.
    let machine = support::machine();
    let work = out.join("object-store");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)
        .unwrap_or_else(|e| fail(1, &format!("create {}: {e}", work.display())));
    if let Some(c) = &cpus {
        // Before any other thread exists: the runtimes' threads inherit it.
        if let Err(e) = pin(std::process::id(), &c.writer, true) {
            fail(1, &e);
        }
        println!(
            "Garage on CPUs {}; this process, record (--threads {}) and the clients on CPUs {}",
            cpu_list(&c.server),
            c.writer.len(),
            cpu_list(&c.writer)
        );
    }
    let bench = Bench {
        threads: cpus.as_ref().map_or(2, |c| c.writer.len()),
        cpus,
        record,
        baseline: args.get("--baseline-record").map(PathBuf::from),
        python,
        compare_py: root.join("tools/peers/compare.py"),
        work: work.clone(),
        verify,
    };

    let placement = match &bench.cpus {
        Some(c) => format!(
            "Garage on CPUs {}, the writer (`record --threads {}`), the ceiling and \
             acquire-zarr on CPUs {}",
            cpu_list(&c.server),
            bench.threads,
            cpu_list(&c.writer)
        ),
        None => "nothing pinned: the server and the writer share every CPU".to_string(),
    };
    let mut md = format!(
        "# Object storage (Garage {} on loopback)\n\n{}; zarrstream at {}; {placement}; \
         {repeats} repeat(s).\n\n",
        garage::VERSION,
        machine,
        git_head(&root),
    );
    if only.as_deref() != Some("parts") {
        let raw = root.join(format!("target/peers/frames-{frames}.raw"));
        bench.save_frames(&raw, frames, SEED);
        let rows = bench.single(&raw, frames, &codecs, &layouts, repeats);
        let table = single_table(&rows, frames, aqz_note);
        println!("\n{table}");
        md.push_str(&table);
    }
    if only.as_deref() != Some("single") {
        let rows = bench.parts(parts_frames, repeats);
        let table = parts_table(&rows, parts_frames);
        println!("\n{table}");
        md.push_str(&table);
    }
    let wall = started.elapsed().as_secs_f64();
    let _ = writeln!(md, "\nWall time {wall:.0} s ({:.1} min).", wall / 60.0);
    if let Some(d) = md_path.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    std::fs::write(&md_path, &md)
        .unwrap_or_else(|e| fail(1, &format!("write {}: {e}", md_path.display())));
    println!("written to {}", md_path.display());
    println!(
        "object_store: wall time {wall:.0} s ({:.1} min)",
        wall / 60.0
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// Prints `why` and exits with `code` (2: a wrong option; 1: the run cannot be done).
fn fail(code: i32, why: &str) -> ! {
    eprintln!("object_store: {why}");
    std::process::exit(code)
}

/// The repository root: where this bench was compiled, else (the binary copied to another
/// machine, e.g. by `tools/scaling/run`) the current directory.
fn repo_root() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    if built.join("Cargo.toml").is_file() {
        built
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
    }
}

/// `--aqz-layouts`: the acquire-zarr layouts to run (`none`: no acquire-zarr rows).
fn aqz_layouts(args: &Args) -> Result<Vec<&'static Layout>, String> {
    let names = args.list("--aqz-layouts", "c1,shard-chunk,chunk-objects");
    names
        .iter()
        .filter(|n| n.as_str() != "none")
        .map(|n| {
            LAYOUTS
                .iter()
                .find(|l| l.name == n.as_str())
                .ok_or_else(|| {
                    format!("--aqz-layouts: unknown {n} (c1, shard-chunk, chunk-objects or none)")
                })
        })
        .collect()
}

/// Where the server and the clients run: disjoint sets of CPUs this process may run on.
struct Cpus {
    server: Vec<usize>,
    writer: Vec<usize>,
}

/// `--server-cpus`, `--writer-cpus` and `--split-cores` checked against the CPUs this
/// process may run on; `None` when none is given.
fn cpu_sets(args: &Args) -> Result<Option<Cpus>, String> {
    let (server, writer) = (args.get("--server-cpus"), args.get("--writer-cpus"));
    let split = args.flag("--split-cores");
    if !split && server.is_none() && writer.is_none() {
        return Ok(None);
    }
    let allowed: Vec<usize> = core_affinity::get_core_ids()
        .ok_or("cannot read the CPUs this process may run on (sched_getaffinity)")?
        .into_iter()
        .map(|c| c.id)
        .collect();
    let rest = |taken: &[usize]| -> Vec<usize> {
        allowed
            .iter()
            .copied()
            .filter(|c| !taken.contains(c))
            .collect()
    };
    let parse =
        |flag: &str, text: Option<&str>| text.map(|t| parse_cpus(flag, t, &allowed)).transpose();
    let (server, writer) = match (
        split,
        parse("--server-cpus", server)?,
        parse("--writer-cpus", writer)?,
    ) {
        (true, None, None) => {
            let half = allowed.len() / 2;
            (allowed[half..].to_vec(), allowed[..half].to_vec())
        }
        (true, _, _) => {
            return Err(
                "--split-cores is shorthand for --server-cpus and --writer-cpus: give one or \
                 the other"
                    .into(),
            );
        }
        (false, Some(s), Some(w)) => (s, w),
        (false, Some(s), None) => {
            let w = rest(&s);
            (s, w)
        }
        (false, None, Some(w)) => (rest(&w), w),
        (false, None, None) => return Ok(None),
    };
    let may = cpu_list(&allowed);
    if server.is_empty() {
        return Err(format!(
            "no CPU left for the server (this process may run on {may})"
        ));
    }
    if writer.is_empty() {
        return Err(format!(
            "no CPU left for the writer (this process may run on {may})"
        ));
    }
    let both: Vec<usize> = server
        .iter()
        .copied()
        .filter(|c| writer.contains(c))
        .collect();
    if !both.is_empty() {
        return Err(format!(
            "--server-cpus and --writer-cpus share CPUs {}: the point is cores of their own",
            cpu_list(&both)
        ));
    }
    Ok(Some(Cpus { server, writer }))
}

/// A CPU list (`0-7`, `0,2,4`, `0-3,8-11`), sorted, each CPU one of `allowed`.
fn parse_cpus(flag: &str, text: &str, allowed: &[usize]) -> Result<Vec<usize>, String> {
    let num = |x: &str| {
        x.trim()
            .parse::<usize>()
            .map_err(|_| format!("{flag} {text}: `{x}` is not a CPU number"))
    };
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if a > b {
            return Err(format!("{flag} {text}: the range {part} runs backwards"));
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(format!(
            "{flag} {text}: CPU {c} is not one this process may run on ({})",
            cpu_list(allowed)
        ));
    }
    Ok(cpus)
}

/// `cpus` (sorted) as a CPU list with ranges, `0-3,8`: what `taskset -c` takes.
fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Whether `python` can import acquire-zarr and numpy.
fn peers_python(python: &Path) -> Result<(), String> {
    let out = Command::new(python)
        .args(["-c", "import acquire_zarr, numpy"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn git_head(root: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

struct Bench {
    /// `--server-cpus`/`--writer-cpus`/`--split-cores`: where the server and the clients
    /// run; `None`: nothing pinned.
    cpus: Option<Cpus>,
    /// `record`'s and acquire-zarr's threads: one per writer CPU, else 2.
    threads: usize,
    /// The `zarrstream` binary whose `record` is measured.
    record: PathBuf,
    /// `--baseline-record`: another `zarrstream` binary.
    baseline: Option<PathBuf>,
    python: Option<PathBuf>,
    compare_py: PathBuf,
    work: PathBuf,
    verify: bool,
}

/// One repeat of one codec on one node.
struct SingleRun {
    codec: String,
    zs: Timed,
    ceiling: Timed,
    /// The `--baseline-record` build, if given.
    base: Option<Timed>,
    /// acquire-zarr per layout: its timing and extra RSS, or why it failed.
    aqz: Vec<AqzRun>,
    /// Raw bytes / bytes zarrstream stored.
    compression: f64,
    /// Extra RSS of `record`, its frame pool and the uploader's bound, MiB.
    rss: (f64, f64, f64),
}

/// acquire-zarr's run on one layout: its timing and extra RSS, or why it failed.
type AqzRun = (&'static Layout, Result<(Timed, Option<f64>), String>);

/// An acquire-zarr array layout (t, y, x).
struct Layout {
    name: &'static str,
    what: &'static str,
    chunk: [u64; 3],
    shard: [u64; 3],
}

/// C1, and the nearest layouts acquire-zarr 0.10.0 can write to S3: its S3 sink takes a
/// shard's chunks only in order, which C1's 512 × 512 chunks of a 32-frame shard are not
/// (BENCHMARKS.md §15).
const LAYOUTS: [Layout; 3] = [
    Layout {
        name: "c1",
        what: "C1 (chunk 1×512×512, shard 32×2048×2048)",
        chunk: [1, 512, 512],
        shard: [32, 2048, 2048],
    },
    Layout {
        name: "shard-chunk",
        what: "one 32×2048×2048 chunk per shard (C1's object sizes)",
        chunk: [32, 2048, 2048],
        shard: [32, 2048, 2048],
    },
    Layout {
        name: "chunk-objects",
        what: "C1's 1×512×512 chunks, one per shard (object)",
        chunk: [1, 512, 512],
        shard: [1, 512, 512],
    },
];

/// A timed phase: seconds, bytes moved (raw frames, or the ceiling's object bytes
/// counted as the raw frames they hold), whole-machine busy cores, process CPU seconds.
#[derive(Clone, Copy)]
struct Timed {
    seconds: f64,
    raw_bytes: u64,
    busy_cores: f64,
    /// CPU seconds of the writer (or the ceiling's client).
    cpu_s: Option<f64>,
    /// CPU seconds of the Garage server meanwhile.
    server_cpu_s: Option<f64>,
}

impl Timed {
    fn mib_s(&self) -> f64 {
        mib(self.raw_bytes) / self.seconds
    }
}

/// One repeat of the several-PC comparison.
struct PartsRun {
    one: Timed,
    three: Timed,
    per_process: Vec<f64>,
    publish_s: f64,
}

impl Bench {
    /// A command for a client program, `zarrstream record` for a `zarrstream` binary: on
    /// the writer's CPUs when given (`taskset -c`). `record` pins its workers within them
    /// (the CPUs its starting thread may run on) unless `pin_workers` is false.
    fn client(&self, program: &Path, pin_workers: bool) -> Command {
        let mut cmd = match &self.cpus {
            Some(c) => {
                let mut cmd = Command::new("taskset");
                cmd.args(["-c", &cpu_list(&c.writer)]).arg(program);
                cmd
            }
            None => Command::new(program),
        };
        if program == self.record || Some(program) == self.baseline.as_deref() {
            cmd.arg("record");
            if self.cpus.is_some() && !pin_workers {
                cmd.arg("--no-pin");
            }
        }
        cmd
    }

    /// `start` (which starts Garage under `dir`) with the server's CPUs when given: from
    /// this thread moved onto them first (Garage's runtime takes as many workers as the
    /// CPUs it may run on at start, which it inherits), then every thread of every Garage
    /// process under `dir` moved there (`taskset -a`), and this thread back.
    fn start_server(&self, dir: &Path, start: impl FnOnce() -> Garage) -> Garage {
        let Some(c) = &self.cpus else {
            return start();
        };
        // This process's main thread (its thread id is the process id) alone.
        let me = std::process::id();
        pin(me, &c.server, false).unwrap_or_else(|e| fail(1, &e));
        let g = start();
        pin(me, &c.writer, false).unwrap_or_else(|e| fail(1, &e));
        let pids = garage_pids(dir);
        assert!(
            !pids.is_empty(),
            "no Garage process under {}",
            dir.display()
        );
        for pid in pids {
            pin(pid, &c.server, true).unwrap_or_else(|e| fail(1, &e));
        }
        g
    }

    /// `record --save-frames` of `n` synthetic frames with `seed`, unless `path` has them.
    fn save_frames(&self, path: &Path, n: usize, seed: u64) {
        if std::fs::metadata(path).is_ok_and(|m| m.len() == (n * FRAME_BYTES) as u64) {
            return;
        }
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).expect("create the frames' directory");
        }
        println!(
            "writing {n} synthetic frames (seed {seed}) to {}",
            path.display()
        );
        let status = Command::new(&self.record)
            .args(["record", "--save-frames"])
            .arg(path)
            .args(["--frames", &n.to_string(), "--seed", &seed.to_string()])
            .args(["--shape", "0,2048,2048", "--quiet"])
            .status()
            .expect("run record --save-frames");
        assert!(status.success(), "record --save-frames failed");
    }

    fn single(
        &self,
        raw: &Path,
        frames: usize,
        codecs: &[String],
        layouts: &[&'static Layout],
        repeats: usize,
    ) -> Vec<SingleRun> {
        let all = if self.verify {
            Some(std::fs::read(raw).expect("read the frames"))
        } else {
            None
        };
        let raw_bytes = (frames * FRAME_BYTES) as u64;
        let mut runs = Vec::new();
        for r in 0..repeats {
            let dir = self.work.join(format!("garage-{r}"));
            let g = self.start_server(&dir, || Garage::single(&dir));
            let s3 = S3::new(&g);
            for codec in codecs {
                let tag = codec.replace(':', "");
                let zs_prefix = format!("zs-{tag}-{r}.zarr");
                let ceiling_prefix = format!("ceiling-{tag}-{r}");
                let aqz_runs = || -> Vec<AqzRun> {
                    let Some(py) = self.python.as_ref() else {
                        return Vec::new();
                    };
                    layouts
                        .iter()
                        .map(|&l| {
                            let prefix = format!("aqz-{}-{tag}-{r}.zarr", l.name);
                            let s0 = server_cpu_s(&dir);
                            let mut res = self.acquire_zarr(py, &g, raw, frames, codec, l, &prefix);
                            if let Ok((t, _)) = &mut res {
                                t.server_cpu_s = Some(server_cpu_s(&dir) - s0);
                            }
                            if let (Ok(_), Some(all)) = (&res, &all)
                                && let Err(e) = check_array(
                                    &s3.get_all(&prefix),
                                    &[(0, all.as_slice())],
                                    frames,
                                    false,
                                )
                            {
                                res = Err(format!("read back: {e}"));
                            }
                            s3.delete_prefix(&prefix);
                            (l, res)
                        })
                        .collect()
                };
                // acquire-zarr first in odd repeats: drift hits both sides alike.
                let aqz_first = r % 2 == 1;
                let mut aqz = if aqz_first { aqz_runs() } else { Vec::new() };

                // A baseline build of `record` (--baseline-record) right before or after.
                let baseline_run = || {
                    let bin = self.baseline.as_ref()?;
                    let prefix = format!("base-{tag}-{r}.zarr");
                    let s0 = server_cpu_s(&dir);
                    let (mut t, _) = self.record_one(bin, &g, raw, frames, codec, &prefix);
                    t.server_cpu_s = Some(server_cpu_s(&dir) - s0);
                    s3.delete_prefix(&prefix);
                    Some(t)
                };
                let mut base = if aqz_first { baseline_run() } else { None };
                let s0 = server_cpu_s(&dir);
                let (mut zs, rss) =
                    self.record_one(&self.record, &g, raw, frames, codec, &zs_prefix);
                zs.server_cpu_s = Some(server_cpu_s(&dir) - s0);
                if !aqz_first {
                    base = baseline_run();
                }
                let objects = s3.get_all(&zs_prefix);
                if let Some(all) = &all {
                    check_array(&objects, &[(0, all.as_slice())], frames, false)
                        .unwrap_or_else(|e| panic!("zarrstream {codec} in the bucket: {e}"));
                }
                let stored: u64 = objects.iter().map(|(_, b)| b.len() as u64).sum();
                s3.delete_prefix(&zs_prefix);
                let s0 = server_cpu_s(&dir);
                let mut ceiling = s3.ceiling(&ceiling_prefix, objects, raw_bytes);
                ceiling.server_cpu_s = Some(server_cpu_s(&dir) - s0);
                s3.delete_prefix(&ceiling_prefix);
                if !aqz_first {
                    aqz = aqz_runs();
                }
                let run = SingleRun {
                    codec: codec.clone(),
                    zs,
                    ceiling,
                    base,
                    aqz,
                    compression: raw_bytes as f64 / stored.max(1) as f64,
                    rss,
                };
                let mut line = format!(
                    "[repeat {r}] C1 {codec:6} zarrstream {:6.0} MiB/s  ceiling {:6.0}  \
                     zs/ceiling {:.3}  extra RSS {:.0} MiB",
                    run.zs.mib_s(),
                    run.ceiling.mib_s(),
                    run.zs.mib_s() / run.ceiling.mib_s(),
                    run.rss.0,
                );
                if let Some(b) = run.base {
                    let _ = write!(
                        line,
                        "\n           baseline record {:6.0} MiB/s  zs/baseline {:.3}",
                        b.mib_s(),
                        run.zs.mib_s() / b.mib_s()
                    );
                }
                for (l, res) in &run.aqz {
                    let _ = match res {
                        Ok((t, _)) => write!(
                            line,
                            "\n           acquire-zarr {:13} {:6.0} MiB/s  zs/aqz {:.3}",
                            l.name,
                            t.mib_s(),
                            run.zs.mib_s() / t.mib_s()
                        ),
                        Err(e) => {
                            write!(line, "\n           acquire-zarr {:13} FAILED: {e}", l.name)
                        }
                    };
                }
                println!("{line}");
                runs.push(run);
            }
            drop(s3);
            drop(g);
            let _ = std::fs::remove_dir_all(&dir);
        }
        runs
    }

    /// One `record` run of `bin` into `prefix` on `g`: its timing and (extra RSS, frame
    /// pool, the uploader's bound) in MiB.
    fn record_one(
        &self,
        bin: &Path,
        g: &Garage,
        raw: &Path,
        frames: usize,
        codec: &str,
        prefix: &str,
    ) -> (Timed, (f64, f64, f64)) {
        let report = self.work.join(format!("{prefix}.report.json"));
        let url = format!("s3://{}/{prefix}", g.bucket());
        let mut cmd = self.client(bin, true);
        cmd.arg("--input")
            .arg(raw)
            .args(["--frames", &frames.to_string()])
            .args(C1)
            .args(["--codec", codec, "--threads", &self.threads.to_string()])
            .args(["--sink", "auto", "--pool-frames", "0"])
            .args(["--backpressure", "block", "--durability", "shard"])
            .arg("--staging")
            .arg(self.work.join(format!("{prefix}.staging")))
            .arg("--report")
            .arg(&report)
            .args(["--out", &url])
            .envs(g.env());
        let p = run_processes(vec![cmd]).remove(0);
        let rep = read_report(&report);
        check_report(&rep, frames);
        let timed = Timed {
            seconds: num(&rep, "seconds"),
            raw_bytes: (frames * FRAME_BYTES) as u64,
            busy_cores: p.busy_cores(),
            cpu_s: p.cpu_s,
            server_cpu_s: None,
        };
        let rss = (
            num(&rep, "extra_rss_mib"),
            num(&rep, "pool_mib"),
            uploader_bound_mib(),
        );
        (timed, rss)
    }

    /// acquire-zarr's S3 mode through `compare.py --child-write` on `layout`: its timing
    /// and extra RSS, or why it failed (exit status and its last error line).
    #[allow(clippy::too_many_arguments)]
    fn acquire_zarr(
        &self,
        py: &Path,
        g: &Garage,
        raw: &Path,
        frames: usize,
        codec: &str,
        layout: &Layout,
        prefix: &str,
    ) -> Result<(Timed, Option<f64>), String> {
        let peer_codec = match codec {
            "lz4:1" => "lz4",
            "none" => "none",
            "zstd:1" => "zstd",
            other => panic!("acquire-zarr has no counterpart of {other} here"),
        };
        let job = json!({
            "contender": "acquire-zarr", "config": "C1", "codec": peer_codec,
            "chunk": layout.chunk, "shard": layout.shard,
            "n": frames, "threads": self.threads, "raw": raw, "out": prefix,
            "s3": {"endpoint": g.endpoint(), "bucket": g.bucket(), "region": g.region()},
        });
        let out = self
            .client(py, true)
            .arg(&self.compare_py)
            .arg("--child-write")
            .arg(job.to_string())
            .envs(g.env())
            .stdin(Stdio::null())
            .output()
            .expect("run compare.py --child-write");
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            // The first error acquire-zarr logged says most; the last line, how it ended.
            let first = err.lines().find(|l| l.contains("[ERROR]")).unwrap_or("");
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(format!(
                "{} ({}; {})",
                out.status,
                first.trim(),
                last.trim()
            ));
        }
        let v: Value = text
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| format!("compare.py printed no result: {text}"))?;
        let wall = num(&v, "wall_s");
        let cpu = num(&v, "cpu_s");
        Ok((
            Timed {
                seconds: wall,
                raw_bytes: (frames * FRAME_BYTES) as u64,
                busy_cores: cpu / wall + num(&v, "others_cores"),
                cpu_s: Some(cpu),
                server_cpu_s: None,
            },
            v["extra_rss_mib"].as_f64(),
        ))
    }

    fn parts(&self, m: usize, repeats: usize) -> Vec<PartsRun> {
        let cams: Vec<PathBuf> = (0..3)
            .map(|k| {
                let p = self.work.join(format!("cam{k}-{m}.raw"));
                self.save_frames(&p, m, SEED + k as u64);
                p
            })
            .collect();
        // The single process pushes the same bytes: the three cameras one after another.
        let joined = self.work.join(format!("cams-{m}.raw"));
        {
            let mut out = std::fs::File::create(&joined).expect("create the joined frames");
            for c in &cams {
                let mut f = std::fs::File::open(c).expect("open a camera's frames");
                std::io::copy(&mut f, &mut out).expect("join the frames");
            }
        }
        let frames: Vec<Vec<u8>> = if self.verify {
            cams.iter()
                .map(|c| std::fs::read(c).expect("read a camera's frames"))
                .collect()
        } else {
            Vec::new()
        };
        let raw_bytes = (3 * m * FRAME_BYTES) as u64;
        let mut runs = Vec::new();
        for r in 0..repeats {
            // Alternate which goes first: drift hits both sides alike.
            let mut one = None;
            let mut three = None;
            for side in if r % 2 == 0 { [1, 3] } else { [3, 1] } {
                let dir = self.work.join(format!("cluster-{r}-{side}"));
                let g = self.start_server(&dir, || Garage::cluster(&dir, 3));
                let url = format!("s3://{}/cams.zarr", g.bucket());
                let record = |k: usize, input: &Path, n: usize| {
                    // Three processes pinning their worker `i` to the set's `i`-th CPU would
                    // stack their workers on the same CPUs: the scheduler spreads them.
                    let mut cmd = self.client(&self.record, false);
                    cmd.arg("--input")
                        .arg(input)
                        .args(["--frames", &n.to_string()])
                        .args(C1)
                        .args(["--codec", "lz4:1"])
                        .arg("--staging")
                        .arg(dir.join(format!("staging-{k}")))
                        .arg("--report")
                        .arg(dir.join(format!("report-{k}.json")))
                        .args(["--out", &url])
                        .envs(g.env());
                    if side == 3 {
                        cmd.args(["--part-of", &format!("{k}/3")]);
                    }
                    cmd
                };
                let cmds: Vec<Command> = if side == 1 {
                    vec![record(0, &joined, 3 * m)]
                } else {
                    (0..3).map(|k| record(k, &cams[k], m)).collect()
                };
                let procs = run_processes(cmds);
                let ready = procs.iter().map(|p| p.ready).min().expect("a process");
                let exit = procs.iter().map(|p| p.exit).max().expect("a process");
                let mut per_process = Vec::new();
                for k in 0..procs.len() {
                    let rep = read_report(&dir.join(format!("report-{k}.json")));
                    check_report(&rep, if side == 1 { 3 * m } else { m });
                    per_process.push(num(&rep, "throughput_mib_s"));
                }
                let seconds = (exit - ready).as_secs_f64();
                let busy0 = procs.iter().map(|p| p.busy.0).fold(f64::INFINITY, f64::min);
                let busy1 = procs.iter().map(|p| p.busy.1).fold(0.0, f64::max);
                let timed = Timed {
                    seconds,
                    raw_bytes,
                    busy_cores: (busy1 - busy0) / seconds,
                    cpu_s: None,
                    server_cpu_s: None,
                };
                let s3 = S3::new(&g);
                if side == 1 {
                    if self.verify {
                        let joined_frames: Vec<u8> = frames.concat();
                        check_array(
                            &s3.get_all("cams.zarr"),
                            &[(0, joined_frames.as_slice())],
                            3 * m,
                            false,
                        )
                        .unwrap_or_else(|e| panic!("one process into the cluster: {e}"));
                    }
                    one = Some(timed);
                } else {
                    let t = Instant::now();
                    let report = publish_parts(&url, &remote_options(&g))
                        .expect("publish the parts' zarr.json");
                    let publish_s = t.elapsed().as_secs_f64();
                    assert_eq!(
                        (report.parts_found, report.extent0, report.state.as_str()),
                        (3, m as u64, "finished"),
                        "what publish_parts found"
                    );
                    if self.verify {
                        let cams: Vec<(usize, &[u8])> = frames
                            .iter()
                            .enumerate()
                            .map(|(k, f)| (k, f.as_slice()))
                            .collect();
                        check_array(&s3.get_all("cams.zarr"), &cams, m, true)
                            .unwrap_or_else(|e| panic!("three parts into the cluster: {e}"));
                    }
                    three = Some((timed, per_process, publish_s));
                }
                drop(s3);
                drop(g);
                let _ = std::fs::remove_dir_all(&dir);
            }
            let one = one.expect("the one-process run");
            let (three, per_process, publish_s) = three.expect("the three-process run");
            println!(
                "[repeat {r}] 3-node cluster, lz4:1: 1 process {:.0} MiB/s, 3 processes {:.0} \
                 MiB/s aggregate ({}), ratio {:.3}; publish {:.3} s",
                one.mib_s(),
                three.mib_s(),
                per_process
                    .iter()
                    .map(|v| format!("{v:.0}"))
                    .collect::<Vec<_>>()
                    .join(" + "),
                three.mib_s() / one.mib_s(),
                publish_s
            );
            runs.push(PartsRun {
                one,
                three,
                per_process,
                publish_s,
            });
        }
        let _ = std::fs::remove_file(&joined);
        for c in cams {
            let _ = std::fs::remove_file(c);
        }
        runs
    }
}

/// The Garage server processes whose config lies under `dir`.
fn garage_pids(dir: &Path) -> Vec<u32> {
    let dir = dir.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("garage") && cmdline.contains(&dir) && cmdline.contains("server") {
            pids.push(pid);
        }
    }
    pids
}

/// user + system CPU seconds of the Garage servers under `dir`.
fn server_cpu_s(dir: &Path) -> f64 {
    garage_pids(dir).into_iter().filter_map(process_cpu_s).sum()
}

/// user + system CPU seconds of this process.
fn own_cpu_s() -> f64 {
    let f = stat_fields("self");
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / USER_HZ
}

/// Thread `pid` (with `all`, every thread of process `pid`) onto `cpus` (`taskset -p`).
fn pin(pid: u32, cpus: &[usize], all: bool) -> Result<(), String> {
    let list = cpu_list(cpus);
    let mut cmd = Command::new("taskset");
    if all {
        cmd.arg("-a");
    }
    let out = cmd
        .args(["-p", "-c", &list, &pid.to_string()])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run taskset (util-linux), which pins to CPUs: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "taskset -p -c {list} {pid} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Endpoint and credentials of `g`'s node 0 as `RemoteOptions` (for `publish_parts`).
fn remote_options(g: &Garage) -> RemoteOptions {
    RemoteOptions::default()
        .store_option("aws_endpoint", g.endpoint())
        .store_option("aws_region", g.region())
        .store_option("aws_access_key_id", g.key_id())
        .store_option("aws_secret_access_key", g.secret())
}

/// The most the uploader holds in part buffers, MiB: `2 × uploads_in_flight × part_size`.
fn uploader_bound_mib() -> f64 {
    let d = RemoteOptions::default();
    mib((PARTS_IN_FLIGHT * d.uploads_in_flight * d.part_size) as u64)
}

fn read_report(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read the report {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the report is JSON")
}

fn check_report(rep: &Value, frames: usize) {
    assert_eq!(
        (rep["frames"].as_u64(), rep["dropped"].as_u64()),
        (Some(frames as u64), Some(0)),
        "record pushed every frame and dropped none"
    );
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

/// A finished child process: when it said its frames were ready (the start of its timed
/// phase) and when it exited, the machine's busy CPU seconds at both, and its own CPU
/// seconds in between (when it ran alone).
struct Finished {
    ready: Instant,
    exit: Instant,
    busy: (f64, f64),
    cpu_s: Option<f64>,
}

impl Finished {
    fn busy_cores(&self) -> f64 {
        (self.busy.1 - self.busy.0) / (self.exit - self.ready).as_secs_f64()
    }
}

/// Starts every command at once (stdout discarded, stderr read for `record`'s "ready"
/// line) and waits for all; panics with the stderr of any that failed.
fn run_processes(cmds: Vec<Command>) -> Vec<Finished> {
    let children_cpu0 = children_cpu_s();
    let handles: Vec<_> = cmds
        .into_iter()
        .map(|mut cmd| {
            let mut child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start record");
            std::thread::spawn(move || {
                let pid = child.id();
                let stderr = child.stderr.take().expect("piped stderr");
                let mut lines = Vec::new();
                let mut ready = None;
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if ready.is_none() && line.contains(" ready in ") {
                        ready = Some((Instant::now(), machine_busy_s(), process_cpu_s(pid)));
                    }
                    lines.push(line);
                }
                let status = child.wait().expect("wait for record");
                let exit = Instant::now();
                let busy1 = machine_busy_s();
                assert!(
                    status.success(),
                    "record failed ({status}):\n{}",
                    lines.join("\n")
                );
                let (ready, busy0, cpu_ready) =
                    ready.unwrap_or_else(|| panic!("no ready line:\n{}", lines.join("\n")));
                (
                    Finished {
                        ready,
                        exit,
                        busy: (busy0, busy1),
                        cpu_s: None,
                    },
                    cpu_ready,
                )
            })
        })
        .collect();
    let mut done: Vec<(Finished, Option<f64>)> = handles
        .into_iter()
        .map(|h| h.join().expect("a process reader"))
        .collect();
    if let [(f, Some(at_ready))] = done.as_mut_slice() {
        // One child: the children's CPU it added, less what it spent loading its frames.
        f.cpu_s = Some(children_cpu_s() - children_cpu0 - *at_ready);
    }
    done.into_iter().map(|(f, _)| f).collect()
}

/// Busy CPU seconds of the whole machine (every process), from `/proc/stat`.
fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 8 {
        return 0.0;
    }
    (v.iter().sum::<f64>() - v[3] - v[4]) / USER_HZ
}

/// Fields of `/proc/PID/stat` after the command name (0 = state).
fn stat_fields(pid: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    text.rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map(|x| x.parse().unwrap_or(0.0))
                .collect()
        })
        .unwrap_or_default()
}

/// user + system CPU seconds of a running process.
fn process_cpu_s(pid: u32) -> Option<f64> {
    let f = stat_fields(&pid.to_string());
    Some((f.get(11)? + f.get(12)?) / USER_HZ)
}

/// user + system CPU seconds of this process's waited-for children.
fn children_cpu_s() -> f64 {
    let f = stat_fields("self");
    (f.get(13).copied().unwrap_or(0.0) + f.get(14).copied().unwrap_or(0.0)) / USER_HZ
}

/// A client of `g`'s bucket (node 0) with its own runtime, as the uploader has one.
struct S3 {
    store: Arc<dyn ObjectStore>,
    rt: tokio::runtime::Runtime,
    part_size: usize,
    objects_in_flight: usize,
}

impl S3 {
    fn new(g: &Garage) -> S3 {
        let store = AmazonS3Builder::new()
            .with_endpoint(g.endpoint())
            .with_region(g.region())
            .with_bucket_name(g.bucket())
            .with_access_key_id(g.key_id())
            .with_secret_access_key(g.secret())
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(true)
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(120)),
            )
            .build()
            .expect("an S3 client for the Garage node");
        // The uploader's runtime: two workers (remote/mirror.rs).
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let d = RemoteOptions::default();
        S3 {
            store: Arc::new(store),
            rt,
            part_size: d.part_size,
            objects_in_flight: d.uploads_in_flight,
        }
    }

    /// Every object below `prefix` as (key relative to it, bytes).
    fn get_all(&self, prefix: &str) -> Vec<(String, Bytes)> {
        let store = &self.store;
        self.rt.block_on(async {
            let listed: Vec<_> = store
                .list(Some(&Key::from(prefix)))
                .try_collect()
                .await
                .expect("list the prefix");
            futures::stream::iter(listed)
                .map(|meta| async move {
                    let bytes = store
                        .get(&meta.location)
                        .await
                        .expect("get an object")
                        .bytes()
                        .await
                        .expect("read an object");
                    let rel = meta.location.as_ref()[prefix.len() + 1..].to_string();
                    (rel, bytes)
                })
                .buffer_unordered(4)
                .collect()
                .await
        })
    }

    fn delete_prefix(&self, prefix: &str) {
        let store = &self.store;
        self.rt.block_on(async {
            let listed: Vec<_> = store
                .list(Some(&Key::from(prefix)))
                .map_ok(|m| m.location)
                .try_collect()
                .await
                .expect("list the prefix");
            for p in listed {
                store.delete(&p).await.expect("delete an object");
            }
        });
    }

    /// The upload ceiling: `objects` (XORed) uploaded below `prefix` with the uploader's
    /// part size and concurrency, from memory. `raw_bytes`: the frames they hold.
    fn ceiling(&self, prefix: &str, objects: Vec<(String, Bytes)>, raw_bytes: u64) -> Timed {
        let mut objects: Vec<(Key, Bytes)> = objects
            .into_iter()
            .map(|(rel, b)| {
                let body: Vec<u8> = b.iter().map(|x| x ^ XOR).collect();
                (Key::from(format!("{prefix}/{rel}")), Bytes::from(body))
            })
            .collect();
        // The uploader sends shards in the order they finish: by key here (c/0/…, c/1/…).
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        let store = &self.store;
        let (part, in_flight) = (self.part_size, self.objects_in_flight);
        let busy0 = machine_busy_s();
        let cpu0 = own_cpu_s();
        let t0 = Instant::now();
        self.rt.block_on(async {
            futures::stream::iter(objects)
                .map(
                    |(key, body)| async move { put_object(store.as_ref(), &key, body, part).await },
                )
                .buffer_unordered(in_flight)
                .try_collect::<Vec<()>>()
                .await
                .expect("the ceiling's uploads");
        });
        let seconds = t0.elapsed().as_secs_f64();
        Timed {
            seconds,
            raw_bytes,
            busy_cores: (machine_busy_s() - busy0) / seconds,
            cpu_s: Some(own_cpu_s() - cpu0),
            server_cpu_s: None,
        }
    }
}

/// One object as the uploader sends one: a PUT up to one part, else `WriteMultipart`
/// with `part`-sized parts and at most [`PARTS_IN_FLIGHT`] in flight.
async fn put_object(
    store: &dyn ObjectStore,
    key: &Key,
    body: Bytes,
    part: usize,
) -> object_store::Result<()> {
    if body.len() <= part {
        store.put(key, PutPayload::from(body)).await?;
        return Ok(());
    }
    let upload = store.put_multipart(key).await?;
    let mut w = WriteMultipart::new_with_chunk_size(upload, part);
    let mut at = 0;
    while at < body.len() {
        w.wait_for_capacity(PARTS_IN_FLIGHT).await?;
        let end = (at + part).min(body.len());
        w.put(body.slice(at..end));
        at = end;
    }
    w.finish().await?;
    Ok(())
}

/// Reads the array in `objects` (keys relative to the array) with zarrs and compares it
/// with the frames: `cams` = (camera index, its frames) on axis 1 when `parts`, else one
/// camera's frames on `[T, Y, X]`.
fn check_array(
    objects: &[(String, Bytes)],
    cams: &[(usize, &[u8])],
    frames: usize,
    parts: bool,
) -> Result<(), String> {
    use zarrs::array::{Array, ArraySubset};
    use zarrs::storage::store::MemoryStore;
    use zarrs::storage::{StoreKey, WritableStorageTraits};
    let store = MemoryStore::new();
    for (rel, bytes) in objects {
        let key = StoreKey::new(rel).map_err(|e| e.to_string())?;
        store.set(&key, bytes.clone()).map_err(|e| e.to_string())?;
    }
    let array = Array::open(Arc::new(store), "/").map_err(|e| format!("zarrs opens it: {e}"))?;
    let t_total = frames as u64;
    let want_shape: Vec<u64> = if parts {
        vec![t_total, cams.len() as u64, H as u64, W as u64]
    } else {
        vec![t_total, H as u64, W as u64]
    };
    if array.shape() != want_shape.as_slice() {
        return Err(format!(
            "shape {:?}, expected {want_shape:?}",
            array.shape()
        ));
    }
    for &(k, data) in cams {
        let mut t = 0;
        while t < t_total {
            let end = (t + SHARD_T).min(t_total);
            let ranges = if parts {
                vec![t..end, k as u64..k as u64 + 1, 0..H as u64, 0..W as u64]
            } else {
                vec![t..end, 0..H as u64, 0..W as u64]
            };
            let got: Vec<u16> = array
                .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_ranges(&ranges))
                .map_err(|e| format!("zarrs reads frames {t}..{end}: {e}"))?;
            let want = &data[t as usize * FRAME_BYTES..end as usize * FRAME_BYTES];
            let same = got.len() * 2 == want.len()
                && got
                    .iter()
                    .zip(want.chunks_exact(2))
                    .all(|(g, w)| g.to_le_bytes() == [w[0], w[1]]);
            if !same {
                return Err(format!(
                    "camera {k}, frames {t}..{end} differ from the input"
                ));
            }
            t = end;
        }
    }
    Ok(())
}

fn fmt_runs(v: &[f64], spec: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.spec$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn med(mut v: Vec<f64>) -> f64 {
    median(&mut v)
}

/// `aqz_note`: why acquire-zarr has no rows, when it has none.
fn single_table(runs: &[SingleRun], frames: usize, aqz_note: &str) -> String {
    let repeats = runs
        .first()
        .map_or(0, |f| runs.iter().filter(|r| r.codec == f.codec).count());
    let mut s = format!(
        "## One node: C1, {frames} frames ({:.0} MiB), medians of {repeats} repeat(s)\n\n\
         | codec | zarrstream MiB/s (runs) | ceiling MiB/s (runs) | **zarrstream / ceiling** (per repeat) | compression | extra RSS MiB (pool + uploader bound) | busy cores zarrstream / ceiling | CPU s client + server: zarrstream / ceiling |\n\
         |---|---|---|---|---|---|---|---|\n",
        mib((frames * FRAME_BYTES) as u64),
    );
    let mut codecs: Vec<&str> = Vec::new();
    for r in runs {
        if !codecs.contains(&r.codec.as_str()) {
            codecs.push(&r.codec);
        }
    }
    for &codec in &codecs {
        let rs: Vec<&SingleRun> = runs.iter().filter(|r| r.codec == codec).collect();
        let zs: Vec<f64> = rs.iter().map(|r| r.zs.mib_s()).collect();
        let ceil: Vec<f64> = rs.iter().map(|r| r.ceiling.mib_s()).collect();
        let vs: Vec<f64> = rs
            .iter()
            .map(|r| r.zs.mib_s() / r.ceiling.mib_s())
            .collect();
        let cpu = |f: &dyn Fn(&SingleRun) -> Timed| {
            let client: Vec<f64> = rs.iter().filter_map(|r| f(r).cpu_s).collect();
            let server: Vec<f64> = rs.iter().filter_map(|r| f(r).server_cpu_s).collect();
            if client.is_empty() || server.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2} + {:.2}", med(client), med(server))
            }
        };
        let _ = writeln!(
            s,
            "| {codec} | **{:.0}** ({}) | **{:.0}** ({}) | **{:.3}** ({}) | {:.3} | {:.0} ({:.0} + {:.0}) | {:.2} / {:.2} | {} / {} |",
            med(zs.clone()),
            fmt_runs(&zs, 0),
            med(ceil.clone()),
            fmt_runs(&ceil, 0),
            med(vs.clone()),
            fmt_runs(&vs, 3),
            med(rs.iter().map(|r| r.compression).collect()),
            med(rs.iter().map(|r| r.rss.0).collect()),
            rs[0].rss.1,
            rs[0].rss.2,
            med(rs.iter().map(|r| r.zs.busy_cores).collect()),
            med(rs.iter().map(|r| r.ceiling.busy_cores).collect()),
            cpu(&|r| r.zs),
            cpu(&|r| r.ceiling),
        );
    }
    if runs.iter().any(|r| r.base.is_some()) {
        s.push_str(
            "\n| codec | baseline `record` MiB/s (runs) | **zarrstream / baseline** (per repeat) | baseline / ceiling (per repeat) |\n\
             |---|---|---|---|\n",
        );
        for &codec in &codecs {
            let rs: Vec<&SingleRun> = runs.iter().filter(|r| r.codec == codec).collect();
            let base: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.base.map(|b| b.mib_s()))
                .collect();
            let vs: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.base.map(|b| r.zs.mib_s() / b.mib_s()))
                .collect();
            let of_ceiling: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.base.map(|b| b.mib_s() / r.ceiling.mib_s()))
                .collect();
            let _ = writeln!(
                s,
                "| {codec} | **{:.0}** ({}) | **{:.3}** ({}) | {:.3} ({}) |",
                med(base.clone()),
                fmt_runs(&base, 0),
                med(vs.clone()),
                fmt_runs(&vs, 3),
                med(of_ceiling.clone()),
                fmt_runs(&of_ceiling, 3),
            );
        }
    }
    if runs.iter().all(|r| r.aqz.is_empty()) {
        let _ = write!(s, "\nacquire-zarr: skipped ({aqz_note}).\n\n");
        return s;
    }
    s.push_str(
        "\n| codec | acquire-zarr S3 layout | ok / runs | acquire-zarr MiB/s (runs) | **zarrstream C1 / acquire-zarr** (per repeat) | extra RSS MiB | busy cores | CPU s client + server | failures |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for &codec in &codecs {
        let rs: Vec<&SingleRun> = runs.iter().filter(|r| r.codec == codec).collect();
        for layout in LAYOUTS.iter() {
            let mut tried = 0;
            let (mut mibs, mut vs, mut rss, mut busy, mut cpu, mut server, mut errs) =
                (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
            for r in &rs {
                for (l, res) in &r.aqz {
                    if l.name != layout.name {
                        continue;
                    }
                    tried += 1;
                    match res {
                        Ok((t, m)) => {
                            mibs.push(t.mib_s());
                            vs.push(r.zs.mib_s() / t.mib_s());
                            rss.extend(*m);
                            busy.push(t.busy_cores);
                            cpu.extend(t.cpu_s);
                            server.extend(t.server_cpu_s);
                        }
                        Err(e) => errs.push(e.clone()),
                    }
                }
            }
            if tried == 0 {
                continue;
            }
            let or_dash = |v: Vec<f64>, spec: usize| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.spec$}", med(v))
                }
            };
            errs.dedup();
            let _ = writeln!(
                s,
                "| {codec} | {} | {}/{tried} | **{}** ({}) | **{}** ({}) | {} | {} | {} | {} |",
                layout.what,
                mibs.len(),
                or_dash(mibs.clone(), 0),
                fmt_runs(&mibs, 0),
                or_dash(vs.clone(), 2),
                fmt_runs(&vs, 2),
                or_dash(rss, 0),
                or_dash(busy, 2),
                if cpu.is_empty() {
                    "-".to_string()
                } else {
                    format!("{} + {}", or_dash(cpu, 2), or_dash(server, 2))
                },
                errs.join("; ").replace('|', "/"),
            );
        }
    }
    s.push('\n');
    s
}

fn parts_table(runs: &[PartsRun], m: usize) -> String {
    let one: Vec<f64> = runs.iter().map(|r| r.one.mib_s()).collect();
    let three: Vec<f64> = runs.iter().map(|r| r.three.mib_s()).collect();
    let ratio: Vec<f64> = runs
        .iter()
        .map(|r| r.three.mib_s() / r.one.mib_s())
        .collect();
    let per: Vec<f64> = runs.iter().flat_map(|r| r.per_process.clone()).collect();
    let publish: Vec<f64> = runs.iter().map(|r| r.publish_s).collect();
    format!(
        "## Several PCs: 3-node Garage (replication 3), C1 lz4:1, {} frames in all, median of {} repeat(s)\n\n\
         | writers | aggregate MiB/s (runs) | **3 processes / 1 process** (per repeat) | each process's own MiB/s (report) | busy cores 1 / 3 | publish_parts s |\n\
         |---|---|---|---|---|---|\n\
         | 1 process, {} frames | **{:.0}** ({}) | | | {:.2} / | |\n\
         | 3 processes (`--part-of K/3`), {m} frames each | **{:.0}** ({}) | **{:.3}** ({}) | {:.0} (median of {}) | / {:.2} | {:.3} |\n\n",
        3 * m,
        runs.len(),
        3 * m,
        med(one.clone()),
        fmt_runs(&one, 0),
        med(runs.iter().map(|r| r.one.busy_cores).collect()),
        med(three.clone()),
        fmt_runs(&three, 0),
        med(ratio.clone()),
        fmt_runs(&ratio, 3),
        med(per.clone()),
        per.len(),
        med(runs.iter().map(|r| r.three.busy_cores).collect()),
        med(publish),
    )
}
