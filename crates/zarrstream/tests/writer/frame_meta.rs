//! Per-frame metadata: numeric fields as 1-D Zarr arrays aligned with the frames, free
//! JSON per frame, never published ahead of the frames, read back by zarrs.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use zarrstream::{ArraySpec, Error, FrameMeta, FrameMetaSpec, MetaType, Writer, WriterOptions};

fn doc(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path.join("zarr.json")).expect("zarr.json"))
        .expect("json")
}

/// A 1-D array of `T` as zarrs reads it.
fn read<T: zarrs::array::ElementOwned>(dir: &Path) -> Vec<T> {
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir).expect("store"));
    let array = zarrs::array::Array::open(store, "/").expect("zarrs opens the array");
    let n = array.shape()[0];
    array
        .retrieve_array_subset::<Vec<T>>(&zarrs::array::ArraySubset::new_with_shape(vec![n]))
        .expect("zarrs reads it")
}

fn options() -> WriterOptions {
    WriterOptions::default().threads(1).frame_meta(
        FrameMetaSpec::new()
            .field("timestamp", MetaType::Float64)
            .field("counter", MetaType::Int64)
            .json(true),
    )
}

fn spec(shape: &[u64], chunk: &[u64], shard: &[u64]) -> ArraySpec {
    ArraySpec::builder()
        .shape(shape)
        .chunk_shape(chunk)
        .shard_shape(shard)
        .dtype(zarrstream::DataType::UInt8)
        .build()
        .expect("spec")
}

#[test]
fn values_json_and_gaps_read_back_aligned_with_the_frames() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("m.zarr");
    // (t, c, y, x): two frames per step; 5000 steps cross the 4096-value chunks.
    let mut w = Writer::create(
        &dir,
        spec(&[0, 2, 8, 8], &[1, 1, 8, 8], &[16, 2, 8, 8]),
        options(),
    )
    .expect("create");
    let frame = [3u8; 64];
    let n = 10_000u64;
    for i in 0..n {
        if i % 1000 == 999 {
            w.skip().expect("skip"); // a lost frame keeps its place, with no values
            continue;
        }
        let mut meta = FrameMeta::new().value("timestamp", i as f64 * 0.5);
        if i % 2 == 0 {
            meta = meta.value("counter", i as i64);
        }
        if i % 3 == 0 {
            meta = meta.with_json(json!({"i": i, "note": "é"}));
        }
        assert!(
            w.push_with(&frame, Instant::now(), &meta)
                .expect("push")
                .is_accepted()
        );
    }
    w.finish().expect("finish");
    let meta = dir.join("frame_meta");
    let group = doc(&meta);
    assert_eq!(group["node_type"], "group");
    assert_eq!(group["attributes"]["zarrstream_frame_meta"]["json"], true);
    let ts: Vec<f64> = read(&meta.join("timestamp"));
    let counter: Vec<i64> = read(&meta.join("counter"));
    let offset: Vec<u64> = read(&meta.join("json_offset"));
    let length: Vec<u64> = read(&meta.join("json_length"));
    let bytes: Vec<u8> = read(&meta.join("json_bytes"));
    assert_eq!(ts.len() as u64, n);
    assert_eq!(counter.len() as u64, n);
    assert_eq!(offset.len() as u64, n);
    for i in 0..n as usize {
        if i % 1000 == 999 {
            assert!(ts[i].is_nan(), "skipped frame {i} reads as the fill value");
            assert_eq!(length[i], 0);
            continue;
        }
        assert_eq!(ts[i], i as f64 * 0.5, "timestamp of frame {i}");
        assert_eq!(counter[i], if i % 2 == 0 { i as i64 } else { 0 });
        let text = &bytes[offset[i] as usize..(offset[i] + length[i]) as usize];
        if i % 3 == 0 {
            let v: Value = serde_json::from_slice(text).expect("json");
            assert_eq!(v, json!({"i": i, "note": "é"}));
        } else {
            assert!(text.is_empty());
        }
    }
    assert_eq!(doc(&dir)["shape"][0], n / 2);
}

#[test]
fn metadata_is_never_published_ahead_of_the_frames() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("v.zarr");
    let mut w =
        Writer::create(&dir, spec(&[0, 8, 8], &[1, 8, 8], &[4, 8, 8]), options()).expect("create");
    let frame = [1u8; 64];
    let meta_dir = dir.join("frame_meta");
    let mut seen_growth = false;
    for i in 0..400u64 {
        let m = FrameMeta::new().value("timestamp", i as f64);
        assert!(
            w.push_with(&frame, Instant::now(), &m)
                .expect("push")
                .is_accepted()
        );
        // Read the metadata first, the frames second: the frames can only have grown.
        let meta_len = doc(&meta_dir.join("timestamp"))["shape"][0]
            .as_u64()
            .expect("shape");
        let frames = doc(&dir)["shape"][0].as_u64().expect("shape");
        assert!(
            meta_len <= frames,
            "metadata {meta_len} ahead of frames {frames}"
        );
        seen_growth |= meta_len > 0;
    }
    assert!(seen_growth, "metadata was published while recording");
    w.finish().expect("finish");
    assert_eq!(doc(&meta_dir.join("timestamp"))["shape"][0], 400);
}

#[test]
fn metadata_that_does_not_fit_refuses_the_frame() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("b.zarr");
    let mut w =
        Writer::create(&dir, spec(&[0, 8, 8], &[1, 8, 8], &[4, 8, 8]), options()).expect("create");
    let frame = [1u8; 64];
    let cases = [
        (FrameMeta::new().value("exposure", 1.0), "exposure"),
        (FrameMeta::new().value("counter", 1.5), "counter"),
    ];
    for (meta, field) in cases {
        let e = w
            .push_with(&frame, Instant::now(), &meta)
            .expect_err("refused");
        assert!(
            matches!(&e, Error::FrameMeta { field: f, .. } if f == field),
            "{e}"
        );
        assert_eq!(w.frames_pushed(), 0, "the frame was not pushed");
    }
    // A float field takes an integer.
    let pushed = w.push_with(
        &frame,
        Instant::now(),
        &FrameMeta::new().value("timestamp", 3i64),
    );
    assert!(pushed.expect("push").is_accepted());
    w.finish().expect("finish");
    let ts: Vec<f64> = read(&dir.join("frame_meta/timestamp"));
    assert_eq!(ts, vec![3.0]);

    // Without frame_meta in the options, and JSON where none is stored.
    let plain = tmp.path().join("p.zarr");
    let mut w = Writer::create(
        &plain,
        spec(&[0, 8, 8], &[1, 8, 8], &[4, 8, 8]),
        WriterOptions::default(),
    )
    .expect("create");
    let e = w
        .push_with(&frame, Instant::now(), &FrameMeta::new())
        .expect_err("refused");
    assert!(matches!(e, Error::FrameMeta { .. }), "{e}");
    w.finish().expect("finish");
    let nojson = tmp.path().join("n.zarr");
    let options = WriterOptions::default()
        .frame_meta(FrameMetaSpec::new().field("timestamp", MetaType::Float64));
    let mut w =
        Writer::create(&nojson, spec(&[0, 8, 8], &[1, 8, 8], &[4, 8, 8]), options).expect("create");
    let e = w
        .push_with(
            &frame,
            Instant::now(),
            &FrameMeta::new().with_json(json!(1)),
        )
        .expect_err("refused");
    assert!(e.to_string().contains("no JSON"), "{e}");
    w.finish().expect("finish");
    assert!(!nojson.join("frame_meta/json_bytes").exists());
}

#[test]
fn bad_field_names_are_refused_at_creation() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for name in ["", "a/b", ".x", "json_offset", "c"] {
        let options = WriterOptions::default()
            .frame_meta(FrameMetaSpec::new().field(name, MetaType::Float64));
        let dir = tmp.path().join("bad.zarr");
        let e = Writer::create(&dir, spec(&[0, 8, 8], &[1, 8, 8], &[4, 8, 8]), options)
            .err()
            .expect("refused");
        assert!(matches!(e, Error::FrameMeta { .. }), "{name}: {e}");
        assert!(!dir.exists(), "nothing left behind for {name:?}");
    }
}
