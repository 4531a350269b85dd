//! Simulated power loss: recordings onto a file system that forgets what was not made
//! durable.
//!
//! Each mode runs in a child process of its own, in a private mount namespace (see
//! `support_fs`), which mounts `zarrstream-testfs` (FUSE; as root, no libfuse or
//! fusermount needed): a file's data becomes durable when the file is fsynced, a
//! directory entry when its directory is fsynced, and nothing else ever is. For each
//! cut the child records a small array onto a fresh mount with the library's API, in a
//! process of its own (deterministic frames of 32 × 32; shards of 2 frames, one per
//! frame of 2 × 2 chunks or two per frame, so a row is published only once both are
//! finished; chunks in C or Morton order),
//! and the file system cuts the power in place of a randomly chosen request that
//! changes it (or after `finish`): clean (everything not durable is lost) or torn (a
//! random part of it survives, page by page and change by change). The writer then
//! meets `EIO` and is dropped; the power comes back with what survived; and the child
//! checks, reading with the `zarrs` crate:
//!
//! - `zarr.json` as the cut left it never covers missing data: every frame below its
//!   `shape[0]` reads as it was pushed;
//! - after `recover`, every frame the writer had published at the cut (`shape[0]` of
//!   `zarr.json` as programs saw it at that moment) reads as it was pushed, and every
//!   other frame below the recovered `shape[0]` holds, chunk by chunk, its input or
//!   the fill value (never other bytes).
//!
//! `Durability::Shard` and `Periodic` must keep both promises at every cut; `None`
//! promises nothing and is only reported. Cuts per mode: 100 (`None`: 25), half of them
//! torn; `ZARRSTREAM_POWER_CUTS=N` runs `N` per mode (`None`: N/4) and
//! `ZARRSTREAM_POWER_SEED=S` replays a run. `cargo test -p zarrstream --test writer
//! power_loss:: -- --nocapture` prints one `REPORT` line per mode.

// Linux only: the power-loss file system is FUSE (zarrstream-testfs), which Windows lacks.
#![cfg(target_os = "linux")]

use crate::support_fs;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream::{
    ArrayConfig, ArraySpec, ChunkOrder, Codec, Durability, FrameMeta, FrameMetaSpec, Levels,
    MetaType, Ome, Packing, Recording, SinkChoice, Writer, WriterOptions,
};
use zarrstream_testfs::{CutKind, PowerFs};

const ENTRY: &str = "power_loss::power_loss_entry";

/// Frames per recording, and the frame's shape.
const FRAMES: u64 = 12;
const H: u64 = 32;
const W: u64 = 32;
/// Inner chunks per frame (16 × 16 chunks).
const TILES: usize = 4;

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Frame `k`: never 0 (the fill value), so a missing chunk is told from a present one.
fn frame(k: u64) -> Vec<u16> {
    (0..H * W)
        .map(|i| (splitmix((k << 20) ^ i) as u16) | 1)
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Shard,
    Periodic,
    None,
}

impl Mode {
    fn parse(s: &str) -> Mode {
        match s {
            "shard" => Mode::Shard,
            "periodic" => Mode::Periodic,
            "none" => Mode::None,
            _ => panic!("mode {s}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Shard => "shard",
            Mode::Periodic => "periodic",
            Mode::None => "none",
        }
    }

    fn durability(self) -> Durability {
        match self {
            Mode::Shard => Durability::Shard,
            Mode::Periodic => Durability::Periodic {
                interval: Duration::from_millis(5),
            },
            Mode::None => Durability::None,
        }
    }

    /// Whether the mode promises that published frames survive a power cut.
    fn promises(self) -> bool {
        self != Mode::None
    }

    /// Whether every shard under `c/` was flushed before it got there, so that after
    /// `recover` the frames beyond the published extent hold their input or fill.
    ///
    /// With `Periodic` too: its finisher keeps a finished shard under its temporary name
    /// until the group commit has flushed it, so `c/` never holds an unflushed shard
    /// whose index could survive without its data. Not with `None`, which flushes
    /// nothing.
    fn recovers_only_flushed(self) -> bool {
        self != Mode::None
    }
}

fn cuts_wanted(mode: Mode) -> u64 {
    let n = std::env::var("ZARRSTREAM_POWER_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100u64);
    if mode == Mode::None {
        (n / 4).max(1)
    } else {
        n
    }
}

fn seed() -> u64 {
    std::env::var("ZARRSTREAM_POWER_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// Runs `mode` in a child; its time limit grows with the number of cuts.
fn parent(mode: &str, what: &str) {
    let m = Mode::parse(mode);
    let cuts = if what == "cuts" { cuts_wanted(m) } else { 2 };
    let seed = seed();
    println!("power_loss {mode} {what}: seed {seed} (ZARRSTREAM_POWER_SEED={seed} replays it)");
    let timeout = Duration::from_secs(120 + 4 * cuts);
    support_fs::run_child(ENTRY, &format!("{what}:{mode}:{seed}:{cuts}"), timeout);
}

#[test]
fn power_loss_shard() {
    parent("shard", "cuts");
}

#[test]
fn power_loss_periodic() {
    parent("periodic", "cuts");
}

#[test]
fn power_loss_none_reported() {
    parent("none", "cuts");
}

/// A finished recording survives a power cut whole (regression: the store directory's
/// own entry was never made durable, so a cut after `finish` lost the whole store).
#[test]
fn finished_recording_survives_power_cut() {
    parent("shard", "finished");
    parent("periodic", "finished");
}

/// The same for a `Recording` of two arrays, one of them below a group of its own
/// (`pos1/cam1`), an OME-Zarr image with a pyramid and an array with per-frame metadata:
/// every directory and file they create is durable once they finish.
#[test]
fn finished_multi_array_recording_survives_power_cut() {
    parent("shard", "recording");
    parent("periodic", "recording");
}

/// The file system itself, through the kernel: what a clean cut keeps and what the mount
/// shows once the power is back.
#[test]
fn testfs_keeps_only_what_was_synced() {
    parent("shard", "fs");
}

/// The entry point of the child processes; a no-op in the parent.
#[test]
fn power_loss_entry() {
    let Some(s) = support_fs::scenario() else {
        return;
    };
    if !Path::new("/dev/fuse").exists() {
        support_fs::unsupported("no /dev/fuse");
    }
    let parts: Vec<&str> = s.splitn(4, ':').collect();
    if let ["fs-client", phase, _, at] = parts.as_slice() {
        fs_client(phase, Path::new(at));
        return;
    }
    if let ["record-recording", mode, _, root] = parts.as_slice() {
        record_recording(Path::new(root), Mode::parse(mode));
        return;
    }
    if let ["record", mode, case, store] = parts.as_slice() {
        let accepted = record(Path::new(store), Mode::parse(mode), Case::parse(case));
        println!("recorded {accepted} frames");
        return;
    }
    let [what, mode, seed, cuts] = parts.as_slice() else {
        panic!("scenario {s}");
    };
    let mode = Mode::parse(mode);
    let seed: u64 = seed.parse().expect("a seed");
    let cuts: u64 = cuts.parse().expect("a number of cuts");
    match *what {
        "cuts" => run_cuts(mode, seed, cuts),
        "finished" => finished(mode),
        "recording" => finished_recording(mode),
        "fs" => fs_power_cycle(),
        _ => panic!("scenario {s}"),
    }
}

/// What a recording varies besides the durability: the chunk order in the shards, and
/// whether a frame is one shard or two (a row of shards is then published only once
/// both are finished; these also use zstd instead of the default blosc-lz4, sparse
/// packing, which punches the unused tails of the slots out of Morton-ordered shards,
/// and record a per-frame timestamp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Case {
    order: ChunkOrder,
    halves: bool,
}

impl Case {
    const ALL: [Case; 4] = [
        Case {
            order: ChunkOrder::C,
            halves: false,
        },
        Case {
            order: ChunkOrder::Morton,
            halves: false,
        },
        Case {
            order: ChunkOrder::C,
            halves: true,
        },
        Case {
            order: ChunkOrder::Morton,
            halves: true,
        },
    ];

    fn name(self) -> String {
        let order = if self.order == ChunkOrder::Morton {
            "morton"
        } else {
            "c"
        };
        format!("{order}-{}", if self.halves { "halves" } else { "whole" })
    }

    fn parse(s: &str) -> Case {
        Case::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .unwrap_or_else(|| panic!("case {s}"))
    }

    fn spec(self) -> ArraySpec {
        let shard_h = if self.halves { H / 2 } else { H };
        let codec = if self.halves {
            Codec::zstd(1)
        } else {
            Codec::blosc_lz4(1)
        };
        ArraySpec::builder()
            .shape([0, H, W])
            .chunk_shape([1, 16, 16])
            .shard_shape([2, shard_h, W])
            .codec(codec)
            .build()
            .expect("a valid spec")
    }

    fn packing(self) -> Packing {
        if self.halves {
            Packing::Sparse
        } else {
            Packing::Compact
        }
    }
}

/// How long one recording may take (it takes well under a second).
const RECORD_TIMEOUT: Duration = Duration::from_secs(30);

/// Records onto the mount in a process of its own (this binary, scenario `record`, in
/// this process's mount namespace): the file system's server runs in this process, and
/// a process that is a client of its own FUSE server can hang for good when it is
/// killed while a request is in flight (the kernel waits for an answer that its own
/// dead server thread will never give). A recorder that hangs or dies is killed and
/// reported; the server stays to answer its last requests.
fn run_recorder(mode: Mode, case: Case, store: &Path) -> Result<(), String> {
    run_in_child(&format!(
        "record:{}:{}:{}",
        mode.name(),
        case.name(),
        store.display()
    ))
}

/// Runs this binary's `scenario` in a process of its own (see [`run_recorder`]).
fn run_in_child(scenario: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(exe)
        .args([ENTRY, "--exact", "--nocapture", "--test-threads=1"])
        .env(support_fs::SCENARIO, scenario)
        .env(support_fs::DIR, support_fs::dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn the recorder: {e}"))?;
    let deadline = std::time::Instant::now() + RECORD_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("the recorder failed ({status}): {err}"));
            }
            Ok(None) if std::time::Instant::now() >= deadline => {
                // Our own child, by its id. It may not die while it waits for an answer
                // this server never gives (if the server failed): it is then reaped only
                // when this process exits and the kernel ends the FUSE connection, so
                // it is not waited for here.
                let _ = child.kill();
                for _ in 0..500 {
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Err(format!(
                    "the recorder hung (killed after {RECORD_TIMEOUT:?})"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for the recorder: {e}")),
        }
    }
}

/// Mounts a fresh file system at a new directory under the child's scenario directory.
fn mount(k: u64) -> (PowerFs, zarrstream_testfs::Mounted) {
    let at = support_fs::dir().join(format!("m{k}"));
    std::fs::create_dir_all(&at).expect("a mount point");
    let fs = PowerFs::new();
    match fs.mount(&at) {
        Ok(m) => (fs, m),
        Err(e) => support_fs::unsupported(&format!(
            "mount zarrstream-testfs (FUSE) at {}: {e}",
            at.display()
        )),
    }
}

/// Records up to `FRAMES` frames; stops at the first error (after a cut every request
/// fails). Returns the frames accepted.
fn record(store: &Path, mode: Mode, case: Case) -> u64 {
    let opts = WriterOptions::default()
        .threads(1)
        .sink(SinkChoice::Pwrite)
        .durability(mode.durability())
        .chunk_order(case.order)
        .packing(case.packing());
    let opts = if case.halves {
        opts.frame_meta(FrameMetaSpec::new().field("timestamp", MetaType::Float64))
    } else {
        opts
    };
    let Ok(mut w) = Writer::create(store, case.spec(), opts) else {
        return 0;
    };
    let mut accepted = 0;
    for k in 0..FRAMES {
        let pushed = if case.halves {
            let bytes: Vec<u8> = frame(k).iter().flat_map(|v| v.to_le_bytes()).collect();
            let meta = FrameMeta::new().value("timestamp", k as f64);
            w.push_with(&bytes, std::time::Instant::now(), &meta)
        } else {
            w.push(&frame(k))
        };
        if pushed.is_err() {
            break;
        }
        accepted += 1;
        if mode == Mode::Periodic && k % 3 == 2 {
            // Let a group commit fall between frames now and then.
            std::thread::sleep(Duration::from_millis(6));
        }
    }
    // After a cut this fails; what matters is what the disk kept.
    let _ = w.finish();
    accepted
}

/// `shape[0]` and `frames_committed` of a `zarr.json` document.
fn progress(doc: &[u8]) -> Option<(u64, u64)> {
    let v: Value = serde_json::from_slice(doc).ok()?;
    let shape0 = v["shape"][0].as_u64()?;
    let committed = v["attributes"]["zarrstream"]["frames_committed"]
        .as_u64()
        .unwrap_or(0);
    Some((shape0, committed))
}

/// How frames below an extent read back.
#[derive(Debug, Default)]
struct Readback {
    /// Frames that read exactly as pushed.
    exact: u64,
    /// Frames with some chunks missing (fill) and the others exact.
    partial: u64,
    /// Frames with a chunk that is neither its input nor fill, or that could not be read.
    wrong: u64,
    /// The first problem, for the message.
    first: Option<String>,
}

/// Reads frames `0..extent` of the array at `store` with `zarrs` and classifies each.
fn read_back(store: &Path, extent: u64) -> Readback {
    let mut r = Readback::default();
    if extent == 0 {
        return r;
    }
    let array = FilesystemStore::new(store)
        .map_err(|e| e.to_string())
        .and_then(|s| Array::open(Arc::new(s), "/").map_err(|e| e.to_string()));
    let array = match array {
        Ok(a) => a,
        Err(e) => {
            r.wrong = extent;
            r.first = Some(format!("zarrs cannot open the array: {e}"));
            return r;
        }
    };
    for k in 0..extent {
        let got = array.retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_ranges(&[
            k..k + 1,
            0..H,
            0..W,
        ]));
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                r.wrong += 1;
                r.first.get_or_insert(format!("frame {k}: zarrs read: {e}"));
                continue;
            }
        };
        let want = frame(k);
        if got == want {
            r.exact += 1;
            continue;
        }
        // Chunk by chunk: its input, or entirely fill.
        let mut ok = true;
        for t in 0..TILES {
            let (y0, x0) = ((t / 2) * 16, (t % 2) * 16);
            let idx = |y: usize, x: usize| (y0 + y) * W as usize + x0 + x;
            let same = (0..16).all(|y| (0..16).all(|x| got[idx(y, x)] == want[idx(y, x)]));
            let fill = (0..16).all(|y| (0..16).all(|x| got[idx(y, x)] == 0));
            ok &= same || fill;
        }
        if ok {
            r.partial += 1;
            r.first
                .get_or_insert(format!("frame {k}: some chunks missing (fill)"));
        } else {
            r.wrong += 1;
            r.first
                .get_or_insert(format!("frame {k}: a chunk holds other bytes"));
        }
    }
    r
}

/// What one cut showed.
#[derive(Debug, Default)]
struct Outcome {
    /// `shape[0]` published at the cut (as programs saw `zarr.json`).
    published: u64,
    /// `shape[0]` of `zarr.json` as the cut left it (before recovery).
    left: u64,
    /// Frames below it that are not exact after recovery.
    published_lost: u64,
    /// Frames below `shape[0]` of `zarr.json` as the cut left it that were not exact
    /// before recovery.
    left_uncovered: u64,
    /// The store (its `zarr.json`) did not survive.
    store_lost: bool,
    /// Frames recovery added beyond the published extent.
    recovered_beyond: u64,
    /// Frames holding bytes that are neither input nor fill after recovery.
    wrong_after: u64,
    /// `recover` failed.
    recover_error: Option<String>,
    /// A broken promise.
    problem: Option<String>,
    /// A finding beyond the mode's promise (reported only).
    note: Option<String>,
}

/// One recording with a cut in place of request `n` (or after the recording, when it
/// made fewer requests).
fn one_cut(k: u64, mode: Mode, case: Case, n: u64, kind: CutKind) -> (Outcome, u64) {
    let (fs, mnt) = mount(k);
    fs.cut_at(n, kind);
    let recorded = run_recorder(mode, case, &mnt.path().join("a.zarr"));
    let cut = match fs.last_cut() {
        Some(c) => c,
        None => match kind {
            CutKind::Clean => fs.power_cut(),
            CutKind::Torn(seed) => fs.torn_cut(seed),
        },
    };
    let ops = cut.ops;
    let published = cut
        .live
        .read_path("a.zarr/zarr.json")
        .ok()
        .and_then(|d| progress(&d))
        .map_or(0, |(shape0, _)| shape0);
    // What survived, as ordinary files: recovery and reading never go through the
    // mount, whose server is this process (see `run_recorder`).
    let survived = support_fs::dir().join(format!("d{k}"));
    std::fs::create_dir_all(&survived).expect("a directory for what survived");
    fs.with_model(|m| m.materialize(&survived))
        .expect("write out what survived");
    drop(mnt);
    let store = survived.join("a.zarr");
    let mut o = Outcome {
        published,
        ..Outcome::default()
    };
    if let Err(e) = recorded {
        o.problem = Some(e);
    }
    let o = check_survivors(&store, published, mode.recovers_only_flushed(), o);
    let _ = std::fs::remove_dir_all(&survived);
    (o, ops)
}

/// The checks after a cut on the store as it survived (see the module docs).
fn check_survivors(store: &Path, published: u64, strict_beyond: bool, mut o: Outcome) -> Outcome {
    // zarr.json as the cut left it.
    let left = std::fs::read(store.join("zarr.json"))
        .ok()
        .and_then(|d| progress(&d));
    let Some((left_shape0, _)) = left else {
        o.store_lost = true;
        o.published_lost = published;
        if published > 0 {
            o.problem = Some(format!(
                "zarr.json is gone after the cut, though {published} frames were published"
            ));
        }
        return o;
    };
    o.left = left_shape0;
    if let Some(p) = check_timestamps(store, left_shape0) {
        o.problem.get_or_insert(p);
    }
    let before = read_back(store, left_shape0);
    o.left_uncovered = before.partial + before.wrong;
    if o.left_uncovered > 0 {
        o.problem = Some(format!(
            "zarr.json as left (shape[0] = {left_shape0}) covers data that is not there: {}",
            before.first.unwrap_or_default()
        ));
    }
    match zarrstream::recover::recover_store(store) {
        Ok(_) => {}
        Err(e) => {
            o.recover_error = Some(e.to_string());
            o.problem.get_or_insert(format!("recover failed: {e}"));
        }
    }
    let after = std::fs::read(store.join("zarr.json"))
        .ok()
        .and_then(|d| progress(&d))
        .map_or(0, |(shape0, _)| shape0);
    let published_read = read_back(store, published.min(after));
    o.published_lost = published - published_read.exact;
    if o.published_lost > 0 {
        o.problem.get_or_insert(format!(
            "after recover (shape[0] = {after}), {} of {published} published frames are not \
             as pushed: {}",
            o.published_lost,
            published_read.first.clone().unwrap_or_default()
        ));
    }
    if after > published {
        o.recovered_beyond = after - published;
        let rest = read_back_from(store, published, after);
        o.wrong_after = rest;
        if rest > 0 {
            let text = format!(
                "after recover, {rest} frames between {published} and {after} hold bytes \
                 that are neither their input nor fill"
            );
            if strict_beyond {
                o.problem.get_or_insert(text);
            } else {
                o.note = Some(text);
            }
        }
    }
    o
}

/// The per-frame timestamps as the cut left them (the half-frame cases record them):
/// never more than the array's frames, each the one pushed with its frame.
fn check_timestamps(store: &Path, frames: u64) -> Option<String> {
    let column = store.join("frame_meta/timestamp");
    let shape0 = progress(&std::fs::read(column.join("zarr.json")).ok()?)?.0;
    if shape0 > frames {
        return Some(format!(
            "the per-frame timestamps cover {shape0} frames, the array {frames}"
        ));
    }
    let got = FilesystemStore::new(&column)
        .map_err(|e| e.to_string())
        .and_then(|s| Array::open(Arc::new(s), "/").map_err(|e| e.to_string()))
        .and_then(|a| {
            a.retrieve_array_subset::<Vec<f64>>(&ArraySubset::new_with_shape(vec![shape0]))
                .map_err(|e| e.to_string())
        });
    let want: Vec<f64> = (0..shape0).map(|k| k as f64).collect();
    match got {
        Ok(v) if v == want => None,
        Ok(v) => Some(format!("the per-frame timestamps read {v:?}")),
        Err(e) => Some(format!("the per-frame timestamps cannot be read: {e}")),
    }
}

/// Frames `from..to` holding bytes that are neither input nor fill.
fn read_back_from(store: &Path, from: u64, to: u64) -> u64 {
    let all = read_back(store, to);
    let head = read_back(store, from);
    all.wrong - head.wrong
}

/// Total requests of a whole recording (no cut), to draw cut points from.
fn calibrate(mode: Mode, case: Case, k: u64) -> u64 {
    let (fs, mnt) = mount(k);
    if let Err(e) = run_recorder(mode, case, &mnt.path().join("a.zarr")) {
        panic!("{mode:?} {case:?}: a recording without a cut: {e}");
    }
    let ops = fs.ops();
    drop(mnt);
    ops
}

fn run_cuts(mode: Mode, seed: u64, cuts: u64) {
    println!("seed {seed}, {cuts} cuts, mode {mode:?}");
    let totals: Vec<u64> = (0..)
        .zip(Case::ALL)
        .map(|(i, case)| calibrate(mode, case, 1_000_000 + i))
        .collect();
    let mut rng = seed;
    let mut next = || {
        rng = splitmix(rng);
        rng
    };
    let (mut torn, mut after_finish, mut published, mut lost, mut uncovered) = (0, 0, 0, 0, 0);
    let (mut stores_lost, mut recover_errors, mut beyond, mut wrong) = (0, 0, 0, 0);
    let (mut problems, mut notes) = (Vec::new(), Vec::new());
    for k in 0..cuts {
        // Order alternates, then clean and torn, then whole-frame and half-frame shards.
        let o = ((k % 2) + 2 * ((k / 4) % 2)) as usize;
        let (case, total) = (Case::ALL[o], totals[o]);
        // A tenth of the draws fall after the recording's last request: a cut after
        // `finish`.
        let n = 1 + next() % (total + total / 10);
        let kind = if (k / 2) % 2 == 1 {
            torn += 1;
            CutKind::Torn(next())
        } else {
            CutKind::Clean
        };
        let (out, ops) = one_cut(k, mode, case, n, kind);
        if n > ops {
            after_finish += 1;
        }
        published += out.published;
        lost += out.published_lost;
        uncovered += out.left_uncovered;
        stores_lost += u64::from(out.store_lost);
        recover_errors += u64::from(out.recover_error.is_some());
        beyond += out.recovered_beyond;
        wrong += out.wrong_after;
        let at = format!(
            "cut {k} ({}, {kind:?}, at request {n} of ~{total})",
            case.name()
        );
        if let Some(p) = out.problem {
            problems.push(format!("{at}: {p}"));
        }
        if let Some(p) = out.note {
            notes.push(format!("{at}: {p}"));
        }
    }
    println!(
        "REPORT mode {mode:?}: seed {seed}, {cuts} cuts ({torn} torn, {after_finish} after \
         finish; requests per recording {totals:?}): published frames {published}, \
         published frames lost {lost}, frames zarr.json covered without data {uncovered}, \
         stores lost {stores_lost}, recover errors {recover_errors}, frames recovered beyond \
         the published extent {beyond}, frames with wrong bytes after recover {wrong}"
    );
    for p in problems.iter().take(20) {
        println!("REPORT   {p}");
    }
    for p in notes.iter().take(5) {
        println!("REPORT   (beyond the promise) {p}");
    }
    if mode.promises() {
        assert!(
            problems.is_empty(),
            "{mode:?} broke its promise at {} of {cuts} cuts (seed {seed}):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
}

/// A finished recording, then a clean cut: everything must be there (no recovery needed).
fn finished(mode: Mode) {
    for (k, case) in (0..).zip(Case::ALL) {
        let (out, _) = one_cut(k, mode, case, u64::MAX, CutKind::Clean);
        assert_eq!(
            out.published, FRAMES,
            "{mode:?} {case:?}: all frames published"
        );
        assert_eq!(
            out.left, FRAMES,
            "{mode:?} {case:?}: zarr.json as the cut left it shows every frame"
        );
        assert!(
            out.problem.is_none(),
            "{mode:?} {case:?}: {}",
            out.problem.unwrap_or_default()
        );
    }
    println!("REPORT finished {mode:?}: a cut after finish keeps every frame");
}

/// The arrays of the multi-array recording.
const RECORDING_KEYS: [&str; 2] = ["cam0", "pos1/cam1"];

/// Records `FRAMES` frames into each array of a `Recording` at `root` and finishes it.
fn record_recording(root: &Path, mode: Mode) {
    let arrays = RECORDING_KEYS
        .iter()
        .map(|k| ArrayConfig::new(*k, Case::ALL[0].spec()))
        .collect::<Vec<_>>();
    let opts = WriterOptions::default()
        .threads(1)
        .sink(SinkChoice::Pwrite)
        .durability(mode.durability());
    let rec = Recording::create(root, arrays, opts).expect("create the recording");
    for k in 0..FRAMES {
        for key in RECORDING_KEYS {
            assert!(
                rec.array(key)
                    .and_then(|mut w| w.push(&frame(k)))
                    .expect("push")
                    .is_accepted(),
                "frame {k} of {key} accepted"
            );
        }
    }
    rec.finish().expect("finish the recording");
    // And an OME-Zarr image with a pyramid of two levels, beside it.
    let image = root.with_file_name("img.zarr");
    let ome = Ome::new().levels(Levels::Count(2));
    let opts = WriterOptions::default()
        .threads(1)
        .sink(SinkChoice::Pwrite)
        .durability(mode.durability());
    let mut w =
        Writer::create_ome(&image, Case::ALL[0].spec(), &ome, opts).expect("create the image");
    for k in 0..FRAMES {
        assert!(w.push(&frame(k)).expect("push").is_accepted());
    }
    w.finish().expect("finish the image");
    // And an array with per-frame metadata (a group of 1-D arrays of its own).
    let opts = WriterOptions::default()
        .threads(1)
        .sink(SinkChoice::Pwrite)
        .durability(mode.durability())
        .frame_meta(FrameMetaSpec::new().field("timestamp", MetaType::Float64));
    let mut w = Writer::create(root.with_file_name("meta.zarr"), Case::ALL[0].spec(), opts)
        .expect("create the array with metadata");
    for k in 0..FRAMES {
        let meta = FrameMeta::new().value("timestamp", k as f64);
        let bytes: Vec<u8> = frame(k).iter().flat_map(|v| v.to_le_bytes()).collect();
        let pushed = w.push_with(&bytes, std::time::Instant::now(), &meta);
        assert!(pushed.expect("push").is_accepted());
    }
    w.finish().expect("finish the array with metadata");
}

/// A finished multi-array recording, then a clean cut: every array is there whole.
fn finished_recording(mode: Mode) {
    let (fs, mnt) = mount(0);
    run_in_child(&format!(
        "record-recording:{}:-:{}",
        mode.name(),
        mnt.path().join("r.zarr").display()
    ))
    .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    fs.power_cut();
    let survived = support_fs::dir().join("survived");
    std::fs::create_dir_all(&survived).expect("a directory for what survived");
    fs.with_model(|m| m.materialize(&survived))
        .expect("write out what survived");
    drop(mnt);
    let stores = RECORDING_KEYS
        .iter()
        .map(|k| survived.join("r.zarr").join(k))
        .chain([survived.join("img.zarr/0"), survived.join("meta.zarr")]);
    for store in stores {
        let key = store.display();
        let left = std::fs::read(store.join("zarr.json"))
            .ok()
            .and_then(|d| progress(&d));
        assert_eq!(
            left.map(|(shape0, _)| shape0),
            Some(FRAMES),
            "{mode:?}: {key}'s zarr.json after a cut that followed finish"
        );
        let r = read_back(&store, FRAMES);
        assert_eq!(r.exact, FRAMES, "{mode:?}: {key}: {:?}", r.first);
    }
    let level1 = std::fs::read(survived.join("img.zarr/1/zarr.json"))
        .ok()
        .and_then(|d| progress(&d));
    assert_eq!(
        level1.map(|(shape0, _)| shape0),
        Some(FRAMES),
        "{mode:?}: the image's level 1 after a cut that followed finish"
    );
    let ts = FilesystemStore::new(survived.join("meta.zarr/frame_meta/timestamp"))
        .map_err(|e| e.to_string())
        .and_then(|s| Array::open(Arc::new(s), "/").map_err(|e| e.to_string()))
        .and_then(|a| {
            a.retrieve_array_subset::<Vec<f64>>(&ArraySubset::new_with_shape(vec![FRAMES]))
                .map_err(|e| e.to_string())
        });
    let want: Vec<f64> = (0..FRAMES).map(|k| k as f64).collect();
    assert_eq!(
        ts,
        Ok(want),
        "{mode:?}: the per-frame timestamps after a cut that followed finish"
    );
    let group = std::fs::read(survived.join("img.zarr/zarr.json")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&group).contains("multiscales"),
        "{mode:?}: the image's group document after a cut that followed finish"
    );
    println!(
        "REPORT finished recording {mode:?}: a cut after finish keeps every array, the \
         image and the per-frame metadata whole"
    );
}

/// Writes (`phase` "write") or checks (`phase` "check") files at the mount `at`, in a
/// process of its own (see [`run_recorder`]).
fn fs_client(phase: &str, at: &Path) {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let sync = |p: &Path| {
        std::fs::File::open(p)
            .and_then(|f| f.sync_all())
            .expect("fsync")
    };
    match phase {
        "write" => {
            let d = at.join("d");
            std::fs::create_dir(&d).expect("mkdir");
            let mut f = std::fs::File::create(d.join("kept")).expect("create");
            f.write_all(b"synced").expect("write");
            f.sync_data().expect("fdatasync");
            f.write_all_at(b"SYNCED later, lost", 0).expect("pwrite");
            rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, 8192)
                .expect("fallocate");
            std::fs::write(d.join("unsynced"), b"x").expect("write a second file");
            sync(&d);
            sync(at);
            std::fs::write(d.join("after"), b"y").expect("write after the syncs");
            std::fs::rename(d.join("kept"), d.join("renamed")).expect("rename");
            let listed: Vec<_> = std::fs::read_dir(&d)
                .expect("readdir")
                .map(|e| e.expect("entry").file_name())
                .collect();
            assert_eq!(listed.len(), 3, "{listed:?}");
        }
        "check" => {
            let d = at.join("d");
            let mut listed: Vec<String> = std::fs::read_dir(&d)
                .expect("readdir after the cut")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            listed.sort();
            // The rename and the last file were never synced; the second file's name
            // was, its data was not.
            assert_eq!(listed, ["kept", "unsynced"]);
            assert_eq!(std::fs::read(d.join("kept")).expect("read"), b"synced");
            assert_eq!(std::fs::read(d.join("unsynced")).expect("read"), b"");
        }
        _ => panic!("phase {phase}"),
    }
}

/// Mounts, writes in a child, cuts the power, restores it and checks in another child.
fn fs_power_cycle() {
    let (fs, mnt) = mount(0);
    let at = mnt.path().display().to_string();
    run_in_child(&format!("fs-client:write:-:{at}")).unwrap_or_else(|e| panic!("{e}"));
    let cut = fs.power_cut();
    assert!(!fs.powered());
    // The live state at the cut: the rename, the later write and the reservation.
    let mut want = b"SYNCED later, lost".to_vec();
    want.resize(8192, 0);
    assert_eq!(cut.live.read_path("d/renamed").ok(), Some(want));
    fs.power_on();
    run_in_child(&format!("fs-client:check:-:{at}")).unwrap_or_else(|e| panic!("{e}"));
    drop(mnt);
    println!("REPORT testfs: a clean cut keeps what was synced, through the kernel");
}
