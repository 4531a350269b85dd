//! `zarrstream record --ome` read while it records: ome-zarr-py, ome-zarr-models and
//! zarr-python (`tests/interop/ome_check.py live`) never see level 0 ahead of its data.
//! (Moved from the library's `ome.rs`, which tests the library's API.)

// Linux only: the readers are Python's, which the Windows build does not run.
#![cfg(target_os = "linux")]

use zarrstream_testkit::python as pyenv;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use zarrstream_testkit::cli_record as record;

fn check_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../zarrstream/tests/interop/ome_check.py")
}

#[test]
fn readers_never_see_level0_ahead_of_its_data_while_recording() {
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), "OME-ZARR READER TEST") else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("ome-live-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let dir = dir.path();
    // 2 channels x 64 x 48, 2 steps per shard; 180 frames at 60 fps = 3 s, 90 steps.
    let plane = 64 * 48;
    let frames = 180u64;
    let data: Vec<u8> = (0..frames)
        .flat_map(|k| (0..plane).map(move |i| (k as usize * 7919 + i * 13) as u16))
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let input = dir.join("frames.raw");
    fs::write(&input, &data).expect("input");
    let store = dir.join("live.ome.zarr");
    let ready = dir.join("ready");
    let manifest = dir.join("live.json");
    let live = json!({
        "name": "live_tcyx", "path": store, "expected": input, "dtype": "<u2",
        "shape": [frames / 2, 2, 64, 48], "axes": ["t", "c", "y", "x"],
        "levels": 4, "method": "mean",
        "timeout_s": 120, "ready_file": ready,
    });
    fs::write(&manifest, json!({ "live": live }).to_string()).expect("manifest");
    let mut reader = Command::new(&py)
        .arg(check_script())
        .arg("live")
        .arg(&manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ome_check.py live");
    let t0 = Instant::now();
    while !ready.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "reader never ready"
        );
        if let Ok(Some(s)) = reader.try_wait() {
            panic!("ome_check.py live exited early: {s}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let rec = record!()
        .arg("--out")
        .arg(&store)
        .args(["--ome", "--shape", "0,2,64,48", "--chunk", "1,1,32,48"])
        .args([
            "--shard",
            "2,2,64,48",
            "--codec",
            "zstd:1",
            "--channels",
            "A,B",
        ])
        .args(["--pixel-size", "0.5", "--frames", &frames.to_string()])
        .args(["--levels", "4"])
        .args(["--fps", "60", "--threads", "2", "--no-pin", "--quiet"])
        .arg("--input")
        .arg(&input)
        .stdin(Stdio::null())
        .output()
        .expect("run record");
    let out = reader.wait_with_output().expect("reader output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        rec.status.success(),
        "record --ome failed: {}",
        String::from_utf8_lossy(&rec.stderr)
    );
    assert!(out.status.success(), "live OME reads failed:\n{text}");
}
