//! `zarrstream record`'s `--arrays`, `--camera-threads` and `--resume`: what it
//! records is read back with the `zarrs` crate and compared with the synthetic camera's
//! frames (as `--save-frames` writes them) or with an uninterrupted recording.

// Linux only: the Windows build of `zarrstream record` is run under Wine from Linux by
// crates/zarrstream/tests/windows.rs.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Output;

use std::sync::Arc;
use zarrstream_testkit::cli_record as record;

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

/// Small u16 frames, one frame per chunk, four frames per shard.
const GEOMETRY: [&str; 6] = [
    "--shape", "0,32,48", "--chunk", "1,16,48", "--shard", "4,32,48",
];
const PLANE: usize = 32 * 48;

/// Runs `record` with the small geometry, two workers and `args`.
fn run(args: &[&str]) -> Output {
    record!()
        .args(GEOMETRY)
        .args(["--threads", "2", "--no-pin", "--quiet"])
        .args(args)
        .output()
        .expect("run record")
}

fn ok(args: &[&str]) {
    let out = run(args);
    assert!(
        out.status.success(),
        "record {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The `frames` frames the synthetic camera pushes into one array, as `--save-frames`
/// writes them.
fn synthetic(dir: &Path, frames: u64) -> Vec<Vec<u16>> {
    let raw = dir.join(format!("synthetic-{frames}.raw"));
    ok(&["--frames", &frames.to_string(), "--save-frames", s(&raw)]);
    let bytes = std::fs::read(&raw).expect("saved frames");
    assert_eq!(bytes.len(), frames as usize * PLANE * 2);
    bytes
        .chunks_exact(PLANE * 2)
        .map(|f| {
            f.chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .collect()
        })
        .collect()
}

/// The frames of the array at `key` under `root` (`""`: the root is the array).
fn frames_of(root: &Path, key: &str) -> Vec<Vec<u16>> {
    let store = Arc::new(FilesystemStore::new(root).expect("store"));
    let array = Array::open(store, &format!("/{key}")).expect("zarrs opens the array");
    let shape = array.shape().to_vec();
    assert_eq!(shape[1..], [32, 48]);
    let data = array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(shape))
        .expect("zarrs reads it");
    data.chunks_exact(PLANE).map(<[u16]>::to_vec).collect()
}

fn report(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("report")).expect("json")
}

/// Camera `a` of `n` starts `a / n` of the way into the shared pool of synthetic frames.
fn expected_camera(pool: &[Vec<u16>], a: usize, n: usize) -> Vec<Vec<u16>> {
    let off = a * pool.len() / n;
    (0..pool.len())
        .map(|k| pool[(k + off) % pool.len()].clone())
        .collect()
}

fn check_cameras(out: &Path, n: usize, pool: &[Vec<u16>]) {
    for a in 0..n {
        let got = frames_of(out, &format!("cam{a}"));
        assert_eq!(got.len(), pool.len(), "cam{a}: frames");
        assert!(
            got == expected_camera(pool, a, n),
            "cam{a}: frames differ from the synthetic camera's"
        );
    }
}

#[test]
fn record_arrays_3_writes_cam0_to_cam2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let rep = tmp.path().join("rec.json");
    let pool = synthetic(tmp.path(), 9);
    ok(&[
        "--arrays",
        "3",
        "--frames",
        "9",
        "--out",
        s(&out),
        "--report",
        s(&rep),
    ]);
    check_cameras(&out, 3, &pool);
    let group: Value =
        serde_json::from_slice(&std::fs::read(out.join("zarr.json")).expect("group")).unwrap();
    assert_eq!(group["node_type"], "group");
    let doc = report(&rep);
    let arrays = doc["arrays"].as_array().expect("arrays list");
    assert_eq!(arrays.len(), 3);
    for (a, entry) in arrays.iter().enumerate() {
        assert_eq!(entry["key"], format!("cam{a}"));
        assert_eq!(entry["frames_written"], 9);
        assert_eq!(entry["frames_dropped"], 0);
        assert_eq!(entry["bytes_in"], 9 * PLANE as u64 * 2);
        assert!(entry["bytes_stored"].as_u64().unwrap() > 0);
        assert!(entry["push_latency_us"]["p99"].is_number());
        assert!(entry["frame_latency_us"]["max"].is_number());
    }
    let total = &doc["total"];
    assert_eq!(total["frames_written"], 27);
    assert_eq!(total["bytes_in"], 27 * PLANE as u64 * 2);
    let mib_s = total["bytes_in"].as_f64().unwrap()
        / (1u64 << 20) as f64
        / total["seconds"].as_f64().unwrap();
    let reported = total["throughput_mib_s"].as_f64().unwrap();
    assert!(
        (reported - mib_s).abs() <= 0.01 + 1e-3 * mib_s,
        "{reported} vs {mib_s}"
    );
    assert!(doc.get("resumed_from").is_none());
}

#[test]
fn record_arrays_2_camera_threads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let pool = synthetic(tmp.path(), 12);
    ok(&[
        "--arrays",
        "2",
        "--camera-threads",
        "--fps",
        "200",
        "--frames",
        "12",
        "--out",
        s(&out),
    ]);
    check_cameras(&out, 2, &pool);
}

#[test]
fn record_arrays_with_input_push_the_input_to_every_array() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let input = tmp.path().join("in.raw");
    let frames: Vec<Vec<u16>> = (0..5)
        .map(|k| (0..PLANE).map(|i| (i * 7 + k * 1013) as u16).collect())
        .collect();
    let bytes: Vec<u8> = frames
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(&input, bytes).expect("input");
    ok(&["--arrays", "2", "--input", s(&input), "--out", s(&out)]);
    for a in 0..2 {
        assert!(frames_of(&out, &format!("cam{a}")) == frames, "cam{a}");
    }
}

#[test]
fn record_arrays_2_frame_meta_per_array() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    ok(&[
        "--arrays",
        "2",
        "--frame-meta",
        "--frames",
        "15",
        "--out",
        s(&out),
    ]);
    for a in 0..2 {
        let dir = out.join(format!("cam{a}/frame_meta/stage_x"));
        let store = Arc::new(FilesystemStore::new(&dir).expect("store"));
        let array = Array::open(store, "/").expect("zarrs opens the column");
        assert_eq!(array.shape(), [15]);
        let x = array
            .retrieve_array_subset::<Vec<f64>>(&ArraySubset::new_with_shape(vec![15]))
            .expect("column");
        let want: Vec<f64> = (0..15).map(|k| 100.0 + 0.5 * k as f64).collect();
        assert_eq!(x, want, "cam{a}");
        assert!(out.join(format!("cam{a}/frame_meta/timestamp")).is_dir());
    }
}

#[test]
fn record_resume_continues_the_array() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let whole = tmp.path().join("whole.zarr");
    let rep = tmp.path().join("resume.json");
    ok(&["--frames", "10", "--out", s(&out)]);
    ok(&[
        "--frames",
        "7",
        "--resume",
        "--out",
        s(&out),
        "--report",
        s(&rep),
    ]);
    ok(&["--frames", "17", "--out", s(&whole)]);
    let got = frames_of(&out, "");
    assert_eq!(got.len(), 17);
    assert!(got == frames_of(&whole, ""), "resumed != uninterrupted");
    let doc = report(&rep);
    assert_eq!(doc["resumed_from"], 10);
    assert_eq!(doc["frames"], 7);
}

#[test]
fn record_resume_with_input_appends_its_first_frame_next() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let input = tmp.path().join("in.raw");
    let frames: Vec<Vec<u16>> = (0..3)
        .map(|k| (0..PLANE).map(|i| (i * 3 + k * 101) as u16).collect())
        .collect();
    let bytes: Vec<u8> = frames
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(&input, bytes).expect("input");
    ok(&["--frames", "5", "--out", s(&out)]);
    let before = frames_of(&out, "");
    ok(&["--resume", "--input", s(&input), "--out", s(&out)]);
    let after = frames_of(&out, "");
    assert_eq!(after.len(), 8);
    assert!(after[..5] == before[..] && after[5..] == frames[..]);
}

#[test]
fn record_resume_arrays_continues_every_array() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let rep = tmp.path().join("resume.json");
    ok(&["--arrays", "2", "--frames", "6", "--out", s(&out)]);
    let before: Vec<_> = (0..2)
        .map(|a| frames_of(&out, &format!("cam{a}")))
        .collect();
    ok(&[
        "--arrays",
        "2",
        "--camera-threads",
        "--frames",
        "3",
        "--resume",
        "--out",
        s(&out),
        "--report",
        s(&rep),
    ]);
    for (a, before) in before.iter().enumerate() {
        let after = frames_of(&out, &format!("cam{a}"));
        assert_eq!(after.len(), 9, "cam{a}");
        // The first session's frames are still there, unchanged.
        assert!(after[..6] == before[..], "cam{a}");
    }
    let doc = report(&rep);
    assert_eq!(doc["arrays"][1]["resumed_from"], 6);
    assert_eq!(doc["resumed_from"], 12);
}

fn refused(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(2), "record {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `record --codec blosc-zstd:5` (and with bit shuffle) writes what the synthetic camera
/// gave, read back by zarrs; `zarr.json` names blosc with zstd inside.
#[test]
fn record_blosc_zstd() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pool = synthetic(tmp.path(), 6);
    for (codec, shuffle) in [
        ("blosc-zstd:5", "shuffle"),
        ("blosc-zstd:3:bitshuffle", "bitshuffle"),
    ] {
        let out = tmp.path().join(format!("{shuffle}.zarr"));
        ok(&["--frames", "6", "--codec", codec, "--out", s(&out)]);
        assert!(frames_of(&out, "") == pool, "{codec}");
        let doc: Value =
            serde_json::from_slice(&std::fs::read(out.join("zarr.json")).expect("zarr.json"))
                .expect("json");
        let blosc = &doc["codecs"][0]["configuration"]["codecs"][1];
        assert_eq!(blosc["name"], "blosc", "{codec}");
        assert_eq!(blosc["configuration"]["cname"], "zstd", "{codec}");
        assert_eq!(blosc["configuration"]["shuffle"], shuffle, "{codec}");
    }
}

#[test]
fn record_resume_with_another_codec_is_a_usage_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    ok(&["--frames", "4", "--codec", "lz4:1", "--out", s(&out)]);
    let err = refused(&[
        "--frames",
        "4",
        "--codec",
        "zstd:3",
        "--resume",
        "--out",
        s(&out),
    ]);
    assert!(err.contains("codec"), "{err}");
    // The array is left as it was.
    assert_eq!(frames_of(&out, "").len(), 4);
}

#[test]
fn record_refusals() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let err = refused(&["--resume", "--overwrite", "--out", s(&out)]);
    assert!(err.contains("--overwrite"), "{err}");
    let err = refused(&["--camera-threads", "--out", s(&out)]);
    assert!(err.contains("--camera-threads needs --arrays"), "{err}");
    let err = refused(&["--arrays", "0", "--out", s(&out)]);
    assert!(err.contains("--arrays"), "{err}");
    let err = refused(&["--resume", "--out", s(&out)]);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!out.exists());
}

#[test]
fn record_resume_of_the_wrong_layout_is_a_usage_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let group = tmp.path().join("group.zarr");
    ok(&["--arrays", "2", "--frames", "3", "--out", s(&group)]);
    let err = refused(&["--resume", "--frames", "3", "--out", s(&group)]);
    assert!(err.contains("is a group, not an array"), "{err}");
    let err = refused(&["--resume", "--arrays", "3", "--out", s(&group)]);
    assert!(err.contains("cam2 does not exist"), "{err}");
    for a in 0..2 {
        assert_eq!(frames_of(&group, &format!("cam{a}")).len(), 3);
    }
}

#[test]
fn record_resume_of_a_live_or_crashed_array_fails_with_exit_1() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    // 20 s of frames at 10 fps: still recording when the resume is tried.
    // Killed however the test ends.
    struct Live(std::process::Child);
    impl Drop for Live {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let live = record!()
        .args(GEOMETRY)
        .args(["--threads", "1", "--no-pin", "--quiet", "--progress"])
        .args(["--frames", "200", "--fps", "10", "--out", s(&out)])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start record");
    let mut live = Live(live);
    // The first encoded frame: the writer is up and holds its lock.
    let mut stderr = std::io::BufReader::new(live.0.stderr.take().expect("stderr"));
    // `--progress` prints the sink in use first.
    let mut line = String::new();
    while !line.starts_with("encoded") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).expect("progress");
        assert!(n > 0, "record ended before it encoded a frame");
        assert!(
            line.starts_with("encoded") || line.starts_with("sink "),
            "{line}"
        );
    }
    let out_live = run(&["--resume", "--frames", "2", "--out", s(&out)]);
    drop(live);
    assert_eq!(out_live.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out_live.stderr);
    assert!(err.contains("locked"), "{err}");
    let crashed = run(&["--resume", "--frames", "2", "--out", s(&out)]);
    assert_eq!(crashed.status.code(), Some(1));
    let err = String::from_utf8_lossy(&crashed.stderr);
    assert!(err.contains("zarrstream recover"), "{err}");
}
