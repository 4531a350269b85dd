//! The Windows build, run under Wine from Linux: the library's own tests cross-compiled for
//! `x86_64-pc-windows-gnu` and run under Wine, and `zarrstream.exe record` recording through every
//! sink and codec into arrays that zarrs (here, in Rust), zarr-python, tensorstore and
//! zarrs-python (`tests/interop/check.py`) read back exactly on Linux, and onto a full
//! volume. The toolchain, its cache and the Wine prefix are `tools/windows/cargo`'s
//! (`zarrstream_testkit::windows`).
//!
//! What this proves rests on Wine 8 over Linux's file system: sharing modes, unbuffered
//! writes and mappings behave as Wine emulates them, not necessarily as Windows does.
//!
//! `cargo test --test windows -- --nocapture` prints the Wine test counts.

// The driver runs on Linux; the Windows build of this package leaves it out.
#![cfg(target_os = "linux")]

use zarrstream_testkit::python;
use zarrstream_testkit::windows;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

use windows::{Win, wine_path};

/// How long one run of `zarrstream.exe record` may take under Wine (seconds of work, with a wide
/// margin for a machine busy compiling).
const RUN: Duration = Duration::from_secs(300);

/// The frames of the round trips: 512 × 512 `uint16`, in inner chunks of 256 × 256 (slots
/// large enough for the direct sink) and shards of 4 frames.
const GEOMETRY: [&str; 8] = [
    "--shape",
    "0,512,512",
    "--chunk",
    "1,256,256",
    "--shard",
    "4,512,512",
    "--dim-names",
    "t,y,x",
];
const PLANE: usize = 512 * 512;

/// `zarrstream.exe` (the CLI, whose `record` runs here), built once per process (the
/// `wine` profile).
fn zarrstream_exe(win: &Win) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            win.build_suite();
            win.profile_dir().join("zarrstream.exe")
        })
        .clone()
}

/// The synthetic camera's first `frames` frames of the round trips' geometry, as `record
/// --save-frames` writes them: the same camera crate, so a Windows recording must hold
/// exactly these.
fn camera_frames(dir: &Path, frames: u64) -> (PathBuf, Vec<u16>) {
    let raw = dir.join(format!("camera-{frames}.raw"));
    let camera = zarrstream_camera::Camera::new(512, 512, zarrstream::DataType::UInt16);
    zarrstream_camera::save_frames(&raw, &camera.pool(frames, 0), frames).expect("save frames");
    let bytes = std::fs::read(&raw).expect("saved frames");
    assert_eq!(bytes.len(), frames as usize * PLANE * 2);
    let px = bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    (raw, px)
}

/// Every element of the array at `root`, read with zarrs, and its shape.
fn read_zarrs(root: &Path) -> (Vec<u64>, Vec<u16>) {
    let store = Arc::new(FilesystemStore::new(root).expect("store"));
    let array = Array::open(store, "/").expect("zarrs opens the array");
    let shape = array.shape().to_vec();
    let data = array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(shape.clone()))
        .expect("zarrs reads it");
    (shape, data)
}

fn zarr_json(root: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(root.join("zarr.json")).expect("zarr.json"))
        .expect("zarr.json parses")
}

/// `zarrstream.exe record` (from Linux's point of view) with the round trips' geometry and
/// `args`.
fn record_cmd(win: &Win, out: &Path, args: &[&str]) -> Command {
    let mut cmd = win.command(&zarrstream_exe(win));
    cmd.arg("record")
        .args(GEOMETRY)
        .args(["--threads", "2", "--no-pin", "--quiet", "--out"])
        .arg(wine_path(out))
        .args(args);
    cmd
}

/// The unit and integration tests of the library, the CLI and the C API, built for Windows
/// and run under Wine (`tools/windows/cargo test --suite`; the test files that need Linux
/// compile to nothing there, each saying why). Counts are printed; any failure fails this
/// test with the Wine run's output.
#[test]
fn the_windows_suite_passes_under_wine() {
    let Some(win) = windows::require("WINDOWS SUITE TESTS") else {
        return;
    };
    let args = ["test", "--locked", "--suite", "--no-fail-fast"];
    let out = win.cargo(&args, windows::BUILD_DEADLINE);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let counts = windows::test_counts(&text);
    // Linux's clippy never sees the Windows-only code: the Windows build must at least
    // compile it without a warning.
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("warning") && l.contains("zarrstream"))
        .collect();
    assert!(
        warnings.is_empty(),
        "the Windows build warns: {warnings:#?}\n{text}"
    );
    assert!(
        out.status.success() && counts.1 == 0,
        "tools/windows/cargo {} failed ({}): {counts:?}\n{text}",
        args.join(" "),
        out.status
    );
    windows::shout(&format!(
        "Windows build under Wine: {} tests passed, {} failed, {} ignored, in {} test \
         binaries (zarrstream, zarrstream-cli and zarrstream-capi)",
        counts.0, counts.1, counts.2, counts.3
    ));
    assert!(counts.0 >= 300, "too few tests ran under Wine: {counts:?}");
}

/// `zarrstream.exe record` through each sink (mmap, pwrite, unbuffered direct) and codec: the
/// report names the sink asked for, and every reader reads back the camera's frames.
#[test]
fn record_on_windows_round_trips_through_every_sink_and_codec() {
    let Some(win) = windows::require("WINDOWS ZARRSTREAM RECORD ROUND TRIPS") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = 16u64;
    let (raw, camera) = camera_frames(dir.path(), frames);
    let mut manifest = Vec::new();
    for sink in ["mmap", "pwrite", "direct"] {
        for (codec, codec_json) in [
            (
                "lz4:1",
                json!({"name": "blosc", "cname": "lz4", "clevel": 1, "shuffle": "shuffle"}),
            ),
            ("zstd:1", json!({"name": "zstd", "level": 1})),
            ("none", json!({"name": "none"})),
        ] {
            let name = format!("{sink}-{}", codec.replace(':', "-"));
            let store = dir.path().join(format!("{name}.zarr"));
            let report = dir.path().join(format!("{name}.json"));
            let mut cmd = record_cmd(
                &win,
                &store,
                &["--frames", &frames.to_string(), "--codec", codec],
            );
            cmd.args(["--sink", sink, "--report"])
                .arg(wine_path(&report));
            let out = win.run(&mut cmd, RUN, &format!("zarrstream.exe record {name}"));
            assert!(
                out.status.success(),
                "[{name}] zarrstream.exe record failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            let doc: Value =
                serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("json");
            assert_eq!(doc["sink"], sink, "[{name}] the sink used: {doc}");
            assert_eq!(doc["frames_written"], frames, "[{name}]");
            let (shape, data) = read_zarrs(&store);
            assert_eq!(shape, [frames, 512, 512], "[{name}]");
            assert!(data == camera, "[{name}] zarrs reads other pixels");
            let meta = zarr_json(&store);
            assert_eq!(
                meta["attributes"]["zarrstream"]["state"], "finished",
                "[{name}]"
            );
            assert!(
                !store.join(".zarrstream-partial").exists(),
                "[{name}] the temporary directory was left"
            );
            manifest.push(json!({
                "name": name,
                "path": store,
                "expected": raw,
                "dtype": "<u2",
                "shape": [frames, 512, 512],
                "chunk": [1, 256, 256],
                "shard": [4, 512, 512],
                "fill_hex": "0x0000",
                "fill_display": "0",
                "codec": codec_json,
                "crc32c": true,
                "index_location": "end",
                "dimension_names": ["t", "y", "x"],
                "frames": frames,
            }));
        }
    }
    // zarr-python, zarrs-python and tensorstore, every element and sub-regions.
    let Some(py) = python::interop(
        zarrstream_testkit::target_tmp!(),
        "WINDOWS ZARRSTREAM RECORD READERS",
    ) else {
        return;
    };
    let path = dir.path().join("manifest.json");
    std::fs::write(&path, json!({ "arrays": manifest }).to_string()).expect("manifest");
    let mut cmd = Command::new(py);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/check.py"))
        .args(["matrix"])
        .arg(&path);
    let out = windows::run(&mut cmd, RUN, "check.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "the Python readers disagree:\n{text}");
}

/// A tmpfs of 6 MiB, mounted for the life of the value (root only; CI runs as root).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        mount(&["-t", "tmpfs", "-o", "size=6m", "tmpfs"], at)?;
        Ok(Tmpfs(at.to_path_buf()))
    }

    /// Makes room, as a user would free space before running `recover`.
    fn grow(&self) {
        mount(&["-o", "remount,size=64m"], &self.0).expect("remount the tmpfs larger");
    }
}

fn mount(args: &[&str], at: &Path) -> Result<(), String> {
    let out = Command::new("mount")
        .args(args)
        .arg(at)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Counts the frames of `data` (frames of [`PLANE`] pixels, in tiles of 256 × 256) that
/// equal the camera's, and checks every tile of the others is the camera's or fill (0):
/// no tile holds other pixels.
fn complete_frames(data: &[u16], camera: &[u16]) -> u64 {
    let mut complete = 0;
    for (i, frame) in data.chunks(PLANE).enumerate() {
        let want = &camera[i * PLANE..(i + 1) * PLANE];
        if frame == want {
            complete += 1;
            continue;
        }
        for (ty, tx) in [(0, 0), (0, 256), (256, 0), (256, 256)] {
            let tile = |f: &[u16]| -> Vec<u16> {
                (ty..ty + 256)
                    .flat_map(|y| f[y * 512 + tx..y * 512 + tx + 256].to_vec())
                    .collect()
            };
            let got = tile(frame);
            assert!(
                got == tile(want) || got.iter().all(|&v| v == 0),
                "frame {i}, tile ({ty}, {tx}) holds neither the camera's pixels nor fill"
            );
        }
    }
    complete
}

/// `zarrstream.exe record` onto a volume that fills up: it exits with the library's disk-full error
/// (no crash, no access violation), every frame its `zarr.json` counts reads back as the
/// camera's, and once space is freed `recover` brings back at least a shard's frames,
/// exactly.
///
/// Under Wine a shard's reservation need not take its blocks (in one CI run three shards
/// of 2.06 MiB each passed the free-space check on this 6 MiB volume; NTFS allocates at
/// `SetEndOfFile`), so the disk can fill while a worker writes a chunk rather than when
/// the next shard is reserved; the writer then stops without finishing the shards in
/// flight, and `recover` rebuilds them. How many shards were finished before depends on
/// timing, so the test holds the recording to what is certain: the frames after
/// `recover`. (An accepted frame whose chunk then finds no room is lost with the disk:
/// the guarantee rests on the reservation, which Wine does not make.)
#[test]
fn record_on_windows_on_a_full_volume_fails_cleanly_and_keeps_finished_shards() {
    let Some(win) = windows::require("WINDOWS FULL DISK") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = 40u64; // 20 MiB of frames for a 6 MiB volume
    let (_, camera) = camera_frames(dir.path(), frames);
    let volume = match Tmpfs::mount(&dir.path().join("volume")) {
        Ok(v) => v,
        Err(e) if windows::in_ci() => panic!("WINDOWS FULL DISK: cannot mount a tmpfs: {e}"),
        Err(e) => {
            windows::shout(&format!(
                "WINDOWS FULL DISK SKIPPED: cannot mount a tmpfs (not root?): {e}"
            ));
            return;
        }
    };
    let store = volume.0.join("full.zarr");
    let mut cmd = record_cmd(
        &win,
        &store,
        &["--frames", &frames.to_string(), "--codec", "none"],
    );
    cmd.args(["--sink", "pwrite", "--durability", "shard"]);
    let out = win.run(&mut cmd, RUN, "zarrstream.exe record on a full volume");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "zarrstream.exe record should fail with its error status, not crash: {stderr}"
    );
    assert!(
        stderr.contains("disk full"),
        "not a disk-full error: {stderr}"
    );
    let meta = zarr_json(&store);
    let ours = &meta["attributes"]["zarrstream"];
    // `aborted`, or still `running` where the disk had no room left for the last
    // `zarr.json` either (the same unreserved blocks).
    assert!(
        ours["state"] == "aborted" || ours["state"] == "running",
        "{meta}"
    );
    let committed = ours["frames_committed"].as_u64().expect("frames_committed");
    let (shape, data) = read_zarrs(&store);
    assert_eq!(shape[0], committed, "{meta}");
    assert!(
        data[..] == camera[..committed as usize * PLANE],
        "the finished shards hold other pixels"
    );

    volume.grow();
    let report = zarrstream::recover::recover_store(&store).expect("recover");
    let (shape, data) = read_zarrs(&store);
    assert_eq!(shape[0], report.shape[0], "{report:?}");
    let complete = complete_frames(&data, &camera);
    assert_eq!(
        complete, report.frames_committed,
        "recover counts the frames whose every chunk is on disk: {report:?}"
    );
    assert!(
        complete >= committed.max(4),
        "recover brought back {complete} frames, {committed} were published before: {report:?}"
    );
    windows::shout(&format!(
        "Windows full disk under Wine: {committed} of {frames} frames published, {complete} \
         after recover, error: {}",
        stderr.trim()
    ));
}
