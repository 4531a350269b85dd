//! Recovery of hand-made crashed stores: damaged entries, stores without crc32c,
//! shards the finisher was finishing, finished shards and strangers.

use crate::platform::FileExt;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;
use crate::codec::{ChunkEncoder, Codec};
use crate::dtype::DataType;
use crate::metadata::{self, Progress, State, array_json};
use crate::read::index::{EMPTY, parse_index};
use crate::read::{blosc, zstd};
use crate::shard::{ChunkOrder, Packing, ShardLayout, SlotOrder, encode_index, entry_bytes, plan};
use crate::spec::{ArraySpec, IndexLocation};
use crate::store::{UNRECOVERABLE_SUFFIX, partial_file_name};

const N_FRAMES: u64 = 4;

/// 3-D u16 array: frames 16 x 16, chunks 1 x 8 x 8 (4 per frame), shards of 4 frames
/// (16 chunks).
fn spec(codec: Codec, crc32c: bool, location: IndexLocation) -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 16, 16])
        .chunk_shape([1, 8, 8])
        .shard_shape([N_FRAMES, 16, 16])
        .dtype(DataType::UInt16)
        .codec(codec)
        .crc32c(crc32c)
        .index_location(location)
        .build()
        .unwrap()
}

/// Content of inner chunk `i` of shard row `row` (never all fill).
fn chunk_data(row: u64, i: usize) -> Vec<u8> {
    (0..64u16)
        .flat_map(|j| (j.wrapping_mul(7) ^ (i as u16 * 31 + row as u16 * 517) | 1).to_le_bytes())
        .collect()
}

fn encoded(spec: &ArraySpec, row: u64, i: usize) -> Vec<u8> {
    let mut enc = ChunkEncoder::new(spec.codec, 2, spec.checksum()).unwrap();
    let data = chunk_data(row, i);
    let mut out = vec![0u8; enc.slot_bound(data.len())];
    let n = enc.encode_slice(&data, &mut out).unwrap();
    out.truncate(n);
    out
}

struct Store {
    _dir: tempfile::TempDir,
    path: PathBuf,
    spec: ArraySpec,
    layout: ShardLayout,
}

/// A store whose writer died: zarr.json in state running at extent 0, and the
/// temporary shard of row 0 with chunks `written` in their slots and their entries.
fn crashed(spec: ArraySpec, written: &[usize]) -> Store {
    crashed_in(spec, written, &SlotOrder::c())
}

/// [`crashed`], the slots laid out in `order`.
fn crashed_in(spec: ArraySpec, written: &[usize], order: &SlotOrder) -> Store {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    fs::create_dir_all(path.join(PARTIAL_DIR)).unwrap();
    let progress = Progress {
        state: State::Running,
        frames_committed: 0,
        frames_dropped: 0,
        error: None,
    };
    metadata::publish(&path, &array_json(&spec, 0, &progress)).unwrap();
    let layout = ShardLayout::new(&spec).unwrap();
    let f = File::create(path.join(PARTIAL_DIR).join("c.0.0.0.partial")).unwrap();
    f.set_len(layout.file_size).unwrap();
    let empty = entry_bytes(EMPTY, EMPTY).repeat(layout.n as usize);
    f.write_all_at(&empty, layout.index_offset).unwrap();
    for &i in written {
        let bytes = encoded(&spec, 0, i);
        let at = layout.slot_offset(order.position(i) as u64);
        f.write_all_at(&bytes, at).unwrap();
        set_entry(&path, &layout, i, at, bytes.len() as u64);
    }
    Store {
        _dir: dir,
        path,
        spec,
        layout,
    }
}

fn partial(path: &Path) -> PathBuf {
    path.join(PARTIAL_DIR).join("c.0.0.0.partial")
}

fn set_entry(path: &Path, layout: &ShardLayout, i: usize, offset: u64, nbytes: u64) {
    let f = OpenOptions::new().write(true).open(partial(path)).unwrap();
    f.write_all_at(
        &entry_bytes(offset, nbytes),
        layout.index_offset + 16 * i as u64,
    )
    .unwrap();
}

/// Decoded chunks of the finished shard `c/0/0/0` (None = empty).
fn read_back(s: &Store) -> Vec<Option<Vec<u8>>> {
    let data = fs::read(s.path.join("c/0/0/0")).unwrap();
    let size = s.layout.index_size as usize;
    let index = match s.spec.index_location {
        IndexLocation::End => &data[data.len() - size..],
        IndexLocation::Start => &data[..size],
    };
    let entries = parse_index(index, s.layout.n as usize).unwrap();
    entries
        .iter()
        .map(|e| {
            e.map(|(o, b)| {
                let mut c = &data[o as usize..(o + b) as usize];
                if s.spec.crc32c {
                    let (body, crc) = c.split_at(c.len() - 4);
                    assert_eq!(crc32c::crc32c(body).to_le_bytes(), crc);
                    c = body;
                }
                match s.spec.codec {
                    Codec::None => c.to_vec(),
                    Codec::Zstd { .. } => zstd::decompress(c, 512).unwrap(),
                    Codec::Blosc { .. } => blosc::decompress(c, 512).unwrap(),
                }
            })
        })
        .collect()
}

fn zarr_json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path.join("zarr.json")).unwrap()).unwrap()
}

#[test]
fn rebuilds_verified_chunks_and_rejects_damaged_entries() {
    for location in [IndexLocation::End, IndexLocation::Start] {
        // Frames 0 and 1 complete (chunks 0..8), frame 2 partly (8, 9, 10, 11).
        let s = crashed(
            spec(Codec::blosc_lz4(1), true, location),
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        );
        let l = s.layout;
        let f = OpenOptions::new()
            .write(true)
            .open(partial(&s.path))
            .unwrap();
        // Chunk 9: a flipped byte.
        f.write_all_at(&[0x5a], l.slot_offset(9) + 20).unwrap();
        // Chunk 10: the entry points past the end of the slots region.
        set_entry(&s.path, &l, 10, l.slot_offset(l.n) - 8, 40);
        // Chunk 11: torn entry, offset set and nbytes garbage.
        set_entry(&s.path, &l, 11, l.slot_offset(11), 0xdead_beef_dead_beef);
        // Chunk 12: torn the other way round (offset still empty).
        set_entry(&s.path, &l, 12, EMPTY, 77);
        // Closed first: on Windows a file open elsewhere is not removed until it closes.
        drop(f);

        let r = recover_store(&s.path).unwrap();
        assert_eq!(r.validation, Validation::Crc32c);
        assert_eq!(r.shards_recovered, 1);
        assert_eq!(r.chunks_kept, 9);
        assert_eq!(r.chunks_rejected, 4);
        let reasons: Vec<(usize, &RejectReason)> =
            r.rejected.iter().map(|c| (c.chunk, &c.reason)).collect();
        assert!(
            matches!(reasons[0], (9, RejectReason::Checksum { .. })),
            "{reasons:?}"
        );
        assert!(
            matches!(
                reasons[1],
                (
                    10,
                    RejectReason::OutOfBounds {
                        region: "the slots region",
                        ..
                    }
                )
            ),
            "{reasons:?}"
        );
        assert!(
            matches!(reasons[2], (11, RejectReason::OutOfBounds { .. })),
            "{reasons:?}"
        );
        assert!(
            matches!(reasons[3], (12, RejectReason::TornEntry { .. })),
            "{reasons:?}"
        );
        assert_eq!(r.frames_committed, 2);
        assert_eq!(r.frames_recovered, 2);
        assert_eq!(r.shape, vec![3, 16, 16], "chunk 8 of frame 2 exists");
        assert!(r.published);

        let got = read_back(&s);
        for (i, c) in got.iter().enumerate() {
            if i < 9 {
                assert_eq!(c.as_deref(), Some(&chunk_data(0, i)[..]), "chunk {i}");
            } else {
                assert!(c.is_none(), "chunk {i}");
            }
        }
        let doc = zarr_json(&s.path);
        assert_eq!(doc["shape"], json!([3, 16, 16]));
        assert_eq!(doc["attributes"]["zarrstream"]["state"], "recovered");
        assert_eq!(doc["attributes"]["zarrstream"]["frames_committed"], 2);
        assert_eq!(
            doc["attributes"]["zarrstream"]["recovery"]["previous_state"],
            "running"
        );
        assert!(!s.path.join(PARTIAL_DIR).exists());

        // Idempotent: nothing left to do.
        let again = recover_store(&s.path).unwrap();
        assert!(!again.published);
        assert!(again.shards.is_empty());
        assert_eq!(again.frames_committed, 2);
        assert_eq!(zarr_json(&s.path), doc);
    }
}

#[test]
fn without_crc32c_chunks_are_validated_by_decoding() {
    for codec in [
        Codec::blosc_lz4(1),
        Codec::zstd(1),
        Codec::none(),
        Codec::blosc_zstd(1).with_shuffle(crate::BloscShuffle::BitShuffle),
    ] {
        let s = crashed(spec(codec, false, IndexLocation::End), &[0, 1, 2, 3, 4, 5]);
        let l = s.layout;
        let f = OpenOptions::new()
            .write(true)
            .open(partial(&s.path))
            .unwrap();
        // Chunk 4 cut short: the entry claims fewer bytes than were written.
        let n4 = encoded(&s.spec, 0, 4).len() as u64;
        set_entry(&s.path, &l, 4, l.slot_offset(4), n4 - 3);
        // Chunk 5: header damaged (for codec none: wrong length).
        match codec {
            Codec::None => set_entry(&s.path, &l, 5, l.slot_offset(5), 100),
            _ => f.write_all_at(&[0x77], l.slot_offset(5)).unwrap(),
        }
        let r = recover_store(&s.path).unwrap();
        assert_eq!(r.validation, Validation::Decoding, "{codec:?}");
        assert_eq!(r.validation.describe(), "validated by decoding");
        assert_eq!(r.chunks_kept, 4, "{codec:?}: {:?}", r.rejected);
        assert_eq!(r.chunks_rejected, 2, "{codec:?}: {:?}", r.rejected);
        assert_eq!(r.frames_committed, 1);
        assert_eq!(r.shape[0], 1, "chunks 4 and 5 of frame 1 are gone");
        let got = read_back(&s);
        for (i, c) in got.iter().enumerate().take(4) {
            assert_eq!(c.as_deref(), Some(&chunk_data(0, i)[..]));
        }
        assert!(got[4..].iter().all(Option::is_none));
    }
}

/// A shard the finisher had compacted and cut (or was compacting) when it died, its
/// slots in C or Morton order. Recovery tells the order from the index (it is recorded
/// nowhere): a chunk moved by a Morton compaction is found where that compaction put
/// it, and the rebuilt shard keeps the order.
#[test]
fn recovers_a_shard_the_finisher_was_finishing() {
    let cases = [
        (Codec::zstd(1), ChunkOrder::C),
        (Codec::zstd(1), ChunkOrder::Morton),
    ];
    for (codec, chunk_order) in cases {
        for location in [IndexLocation::End, IndexLocation::Start] {
            for stage in ["moved", "indexed", "cut"] {
                finisher_died(codec, chunk_order, location, stage);
            }
        }
    }
}

fn finisher_died(codec: Codec, chunk_order: ChunkOrder, location: IndexLocation, stage: &str) {
    let what = format!("{codec} {chunk_order} {location:?} {stage}");
    {
        {
            let all: Vec<usize> = (0..16).collect();
            let order = SlotOrder::new(chunk_order, &spec(codec, true, location));
            let s = crashed_in(spec(codec, true, location), &all, &order);
            let l = s.layout;
            let path = partial(&s.path);
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let written: Vec<Option<(u64, u64)>> = (0..16)
                .map(|i| {
                    let at = l.slot_offset(order.position(i) as u64);
                    Some((at, encoded(&s.spec, 0, i).len() as u64))
                })
                .collect();
            let fin = plan(&l, &written, Packing::Compact, &order);
            for m in &fin.moves {
                let mut buf = vec![0u8; m.len as usize];
                f.read_exact_at(&mut buf, m.from).unwrap();
                f.write_all_at(&buf, m.to).unwrap();
            }
            if stage != "moved" {
                let mut idx = vec![0u8; l.index_size as usize];
                encode_index(&fin.entries, &mut idx);
                f.write_all_at(&idx, fin.index_at).unwrap();
            }
            if stage == "cut" {
                f.set_len(fin.len).unwrap();
            }
            drop(f);
            let r = recover_store(&s.path).unwrap();
            assert_eq!(r.chunks_kept, 16, "{what}: {:?}", r.rejected);
            assert_eq!(r.frames_committed, N_FRAMES);
            let got = read_back(&s);
            for (i, c) in got.iter().enumerate() {
                assert_eq!(
                    c.as_deref(),
                    Some(&chunk_data(0, i)[..]),
                    "{what}: chunk {i}"
                );
            }
            // The rebuilt shard keeps the writer's order.
            let data = fs::read(s.path.join("c/0/0/0")).unwrap();
            let size = l.index_size as usize;
            let index = match location {
                IndexLocation::End => &data[data.len() - size..],
                _ => &data[..size],
            };
            let entries = parse_index(index, 16).unwrap();
            let mut by_offset: Vec<u64> = (0..16).collect();
            by_offset.sort_by_key(|&i| entries[i as usize].unwrap().0);
            assert_eq!(by_offset, chunk_order.sequence(&s.spec), "{what}");
        }
    }
}

#[test]
fn counts_finished_shards_and_leaves_strangers_alone() {
    let s = crashed(
        spec(Codec::blosc_lz4(1), true, IndexLocation::End),
        &[0, 1, 2],
    );
    // A finished shard of row 1 with frames 4 and 5 complete, published at extent 0.
    let l = s.layout;
    let mut kept = vec![None; 16];
    let mut data = Vec::new();
    for (i, k) in kept.iter_mut().enumerate().take(8) {
        let b = encoded(&s.spec, 1, i);
        *k = Some((data.len() as u64, b.len() as u64));
        data.extend(b);
    }
    let mut idx = vec![0u8; l.index_size as usize];
    encode_index(&kept, &mut idx);
    data.extend(idx);
    fs::create_dir_all(s.path.join("c/1/0")).unwrap();
    fs::write(s.path.join("c/1/0/0"), &data).unwrap();
    // A damaged finished shard and an unrelated file.
    fs::create_dir_all(s.path.join("c/2/0")).unwrap();
    fs::write(s.path.join("c/2/0/0"), b"garbage").unwrap();
    fs::write(s.path.join(PARTIAL_DIR).join("notes.txt"), b"hi").unwrap();
    let r = recover_store(&s.path).unwrap();
    assert_eq!(r.frames_committed, 2, "frames 4 and 5");
    assert_eq!(r.frames_recovered, 0, "frame 0 lacks chunk 3");
    assert_eq!(r.shape[0], 6);
    assert_eq!(r.damaged_shards, vec!["c/2/0/0".to_string()]);
    assert_eq!(r.skipped_files, vec!["notes.txt".to_string()]);
    assert!(s.path.join(PARTIAL_DIR).join("notes.txt").exists());
    assert!(!partial(&s.path).exists());
}

#[test]
fn unreadable_partial_is_set_aside_and_empty_one_removed() {
    let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &[]);
    let r = recover_store(&s.path).unwrap();
    assert_eq!(r.shards[0].outcome, ShardOutcome::Empty);
    assert!(!s.path.join("c").exists());
    assert_eq!(r.shape[0], 0);
    assert!(r.published);

    // Killed while the preparer was creating the file: empty, or reserved with the
    // working index not yet initialised (zeros).
    for len in [
        0,
        ShardLayout::new(&spec(Codec::blosc_lz4(1), true, IndexLocation::End))
            .unwrap()
            .file_size,
    ] {
        let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &[]);
        let f = OpenOptions::new()
            .write(true)
            .open(partial(&s.path))
            .unwrap();
        f.set_len(0).unwrap();
        f.set_len(len).unwrap();
        drop(f);
        let r = recover_store(&s.path).unwrap();
        assert_eq!(r.shards[0].outcome, ShardOutcome::Empty, "length {len}");
        assert_eq!(r.chunks_rejected, 0, "length {len}: {:?}", r.rejected);
        assert!(!s.path.join(PARTIAL_DIR).exists(), "length {len}");
    }

    let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &[0]);
    OpenOptions::new()
        .write(true)
        .open(partial(&s.path))
        .unwrap()
        .set_len(100)
        .unwrap();
    let r = recover_store(&s.path).unwrap();
    assert_eq!(r.shards[0].outcome, ShardOutcome::Unrecoverable);
    assert_eq!(r.shards[0].index, IndexSource::None);
    assert!(
        s.path
            .join(PARTIAL_DIR)
            .join(format!("c.0.0.0.partial{UNRECOVERABLE_SUFFIX}"))
            .exists()
    );
}

#[test]
fn rejects_stores_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        recover_store(dir.path()),
        Err(RecoverError::Io { .. })
    ));
    fs::write(dir.path().join("zarr.json"), b"{\"zarr_format\": 2}").unwrap();
    assert!(matches!(
        recover_store(dir.path()),
        Err(RecoverError::Metadata { .. })
    ));
}

/// The writer's names and recovery's discovery agree: a temporary shard the sink
/// creates under the contract's name for a shard key (the writer's grid and preparer
/// build both with `store::shard_key` and `store::partial_file_name`) is what recovery
/// finds, and a `.creating` file left by a crash is cleared away.
#[test]
fn recovery_finds_what_the_writer_names() {
    let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &[]);
    fs::remove_file(partial(&s.path)).unwrap();
    let key = crate::store::shard_key([1, 0, 0]);
    let tmp = s.path.join(PARTIAL_DIR);
    let temp =
        crate::sink::TempShard::create(&tmp.join(partial_file_name(&key)), s.layout).unwrap();
    temp.keep();
    drop(temp);
    let creating = tmp
        .join(partial_file_name(&key))
        .with_extension(crate::store::CREATING_EXTENSION);
    fs::write(&creating, b"").unwrap();

    let r = recover_store(&s.path).unwrap();
    assert_eq!(r.shards.len(), 1, "{r:?}");
    assert_eq!(r.shards[0].key, "c/1/0/0");
    assert_eq!(r.shards[0].index, IndexSource::Working);
    assert_eq!(r.shards[0].outcome, ShardOutcome::Empty);
    assert!(r.skipped_files.is_empty(), "{:?}", r.skipped_files);
    assert!(!creating.exists());
}

/// A resumed writer's first temporary shard replaces the finished shard it started
/// from; a crash while it was carrying the finished chunks over leaves a temporary
/// shard with only some of them. Recovery keeps both.
#[test]
fn a_crashed_resume_keeps_the_finished_chunks_it_had_not_carried_over() {
    for location in [IndexLocation::End, IndexLocation::Start] {
        // The resumed writer got as far as frame 2's chunks (8..12) and chunk 0.
        let s = crashed(spec(Codec::zstd(1), true, location), &[0, 8, 9, 10, 11]);
        let l = s.layout;
        // The finished shard of the first session: frames 0 and 1 (chunks 0..8).
        let old: Vec<Option<(u64, u64)>> = (0..16)
            .map(|i| (i < 8).then(|| (0, encoded(&s.spec, 0, i).len() as u64)))
            .collect();
        let fin = plan(&l, &old, Packing::Compact, &SlotOrder::c());
        let mut data = vec![0u8; fin.len as usize];
        for (i, e) in fin.entries.iter().enumerate() {
            if let Some((at, n)) = e {
                data[*at as usize..(*at + *n) as usize].copy_from_slice(&encoded(&s.spec, 0, i));
            }
        }
        let mut idx = vec![0u8; l.index_size as usize];
        encode_index(&fin.entries, &mut idx);
        data[fin.index_at as usize..][..idx.len()].copy_from_slice(&idx);
        fs::create_dir_all(s.path.join("c/0/0")).unwrap();
        fs::write(s.path.join("c/0/0/0"), &data).unwrap();

        let r = recover_store(&s.path).unwrap();
        assert_eq!(r.chunks_kept, 12, "{location:?}: {:?}", r.rejected);
        let got = read_back(&s);
        for (i, c) in got.iter().enumerate() {
            let want = (i < 12).then(|| chunk_data(0, i));
            assert_eq!(c.as_deref(), want.as_deref(), "{location:?} chunk {i}");
        }
    }
}

#[test]
fn a_torn_entry_is_completed_from_the_chunk_itself() {
    for codec in [Codec::blosc_lz4(1), Codec::zstd(1), Codec::None] {
        let s = crashed(spec(codec, true, IndexLocation::End), &[0, 1, 2, 3, 4]);
        let l = s.layout;
        // Killed between storing the offset and the length (`store_entry`): chunk 3's
        // entry has its offset only. Chunk 4's likewise, but its bytes are damaged.
        set_entry(&s.path, &l, 3, l.slot_offset(3), EMPTY);
        set_entry(&s.path, &l, 4, l.slot_offset(4), EMPTY);
        let f = OpenOptions::new()
            .write(true)
            .open(partial(&s.path))
            .unwrap();
        f.write_all_at(&[0x5a], l.slot_offset(4) + 20).unwrap();

        let r = recover_store(&s.path).unwrap();
        assert_eq!((r.chunks_kept, r.chunks_rejected), (4, 1), "{codec:?}");
        assert_eq!(r.shards[0].chunks_from_torn_entries, 2, "{codec:?}");
        assert_eq!(r.rejected[0].chunk, 4, "{codec:?}");
        let got = read_back(&s);
        for (i, c) in got.iter().enumerate() {
            if i < 4 {
                assert_eq!(c.as_deref(), Some(&chunk_data(0, i)[..]), "{codec:?} {i}");
            } else {
                assert!(c.is_none(), "{codec:?} chunk {i}");
            }
        }
    }
}

#[test]
fn a_damaged_chunk_is_never_taken_from_another_chunks_place() {
    // An appended shard (the pwrite and direct sinks): chunks of equal length (`none`)
    // lie back to back in the order they completed, 1 before 0. Chunk 0 is damaged; the
    // place compaction would give it holds chunk 1, which passes its crc32c but is not
    // chunk 0.
    let s = crashed(spec(Codec::None, true, IndexLocation::End), &[]);
    let l = s.layout;
    let f = OpenOptions::new()
        .write(true)
        .open(partial(&s.path))
        .unwrap();
    let (c1, c0) = (encoded(&s.spec, 0, 1), encoded(&s.spec, 0, 0));
    let n = c0.len() as u64;
    assert_eq!(c1.len() as u64, n);
    f.write_all_at(&c1, 0).unwrap();
    f.write_all_at(&c0, n).unwrap();
    set_entry(&s.path, &l, 1, 0, n);
    set_entry(&s.path, &l, 0, n, n);
    f.write_all_at(&[0x5a], n + 20).unwrap();

    let r = recover_store(&s.path).unwrap();
    assert_eq!((r.chunks_kept, r.chunks_rejected), (1, 1));
    assert_eq!(r.shards[0].chunks_relocated, 0);
    let got = read_back(&s);
    assert!(
        got[0].is_none(),
        "chunk 0 is not taken from chunk 1's place"
    );
    assert_eq!(got[1].as_deref(), Some(&chunk_data(0, 1)[..]));
}

#[test]
fn a_final_index_after_the_working_index_is_read_and_a_cut_one_ignored() {
    let chunks: Vec<usize> = (0..16).collect();
    for extra in [None, Some(7u64)] {
        let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &chunks);
        let l = s.layout;
        let f = OpenOptions::new()
            .write(true)
            .open(partial(&s.path))
            .unwrap();
        match extra {
            // The finisher wrote the final index right after the working index.
            None => {
                let entries: Vec<Option<(u64, u64)>> = chunks
                    .iter()
                    .map(|&i| Some((l.slot_offset(i as u64), encoded(&s.spec, 0, i).len() as u64)))
                    .collect();
                let mut index = vec![0u8; l.index_size as usize];
                encode_index(&entries, &mut index);
                f.write_all_at(&index, l.file_size).unwrap();
            }
            // A kill cut that write short: the working index before it is whole.
            Some(n) => f
                .write_all_at(&vec![0xab; n as usize], l.file_size)
                .unwrap(),
        }
        let r = recover_store(&s.path).unwrap();
        assert_eq!((r.chunks_kept, r.chunks_rejected), (16, 0), "{extra:?}");
        let source = if extra.is_none() {
            IndexSource::Final
        } else {
            IndexSource::Working
        };
        assert_eq!(r.shards[0].index, source, "{extra:?}");
        let got = read_back(&s);
        for (i, c) in got.iter().enumerate() {
            assert_eq!(
                c.as_deref(),
                Some(&chunk_data(0, i)[..]),
                "{extra:?} chunk {i}"
            );
        }
    }
}
