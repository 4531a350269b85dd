//! [`summarise`], [`shard_index`], [`verify`] and [`allocated_bytes`] on stores written
//! by the [`Writer`](crate::Writer), sound and then damaged.

use crate::platform::FileExt;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::*;
use crate::{ArraySpec, Codec, DataType, PushOutcome, Writer, WriterOptions};

/// Frames of 16 x 16 u16 in chunks of 1 x 8 x 8 (4 per frame) and shards of 2 frames
/// (8 chunks).
fn spec(crc32c: bool) -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 16, 16])
        .chunk_shape([1, 8, 8])
        .shard_shape([2, 16, 16])
        .dtype(DataType::UInt16)
        .codec(Codec::zstd(1))
        .crc32c(crc32c)
        .build()
        .unwrap()
}

/// Frame `t`, never the fill value (an all-fill chunk could be left empty).
fn frame(t: u16) -> Vec<u16> {
    (0..256u16).map(|i| i.wrapping_mul(31) ^ t | 1).collect()
}

/// Five frames, the fourth skipped: shard 0 holds frames 0-1 (8 chunks), shard 1
/// frames 2 and the skipped 3 (4 chunks, 4 empty inside the array), shard 2 frame 4
/// (4 chunks, 4 empty past the end).
fn written(dir: &Path, crc32c: bool) -> (PathBuf, StoreReader) {
    let path = dir.join("a.zarr");
    let options = WriterOptions::default().threads(2).pin_threads(false);
    let mut writer = Writer::create(&path, spec(crc32c), options).unwrap();
    for t in 0..3 {
        assert_eq!(writer.push(&frame(t)).unwrap(), PushOutcome::Accepted);
    }
    writer.skip().unwrap();
    assert_eq!(writer.push(&frame(4)).unwrap(), PushOutcome::Accepted);
    writer.finish().unwrap();
    let store = StoreReader::open(&path).unwrap();
    (path, store)
}

#[test]
fn summarise_counts_frames_shards_and_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = written(dir.path(), true);
    let mut calls = Vec::new();
    let s = summarise(&store, |done, total| calls.push((done, total))).unwrap();
    assert_eq!(calls, [(0, 3), (1, 3), (2, 3), (3, 3)]);

    assert_eq!(s.store, path);
    assert_eq!(s.array.shape, [5, 16, 16]);
    // Four frames written and the skipped one counted as dropped; it keeps its place.
    let progress = &s.array.attributes["zarrstream"];
    assert_eq!(progress["frames_committed"], 4);
    assert_eq!(progress["frames_dropped"], 1);
    assert_eq!(s.array.dtype, "uint16");
    assert_eq!(s.array.chunks_per_shard, [2, 2, 2]);
    assert!(s.array.crc32c);
    assert_eq!(s.array.index_location, "end");
    assert!(
        s.array.codecs_text().ends_with("-> crc32c"),
        "{}",
        s.array.codecs_text()
    );
    assert_eq!(s.shards, 3);
    assert_eq!(s.shards_in_grid, 3);
    assert_eq!(s.chunks_stored, 16);
    assert_eq!(s.empty_chunks, 8);
    assert_eq!(s.empty_chunks_in_array, 4);
    assert_eq!(s.raw_bytes, 5 * 16 * 16 * 2);
    let keys: Vec<&str> = s.shard_list.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["c/0/0/0", "c/1/0/0", "c/2/0/0"]);
    let chunks: Vec<u64> = s.shard_list.iter().map(|i| i.chunks).collect();
    assert_eq!(chunks, [8, 4, 4]);
    let on_disk: u64 = keys
        .iter()
        .map(|k| std::fs::metadata(path.join(k)).unwrap().len())
        .sum();
    assert_eq!(s.stored_bytes, on_disk);
    assert!(s.shard_list.iter().all(|i| i.error.is_none()));
    // Compact packing leaves no gaps.
    assert_eq!((s.gap_bytes, s.sparse_shards), (0, 0));
}

#[test]
fn summarise_lists_a_shard_with_a_broken_index() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = written(dir.path(), true);
    let shard = path.join("c/1/0/0");
    let len = std::fs::metadata(&shard).unwrap().len();
    flip_byte(&shard, len - 1); // the index crc32c (index at the end)
    let s = summarise(&store, |_, _| {}).unwrap();
    let bad = &s.shard_list[1];
    assert_eq!(bad.key, "c/1/0/0");
    assert!(bad.error.as_deref().unwrap().contains("crc32c"), "{bad:?}");
    assert_eq!(s.chunks_stored, 12);
}

#[test]
fn shard_index_lists_every_inner_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = written(dir.path(), true);
    let ix = shard_index(&store, "c/1/0/0").unwrap();
    assert_eq!(ix.key, "c/1/0/0");
    assert_eq!(
        ix.bytes,
        std::fs::metadata(path.join("c/1/0/0")).unwrap().len()
    );
    assert_eq!(ix.index_size, 16 * 8 + 4);
    assert_eq!(ix.index_offset, ix.bytes - ix.index_size);
    assert_eq!(ix.gap_bytes, 0);
    assert_eq!(ix.chunks.len(), 8);
    assert_eq!(ix.chunks[5].chunk, [1, 0, 1]);
    // Frame 2 stored, the skipped frame 3 empty.
    for row in &ix.chunks {
        assert_eq!(row.offset.is_some(), row.chunk[0] == 0, "{row:?}");
        assert_eq!(row.offset.is_some(), row.nbytes.is_some(), "{row:?}");
    }
    let stored: u64 = ix.chunks.iter().filter_map(|r| r.nbytes).sum();
    assert_eq!(stored, ix.index_offset, "dense: chunks then index");
    match shard_index(&store, "c/9/0/0") {
        Err(StoreError::NoSuchShard { key, .. }) => assert_eq!(key, "c/9/0/0"),
        other => panic!("expected NoSuchShard, got {other:?}"),
    }
}

#[test]
fn verify_passes_a_sound_store_and_names_a_corrupted_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = written(dir.path(), true);
    for (decode, by) in [
        (false, CheckedBy::Crc32c),
        (true, CheckedBy::Crc32cAndDecode),
    ] {
        let mut last = (0, 0);
        let r = verify(&store, decode, |done, total| last = (done, total)).unwrap();
        assert_eq!(last, (3, 3));
        assert_eq!(r.store, path);
        assert_eq!(r.shards, 3);
        assert_eq!(r.chunks_checked, 16);
        assert_eq!(r.chunks_empty, 8);
        assert_eq!(r.checked_by, by);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    // One byte flipped in the middle of chunk [0, 1, 0] of shard c/1/0/0.
    let ix = shard_index(&store, "c/1/0/0").unwrap();
    let row = &ix.chunks[2];
    assert_eq!(row.chunk, [0, 1, 0]);
    let (o, n) = (row.offset.unwrap(), row.nbytes.unwrap());
    flip_byte(&path.join("c/1/0/0"), o + n / 2);
    let r = verify(&store, false, |_, _| {}).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    let p = &r.problems[0];
    assert_eq!(
        (p.shard.as_str(), p.chunk.as_deref()),
        ("c/1/0/0", Some(&[0, 1, 0][..]))
    );
    assert!(p.message.contains("crc32c mismatch"), "{}", p.message);
    assert!(
        p.to_string()
            .starts_with("c/1/0/0 chunk [0, 1, 0]: crc32c mismatch"),
        "{p}"
    );
    assert_eq!(r.chunks_checked, 16);
}

#[test]
fn verify_decodes_without_crc32c_and_reports_a_broken_index() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = written(dir.path(), false);
    let r = verify(&store, false, |_, _| {}).unwrap();
    assert_eq!(r.checked_by, CheckedBy::Decode);
    assert!(r.problems.is_empty(), "{:?}", r.problems);

    let shard = path.join("c/0/0/0");
    let len = std::fs::metadata(&shard).unwrap().len();
    flip_byte(&shard, len - 1);
    let r = verify(&store, false, |_, _| {}).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert_eq!(r.problems[0].shard, "c/0/0/0");
    assert_eq!(r.problems[0].chunk, None);
    // The broken shard's chunks are not counted as checked.
    assert_eq!(r.chunks_checked, 8);
}

#[test]
fn allocated_bytes_sees_a_sparse_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse");
    let f = File::create(&path).unwrap();
    f.set_len(1 << 20).unwrap();
    assert!(allocated_bytes(&path).unwrap() < 1 << 20);
    assert!(allocated_bytes(&dir.path().join("absent")).is_err());
}

fn flip_byte(path: &Path, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0xff], at).unwrap();
}
