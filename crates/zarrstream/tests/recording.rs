//! `Recording`: several arrays in one group, one engine of workers, one budget; read
//! back with the `zarrs` crate.
//!
//! A test binary of its own, not a module of `writer`: its tests count the worker threads
//! of the whole process (`/proc/self/task`), which the other writers' tests would add to.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream::{
    ArrayConfig, ArraySpec, Backpressure, Codec, DataType, Error, FrameMeta, FrameMetaSpec,
    MetaType, Ome, Recording, SinkChoice, WriterOptions,
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

/// Linux only: threads are counted by name in `/proc` (Windows has no such listing).
#[cfg(target_os = "linux")]
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
        assert!(
            rec.array("cam0")
                .unwrap()
                .push(&frame_a(k))
                .unwrap()
                .is_accepted()
        );
        assert!(
            rec.array(1)
                .unwrap()
                .push(&frame_b(k))
                .unwrap()
                .is_accepted()
        );
    }
    assert_eq!(rec.array("pos1/cam1").unwrap().frames_pushed(), n as u64);
    assert_eq!(rec.array(0).unwrap().spec().dtype(), DataType::UInt16);
    let stats = rec.finish().unwrap();
    assert_eq!(stats.arrays.len(), 2);
    assert_eq!(stats.arrays[0].0, "cam0");
    assert_eq!(stats.arrays[1].1.frames_written, n as u64);
    assert_eq!(stats.total.frames_written, 2 * n as u64);

    assert_eq!(json(&root.join("zarr.json"))["node_type"], "group");
    assert_eq!(json(&root.join("pos1/zarr.json"))["node_type"], "group");
    // zarrs opens both as groups.
    let store = Arc::new(FilesystemStore::new(&root).unwrap());
    for path in ["/", "/pos1"] {
        zarrs::group::Group::open(store.clone(), path).unwrap();
    }
    let a: Vec<u16> = read(&root, "cam0", vec![n as u64, 64, 48]);
    assert!(a == (0..n).flat_map(frame_a).collect::<Vec<_>>());
    let b: Vec<u8> = read(&root, "pos1/cam1", vec![n as u64, 40, 40]);
    assert!(b == (0..n).flat_map(frame_b).collect::<Vec<_>>());
}

/// `threads(2)` means two encoding workers in all, not two per array.
#[test]
#[cfg(target_os = "linux")]
fn two_arrays_share_two_workers() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("threads.zarr");
    let arrays = vec![
        ArrayConfig::new("a", spec_a()),
        ArrayConfig::new("b", spec_b()),
    ];
    let rec = Recording::create(&root, arrays, options()).unwrap();
    assert!(
        rec.array("a")
            .unwrap()
            .push(&frame_a(0))
            .unwrap()
            .is_accepted()
    );
    assert!(
        rec.array("b")
            .unwrap()
            .push(&frame_b(0))
            .unwrap()
            .is_accepted()
    );
    assert_eq!(worker_threads(), 2);
    rec.finish().unwrap();
    // Joined threads leave /proc at once; the deadline only guards a slow reaper.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while worker_threads() != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
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
            acc.push(
                rec.array(i)
                    .unwrap()
                    .push(&frame_a(k + i))
                    .unwrap()
                    .is_accepted(),
            );
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
        vec!["zarr.json"],
        vec!["a/zarr.json"],
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
    match rec.array("nope").and_then(|mut w| w.push(&frame_a(0))) {
        Err(Error::UnknownArray { key }) => assert_eq!(key, "nope"),
        other => panic!("expected UnknownArray, got {other:?}"),
    }
    match rec.array(1).and_then(|mut w| w.push(&frame_a(0))) {
        Err(Error::UnknownArray { key }) => assert_eq!(key, "1"),
        other => panic!("expected UnknownArray, got {other:?}"),
    }
    let e = rec.array("a").unwrap().push(&frame_b(0)).unwrap_err();
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
        assert!(
            rec.array("img")
                .unwrap()
                .push(&frame_a(k))
                .unwrap()
                .is_accepted()
        );
        assert!(
            rec.array("raw")
                .unwrap()
                .push(&frame_b(k))
                .unwrap()
                .is_accepted()
        );
    }
    #[cfg(target_os = "linux")] // the count is read from /proc
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
fn frame_meta_per_array_reads_back_aligned() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r.zarr");
    let meta = FrameMetaSpec::new()
        .field("t", MetaType::Float64)
        .json(true);
    let arrays = vec![
        ArrayConfig::new("a", spec_a()).frame_meta(meta),
        // Takes the options' default: an int64 counter, no JSON.
        ArrayConfig::new("b", spec_b()),
    ];
    let opts = options().frame_meta(FrameMetaSpec::new().field("n", MetaType::Int64));
    let rec = Recording::create(&root, arrays, opts).unwrap();
    let now = std::time::Instant::now();
    for k in 0..6 {
        let m = FrameMeta::new()
            .value("t", k as f64 * 0.5)
            .with_json(serde_json::json!({"k": k}));
        let a = frame_a(k);
        let _ = rec
            .array("a")
            .unwrap()
            .push_with(bytemuck::cast_slice(&a), now, &m)
            .unwrap();
        let _ = rec
            .array(1)
            .unwrap()
            .push_with(
                &frame_b(k),
                now,
                &FrameMeta::new().value("n", k as i64 * 10),
            )
            .unwrap();
    }
    // The wrong array's field: refused, frame not pushed.
    let e = rec
        .array("b")
        .unwrap()
        .push_with(&frame_b(9), now, &FrameMeta::new().value("t", 1.0))
        .unwrap_err();
    assert!(matches!(e, Error::FrameMeta { .. }), "{e}");
    assert_eq!(rec.array("b").unwrap().frames_pushed(), 6);
    rec.finish().unwrap();
    let t: Vec<f64> = read(&root, "a/frame_meta/t", vec![6]);
    assert_eq!(t, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
    let n: Vec<i64> = read(&root, "b/frame_meta/n", vec![6]);
    assert_eq!(n, [0, 10, 20, 30, 40, 50]);
    assert!(!root.join("b/frame_meta/json_bytes").exists());
    let len: Vec<u64> = read(&root, "a/frame_meta/json_length", vec![6]);
    assert_eq!(len, [7; 6]); // {"k":0}
    let offsets: Vec<u64> = read(&root, "a/frame_meta/json_offset", vec![6]);
    let text: Vec<u8> = read(&root, "a/frame_meta/json_bytes", vec![42]);
    for k in 0..6 {
        let one = &text[offsets[k] as usize..][..len[k] as usize];
        let v: Value = serde_json::from_slice(one).unwrap();
        assert_eq!(v, serde_json::json!({"k": k}), "frame {k}");
    }
}

#[test]
fn attributes_of_arrays_images_and_the_root() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r.zarr");
    let arrays = vec![
        ArrayConfig::new("plain", spec_a()),
        ArrayConfig::new("img", spec_a()).ome(Ome::new().levels(zarrstream::Levels::Count(1))),
    ];
    let rec = Recording::create(&root, arrays, options()).unwrap();
    rec.set_root_attribute("acquisition", serde_json::json!({"operator": "ada"}))
        .unwrap();
    rec.array("plain")
        .unwrap()
        .set_attribute("stage", serde_json::json!({"x": 1.5}))
        .unwrap();
    rec.set_group_attribute("img", "well", serde_json::json!("B3"))
        .unwrap();
    let e = rec
        .set_group_attribute("plain", "well", serde_json::json!("B3"))
        .unwrap_err();
    assert!(matches!(e, Error::NotAnImage(_)), "{e}");
    let e = rec
        .set_root_attribute("zarrstream", serde_json::json!(1))
        .unwrap_err();
    assert!(matches!(e, Error::Attribute { .. }), "{e}");
    let _ = rec.array("plain").unwrap().push(&frame_a(0)).unwrap();
    let _ = rec.array("img").unwrap().push(&frame_a(0)).unwrap();
    rec.finish().unwrap();
    // zarrs opens each node with the attributes set.
    let store = Arc::new(FilesystemStore::new(&root).unwrap());
    let g = zarrs::group::Group::open(store.clone(), "/").unwrap();
    assert_eq!(g.attributes()["acquisition"]["operator"], "ada");
    assert_eq!(
        g.attributes()["zarrstream"]["recording"]["arrays"],
        serde_json::json!(["plain", "img"])
    );
    let a = Array::open(store.clone(), "/plain").unwrap();
    assert_eq!(a.attributes()["stage"]["x"], 1.5);
    let img = zarrs::group::Group::open(store, "/img").unwrap();
    assert_eq!(img.attributes()["well"], "B3");
    assert!(img.attributes().contains_key("ome"));
}

/// A group someone else made (here: by hand, with attributes of its own).
fn foreign_group(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(
        root.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"version": "0.5", "plate": {"name": "p"}}, "theirs": 1}}"#,
    )
    .unwrap();
}

#[test]
fn a_foreign_group_is_joined_only_when_asked_and_never_rewritten() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("plate.zarr");
    foreign_group(&root);
    let before = std::fs::read(root.join("zarr.json")).unwrap();
    let e = Recording::create(&root, vec![ArrayConfig::new("A/1/0", spec_a())], options())
        .err()
        .unwrap();
    assert!(matches!(e, Error::NotOwned { .. }), "{e}");
    // Overwrite alone never replaces a group that is not ours... as long as
    // existing_group is set; without it, overwrite replaces the path as it always has.
    let rec = Recording::create(
        &root,
        vec![ArrayConfig::new("A/1/0", spec_a())],
        options().existing_group(true),
    )
    .unwrap();
    let _ = rec.array(0).unwrap().push(&frame_a(0)).unwrap();
    rec.finish().unwrap();
    assert_eq!(std::fs::read(root.join("zarr.json")).unwrap(), before);
    let row = json(&root.join("A/zarr.json"));
    assert_eq!(row["node_type"], "group");
    let store = Arc::new(FilesystemStore::new(&root).unwrap());
    zarrs::group::Group::open(store, "/A").unwrap();
    let got: Vec<u16> = read(&root, "A/1/0", vec![1, 64, 48]);
    assert_eq!(got, frame_a(0));
    // A second recording into the same group: an existing array is refused, a new
    // one is added next to it.
    let e = Recording::create(
        &root,
        vec![ArrayConfig::new("A/1/0", spec_a())],
        options().existing_group(true),
    )
    .err()
    .unwrap();
    assert!(matches!(e, Error::Exists { .. }), "{e}");
    let rec = Recording::create(
        &root,
        vec![ArrayConfig::new("A/2/0", spec_a())],
        options().existing_group(true),
    )
    .unwrap();
    rec.set_root_attribute("acq", serde_json::json!(2)).unwrap();
    rec.finish().unwrap();
    let doc = json(&root.join("zarr.json"));
    assert_eq!(doc["attributes"]["theirs"], 1);
    assert_eq!(doc["attributes"]["ome"]["plate"]["name"], "p");
    assert_eq!(doc["attributes"]["acq"], 2);
    assert!(root.join("A/1/0/zarr.json").exists());
    // A file where a group should be: never taken.
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let e = Recording::create(
        &file,
        vec![ArrayConfig::new("a", spec_a())],
        options().existing_group(true),
    )
    .err()
    .unwrap();
    assert!(matches!(e, Error::NotOwned { .. }), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn overwrite_refuses_a_recording_a_live_writer_holds_deep_inside() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r.zarr");
    let live = Recording::create(
        &root,
        vec![
            ArrayConfig::new("pos/0/img", spec_a())
                .ome(Ome::new().levels(zarrstream::Levels::Count(1))),
        ],
        options(),
    )
    .unwrap();
    let e = Recording::create(
        &root,
        vec![ArrayConfig::new("a", spec_a())],
        options().overwrite(true),
    )
    .err()
    .unwrap();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    let _ = live.array(0).unwrap().push(&frame_a(1)).unwrap();
    live.finish().unwrap();
    let got: Vec<u16> = read(&root, "pos/0/img/0", vec![1, 64, 48]);
    assert_eq!(got, frame_a(1));
    // Once it is done, overwrite replaces it.
    Recording::create(
        &root,
        vec![ArrayConfig::new("a", spec_a())],
        options().overwrite(true),
    )
    .unwrap()
    .finish()
    .unwrap();
    assert!(!root.join("pos").exists());
}
