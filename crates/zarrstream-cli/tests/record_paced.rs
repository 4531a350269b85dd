//! `zarrstream record --fps F` as the peers' paced mode (`tools/peers/run --paced`) drives
//! it: `--input` cycled to more frames than the file holds, paced on the camera clock. The
//! run takes at least the camera's time for its frames, and the report carries what the
//! paced table reads: push-latency percentiles (the time inside `push`), late and
//! dropped frames, the rate asked for and the seconds from the first frame's due time.

// Linux only: the Windows build of `zarrstream record` is run under Wine from Linux by
// crates/zarrstream/tests/windows.rs.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

const H: u64 = 32;
const W: u64 = 48;
/// Distinct frames in the input file.
const DISTINCT: u64 = 3;
/// Frames pushed: the input cycled more than 13 times.
const FRAMES: u64 = 40;
const FPS: f64 = 50.0;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Frame `k` of the input file.
fn frame(k: u64) -> Vec<u16> {
    (0..H * W).map(|p| (k * 1000 + p) as u16).collect()
}

#[test]
fn a_paced_run_takes_the_camera_time_and_reports_push_percentiles() {
    let tmp = tempfile::Builder::new()
        .prefix("record-paced-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let input = tmp.path().join("frames.raw");
    let bytes: Vec<u8> = (0..DISTINCT)
        .flat_map(frame)
        .flat_map(u16::to_le_bytes)
        .collect();
    std::fs::write(&input, bytes).expect("input");
    let out = tmp.path().join("paced.zarr");
    let report = tmp.path().join("report.json");

    let t0 = Instant::now();
    let done = zarrstream_testkit::cli_record!()
        .args([
            "--shape", "0,32,48", "--chunk", "1,32,48", "--shard", "4,32,48",
        ])
        .args(["--input", s(&input), "--frames", &FRAMES.to_string()])
        .args(["--fps", &FPS.to_string(), "--backpressure", "block"])
        .args(["--threads", "1", "--no-pin", "--quiet"])
        .args(["--out", s(&out), "--report", s(&report)])
        .stdin(Stdio::null())
        .output()
        .expect("run record");
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        done.status.success(),
        "record --fps: {}",
        String::from_utf8_lossy(&done.stderr)
    );

    // Frame k is due at k / FPS: the last one no sooner than (FRAMES - 1) / FPS after
    // the first, both for the process and for the report's clock.
    let camera_time = (FRAMES - 1) as f64 / FPS;
    assert!(
        wall >= camera_time,
        "{wall} s for {camera_time} s of frames"
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&report).expect("report")).unwrap();
    let seconds = doc["seconds"].as_f64().expect("seconds");
    assert!(
        seconds >= camera_time && seconds <= wall,
        "report seconds {seconds}, camera time {camera_time}, process {wall}"
    );
    assert_eq!(doc["fps"].as_f64(), Some(FPS));
    assert_eq!(doc["frames"], FRAMES);
    assert_eq!(doc["frames_written"], FRAMES);
    assert_eq!(doc["dropped"], 0, "back-pressure block never drops");
    assert_eq!(doc["backpressure"], "block");
    let late = doc["late_frames"].as_u64().expect("late_frames");
    assert!(late <= FRAMES);
    assert!(doc["max_lateness_us"].as_f64().expect("max_lateness_us") >= 0.0);

    let lat = &doc["push_latency_us"];
    let q: Vec<f64> = ["p50", "p99", "p999", "max"]
        .iter()
        .map(|k| {
            lat[k]
                .as_f64()
                .unwrap_or_else(|| panic!("push_latency_us.{k}"))
        })
        .collect();
    assert!(q[0] > 0.0, "a push takes time: {lat}");
    assert!(q.windows(2).all(|w| w[0] <= w[1]), "not ordered: {lat}");
    // Every push returned within the run.
    assert!(q[3] <= seconds * 1e6, "max push {} us in {seconds} s", q[3]);

    // The input was cycled: frame k of the array is frame k mod DISTINCT of the file.
    let store = Arc::new(FilesystemStore::new(&out).expect("store"));
    let array = Array::open(store, "/").expect("zarrs opens the array");
    assert_eq!(array.shape(), [FRAMES, H, W]);
    let got = array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(vec![FRAMES, H, W]))
        .expect("zarrs reads it");
    let want: Vec<u16> = (0..FRAMES).flat_map(|k| frame(k % DISTINCT)).collect();
    assert!(got == want, "not the input's frames, cycled");
}
