//! Crash recovery end to end: `zarrstream record` records known frames at a paced rate
//! in a child process, which is killed with SIGKILL in the middle of a shard once it has
//! reported a given number of frames encoded (`--progress`); then the `zarrstream recover`
//! binary rebuilds the store and `zarrs` reads it back.
//!
//! Every case checks: at least as many complete frames as the child last reported
//! encoded; every frame holds its input or (chunk by chunk) the fill value, nothing else;
//! `zarr.json`'s shape ends at the last chunk on disk and its `frames_committed` counts
//! the complete frames; no temporary shard is left. Run with `--nocapture` for the
//! table of frames recovered against frames encoded per case.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

const Y: usize = 64;
const X: usize = 64;
const CHUNK: usize = 32;
const SHARD_FRAMES: u64 = 8;
const FRAMES: u64 = 80;
const FPS: u32 = 120;
/// How long one run of `record` (unpaced) or `zarrstream recover` may take.
const PROGRAM_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
struct Case {
    codec: &'static str,
    index: &'static str,
    crc32c: bool,
    sink: &'static str,
    kill_at: u64,
    /// Inner chunk: frames, and rows = columns (they divide the frame); frames per
    /// shard.
    chunk_t: u64,
    chunk_yx: usize,
    shard_t: u64,
}

impl Case {
    fn name(&self) -> String {
        format!(
            "{}-{}-{}-{}-t{}-kill{}",
            self.codec,
            self.index,
            if self.crc32c { "crc" } else { "nocrc" },
            self.sink,
            self.chunk_t,
            self.kill_at
        )
    }
}

use zarrstream_testkit::crash;
use zarrstream_testkit::windows;

use crash::{Recorder, Wait, partial_files, sample};

fn write_input(path: &Path) {
    crash::write_input(path, FRAMES, Y * X);
}

/// The program a case runs (`zarrstream record`, `zarrstream recover`): this machine's
/// build, or the Windows build under Wine.
struct Tools {
    zarrstream: PathBuf,
    /// Wine, for the Windows builds.
    win: Option<windows::Win>,
}

impl Tools {
    fn native() -> Tools {
        Tools {
            zarrstream: PathBuf::from(env!("CARGO_BIN_EXE_zarrstream")),
            win: None,
        }
    }

    /// `zarrstream.exe`, built for Windows (`tools/windows/cargo`'s `wine` profile).
    fn windows(win: windows::Win) -> Tools {
        win.build_suite();
        let dir = win.profile_dir();
        Tools {
            zarrstream: dir.join("zarrstream.exe"),
            win: Some(win),
        }
    }

    fn command(&self, program: &Path) -> Command {
        match &self.win {
            Some(w) => w.command(program),
            None => Command::new(program),
        }
    }

    fn record(&self) -> Command {
        let mut cmd = self.zarrstream();
        cmd.arg("record");
        cmd
    }

    fn zarrstream(&self) -> Command {
        self.command(&self.zarrstream)
    }

    /// `p` as the programs name it.
    fn path(&self, p: &Path) -> OsString {
        match &self.win {
            Some(_) => windows::wine_path(p).into(),
            None => p.as_os_str().to_owned(),
        }
    }
}

/// Runs the recording until it reports `kill_at` frames encoded, kills it with SIGKILL
/// and returns the largest encoded count it reported (lines read after the decision
/// count too: those frames were encoded before the kill).
fn record_and_kill(tools: &Tools, case: &Case, input: &Path, store: &Path) -> u64 {
    let mut cmd = tools.record();
    cmd.args(["--out"])
        .arg(tools.path(store))
        .args(["--shape", &format!("0,{Y},{X}")])
        .args([
            "--chunk",
            &format!("{},{1},{1}", case.chunk_t, case.chunk_yx),
        ])
        .args(["--shard", &format!("{},{Y},{X}", case.shard_t)])
        .args(["--dtype", "u16", "--codec", case.codec])
        .args(["--index-location", case.index, "--sink", case.sink])
        .arg("--input")
        .arg(tools.path(input))
        .args(["--frames", &FRAMES.to_string(), "--fps", &FPS.to_string()])
        .args(["--threads", "2", "--no-pin", "--quiet", "--progress"]);
    if !case.crc32c {
        cmd.arg("--no-crc32c");
    }
    let mut child = Recorder::spawn(cmd);
    let wait = child.wait_for(child.started + Duration::from_secs(30), |p| {
        p.encoded >= case.kill_at
    });
    let (status, progress) = child.kill();
    assert_eq!(
        wait,
        Wait::Reached,
        "[{}] the recording never reported {} frames encoded (last {}); stderr: {:?}",
        case.name(),
        case.kill_at,
        progress.encoded,
        progress.other
    );
    assert!(
        crash::killed(&status),
        "[{}] the recording was not killed mid-run (it exited with {status}); stderr: {:?}",
        case.name(),
        progress.other
    );
    progress.encoded
}

/// The sink a recording of `case` uses, from a short run's report.
fn sink_in_use(tools: &Tools, case: &Case, input: &Path, dir: &Path) -> String {
    let store = dir.join("sink-check.zarr");
    let report = dir.join("sink-check.json");
    let mut cmd = tools.record();
    cmd.arg("--out")
        .arg(tools.path(&store))
        .args(["--shape", &format!("0,{Y},{X}")])
        .args([
            "--chunk",
            &format!("{},{1},{1}", case.chunk_t, case.chunk_yx),
        ])
        .args(["--shard", &format!("{},{Y},{X}", case.shard_t)])
        .args(["--codec", case.codec, "--sink", case.sink, "--quiet"])
        .arg("--input")
        .arg(tools.path(input))
        .arg("--report")
        .arg(tools.path(&report));
    let out = windows::run(&mut cmd, PROGRAM_DEADLINE, "record for the sink check");
    assert!(
        out.status.success(),
        "record for the sink check: {}",
        out.status
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("report parses");
    doc["sink"].as_str().unwrap_or_default().to_string()
}

struct Outcome {
    relocated: u64,
    final_index: usize,
    encoded: u64,
    complete: u64,
    shape0: u64,
    rejected: u64,
}

fn run_case(tools: &Tools, case: &Case, input: &Path, dir: &Path) -> Outcome {
    let name = case.name();
    let store = dir.join(format!("{name}.zarr"));
    let encoded = record_and_kill(tools, case, input, &store);
    let partials = partial_files(&store);
    assert!(
        !partials.is_empty(),
        "[{name}] the kill left no temporary shard, so nothing was tested"
    );

    let mut cmd = tools.zarrstream();
    cmd.arg("recover").arg(tools.path(&store)).arg("--json");
    let out = windows::run(&mut cmd, PROGRAM_DEADLINE, "zarrstream recover");
    assert!(
        out.status.success(),
        "[{name}] zarrstream recover failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("[{name}] recover --json output: {e}"));
    assert_eq!(report["published"], true, "[{name}] {report}");
    let validation = if case.crc32c { "crc32c" } else { "decoding" };
    assert_eq!(report["validation"], validation, "[{name}]");
    assert!(
        report["damaged_shards"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "[{name}] {report}"
    );
    let rebuilt = report["shards_recovered"].as_u64().unwrap_or(0);
    assert!(
        rebuilt >= 1 || encoded.is_multiple_of(case.shard_t),
        "[{name}] killed after {encoded} frames but no temporary shard held a chunk: {report}"
    );
    let shards = report["shards"].as_array().cloned().unwrap_or_default();
    let relocated: u64 = shards
        .iter()
        .filter_map(|s| s["chunks_relocated"].as_u64())
        .sum();
    let final_index = shards.iter().filter(|s| s["index"] == "final").count();
    let left = partial_files(&store);
    assert!(left.is_empty(), "[{name}] left behind: {left:?}");
    assert!(
        !store.join(".zarrstream-partial").exists(),
        "[{name}] .zarrstream-partial still exists"
    );

    let doc: Value =
        serde_json::from_slice(&std::fs::read(store.join("zarr.json")).expect("zarr.json"))
            .expect("zarr.json parses");
    let ours = &doc["attributes"]["zarrstream"];
    assert_eq!(ours["state"], "recovered", "[{name}]");
    let committed = ours["frames_committed"].as_u64().expect("frames_committed");
    assert_eq!(report["frames_committed"].as_u64(), Some(committed));
    let shape: Vec<u64> = doc["shape"]
        .as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect())
        .expect("shape");
    assert_eq!(shape[1..], [Y as u64, X as u64], "[{name}]");
    let shape0 = shape[0];
    assert!(shape0 <= FRAMES, "[{name}] shape {shape:?}");

    let fs_store = Arc::new(FilesystemStore::new(&store).expect("store"));
    let array = Array::open(fs_store, "/").unwrap_or_else(|e| panic!("[{name}] zarrs open: {e}"));
    assert_eq!(array.shape(), shape.as_slice(), "[{name}] zarrs shape");
    let data: Vec<u16> = array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(shape.clone()))
        .unwrap_or_else(|e| panic!("[{name}] zarrs read: {e}"));
    assert_eq!(data.len(), shape0 as usize * Y * X);

    // Chunk by chunk: the input or all fill, nothing else.
    let mut complete = 0;
    let mut last_with_data = None;
    for t in 0..shape0 {
        let frame = &data[t as usize * Y * X..][..Y * X];
        let mut tiles_ok = 0;
        for ty in 0..Y / CHUNK {
            for tx in 0..X / CHUNK {
                let (mut same, mut fill) = (true, true);
                for y in ty * CHUNK..(ty + 1) * CHUNK {
                    for x in tx * CHUNK..(tx + 1) * CHUNK {
                        let v = frame[y * X + x];
                        same &= v == sample(t, y * X + x);
                        fill &= v == 0;
                    }
                }
                assert!(
                    same || fill,
                    "[{name}] frame {t} tile ({ty}, {tx}) is neither its input nor fill"
                );
                tiles_ok += u64::from(same);
            }
        }
        if tiles_ok > 0 {
            last_with_data = Some(t);
        }
        if tiles_ok == (Y / CHUNK * (X / CHUNK)) as u64 {
            complete += 1;
        }
    }
    assert_eq!(
        last_with_data.map(|t| t + 1),
        Some(shape0),
        "[{name}] shape[0] must end at the last frame with data"
    );
    assert_eq!(complete, committed, "[{name}] frames_committed");
    assert!(
        complete >= encoded,
        "[{name}] {complete} complete frames recovered, but the writer had reported {encoded} encoded"
    );

    // A second run finds nothing to do, says so, and changes nothing.
    let mut cmd = tools.zarrstream();
    cmd.arg("recover").arg(tools.path(&store));
    let again = windows::run(&mut cmd, PROGRAM_DEADLINE, "zarrstream recover again");
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success() && text.contains("nothing to recover"),
        "[{name}] second recover: {} {text}",
        again.status
    );
    let doc2: Value =
        serde_json::from_slice(&std::fs::read(store.join("zarr.json")).expect("zarr.json"))
            .expect("zarr.json parses");
    assert_eq!(doc2, doc, "[{name}] a second recover changed zarr.json");
    Outcome {
        relocated,
        final_index,
        encoded,
        complete,
        shape0,
        rejected: report["chunks_rejected"].as_u64().unwrap_or(0),
    }
}

#[test]
fn killed_recordings_are_recovered() {
    run_all(&Tools::native(), &cases());
}

/// The same with the Windows build under Wine: `zarrstream.exe record` killed mid-shard (the Wine
/// process, as a power cut or Task Manager's "End task" would), `zarrstream.exe recover`,
/// and zarrs reading the result on Linux. One case per sink and index place, both
/// validations. What it proves of Windows rests on Wine's file semantics.
#[test]
fn killed_windows_recordings_are_recovered() {
    let Some(win) = windows::require("WINDOWS CRASH RECOVERY") else {
        return;
    };
    let picked: Vec<Case> = cases()
        .into_iter()
        .filter(|c| {
            matches!(
                (c.sink, c.codec, c.index, c.kill_at, c.crc32c),
                ("pwrite", "lz4:1", "end", 5, true)
                    | ("mmap", "zstd:1", "start", 13, true)
                    | ("pwrite", "zstd:1", "start", 16, true)
                    | ("pwrite", "lz4:1", "end", 13, false)
                    | ("direct", "lz4:1", "end", 8, true)
                    | ("direct", "lz4:1", "start", 40, true)
            )
        })
        .collect();
    assert_eq!(picked.len(), 6, "the picked cases exist");
    run_all(&Tools::windows(win), &picked);
}

fn run_all(tools: &Tools, cases: &[Case]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("frames.raw");
    write_input(&input);
    if let Some(direct) = cases.iter().find(|c| c.sink == "direct") {
        assert_eq!(
            sink_in_use(tools, direct, &input, dir.path()),
            "direct",
            "the direct cases' geometry must not fall back to pwrite"
        );
    }

    eprintln!(
        "{:<38} {:>8} {:>10} {:>8} {:>9} {:>10} {:>12}",
        "case", "encoded", "recovered", "shape0", "rejected", "relocated", "final-index"
    );
    for case in cases {
        let o = run_case(tools, case, &input, dir.path());
        eprintln!(
            "{:<38} {:>8} {:>10} {:>8} {:>9} {:>10} {:>12}",
            case.name(),
            o.encoded,
            o.complete,
            o.shape0,
            o.rejected,
            o.relocated,
            o.final_index
        );
    }
}

/// Every case of the campaign.
fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for codec in ["lz4:1", "zstd:1"] {
        for index in ["end", "start"] {
            for (kill_at, sink) in [(5, "pwrite"), (13, "mmap"), (27, "pwrite")] {
                cases.push(Case {
                    codec,
                    index,
                    crc32c: true,
                    sink,
                    kill_at,
                    chunk_t: 1,
                    chunk_yx: CHUNK,
                    shard_t: SHARD_FRAMES,
                });
            }
        }
    }
    // Right after a shard's last frame: the finisher may be compacting or flushing it.
    for (codec, index) in [("lz4:1", "end"), ("zstd:1", "start")] {
        cases.push(Case {
            codec,
            index,
            crc32c: true,
            sink: "pwrite",
            kill_at: 16,
            chunk_t: 1,
            chunk_yx: CHUNK,
            shard_t: SHARD_FRAMES,
        });
    }
    // Without the per-chunk crc32c, chunks are validated by decoding.
    cases.push(Case {
        codec: "lz4:1",
        index: "end",
        crc32c: false,
        sink: "pwrite",
        kill_at: 13,
        chunk_t: 1,
        chunk_yx: CHUNK,
        shard_t: SHARD_FRAMES,
    });
    cases.push(Case {
        codec: "blosc-zstd:5",
        index: "end",
        crc32c: false,
        sink: "pwrite",
        kill_at: 13,
        chunk_t: 1,
        chunk_yx: CHUNK,
        shard_t: SHARD_FRAMES,
    });
    cases.push(Case {
        codec: "zstd:1",
        index: "start",
        crc32c: false,
        sink: "mmap",
        kill_at: 27,
        chunk_t: 1,
        chunk_yx: CHUNK,
        shard_t: SHARD_FRAMES,
    });
    // The direct sink needs slots of 64 KiB: inner chunks of 8 whole frames (64 KiB),
    // two per shard; killed once the first chunk of a shard is written, and later.
    for (codec, index, kill_at) in [
        ("lz4:1", "end", 8),
        ("zstd:1", "start", 8),
        ("none", "end", 24),
        ("lz4:1", "start", 40),
    ] {
        cases.push(Case {
            codec,
            index,
            crc32c: true,
            sink: "direct",
            kill_at,
            chunk_t: 8,
            chunk_yx: Y,
            shard_t: 16,
        });
    }
    cases
}
