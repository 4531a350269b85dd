//! `zarrstream record`'s `--plate ROWSxCOLS --fields F`: the camera's frames (from
//! `--input`) reach the fields in the order a screening microscope visits them (well by
//! well, each well's fields in turn, one time point of every channel per visit), read
//! back with the `zarrs` crate; the plate validates with ome-zarr-models and reads with
//! the ome-zarr reader and zarr-python (`tests/interop/ome_check.py plate`); a field
//! count of 0 and an empty plate are usage errors that write nothing.

// Linux only: the Windows build of `zarrstream record` is run under Wine from Linux by
// crates/zarrstream/tests/windows.rs.
#![cfg(target_os = "linux")]

use zarrstream_testkit::python as pyenv;

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Arc;

use serde_json::{Value, json};
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

const C: u64 = 2;
const H: u64 = 32;
const W: u64 = 48;
/// Frames per field: 3 time points of 2 channels.
const FRAMES: u64 = 6;
const PLANE: usize = (H * W) as usize;

fn run(args: &[&str]) -> Output {
    zarrstream_testkit::cli_record!()
        .args([
            "--shape",
            "0,2,32,48",
            "--chunk",
            "1,1,32,48",
            "--shard",
            "2,2,32,48",
        ])
        .args([
            "--channels",
            "GFP,RFP",
            "--threads",
            "2",
            "--no-pin",
            "--quiet",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run record")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Frame `g` of the camera (what `--input` holds).
fn camera(g: u64) -> Vec<u16> {
    (0..PLANE as u64)
        .map(|p| (g * 131 + p * 7) as u16)
        .collect()
}

/// The fields of a 2 x 3 plate with 2 fields each, in visiting order.
fn keys() -> Vec<String> {
    let mut keys = Vec::new();
    for row in ["A", "B"] {
        for col in 1..=3 {
            for field in 0..2 {
                keys.push(format!("{row}/{col}/{field}"));
            }
        }
    }
    keys
}

/// Field `i`'s frames: on pass `t` the stage visits every field in order and takes one
/// time point (both channels) at each, so its channel `c` is camera frame
/// `(t * fields + i) * C + c`.
fn expected(i: u64, n: u64) -> Vec<u16> {
    (0..FRAMES / C)
        .flat_map(|t| (0..C).map(move |c| (t * n + i) * C + c))
        .flat_map(camera)
        .collect()
}

#[test]
fn record_plate_pushes_field_by_field() {
    let tmp = tempfile::Builder::new()
        .prefix("record-plate-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let keys = keys();
    let n = keys.len() as u64;
    let input = tmp.path().join("camera.raw");
    let bytes: Vec<u8> = (0..FRAMES * n)
        .flat_map(camera)
        .flat_map(u16::to_le_bytes)
        .collect();
    std::fs::write(&input, bytes).expect("input");
    let out = tmp.path().join("plate.ome.zarr");
    let report = tmp.path().join("report.json");
    let done = run(&[
        "--plate",
        "2x3",
        "--fields",
        "2",
        "--pixel-size",
        "0.5",
        "--frames",
        &FRAMES.to_string(),
        "--input",
        s(&input),
        "--out",
        s(&out),
        "--report",
        s(&report),
    ]);
    assert!(
        done.status.success(),
        "record --plate: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&report).expect("report")).unwrap();
    assert_eq!(
        doc["plate"],
        json!({"rows": 2, "columns": 3, "fields": 2, "images": 12})
    );
    assert_eq!(doc["total"]["frames_written"], FRAMES * n);
    let root: Value =
        serde_json::from_slice(&std::fs::read(out.join("zarr.json")).expect("root")).unwrap();
    assert_eq!(root["attributes"]["ome"]["plate"]["field_count"], 2);
    assert_eq!(
        root["attributes"]["zarrstream"]["recording"]["arrays"],
        json!(keys)
    );

    let store = Arc::new(FilesystemStore::new(&out).expect("store"));
    for (i, key) in keys.iter().enumerate() {
        let array = Array::open(store.clone(), &format!("/{key}/0")).expect("zarrs opens it");
        assert_eq!(array.shape(), [FRAMES / C, C, H, W], "{key}");
        let got = array
            .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(array.shape().to_vec()))
            .expect("zarrs reads it");
        assert!(
            got == expected(i as u64, n),
            "{key}: not the camera's frames in visiting order"
        );
    }

    let Some(py) = pyenv::interop(
        zarrstream_testkit::target_tmp!(),
        "RECORD --PLATE READER TEST",
    ) else {
        return;
    };
    let images: Vec<Value> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let path = tmp.path().join(format!("field{i}.raw"));
            let raw: Vec<u8> = expected(i as u64, n)
                .into_iter()
                .flat_map(u16::to_le_bytes)
                .collect();
            std::fs::write(&path, raw).expect("expected");
            json!({"key": key, "expected": path, "acquisition": null})
        })
        .collect();
    let manifest = tmp.path().join("manifest.json");
    let plate = json!({"plate": {
        "path": out, "rows": ["A", "B"], "columns": ["1", "2", "3"],
        "wells": ["A/1", "A/2", "A/3", "B/1", "B/2", "B/3"], "acquisitions": [],
        "field_count": 2, "name": null, "dtype": "<u2", "shape": [FRAMES / C, C, H, W],
        "levels": 1, "method": "mean", "images": images,
    }});
    std::fs::write(&manifest, plate.to_string()).expect("manifest");
    pyenv::ome_check(&py, "plate", &manifest);
}

#[test]
fn bad_plates_are_usage_errors_and_write_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().join("bad.ome.zarr");
    for (args, want) in [
        (
            ["--plate", "2x3", "--fields", "0"],
            "invalid plate: plate field count 0: every well needs at least one field of view",
        ),
        (
            ["--plate", "0x3", "--fields", "1"],
            "invalid plate: the plate has no rows",
        ),
    ] {
        let done = run(&[&args[..], &["--frames", "2", "--out", s(&out)]].concat());
        assert_eq!(done.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?}: nothing written");
    }
}
