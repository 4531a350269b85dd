//! What `zarrstream record` stores for each frame: `--frame-meta` (the synthetic
//! microscope's per-frame metadata) and `--acquisition-order` (where each camera frame
//! lands), read back with the `zarrs` crate. (Moved from the library's `frame_meta.rs` and
//! `indexed.rs`, which test the library's API.)

// Linux only: the Windows build of `zarrstream record` is run under Wine from Linux by
// crates/zarrstream/tests/windows.rs.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::sync::Arc;

use zarrstream_testkit::cli_record as record;

/// A 1-D array of `T` as zarrs reads it.
fn read<T: zarrs::array::ElementOwned>(dir: &Path) -> Vec<T> {
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir).expect("store"));
    let array = zarrs::array::Array::open(store, "/").expect("zarrs opens the array");
    let n = array.shape()[0];
    array
        .retrieve_array_subset::<Vec<T>>(&zarrs::array::ArraySubset::new_with_shape(vec![n]))
        .expect("zarrs reads it")
}

/// Every point of a grid of `extent`, visited in nested loops over `order` (outermost
/// first).
fn points(extent: &[u64], order: &[usize]) -> Vec<Vec<u64>> {
    let total: u64 = extent.iter().product();
    let mut c = vec![0u64; extent.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        out.push(c.clone());
        for &a in order.iter().rev() {
            c[a] += 1;
            if c[a] < extent[a] {
                break;
            }
            c[a] = 0;
        }
    }
    out
}

/// The C-order frame index of leading coordinates `c`.
fn c_index(extent: &[u64], c: &[u64]) -> u64 {
    c.iter().zip(extent).fold(0, |acc, (&ci, &e)| acc * e + ci)
}

/// `record --frame-meta`: every frame's synthetic stage position and camera time, and a
/// JSON object, stored beside the array and read back by zarrs.
#[test]
fn record_frame_meta_flag_stores_every_frames_values() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("rec.zarr");
    let status = record!()
        .args([
            "--shape",
            "0,128,128",
            "--chunk",
            "1,64,64",
            "--shard",
            "8,128,128",
        ])
        .args(["--frames", "40", "--frame-meta", "--quiet", "--out"])
        .arg(&out)
        .status()
        .expect("run record");
    assert!(status.success());
    let meta = out.join("frame_meta");
    let x: Vec<f64> = read(&meta.join("stage_x"));
    let z: Vec<f64> = read(&meta.join("stage_z"));
    let t: Vec<f64> = read(&meta.join("timestamp"));
    assert_eq!(x.len(), 40);
    for k in 0..40 {
        assert_eq!(x[k], 100.0 + 0.5 * k as f64);
        assert_eq!(z[k], (k / 10) as f64 * 0.25);
    }
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "timestamps rise");
    let length: Vec<u64> = read(&meta.join("json_length"));
    assert!(length.iter().all(|&l| l > 0));
}

/// `record --acquisition-order c,t,z` (and by axis numbers, z outermost): the camera's
/// frame `k` lands at the `k`-th point of that loop, read back by zarrs against the
/// frames `--save-frames` wrote in camera order; a bad order is a usage error.
#[test]
fn record_writes_the_camera_in_its_acquisition_order() {
    let dir = zarrstream_testkit::scratch!("indexed-record");
    let (t, c, z, h, w) = (4u64, 2u64, 3u64, 64usize, 96usize);
    let geometry = [
        "--shape",
        "4,2,3,64,96",
        "--chunk",
        "1,1,1,32,32",
        "--shard",
        "2,1,3,64,96",
        "--dim-names",
        "t,c,z,y,x",
        "--frames",
        "24",
        "--threads",
        "2",
        "--no-pin",
        "--quiet",
    ];
    let raw = dir.path().join("camera.raw");
    let out = record!()
        .args(geometry)
        .arg("--save-frames")
        .arg(&raw)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let camera: Vec<u16> = std::fs::read(&raw)
        .unwrap()
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    let plane = h * w;
    for (name, order, loops) in [
        ("ctz", "c,t,z", [1usize, 0, 2]),
        ("zct", "2,1,0", [2, 1, 0]),
    ] {
        let store = dir.path().join(format!("{name}.zarr"));
        let out = record!()
            .args(geometry)
            .args(["--acquisition-order", order, "--out"])
            .arg(&store)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let zstore = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&store).unwrap());
        let array = zarrs::array::Array::open(zstore, "/").unwrap();
        let shape = vec![t, c, z, h as u64, w as u64];
        let got: Vec<u16> = array
            .retrieve_array_subset::<Vec<u16>>(&zarrs::array::ArraySubset::new_with_shape(
                shape.clone(),
            ))
            .unwrap();
        for (k, p) in points(&[t, c, z], &loops).into_iter().enumerate() {
            let at = c_index(&[t, c, z], &p) as usize;
            assert!(
                got[at * plane..][..plane] == camera[k * plane..][..plane],
                "{name}: camera frame {k} is not at {p:?}"
            );
        }
    }
    let out = record!()
        .args(geometry)
        .args(["--acquisition-order", "c,q,z", "--out"])
        .arg(dir.path().join("bad.zarr"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"q\""), "{stderr}");
}
