//! Resume: an array zarrstream finished (or `recover` repaired) is continued along axis
//! 0; read back with the `zarrs` crate, the result equals one uninterrupted recording.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream_testkit::layout;

use zarrstream::{
    ArrayConfig, ArraySpec, BloscShuffle, Codec, DataType, Error, IndexLocation, Ome, Packing,
    Recording, SinkChoice, Writer, WriterOptions,
};

fn spec(shape: &[u64], chunk: &[u64], shard: &[u64], codec: Codec) -> ArraySpec {
    ArraySpec::builder()
        .shape(shape)
        .chunk_shape(chunk)
        .shard_shape(shard)
        .dtype(DataType::UInt16)
        .codec(codec)
        .build()
        .unwrap()
}

/// (t, y, x), one frame per chunk, 4 frames per shard, two shards across x.
fn spec3() -> ArraySpec {
    spec(
        &[0, 32, 40],
        &[1, 16, 20],
        &[4, 32, 20],
        Codec::blosc_lz4(1),
    )
}

fn frame(k: u64, n: usize) -> Vec<u16> {
    (0..n).map(|i| (i as u64 * 7 + k * 1013) as u16).collect()
}

/// Deterministic slot order (one worker, mmap slots, compacted), so chunk bytes and
/// shard layouts can be compared between two runs.
fn options() -> WriterOptions {
    WriterOptions::default()
        .threads(1)
        .pin_threads(false)
        .sink(SinkChoice::Mmap)
        .packing(Packing::Compact)
}

fn record(dir: &Path, spec: &ArraySpec, frames: std::ops::Range<u64>, options: WriterOptions) {
    let mut w = Writer::create(dir, spec.clone(), options).unwrap();
    let n = spec.frame_bytes() / 2;
    for k in frames {
        assert!(w.push(&frame(k, n)).unwrap().is_accepted());
    }
    w.finish().unwrap();
}

fn read_all(dir: &Path) -> (Vec<u64>, Vec<u16>) {
    let store = Arc::new(FilesystemStore::new(dir).unwrap());
    let array = Array::open(store, "/").unwrap();
    let shape = array.shape().to_vec();
    let data = array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(shape.clone()))
        .unwrap();
    (shape, data)
}

fn doc(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("zarr.json")).unwrap()).unwrap()
}

/// The shard files under `dir/c`, by key (`c/0/1`), in key order.
fn shard_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let key = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((key, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &dir.join("c"), &mut out);
    out.sort();
    out
}

/// Every shard's chunks, byte for byte, by index entry: the index read by the tests'
/// own parser (`layout::parse_index`), not the library's reader. Index at the end.
fn chunks(dir: &Path, chunks_per_shard: usize) -> Vec<(String, Vec<Option<Vec<u8>>>)> {
    shard_files(dir)
        .into_iter()
        .map(|(key, bytes)| {
            let index = layout::parse_index(&bytes, chunks_per_shard, IndexLocation::End)
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            let chunks = index
                .iter()
                .map(|e| e.map(|(o, n)| bytes[o as usize..(o + n) as usize].to_vec()))
                .collect();
            (key, chunks)
        })
        .collect()
}

#[test]
fn resumed_array_equals_one_uninterrupted_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a.zarr"), tmp.path().join("b.zarr"));
    let s = spec3();
    // 10 frames end in the middle of the third shard row.
    record(&a, &s, 0..10, options());
    let mut w = Writer::create(&a, s.clone(), options().resume(true)).unwrap();
    assert_eq!(w.frames_pushed(), 10);
    let n = s.frame_bytes() / 2;
    for k in 10..17 {
        assert!(w.push(&frame(k, n)).unwrap().is_accepted());
    }
    let stats = w.finish().unwrap();
    assert_eq!((stats.frames_pushed, stats.frames_written), (7, 7));
    record(&b, &s, 0..17, options());

    let (shape, got) = read_all(&a);
    assert_eq!(shape, [17, 32, 40]);
    let want: Vec<u16> = (0..17).flat_map(|k| frame(k, n)).collect();
    assert_eq!(got, want);
    // The chunks of the partly filled shard were kept, not re-encoded: every shard holds
    // the same bytes as the uninterrupted run's.
    let per_shard = s.chunks_per_shard();
    assert_eq!(chunks(&a, per_shard), chunks(&b, per_shard));
    let p = &doc(&a)["attributes"]["zarrstream"];
    assert_eq!(p["state"], "finished");
    assert_eq!(p["frames_committed"], 17);
    assert!(!a.join(zarrstream::store::PARTIAL_DIR).exists());
}

#[test]
fn resume_with_other_sinks_and_threads_reads_back_the_same() {
    for sink in [SinkChoice::Pwrite, SinkChoice::Direct, SinkChoice::Auto] {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a.zarr");
        let s = spec3();
        let o = WriterOptions::default()
            .threads(2)
            .pin_threads(false)
            .sink(sink);
        record(&a, &s, 0..6, o.clone());
        record(&a, &s, 6..9, o.clone().resume(true));
        record(&a, &s, 9..14, o.resume(true));
        let n = s.frame_bytes() / 2;
        let (shape, got) = read_all(&a);
        assert_eq!(shape, [14, 32, 40], "{sink}");
        assert_eq!(got, (0..14).flat_map(|k| frame(k, n)).collect::<Vec<_>>());
    }
}

#[test]
fn a_partial_last_step_reads_as_fill_and_the_next_step_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    // (t, c, y, x) with 2 channels: 5 frames end after channel 0 of t = 2.
    let s = spec(
        &[0, 2, 16, 16],
        &[1, 1, 16, 16],
        &[2, 2, 16, 16],
        Codec::zstd(1),
    );
    let n = s.frame_bytes() / 2;
    record(&a, &s, 0..5, options());
    let mut w = Writer::create(&a, s.clone(), options().resume(true)).unwrap();
    // The rest of step 2 was never recorded: the next frame starts step 3.
    assert_eq!(w.frames_pushed(), 6);
    for k in 6..8 {
        let _ = w.push(&frame(k, n)).unwrap();
    }
    w.finish().unwrap();
    let (shape, got) = read_all(&a);
    assert_eq!(shape, [4, 2, 16, 16]);
    for k in 0..8u64 {
        let plane = &got[k as usize * n..][..n];
        if k == 5 {
            assert!(plane.iter().all(|&v| v == 0), "frame 5 reads as fill");
        } else {
            assert_eq!(plane, frame(k, n), "frame {k}");
        }
    }
}

#[test]
fn a_bounded_array_resumes_up_to_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    let s = spec(&[9, 32, 40], &[1, 16, 20], &[4, 32, 20], Codec::none());
    record(&a, &s, 0..5, options());
    let mut w = Writer::create(&a, s.clone(), options().resume(true)).unwrap();
    let n = s.frame_bytes() / 2;
    for k in 5..9 {
        let _ = w.push(&frame(k, n)).unwrap();
    }
    let e = w.push(&frame(9, n)).unwrap_err();
    assert!(matches!(e, Error::ArrayFull { frames: 9 }), "{e}");
    w.finish().unwrap();
    let (shape, got) = read_all(&a);
    assert_eq!(shape, [9, 32, 40]);
    assert_eq!(got, (0..9).flat_map(|k| frame(k, n)).collect::<Vec<_>>());
    // `recover` counts present frames, not where the last one was: a bounded array it
    // repaired is not resumed (the next frame could overwrite a committed one).
    let mut d = doc(&a);
    d["attributes"]["zarrstream"]["state"] = "recovered".into();
    std::fs::write(a.join("zarr.json"), d.to_string()).unwrap();
    let e = Writer::create(&a, s.clone(), options().resume(true))
        .err()
        .unwrap();
    assert!(matches!(e, Error::ResumeUnsupported(_)), "{e}");
    // Another bound is a different array.
    let other = spec(&[12, 32, 40], &[1, 16, 20], &[4, 32, 20], Codec::none());
    let e = Writer::create(&a, other, options().resume(true))
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            Error::ResumeMismatch {
                field: "shape[0]",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn deep_chunks_resume_at_a_chunk_boundary_and_refuse_inside_one() {
    let tmp = tempfile::tempdir().unwrap();
    let s = spec(&[0, 16, 16], &[4, 16, 16], &[8, 16, 16], Codec::zstd(1));
    let n = s.frame_bytes() / 2;
    let a = tmp.path().join("a.zarr");
    record(&a, &s, 0..12, options());
    record(&a, &s, 12..19, options().resume(true));
    let (shape, got) = read_all(&a);
    assert_eq!(shape, [19, 16, 16]);
    assert_eq!(got, (0..19).flat_map(|k| frame(k, n)).collect::<Vec<_>>());
    // 19 frames end inside a 4-deep chunk: continuing would re-encode it.
    let before = std::fs::read(a.join("zarr.json")).unwrap();
    let e = Writer::create(&a, s, options().resume(true)).err().unwrap();
    assert!(matches!(e, Error::ResumeUnsupported(_)), "{e}");
    // Refusing left the array as it was.
    assert_eq!(std::fs::read(a.join("zarr.json")).unwrap(), before);
    assert!(!a.join(zarrstream::store::PARTIAL_DIR).exists());
}

#[test]
fn a_different_spec_is_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    record(&a, &spec3(), 0..3, options());
    let before = std::fs::read(a.join("zarr.json")).unwrap();
    let cases = [
        (
            spec(&[0, 32, 40], &[1, 16, 20], &[4, 32, 20], Codec::zstd(1)),
            "codec",
        ),
        (
            spec(
                &[0, 32, 40],
                &[1, 32, 20],
                &[4, 32, 20],
                Codec::blosc_lz4(1),
            ),
            "chunk_shape",
        ),
        (
            spec(
                &[0, 32, 40],
                &[1, 16, 20],
                &[8, 32, 20],
                Codec::blosc_lz4(1),
            ),
            "shard_shape",
        ),
        (
            spec(
                &[0, 32, 20],
                &[1, 16, 20],
                &[4, 32, 20],
                Codec::blosc_lz4(1),
            ),
            "shape after axis 0",
        ),
    ];
    for (s, field) in cases {
        let e = Writer::create(&a, s, options().resume(true)).err().unwrap();
        match &e {
            Error::ResumeMismatch { field: f, .. } => assert_eq!(*f, field),
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains(field), "{e}");
    }
    let e = Writer::create(
        &a,
        ArraySpec::builder()
            .shape([0, 32, 40])
            .chunk_shape([1, 16, 20])
            .shard_shape([4, 32, 20])
            .dtype(DataType::UInt8)
            .codec(Codec::blosc_lz4(1))
            .build()
            .unwrap(),
        options().resume(true),
    )
    .err()
    .unwrap();
    assert!(
        e.to_string()
            .contains("dtype differs: on disk uint16, requested uint8"),
        "{e}"
    );
    assert_eq!(std::fs::read(a.join("zarr.json")).unwrap(), before);
    let e = Writer::create(&a, spec3(), options().resume(true).overwrite(true))
        .err()
        .unwrap();
    assert!(matches!(e, Error::ConflictingOptions(..)), "{e}");
    let e = Writer::create(tmp.path().join("none"), spec3(), options().resume(true))
        .err()
        .unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

/// The codec is compared as written: an array written with the default shuffle resumes
/// with the same shuffle spelled out and vice versa; another shuffle or compressor is a
/// mismatch naming the codec. A blosc-zstd bit-shuffled array resumes and reads back
/// (zarrs) as one recording.
#[test]
fn blosc_codecs_resume_by_what_they_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dims = (
        &[0u64, 32, 40][..],
        &[1u64, 16, 20][..],
        &[4u64, 32, 20][..],
    );
    let with = |codec| spec(dims.0, dims.1, dims.2, codec);
    let zstd = Codec::blosc_zstd(3);
    let explicit = zstd.with_shuffle(BloscShuffle::Shuffle);
    let bits = zstd.with_shuffle(BloscShuffle::BitShuffle);
    for (i, (first, then)) in [(zstd, explicit), (explicit, zstd), (bits, bits)]
        .into_iter()
        .enumerate()
    {
        let a = tmp.path().join(format!("{i}.zarr"));
        record(&a, &with(first), 0..4, options());
        record(&a, &with(then), 4..9, options().resume(true));
        let (shape, got) = read_all(&a);
        assert_eq!(shape, [9, 32, 40], "{first} then {then}");
        let n = with(first).frame_bytes() / 2;
        assert_eq!(got, (0..9).flat_map(|k| frame(k, n)).collect::<Vec<_>>());
    }
    let a = tmp.path().join("0.zarr");
    for other in [
        bits,
        Codec::blosc_lz4(3),
        zstd.with_shuffle(BloscShuffle::NoShuffle),
    ] {
        let e = Writer::create(&a, with(other), options().resume(true))
            .err()
            .unwrap();
        match &e {
            Error::ResumeMismatch {
                field, requested, ..
            } => assert_eq!(
                (*field, requested.as_str()),
                ("codec", other.to_string().as_str())
            ),
            e => panic!("{other}: {e}"),
        }
    }
}

#[test]
fn a_live_store_is_locked_and_a_crashed_one_needs_recovery_first() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    let s = spec3();
    let n = s.frame_bytes() / 2;
    let mut live = Writer::create(&a, s.clone(), options()).unwrap();
    let _ = live.push(&frame(0, n)).unwrap();
    let e = Writer::create(&a, s.clone(), options().resume(true))
        .err()
        .unwrap();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    live.finish().unwrap();

    // A writer that never finished: state `running` in zarr.json.
    let mut d = doc(&a);
    d["attributes"]["zarrstream"]["state"] = "running".into();
    std::fs::write(a.join("zarr.json"), d.to_string()).unwrap();
    let e = Writer::create(&a, s.clone(), options().resume(true))
        .err()
        .unwrap();
    assert!(matches!(e, Error::NeedsRecovery { .. }), "{e}");
    assert!(e.to_string().contains("zarrstream recover"), "{e}");
    zarrstream::recover::recover_store(&a).unwrap();
    assert_eq!(doc(&a)["attributes"]["zarrstream"]["state"], "recovered");
    record(&a, &s, 1..4, options().resume(true));
    let (shape, got) = read_all(&a);
    assert_eq!(shape, [4, 32, 40]);
    assert_eq!(got, (0..4).flat_map(|k| frame(k, n)).collect::<Vec<_>>());

    // Temporary shards a crashed writer left behind.
    let tmp_dir = a.join(zarrstream::store::PARTIAL_DIR);
    std::fs::create_dir(&tmp_dir).unwrap();
    std::fs::write(tmp_dir.join("c.1.0.0.partial"), b"x").unwrap();
    let e = Writer::create(&a, s.clone(), options().resume(true))
        .err()
        .unwrap();
    assert!(matches!(e, Error::NeedsRecovery { .. }), "{e}");
    // What `recover` set aside is not removed by a resume either.
    std::fs::rename(
        tmp_dir.join("c.1.0.0.partial"),
        tmp_dir.join("c.1.0.0.partial.unrecoverable"),
    )
    .unwrap();
    let e = Writer::create(&a, s, options().resume(true)).err().unwrap();
    assert!(
        matches!(e, Error::NeedsRecovery { ref reason, .. } if reason.contains("unrecoverable")),
        "{e}"
    );
    assert!(tmp_dir.join("c.1.0.0.partial.unrecoverable").exists());
}

#[test]
fn attributes_set_before_are_kept_and_counts_add_up() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    let s = spec3().clone();
    let n = s.frame_bytes() / 2;
    let mut w = Writer::create(&a, s.clone(), options()).unwrap();
    w.set_attribute("stage", serde_json::json!({"x": 1}))
        .unwrap();
    for k in 0..3 {
        let _ = w.push(&frame(k, n)).unwrap();
    }
    w.skip().unwrap();
    w.finish().unwrap();
    let mut w = Writer::create(&a, s, options().resume(true)).unwrap();
    assert_eq!(w.frames_pushed(), 4);
    let _ = w.push(&frame(4, n)).unwrap();
    w.finish().unwrap();
    let d = doc(&a);
    assert_eq!(d["attributes"]["stage"]["x"], 1);
    assert_eq!(d["attributes"]["zarrstream"]["frames_committed"], 4);
    assert_eq!(d["attributes"]["zarrstream"]["frames_dropped"], 1);
    assert_eq!(d["shape"][0], 5);
    // zarrs agrees: frames 0-2 and 4 as pushed, the skipped frame 3 as fill.
    let (shape, got) = read_all(&a);
    assert_eq!(shape, [5, 32, 40]);
    for k in 0..5u64 {
        let plane = &got[k as usize * n..][..n];
        if k == 3 {
            assert!(plane.iter().all(|&v| v == 0), "frame 3 reads as fill");
        } else {
            assert_eq!(plane, frame(k, n), "frame {k}");
        }
    }
}

#[test]
fn a_recording_and_an_ome_image_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r.zarr");
    let s = spec3();
    let n = s.frame_bytes() / 2;
    let arrays = || {
        vec![
            ArrayConfig::new("cam0", s.clone()),
            ArrayConfig::new("cam1", s.clone())
                .ome(Ome::new().levels(zarrstream::Levels::Count(1))),
        ]
    };
    let opts = WriterOptions::default().threads(2).pin_threads(false);
    let rec = Recording::create(&root, arrays(), opts.clone()).unwrap();
    for k in 0..5 {
        let _ = rec.array("cam0").unwrap().push(&frame(k, n)).unwrap();
        let _ = rec.array("cam1").unwrap().push(&frame(k + 100, n)).unwrap();
    }
    rec.set_group_attribute("cam1", "note", serde_json::json!("kept"))
        .unwrap();
    rec.finish().unwrap();
    let rec = Recording::create(&root, arrays(), opts.resume(true)).unwrap();
    assert_eq!(rec.array("cam1").unwrap().frames_pushed(), 5);
    for k in 5..11 {
        let _ = rec.array("cam0").unwrap().push(&frame(k, n)).unwrap();
        let _ = rec.array("cam1").unwrap().push(&frame(k + 100, n)).unwrap();
    }
    rec.finish().unwrap();
    let (shape, got) = read_all(&root.join("cam0"));
    assert_eq!(shape, [11, 32, 40]);
    assert_eq!(got, (0..11).flat_map(|k| frame(k, n)).collect::<Vec<_>>());
    let (shape, got) = read_all(&root.join("cam1/0"));
    assert_eq!(shape, [11, 32, 40]);
    assert_eq!(
        got,
        (100..111).flat_map(|k| frame(k, n)).collect::<Vec<_>>()
    );
    let group: Value =
        serde_json::from_slice(&std::fs::read(root.join("cam1/zarr.json")).unwrap()).unwrap();
    assert_eq!(group["attributes"]["note"], "kept");
    // A pyramid is not resumed (its lower levels would need their partial rows).
    let e = Writer::create_ome(
        tmp.path().join("p.zarr"),
        s,
        &Ome::new().levels(zarrstream::Levels::Count(2)),
        options().resume(true),
    )
    .err()
    .unwrap();
    assert!(matches!(e, Error::ResumeUnsupported(_)), "{e}");
}

fn read_column<T: zarrs::array::ElementOwned>(dir: &Path, name: &str) -> Vec<T> {
    let store = Arc::new(FilesystemStore::new(dir).unwrap());
    let array = Array::open(store, &format!("/frame_meta/{name}")).unwrap();
    let shape = array.shape().to_vec();
    array
        .retrieve_array_subset::<Vec<T>>(&ArraySubset::new_with_shape(shape))
        .unwrap()
}

#[test]
fn per_frame_metadata_continues_aligned_with_the_frames() {
    use zarrstream::{FrameMeta, FrameMetaSpec, MetaType};
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    // (t, c, y, x), 2 channels: 5 frames end inside step 2.
    let s = spec(
        &[0, 2, 16, 16],
        &[1, 1, 16, 16],
        &[2, 2, 16, 16],
        Codec::zstd(1),
    );
    let n = s.frame_bytes() / 2;
    let meta = FrameMetaSpec::new()
        .field("t", MetaType::Float64)
        .json(true);
    let push = |w: &mut Writer, k: u64| {
        let f = frame(k, n);
        let m = FrameMeta::new()
            .value("t", k as f64)
            .with_json(serde_json::json!({"k": k}));
        let _ = w
            .push_with(bytemuck::cast_slice(&f), std::time::Instant::now(), &m)
            .unwrap();
    };
    let mut w = Writer::create(&a, s.clone(), options().frame_meta(meta.clone())).unwrap();
    for k in 0..5 {
        push(&mut w, k);
    }
    w.finish().unwrap();
    let mut w = Writer::create(
        &a,
        s.clone(),
        options().frame_meta(meta.clone()).resume(true),
    )
    .unwrap();
    for k in 6..9 {
        push(&mut w, k);
    }
    w.finish().unwrap();
    let t: Vec<f64> = read_column(&a, "t");
    assert_eq!(t.len(), 9);
    for (k, v) in t.iter().enumerate() {
        if k == 5 {
            assert!(v.is_nan(), "frame 5 was never recorded");
        } else {
            assert_eq!(*v, k as f64);
        }
    }
    let offsets: Vec<u64> = read_column(&a, "json_offset");
    let lengths: Vec<u64> = read_column(&a, "json_length");
    let text: Vec<u8> = read_column(&a, "json_bytes");
    for k in 0..9usize {
        let s = &text[offsets[k] as usize..][..lengths[k] as usize];
        if k == 5 {
            assert!(s.is_empty());
        } else {
            assert_eq!(s, format!("{{\"k\":{k}}}").as_bytes());
        }
    }
    // Other fields, or none, are a different array.
    let e = Writer::create(
        &a,
        s.clone(),
        options()
            .frame_meta(FrameMetaSpec::new().field("x", MetaType::Float64))
            .resume(true),
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            Error::ResumeMismatch {
                field: "frame_meta",
                ..
            }
        ),
        "{e}"
    );
    let e = Writer::create(&a, s, options().resume(true)).err().unwrap();
    assert!(
        matches!(
            e,
            Error::ResumeMismatch {
                field: "frame_meta",
                ..
            }
        ),
        "{e}"
    );
}

/// Columns published in one pass may differ in length after a crash: every column
/// continues at the frames all of them hold, so values stay at their frames. The
/// fields may be listed in another order.
#[test]
fn per_frame_metadata_of_uneven_length_stays_aligned() {
    use zarrstream::{FrameMeta, FrameMetaSpec, MetaType};
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    let s = spec3();
    let n = s.frame_bytes() / 2;
    let push = |w: &mut Writer, k: u64| {
        let f = frame(k, n);
        let m = FrameMeta::new()
            .value("a", k as f64)
            .value("b", k as f64 * 10.0);
        let _ = w
            .push_with(bytemuck::cast_slice(&f), std::time::Instant::now(), &m)
            .unwrap();
    };
    let ab = FrameMetaSpec::new()
        .field("a", MetaType::Float64)
        .field("b", MetaType::Float64);
    let mut w = Writer::create(&a, s.clone(), options().frame_meta(ab)).unwrap();
    for k in 0..5 {
        push(&mut w, k);
    }
    w.finish().unwrap();
    // A crash between the columns' documents: `b` was last published at 3 values.
    let b_doc = a.join("frame_meta/b/zarr.json");
    let mut d: Value = serde_json::from_slice(&std::fs::read(&b_doc).unwrap()).unwrap();
    d["shape"][0] = 3.into();
    std::fs::write(&b_doc, d.to_string()).unwrap();
    let ba = FrameMetaSpec::new()
        .field("b", MetaType::Float64)
        .field("a", MetaType::Float64);
    let mut w = Writer::create(&a, s, options().frame_meta(ba).resume(true)).unwrap();
    for k in 5..7 {
        push(&mut w, k);
    }
    w.finish().unwrap();
    let a_values: Vec<f64> = read_column(&a, "a");
    let b_values: Vec<f64> = read_column(&a, "b");
    assert_eq!(a_values.len(), 7);
    assert_eq!(b_values.len(), 7);
    for k in 0..7usize {
        if k == 3 || k == 4 {
            // Frames whose values not every column kept read as fill in all of them.
            assert!(a_values[k].is_nan() && b_values[k].is_nan(), "frame {k}");
        } else {
            assert_eq!((a_values[k], b_values[k]), (k as f64, k as f64 * 10.0));
        }
    }
}

/// The chunks of the partly filled last shard are carried over as they are, not
/// decoded and encoded again: a chunk stored with another (equally valid) encoding
/// keeps its bytes through the resume, and zarrs still reads every frame.
#[test]
fn carried_over_chunks_keep_their_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.zarr");
    let s = spec(&[0, 32, 40], &[1, 16, 20], &[4, 32, 20], Codec::zstd(1));
    let n = s.frame_bytes() / 2;
    record(&a, &s, 0..10, options());
    // Shard c/2/0/0 holds frames 8 and 9 (y 0..32, x 0..20): chunk 0 is frame 8's top
    // left 16 x 20. Store it encoded differently (below), in a rebuilt shard.
    let shard_path = a.join("c/2/0/0");
    let before = std::fs::read(&shard_path).unwrap();
    let index = layout::parse_index(&before, s.chunks_per_shard(), IndexLocation::End).unwrap();
    let f8 = frame(8, n);
    let chunk0: Vec<u8> = (0..16)
        .flat_map(|y| f8[y * 40..y * 40 + 20].iter().flat_map(|v| v.to_le_bytes()))
        .collect();
    // A zstd frame of one raw (stored) block, with its content size, then the crc32c
    // the array's codecs end with: what no zstd compressor level writes, yet every
    // reader decodes.
    let mut stored = vec![0x28, 0xB5, 0x2F, 0xFD, 0x60];
    stored.extend_from_slice(&(chunk0.len() as u16 - 256).to_le_bytes());
    stored.extend_from_slice(&(1u32 | (chunk0.len() as u32) << 3).to_le_bytes()[..3]);
    stored.extend_from_slice(&chunk0);
    stored.extend_from_slice(&crc32c::crc32c(&stored).to_le_bytes());
    let stored = stored;
    let mut data = Vec::new();
    let mut entries = Vec::new();
    for (i, e) in index.iter().enumerate() {
        let bytes = match (i, e) {
            (0, Some(_)) => stored.clone(),
            (_, Some((o, b))) => before[*o as usize..(*o + *b) as usize].to_vec(),
            (_, None) => {
                entries.push((u64::MAX, u64::MAX));
                continue;
            }
        };
        entries.push((data.len() as u64, bytes.len() as u64));
        data.extend_from_slice(&bytes);
    }
    let mut idx: Vec<u8> = entries
        .iter()
        .flat_map(|(o, b)| o.to_le_bytes().into_iter().chain(b.to_le_bytes()))
        .collect();
    idx.extend_from_slice(&crc32c::crc32c(&idx).to_le_bytes());
    data.extend_from_slice(&idx);
    std::fs::write(&shard_path, &data).unwrap();
    // What encoding it again at the array's own level would give: other bytes.
    let mut enc1 = zarrstream::ChunkEncoder::new(Codec::zstd(1), 2, s.checksum()).unwrap();
    let mut level1 = vec![0u8; enc1.slot_bound(chunk0.len())];
    let len = enc1.encode_slice(&chunk0, &mut level1).unwrap();
    level1.truncate(len);
    assert_ne!(stored, level1);

    record(&a, &s, 10..13, options().resume(true));
    let after = std::fs::read(&shard_path).unwrap();
    let (o, b) =
        layout::parse_index(&after, s.chunks_per_shard(), IndexLocation::End).unwrap()[0].unwrap();
    assert_eq!(after[o as usize..(o + b) as usize], stored[..]);
    let (shape, got) = read_all(&a);
    assert_eq!(shape, [13, 32, 40]);
    assert_eq!(got, (0..13).flat_map(|k| frame(k, n)).collect::<Vec<_>>());
}
