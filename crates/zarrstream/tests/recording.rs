//! `Recording`: several arrays in one group, one engine of workers, one budget; read
//! back with the `zarrs` crate.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream::{
    ArrayConfig, ArraySpec, Backpressure, Codec, DataType, Error, Ome, Recording, SinkChoice,
    WriterOptions,
};

/// The tests count this process's worker threads: one recording at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// u16, blosc-lz4, one frame per chunk.
fn spec_a() -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 64, 48])
        .chunk_shape([1, 32, 48])
        .shard_shape([4, 64, 48])
        .dtype(DataType::UInt16)
        .codec(Codec::blosc_lz4(1))
        .build()
        .unwrap()
}

/// u8, zstd, chunks four frames deep.
fn spec_b() -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 40, 40])
        .chunk_shape([4, 20, 20])
        .shard_shape([8, 40, 40])
        .dtype(DataType::UInt8)
        .codec(Codec::zstd(1))
        .build()
        .unwrap()
}

fn frame_a(k: usize) -> Vec<u16> {
    (0..64 * 48).map(|i| (i * 3 + k * 1009) as u16).collect()
}

fn frame_b(k: usize) -> Vec<u8> {
    (0..40 * 40).map(|i| (i + k * 7) as u8).collect()
}

fn options() -> WriterOptions {
    WriterOptions::default()
        .threads(2)
        .pin_threads(false)
        .sink(SinkChoice::Pwrite)
}

fn read<T: zarrs::array::ElementOwned>(root: &Path, key: &str, shape: Vec<u64>) -> Vec<T> {
    let store = Arc::new(FilesystemStore::new(root).unwrap());
    let array = Array::open(store, &format!("/{key}")).unwrap();
    array
        .retrieve_array_subset::<Vec<T>>(&ArraySubset::new_with_shape(shape))
        .unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn worker_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        // `comm` keeps 15 bytes of `zarrstream-worker-i`.
        .filter(|name| name.starts_with("zarrstream-work"))
        .count()
}

/// Two arrays with different dtypes, shapes and codecs (one with deep chunks, one in a
/// nested group), pushed round-robin, read back exactly; stats per array and in total.
#[test]
fn two_arrays_round_robin_read_back_exactly() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rec.zarr");
    let arrays = vec![
        ArrayConfig::new("cam0", spec_a()),
        ArrayConfig::new("pos1/cam1", spec_b()),
    ];
    let rec = Recording::create(&root, arrays, options()).unwrap();
    assert_eq!(rec.keys().collect::<Vec<_>>(), ["cam0", "pos1/cam1"]);
    let n = 10;
    for k in 0..n {
        assert!(rec.push("cam0", &frame_a(k)).unwrap().is_accepted());
        assert!(rec.push(1, &frame_b(k)).unwrap().is_accepted());
    }
    assert_eq!(rec.frames_pushed("pos1/cam1").unwrap(), n as u64);
    assert_eq!(rec.spec(0).unwrap().dtype(), DataType::UInt16);
    let stats = rec.finish().unwrap();
    assert_eq!(stats.arrays.len(), 2);
    assert_eq!(stats.arrays[0].0, "cam0");
    assert_eq!(stats.arrays[1].1.frames_written, n as u64);
    assert_eq!(stats.total.frames_written, 2 * n as u64);

    assert_eq!(json(&root.join("zarr.json"))["node_type"], "group");
    assert_eq!(json(&root.join("pos1/zarr.json"))["node_type"], "group");
    let a: Vec<u16> = read(&root, "cam0", vec![n as u64, 64, 48]);
    assert!(a == (0..n).flat_map(frame_a).collect::<Vec<_>>());
    let b: Vec<u8> = read(&root, "pos1/cam1", vec![n as u64, 40, 40]);
    assert!(b == (0..n).flat_map(frame_b).collect::<Vec<_>>());
}

/// `threads(2)` means two encoding workers in all, not two per array.
#[test]
fn two_arrays_share_two_workers() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("threads.zarr");
    let arrays = vec![
        ArrayConfig::new("a", spec_a()),
        ArrayConfig::new("b", spec_b()),
    ];
    let rec = Recording::create(&root, arrays, options()).unwrap();
    assert!(rec.push("a", &frame_a(0)).unwrap().is_accepted());
    assert!(rec.push("b", &frame_b(0)).unwrap().is_accepted());
    assert_eq!(worker_threads(), 2);
    rec.finish().unwrap();
    assert_eq!(worker_threads(), 0);
}

/// With `Backpressure::Drop` and a tiny pool, each array counts its own drops, and
/// every accepted frame reads back while every dropped one reads as fill.
#[test]
fn drops_are_counted_per_array() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("drop.zarr");
    let arrays = vec![
        ArrayConfig::new("a", spec_a()),
        ArrayConfig::new("b", spec_a()),
    ];
    let opts = options().pool_frames(2).backpressure(Backpressure::Drop);
    let rec = Recording::create(&root, arrays, opts).unwrap();
    let n = 200;
    let mut accepted = [Vec::new(), Vec::new()];
    for k in 0..n {
        for (i, acc) in accepted.iter_mut().enumerate() {
            acc.push(rec.push(i, &frame_a(k + i)).unwrap().is_accepted());
        }
    }
    let stats = rec.finish().unwrap();
    for (i, key) in ["a", "b"].into_iter().enumerate() {
        let s = &stats.arrays[i].1;
        let dropped = accepted[i].iter().filter(|a| !**a).count() as u64;
        assert_eq!(s.frames_pushed, n as u64);
        assert_eq!(s.frames_dropped, dropped, "{key}");
        assert_eq!(s.frames_written + s.frames_dropped, n as u64);
        let doc = json(&root.join(key).join("zarr.json"));
        assert_eq!(doc["attributes"]["zarrstream"]["frames_dropped"], dropped);
        let got: Vec<u16> = read(&root, key, vec![n as u64, 64, 48]);
        let want: Vec<u16> = (0..n)
            .flat_map(|k| {
                if accepted[i][k] {
                    frame_a(k + i)
                } else {
                    vec![0; 64 * 48]
                }
            })
            .collect();
        assert!(got == want, "{key} does not read back as pushed");
    }
    assert_eq!(
        stats.total.frames_dropped,
        stats.arrays[0].1.frames_dropped + stats.arrays[1].1.frames_dropped
    );
}

/// Keys that are not plain relative paths, given twice or nested in another array's are
/// refused before anything is written, naming the key; unknown arrays likewise.
#[test]
fn bad_keys_are_refused_naming_the_key() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bad.zarr");
    for keys in [
        vec![""],
        vec!["/a"],
        vec!["a/"],
        vec!["a//b"],
        vec!["."],
        vec!["a/.."],
        vec!["a/c"],
        vec![".hidden"],
        vec!["a", "a"],
        vec!["a", "a/b"],
        vec!["x/y/z", "x/y"],
    ] {
        let arrays = keys
            .iter()
            .map(|k| ArrayConfig::new(*k, spec_a()))
            .collect();
        match Recording::create(&root, arrays, options()) {
            Err(Error::ArrayKey { key, reason }) => {
                assert!(keys.contains(&key.as_str()), "{keys:?}: {key}");
                assert!(!reason.is_empty());
            }
            Err(e) => panic!("{keys:?}: expected Error::ArrayKey, got {e:?}"),
            Ok(_) => panic!("{keys:?} was accepted"),
        }
        assert!(!root.exists(), "{keys:?} left a store");
    }
    let rec = Recording::create(&root, vec![ArrayConfig::new("a", spec_a())], options()).unwrap();
    match rec.push("nope", &frame_a(0)) {
        Err(Error::UnknownArray { key }) => assert_eq!(key, "nope"),
        other => panic!("expected UnknownArray, got {other:?}"),
    }
    match rec.push(1, &frame_a(0)) {
        Err(Error::UnknownArray { key }) => assert_eq!(key, "1"),
        other => panic!("expected UnknownArray, got {other:?}"),
    }
    let e = rec.push("a", &frame_b(0)).unwrap_err();
    assert!(
        matches!(e, Error::DataType { .. } | Error::FrameSize { .. }),
        "{e:?}"
    );
    rec.finish().unwrap();
}

/// An array with OME settings is an OME-Zarr image group inside the recording, its
/// pyramid levels encoded by the shared workers.
#[test]
fn an_ome_image_in_a_recording() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ome.zarr");
    let arrays = vec![
        ArrayConfig::new("img", spec_a()).ome(Ome::new().levels(zarrstream::Levels::Count(2))),
        ArrayConfig::new("raw", spec_b()),
    ];
    let rec = Recording::create(&root, arrays, options()).unwrap();
    for k in 0..8 {
        assert!(rec.push("img", &frame_a(k)).unwrap().is_accepted());
        assert!(rec.push("raw", &frame_b(k)).unwrap().is_accepted());
    }
    assert_eq!(worker_threads(), 2);
    rec.finish().unwrap();
    let group = json(&root.join("img/zarr.json"));
    assert_eq!(group["node_type"], "group");
    let ome = &group["attributes"]["ome"];
    assert_eq!(ome["version"], "0.5", "{group}");
    let paths: Vec<&str> = ome["multiscales"][0]["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["0", "1"]);
    let level0: Vec<u16> = read(&root, "img/0", vec![8, 64, 48]);
    assert!(level0 == (0..8).flat_map(frame_a).collect::<Vec<_>>());
    let level1 = json(&root.join("img/1/zarr.json"));
    assert_eq!(level1["shape"], serde_json::json!([8, 32, 24]));
    assert_eq!(level1["attributes"]["zarrstream"]["state"], "finished");
}

#[test]
fn frame_meta_options_are_refused_not_ignored() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let spec = zarrstream::ArraySpec::builder()
        .shape([0, 8, 8])
        .chunk_shape([1, 8, 8])
        .shard_shape([2, 8, 8])
        .build()
        .expect("spec");
    let options = zarrstream::WriterOptions::default()
        .frame_meta(zarrstream::FrameMetaSpec::new().field("t", zarrstream::MetaType::Float64));
    let root = tmp.path().join("r.zarr");
    let e = zarrstream::Recording::create(
        &root,
        vec![zarrstream::ArrayConfig::new("a", spec)],
        options,
    )
    .err()
    .expect("refused");
    assert!(matches!(e, zarrstream::Error::FrameMeta { .. }), "{e}");
    assert!(!root.exists());
}
