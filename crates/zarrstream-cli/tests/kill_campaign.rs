//! The kill campaign: many recordings killed with SIGKILL at random times, each followed
//! by `zarrstream recover`, with every frame checked.
//!
//! Each kill draws a case from a seeded generator (the seed is printed at the start and
//! in every failure; `ZARRSTREAM_KILL_SEED=N` repeats the same draws): the sink (direct,
//! pwrite, mmap; the sink the writer actually used is read from `record --progress`,
//! and a fallback is reported), the codec (`lz4:1`, `zstd:1`, `none`, `blosc-zstd:1`),
//! the index location, crc32c on or off, inner chunks 1, 4 or 8 frames deep, a plain
//! array or an OME-Zarr image with a 3-level mean pyramid, frames paced like a camera or
//! pushed flat out, durability, chunk order and packing, and when to kill: at a random
//! `encoded N` line of `record --progress`, or after a random delay from the start.
//!
//! After the kill, `zarrstream recover` runs on every level (exit 0, no panic), the
//! `zarrs` crate (not our reader) reads every level back, and:
//! - level 0 holds at least as many complete frames, each equal to its input, as the last
//!   `encoded N` the recording printed (each one short is a frame lost: there must be
//!   none). `N` is `Writer::frames_encoded`, a count of frames whose chunks are all in
//!   their shard files, not a prefix: workers finish frames out of order, so frame 13
//!   may still be in flight when frame 14 completes and `N` reads 14;
//! - every inner chunk of every level holds its input (levels 1 and 2: the exact 2×2
//!   rounded mean of the level above, as `pyramid/pixel.rs` computes it) or only the fill
//!   value, nothing else; `frames_committed` counts the complete frames and the extent
//!   ends at the last frame with data;
//! - a second `recover` is a no-op: it publishes nothing and `zarr.json` is unchanged.
//!
//! A kill before the first `encoded` line ("too early": nothing the writer vouched for)
//! or after the recording ended by itself ("too late") does not count; the campaign
//! draws until it has counted `ZARRSTREAM_KILLS` kills (default 40), within a bounded
//! number of attempts. Nothing asserts on timing: which kills count varies with the
//! machine's load, the verdict does not. The full run, with the summary table:
//!
//! ```text
//! ZARRSTREAM_KILLS=200 cargo test -p zarrstream-cli --test kill_campaign -- --nocapture
//! ```

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

use zarrstream_testkit::crash;

use crash::{Recorder, Wait};

/// Frames each recording would write: 3 to 6 shards, so kills land before, inside and
/// between shard finishes.
const FRAMES: u64 = 48;
/// Camera pacing of paced cases: the recording lasts about FRAMES / FPS = 0.32 s, and a
/// kill finds the writer mostly waiting for frames. Unpaced cases push flat out, so
/// their kills land while the pool is full and workers, preparer and finisher all run.
const FPS: u64 = 150;
const LEVELS: usize = 3;
/// Bounds that only stop a hung child; no verdict depends on them.
const RECORD_TIMEOUT: Duration = Duration::from_secs(180);
const RECOVER_TIMEOUT: Duration = Duration::from_secs(120);
/// The campaign stops early after this many failures (each is reported).
const MAX_FAILURES: usize = 10;

/// Seeded draws: ChaCha8 is specified, so a seed replays the same campaign anywhere.
struct Rng(ChaCha8Rng);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(ChaCha8Rng::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    /// At the first `encoded M` line with M ≥ N.
    AtEncoded(u64),
    /// After this long from the start of the process.
    After(Duration),
}

#[derive(Debug, Clone, Copy)]
struct Case {
    sink: &'static str,
    codec: &'static str,
    index: &'static str,
    crc32c: bool,
    /// Frames per inner chunk.
    depth: u64,
    pyramid: bool,
    /// At FPS, or as fast as the writer takes frames.
    paced: bool,
    /// Beyond the issue's dimensions, the options that change how the finisher ends a
    /// shard: `--durability` (when it flushes and publishes), `--chunk-order` (slots in
    /// Morton order, compacted in that order; not with the direct sink, which appends)
    /// and `--packing` (holes punched instead of compaction).
    durability: &'static str,
    order: &'static str,
    packing: &'static str,
    kill: Kill,
}

impl Case {
    fn draw(rng: &mut Rng) -> Case {
        let depth = rng.pick(&[1, 4, 8]);
        let paced = rng.below(2) == 0;
        let kill = if rng.below(2) == 0 {
            Kill::AtEncoded(1 + rng.below(FRAMES - depth))
        } else {
            // From the start: process start-up and the writer's creation, then the
            // frames.
            let window = 100 + if paced { FRAMES * 1000 / FPS } else { 50 };
            Kill::After(Duration::from_millis(rng.below(window)))
        };
        let sink = rng.pick(&["direct", "pwrite", "mmap"]);
        Case {
            sink,
            codec: rng.pick(&["lz4:1", "zstd:1", "none", "blosc-zstd:1"]),
            index: rng.pick(&["start", "end"]),
            crc32c: rng.below(2) == 0,
            depth,
            pyramid: rng.below(2) == 0,
            paced,
            durability: rng.pick(&["shard", "periodic:20", "none"]),
            order: match rng.pick(&["c", "morton"]) {
                _ if sink == "direct" => "c",
                o => o,
            },
            packing: rng.pick(&["compact", "sparse"]),
            kill,
        }
    }

    /// Inner chunk rows and columns. The direct sink needs chunk slots of 64 KiB or it
    /// falls back to pwrite, so its chunks hold 64 KiB of u16 at every depth.
    fn tile(&self) -> (usize, usize) {
        match (self.sink, self.depth) {
            ("direct", 1) => (128, 256),
            ("direct", 4) => (64, 128),
            ("direct", _) => (64, 64),
            _ => (32, 32),
        }
    }

    /// Frames of 2 × 2 inner chunks: a frame is complete only when all four are.
    fn frame(&self) -> (usize, usize) {
        let (cy, cx) = self.tile();
        (2 * cy, 2 * cx)
    }

    fn shard_frames(&self) -> u64 {
        (2 * self.depth).max(8)
    }

    fn levels(&self) -> usize {
        if self.pyramid { LEVELS } else { 1 }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, x) = self.frame();
        let (cy, cx) = self.tile();
        write!(
            f,
            "sink {} codec {} index {} {} chunk {},{cy},{cx} shard {},{y},{x} {} {} \
             durability {} order {} packing {} kill ",
            self.sink,
            self.codec,
            self.index,
            if self.crc32c { "crc32c" } else { "no-crc32c" },
            self.depth,
            self.shard_frames(),
            if self.pyramid { "pyramid" } else { "array" },
            if self.paced { "paced" } else { "unpaced" },
            self.durability,
            self.order,
            self.packing,
        )?;
        match self.kill {
            Kill::AtEncoded(n) => write!(f, "at encoded {n}"),
            Kill::After(d) => write!(f, "after {} ms", d.as_millis()),
        }
    }
}

/// The input of one frame size and what every level must hold.
struct Expected {
    input: PathBuf,
    /// Per level: rows, columns, and FRAMES frames of them.
    levels: Vec<(usize, usize, Vec<u16>)>,
}

/// The 2×2 block mean of `frames` frames of `y` × `x` (even) elements, rounded half up
/// as `pyramid/pixel.rs` does for u16.
fn reduce(frames: &[u16], y: usize, x: usize) -> Vec<u16> {
    let (hy, hx) = (y / 2, x / 2);
    let mut out = Vec::with_capacity(frames.len() / 4);
    for f in frames.chunks_exact(y * x) {
        for r in 0..hy {
            for c in 0..hx {
                let at = |dy: usize, dx: usize| u32::from(f[(2 * r + dy) * x + 2 * c + dx]);
                out.push(((at(0, 0) + at(0, 1) + at(1, 0) + at(1, 1) + 2) >> 2) as u16);
            }
        }
    }
    out
}

fn expected(dir: &Path, y: usize, x: usize) -> Expected {
    let input = dir.join(format!("input-{y}x{x}.raw"));
    crash::write_input(&input, FRAMES, y * x);
    let level0: Vec<u16> = (0..FRAMES)
        .flat_map(|k| (0..y * x).map(move |i| crash::sample(k, i)))
        .collect();
    let mut levels = vec![(y, x, level0)];
    for _ in 1..LEVELS {
        let (py, px, prev) = levels.last().expect("level 0");
        let next = reduce(prev, *py, *px);
        levels.push((py / 2, px / 2, next));
    }
    Expected { input, levels }
}

/// A check failed: what, for the failure list.
type Check<T> = Result<T, String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

fn read_json(path: &Path) -> Check<Value> {
    let bytes = std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("parse {}: {e}", path.display()))
}

fn u64s(v: &Value) -> Option<Vec<u64>> {
    v.as_array()?.iter().map(Value::as_u64).collect()
}

/// Reads level `dir` with zarrs and checks it against `want` (`rows` × `cols` frames):
/// every inner chunk its input or fill, at least `must` complete frames (those short are
/// added to `lost`, also when another check fails), the metadata's counts and extent
/// agreeing with the data. Returns the number of complete frames.
fn check_level(
    dir: &Path,
    rows: usize,
    cols: usize,
    want: &[u16],
    must: u64,
    lost: &mut u64,
) -> Check<u64> {
    // Until the data shows otherwise, every frame that must be there counts as lost.
    *lost += must;
    let doc = read_json(&dir.join("zarr.json"))?;
    let ours = &doc["attributes"]["zarrstream"];
    ensure!(
        ours["state"] != "running",
        "state still running after recover"
    );
    let shape = u64s(&doc["shape"]).ok_or("no shape")?;
    ensure!(
        shape.len() == 3 && shape[1..] == [rows as u64, cols as u64] && shape[0] <= FRAMES,
        "shape {shape:?}, expected [<= {FRAMES}, {rows}, {cols}]"
    );
    let chunk = u64s(&doc["codecs"][0]["configuration"]["chunk_shape"]).ok_or("no chunk_shape")?;
    ensure!(chunk.len() == 3, "chunk_shape {chunk:?}");
    let (depth, cy, cx) = (chunk[0], chunk[1] as usize, chunk[2] as usize);
    let committed = ours["frames_committed"]
        .as_u64()
        .ok_or("no frames_committed")?;
    let t_end = shape[0];
    let data: Vec<u16> = if t_end == 0 {
        Vec::new()
    } else {
        let store = Arc::new(FilesystemStore::new(dir).map_err(|e| format!("zarrs store: {e}"))?);
        let array = Array::open(store, "/").map_err(|e| format!("zarrs open: {e}"))?;
        array
            .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(shape.clone()))
            .map_err(|e| format!("zarrs read: {e}"))?
    };
    let plane = rows * cols;
    ensure!(
        data.len() == t_end as usize * plane,
        "zarrs read {} elements",
        data.len()
    );

    // Chunk by chunk (a deep chunk spans `depth` frames): the input or all fill.
    let tiles = (rows / cy) * (cols / cx);
    let mut tiles_ok = vec![0usize; t_end as usize];
    let mut garbage = None;
    for t0 in (0..t_end).step_by(depth as usize) {
        let ts = t0..(t0 + depth).min(t_end);
        for ty in 0..rows / cy {
            for tx in 0..cols / cx {
                let (mut same, mut fill) = (true, true);
                for t in ts.clone() {
                    for y in ty * cy..(ty + 1) * cy {
                        let at = t as usize * plane + y * cols + tx * cx;
                        let got = &data[at..at + cx];
                        same &= got == &want[at..at + cx];
                        fill &= got.iter().all(|&v| v == 0);
                    }
                }
                if !(same || fill) && garbage.is_none() {
                    garbage = Some(format!(
                        "frames {ts:?} chunk ({ty}, {tx}) are neither their input nor fill"
                    ));
                }
                if same {
                    for t in ts.clone() {
                        tiles_ok[t as usize] += 1;
                    }
                }
            }
        }
    }
    let complete = tiles_ok.iter().filter(|&&n| n == tiles).count() as u64;
    let missing = must.saturating_sub(complete);
    *lost = *lost - must + missing;
    if let Some(g) = garbage {
        return Err(g);
    }
    ensure!(
        missing == 0,
        "{complete} complete frames, but the writer had reported {must} encoded (extent {t_end})"
    );
    ensure!(
        complete == committed,
        "frames_committed {committed}, but {complete} frames are complete"
    );
    let last = tiles_ok
        .iter()
        .rposition(|&n| n > 0)
        .map_or(0, |t| t as u64 + 1);
    ensure!(
        last == t_end,
        "the extent {t_end} does not end at the last frame with data ({last})"
    );
    Ok(complete)
}

fn recover(store: &Path) -> Check<crash::Ran> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zarrstream"));
    cmd.arg("recover").arg(store).arg("--json");
    crash::run_bounded(cmd, RECOVER_TIMEOUT)
}

/// What one kill came to.
enum Verdict {
    /// `sink`: the sink the writer used.
    Counted {
        encoded: u64,
        complete: u64,
        sink: String,
    },
    TooEarly,
    TooLate,
}

/// Tallies of the run.
#[derive(Default)]
struct Tally {
    tried: u64,
    counted: u64,
    too_early: u64,
    too_late: u64,
    frames_lost: u64,
    panics: u64,
    /// Frames recovered beyond the last one reported encoded (in flight at the kill).
    in_flight_recovered: u64,
    encoded: u64,
    /// Counted kills per dimension and value.
    dims: BTreeMap<(&'static str, String), u64>,
    /// Sinks asked for and the sinks used, where they differ.
    fallbacks: BTreeMap<(String, String), u64>,
    failures: Vec<String>,
}

/// Runs one case in `store`; `Err` is a failure of the writer, `recover` or the data.
fn run_kill(case: &Case, exp: &Expected, store: &Path, tally: &mut Tally) -> Check<Verdict> {
    let (y, x) = case.frame();
    let (cy, cx) = case.tile();
    let fps = FPS.to_string();
    let mut cmd = zarrstream_testkit::cli_record!();
    cmd.arg("--out")
        .arg(store)
        .args(["--shape", &format!("0,{y},{x}")])
        .args(["--chunk", &format!("{},{cy},{cx}", case.depth)])
        .args(["--shard", &format!("{},{y},{x}", case.shard_frames())])
        .args(["--dtype", "u16", "--codec", case.codec])
        .args(["--index-location", case.index, "--sink", case.sink])
        .arg("--input")
        .arg(&exp.input)
        .args(["--frames", &FRAMES.to_string()])
        .args(["--fps", if case.paced { &fps } else { "0" }])
        .args(["--durability", case.durability, "--chunk-order", case.order])
        .args(["--packing", case.packing])
        .args(["--threads", "2", "--no-pin", "--quiet", "--progress"]);
    if !case.crc32c {
        cmd.arg("--no-crc32c");
    }
    if case.pyramid {
        cmd.args(["--ome", "--levels", &LEVELS.to_string()]);
    }
    let mut child = Recorder::spawn(cmd);
    let wait = match case.kill {
        Kill::AtEncoded(n) => child.wait_for(child.started + RECORD_TIMEOUT, |p| p.encoded >= n),
        Kill::After(d) => child.wait_for(child.started + d, |_| false),
    };
    let hung = matches!((wait, case.kill), (Wait::Deadline, Kill::AtEncoded(_)));
    let (status, progress) = child.kill();
    ensure!(
        !hung,
        "record printed no progress for {RECORD_TIMEOUT:?}; stderr: {:?}",
        progress.other
    );
    if !crash::killed(&status) {
        ensure!(
            status.success(),
            "record failed ({status}): {:?}",
            progress.other
        );
        return Ok(Verdict::TooLate);
    }
    let sink = progress.sink.clone().unwrap_or_default();
    if !sink.is_empty() && sink != case.sink {
        *tally
            .fallbacks
            .entry((case.sink.to_string(), sink.clone()))
            .or_default() += 1;
    }

    // The levels the writer got to create, by level number (a kill during start-up may
    // leave some without a zarr.json, and not necessarily the last ones).
    let levels: Vec<(usize, PathBuf)> = if case.pyramid {
        (0..LEVELS)
            .map(|l| (l, store.join(l.to_string())))
            .collect()
    } else {
        vec![(0, store.to_path_buf())]
    };
    let levels: Vec<(usize, PathBuf)> = levels
        .into_iter()
        .filter(|(_, l)| l.join("zarr.json").exists())
        .collect();
    let encoded = progress.encoded;
    if encoded > 0 {
        ensure!(
            levels.len() == case.levels(),
            "only {} of the {} levels have a zarr.json",
            levels.len(),
            case.levels()
        );
    }

    let validation = if case.crc32c { "crc32c" } else { "decoding" };
    let mut before = Vec::new();
    for (_, level) in &levels {
        let ran = recover(level)?;
        let err = String::from_utf8_lossy(&ran.stderr);
        if ran.panicked() {
            tally.panics += 1;
        }
        ensure!(
            ran.status.success() && !ran.panicked(),
            "recover {} failed ({}): {err}",
            level.display(),
            ran.status
        );
        let report: Value = serde_json::from_slice(&ran.stdout)
            .map_err(|e| format!("recover --json output of {}: {e}", level.display()))?;
        ensure!(
            report["damaged_shards"]
                .as_array()
                .is_some_and(Vec::is_empty),
            "recover found damaged finished shards: {report}"
        );
        if report["shards_recovered"].as_u64().unwrap_or(0) > 0 {
            ensure!(
                report["validation"] == validation,
                "validation {} for {validation}",
                report["validation"]
            );
        }
        let left = crash::partial_files(level);
        ensure!(left.is_empty(), "temporary shards left behind: {left:?}");
        ensure!(
            !level.join(".zarrstream-partial").exists(),
            "{}/.zarrstream-partial still exists",
            level.display()
        );
        before.push(std::fs::read(level.join("zarr.json")).map_err(|e| e.to_string())?);
    }

    let mut complete0 = 0;
    for (l, level) in &levels {
        let l = *l;
        let (rows, cols, want) = &exp.levels[l];
        let must = if l == 0 { encoded } else { 0 };
        let complete = check_level(level, *rows, *cols, want, must, &mut tally.frames_lost)
            .map_err(|e| format!("level {l}: {e}"))?;
        if l == 0 {
            complete0 = complete;
        }
    }

    // A second recovery finds nothing to do and changes nothing.
    for ((_, level), before) in levels.iter().zip(&before) {
        let ran = recover(level)?;
        if ran.panicked() {
            tally.panics += 1;
        }
        ensure!(
            ran.status.success() && !ran.panicked(),
            "second recover {} failed ({}): {}",
            level.display(),
            ran.status,
            String::from_utf8_lossy(&ran.stderr)
        );
        let report: Value = serde_json::from_slice(&ran.stdout).map_err(|e| e.to_string())?;
        ensure!(
            report["published"] == false && report["shards"].as_array().is_some_and(Vec::is_empty),
            "the second recover of {} did something: {report}",
            level.display()
        );
        let after = std::fs::read(level.join("zarr.json")).map_err(|e| e.to_string())?;
        ensure!(
            &after == before,
            "the second recover changed {}/zarr.json",
            level.display()
        );
    }

    Ok(if encoded == 0 {
        Verdict::TooEarly
    } else {
        Verdict::Counted {
            encoded,
            complete: complete0,
            sink,
        }
    })
}

fn seed() -> u64 {
    match std::env::var("ZARRSTREAM_KILL_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("ZARRSTREAM_KILL_SEED={s:?}: expected an unsigned integer")),
        Err(_) => {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            // Bounded so it is easy to copy.
            (t.as_nanos() as u64 ^ u64::from(std::process::id()) << 20) % 1_000_000_000
        }
    }
}

fn kills_wanted() -> u64 {
    match std::env::var("ZARRSTREAM_KILLS") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("ZARRSTREAM_KILLS={s:?}: expected an unsigned integer")),
        Err(_) => 40,
    }
}

fn print_summary(t: &Tally, seed: u64, target: u64, elapsed: Duration) {
    eprintln!(
        "\nkill campaign summary (seed {seed}, ZARRSTREAM_KILL_SEED={seed} repeats the draws)"
    );
    eprintln!("  {:<28} {:>8}", "kills wanted", target);
    eprintln!("  {:<28} {:>8}", "kills tried", t.tried);
    eprintln!("  {:<28} {:>8}", "kills counted", t.counted);
    eprintln!("  {:<28} {:>8}", "too early (nothing encoded)", t.too_early);
    eprintln!("  {:<28} {:>8}", "too late (recording ended)", t.too_late);
    eprintln!("  {:<28} {:>8}", "frames reported encoded", t.encoded);
    eprintln!(
        "  {:<28} {:>8}",
        "in-flight frames recovered", t.in_flight_recovered
    );
    eprintln!("  {:<28} {:>8}", "frames lost", t.frames_lost);
    eprintln!("  {:<28} {:>8}", "recover panics", t.panics);
    eprintln!("  {:<28} {:>8}", "failures", t.failures.len());
    eprintln!("  {:<28} {:>7.1}s", "time", elapsed.as_secs_f64());
    eprintln!("  counted kills per dimension:");
    let mut last = "";
    for ((dim, value), n) in &t.dims {
        let name = if *dim == last { "" } else { dim };
        last = dim;
        eprintln!("    {name:<10} {value:<14} {n:>5}");
    }
    for ((asked, used), n) in &t.fallbacks {
        eprintln!(
            "  NOTE: --sink {asked} ran as {used} in {n} kill(s): this filesystem cannot take {asked} here"
        );
    }
}

#[test]
fn killed_recordings_lose_no_encoded_frame() {
    let seed = seed();
    let target = kills_wanted();
    eprintln!(
        "kill campaign: seed {seed} (ZARRSTREAM_KILL_SEED={seed} repeats the draws), {target} kills to count"
    );
    let started = Instant::now();
    // Under target/, on the disk the build uses: /tmp may be a tmpfs, where O_DIRECT is
    // refused and the direct sink would never run.
    let dir = tempfile::Builder::new()
        .prefix("kill-campaign-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    let mut rng = Rng::new(seed);
    let mut inputs: HashMap<(usize, usize), Rc<Expected>> = HashMap::new();
    let mut t = Tally::default();
    let max_tries = 4 * target + 20;
    while t.counted < target && t.tried < max_tries && t.failures.len() < MAX_FAILURES {
        t.tried += 1;
        let case = Case::draw(&mut rng);
        let (y, x) = case.frame();
        let exp = Rc::clone(
            inputs
                .entry((y, x))
                .or_insert_with(|| Rc::new(expected(dir.path(), y, x))),
        );
        let store = dir.path().join(format!("kill-{}.zarr", t.tried));
        match run_kill(&case, &exp, &store, &mut t) {
            Ok(Verdict::Counted {
                encoded,
                complete,
                sink,
            }) => {
                t.counted += 1;
                t.encoded += encoded;
                t.in_flight_recovered += complete.saturating_sub(encoded);
                let kill = match case.kill {
                    Kill::AtEncoded(_) => "at encoded",
                    Kill::After(_) => "after delay",
                };
                for (dim, value) in [
                    (
                        "sink",
                        if sink == case.sink {
                            sink
                        } else {
                            format!("{} (ran as {sink})", case.sink)
                        },
                    ),
                    ("codec", case.codec.to_string()),
                    ("index", case.index.to_string()),
                    ("crc32c", case.crc32c.to_string()),
                    ("depth", case.depth.to_string()),
                    ("pyramid", case.pyramid.to_string()),
                    ("paced", case.paced.to_string()),
                    ("durability", case.durability.to_string()),
                    ("order", case.order.to_string()),
                    ("packing", case.packing.to_string()),
                    ("kill", kill.to_string()),
                ] {
                    *t.dims.entry((dim, value)).or_default() += 1;
                }
            }
            Ok(Verdict::TooEarly) => t.too_early += 1,
            Ok(Verdict::TooLate) => t.too_late += 1,
            Err(e) => {
                let msg = format!("seed {seed}, kill {}: [{case}] {e}", t.tried);
                eprintln!("FAILED {msg}");
                t.failures.push(msg);
                // Kept for a look: the store of a failure.
                continue;
            }
        }
        let _ = std::fs::remove_dir_all(&store);
    }
    print_summary(&t, seed, target, started.elapsed());
    if !t.failures.is_empty() {
        // The stores of failures stay for a look.
        let kept = dir.keep();
        panic!(
            "kill campaign (seed {seed}): {} failure(s), stores kept in {}:\n{}",
            t.failures.len(),
            kept.display(),
            t.failures.join("\n")
        );
    }
    assert_eq!(t.frames_lost, 0, "seed {seed}: frames lost");
    assert_eq!(t.panics, 0, "seed {seed}: recover panicked");
    assert!(
        t.counted >= target,
        "seed {seed}: only {} of {target} kills counted in {} tries ({} too early, {} too late)",
        t.counted,
        t.tried,
        t.too_early,
        t.too_late
    );
}
