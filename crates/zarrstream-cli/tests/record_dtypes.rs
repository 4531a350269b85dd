//! `record --dtype` for every data type: `zarrstream record` records headerless frames
//! of each type (`--input`) and of its synthetic camera, and the `zarrs` crate reads back
//! exactly the input's bytes, with the data type and fill value in `zarr.json`.

// Linux only: the Windows build of `zarrstream record` is run under Wine from Linux by
// crates/zarrstream/tests/windows.rs.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use zarrs::array::{Array, ArraySubset, ElementOwned};
use zarrs::filesystem::FilesystemStore;
use zarrstream::DataType;

const FRAMES: u64 = 5;
const H: u64 = 40;
const W: u64 = 56;

fn read<T: ElementOwned + bytemuck::Pod>(path: &Path) -> Vec<u8> {
    let store = Arc::new(FilesystemStore::new(path).expect("store"));
    let array = Array::open(store, "/").expect("zarrs opens the array");
    let all = ArraySubset::new_with_shape(vec![FRAMES, H, W]);
    let v = array
        .retrieve_array_subset::<Vec<T>>(&all)
        .unwrap_or_else(|e| panic!("{}: zarrs reads: {e}", path.display()));
    bytemuck::cast_slice(&v).to_vec()
}

/// The array's bytes as `zarrs` decodes them with the element type of `dtype`.
fn read_as(dtype: DataType, path: &Path) -> Vec<u8> {
    match dtype {
        DataType::Int8 => read::<i8>(path),
        DataType::UInt8 => read::<u8>(path),
        DataType::Int16 => read::<i16>(path),
        DataType::UInt16 => read::<u16>(path),
        DataType::Int32 => read::<i32>(path),
        DataType::UInt32 => read::<u32>(path),
        DataType::Int64 => read::<i64>(path),
        DataType::UInt64 => read::<u64>(path),
        DataType::Float32 => read::<f32>(path),
        DataType::Float64 => read::<f64>(path),
        other => panic!("no reader for {other}"),
    }
}

/// Input bytes that use every bit of the element: a hash per byte, with runs so the
/// codecs have something to compress.
fn input_bytes(dtype: DataType) -> Vec<u8> {
    let n = (FRAMES * H * W) as usize * dtype.size();
    (0..n)
        .map(|i| {
            let j = (i / 16) as u64;
            let h = j.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (j >> 7);
            (h >> 56) as u8
        })
        .collect()
}

fn record(args: &[&str]) {
    let out = zarrstream_testkit::cli_record!()
        .args(args)
        .args(["--threads", "2", "--no-pin"])
        .stdin(Stdio::null())
        .output()
        .expect("run record");
    assert!(
        out.status.success(),
        "record {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn record_writes_every_dtype_and_zarrs_reads_it_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let shape = format!("0,{H},{W}");
    for (i, dtype) in DataType::ALL.into_iter().enumerate() {
        let short = dtype.short_name();
        let input = dir.path().join(format!("{short}.raw"));
        let bytes = input_bytes(dtype);
        std::fs::write(&input, &bytes).expect("input");
        let out = dir.path().join(format!("{short}.zarr"));
        // The codecs in turn, so every type meets each of them.
        let codec = ["lz4:1", "zstd:1", "none"][i % 3];
        let fill = if dtype.is_float() { "-2.5" } else { "7" };
        record(&[
            "--out",
            out.to_str().expect("utf-8"),
            "--input",
            input.to_str().expect("utf-8"),
            "--dtype",
            short,
            "--shape",
            &shape,
            "--chunk",
            "1,16,32",
            "--shard",
            "2,48,64",
            "--frames",
            &FRAMES.to_string(),
            "--codec",
            codec,
            "--fill-value",
            fill,
        ]);
        assert_eq!(read_as(dtype, &out), bytes, "{short} {codec}: bytes differ");
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("zarr.json")).expect("zarr.json"))
                .expect("json");
        assert_eq!(meta["data_type"], dtype.zarr_name(), "{short}");
        let want_fill = if dtype.is_float() {
            serde_json::json!(-2.5)
        } else {
            serde_json::json!(7)
        };
        assert_eq!(meta["fill_value"], want_fill, "{short}");
    }
}

/// The synthetic camera renders every type (a sensor model per type, not dark frames),
/// and what it records reads back as what `--save-frames` wrote.
#[test]
fn the_synthetic_camera_records_every_dtype() {
    let dir = tempfile::tempdir().expect("tmp");
    let shape = format!("0,{H},{W}");
    for dtype in DataType::ALL {
        let short = dtype.short_name();
        let saved = dir.path().join(format!("{short}.frames"));
        let out = dir.path().join(format!("{short}.cam.zarr"));
        let common = [
            "--dtype", short, "--shape", &shape, "--chunk", "1,16,32", "--shard", "2,48,64",
            "--frames", "5",
        ];
        let mut save = common.to_vec();
        save.extend(["--save-frames", saved.to_str().expect("utf-8")]);
        record(&save);
        let mut rec = common.to_vec();
        rec.extend(["--out", out.to_str().expect("utf-8")]);
        record(&rec);
        let frames = std::fs::read(&saved).expect("saved frames");
        assert_eq!(
            frames.len(),
            (FRAMES * H * W) as usize * dtype.size(),
            "{short}"
        );
        let distinct: std::collections::HashSet<_> = frames.chunks(dtype.size()).collect();
        assert!(
            distinct.len() > 50,
            "{short}: {} distinct values",
            distinct.len()
        );
        assert_eq!(
            read_as(dtype, &out),
            frames,
            "{short}: camera frames differ"
        );
    }
}
