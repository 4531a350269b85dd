//! The reader on hand-made shards: coordinates, entry and chunk checks, keys.

use std::path::{Path, PathBuf};

use super::*;
use crate::codec::{ChunkEncoder, Codec};
use crate::dtype::DataType;
use crate::read::index::EMPTY;
use crate::spec::{ArraySpec, IndexLocation};

/// A store of `[8, 64, 64]` u16, chunks `[1, 32, 32]`, shards `[4, 64, 64]` (16
/// chunks per shard), without files.
fn store(codec: Codec, crc32c: bool, location: IndexLocation) -> StoreReader {
    let spec = ArraySpec::builder()
        .shape([8, 64, 64])
        .chunk_shape([1, 32, 32])
        .shard_shape([4, 64, 64])
        .dtype(DataType::UInt16)
        .codec(codec)
        .crc32c(crc32c)
        .index_location(location)
        .build()
        .unwrap();
    StoreReader::for_tests(Path::new("/nonexistent"), spec)
}

fn shard(len: u64) -> Shard {
    Shard {
        key: "c/0/0/0".into(),
        coords: vec![0, 0, 0],
        path: PathBuf::from("/nonexistent/c/0/0/0"),
        len,
    }
}

fn encode(codec: Codec, crc32c: bool, data: &[u8]) -> Vec<u8> {
    let mut enc = ChunkEncoder::new(codec, 2, crate::Checksum::crc32c_if(crc32c)).unwrap();
    let mut out = vec![0u8; enc.slot_bound(data.len())];
    let n = enc.encode_slice(data, &mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn coordinates_and_grid() {
    let s = store(Codec::none(), true, IndexLocation::End);
    assert_eq!(s.chunks_per_shard(), vec![4, 2, 2]);
    assert_eq!(s.inner_coords(0), vec![0, 0, 0]);
    assert_eq!(s.inner_coords(7), vec![1, 1, 1]);
    assert_eq!(s.inner_coords(13), vec![3, 0, 1]);
    assert_eq!(s.shard_grid(), vec![2, 1, 1]);
    assert!(s.chunk_in_array(&[1, 0, 0], &[3, 1, 1]));
    assert!(!s.chunk_in_array(&[2, 0, 0], &[0, 0, 0]));
    assert_eq!(s.data_start(), 0);
    let start = store(Codec::none(), true, IndexLocation::Start);
    assert_eq!(start.data_start(), 16 * 16 + 4);
}

#[test]
fn entry_faults_name_each_bad_entry() {
    let s = store(Codec::none(), true, IndexLocation::End);
    let chunk = 32 * 32 * 2 + 4;
    let len = 4 * chunk + s.index_size();
    let mut entries = vec![None; 16];
    entries[0] = Some((0, chunk)); // fine
    entries[1] = Some((chunk, chunk)); // fine
    entries[2] = Some((chunk + 10, chunk)); // overlaps chunk 1
    entries[3] = Some((EMPTY, 5)); // torn
    entries[4] = Some((7, 0)); // zero bytes
    entries[5] = Some((0, chunk + 1)); // larger than the codec's bound
    entries[6] = Some((len - 10, 8)); // over the index
    entries[7] = Some((len - 2, 8)); // past the end
    let faults = s.entry_faults(&shard(len), &entries);
    let kinds: Vec<(usize, &str)> = faults
        .iter()
        .map(|(i, f)| {
            let k = match f {
                EntryFault::Overlaps { other, .. } => {
                    assert_eq!(other, &vec![0, 0, 1]);
                    "overlap"
                }
                EntryFault::Torn { .. } => "torn",
                EntryFault::Zero { .. } => "zero",
                EntryFault::TooLarge { .. } => "large",
                EntryFault::OverIndex { .. } => "index",
                EntryFault::PastEnd { .. } => "end",
            };
            (*i, k)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (2, "overlap"),
            (3, "torn"),
            (4, "zero"),
            (5, "large"),
            (6, "index"),
            (7, "end")
        ]
    );
    // An index at the start is overlapped by a chunk at offset 0.
    let start = store(Codec::none(), true, IndexLocation::Start);
    let f = start.entry_faults(&shard(len), &[Some((0, 8))]);
    assert!(
        matches!(f[..], [(0, EntryFault::OverIndex { .. })]),
        "{f:?}"
    );
}

#[test]
fn check_chunk_by_crc32c_and_by_decoding() {
    let data: Vec<u8> = (0..32 * 32 * 2).map(|i| (i / 7) as u8).collect();
    for codec in [
        Codec::none(),
        Codec::zstd(1),
        Codec::blosc_lz4(1),
        Codec::blosc_zstd(1),
        Codec::blosc_zstd(3).with_shuffle(crate::BloscShuffle::BitShuffle),
    ] {
        let s = store(codec, true, IndexLocation::End);
        let mut bytes = encode(codec, true, &data);
        assert_eq!(s.check_chunk(&bytes, false), Ok(CheckedBy::Crc32c));
        assert_eq!(s.check_chunk(&bytes, true), Ok(CheckedBy::Crc32cAndDecode));
        bytes[3] ^= 1;
        assert!(matches!(
            s.check_chunk(&bytes, false),
            Err(ChunkFault::Checksum { .. })
        ));
        assert!(matches!(
            s.check_chunk(&bytes[..4], false),
            Err(ChunkFault::TooShort { nbytes: 4 })
        ));

        let s = store(codec, false, IndexLocation::End);
        let bytes = encode(codec, false, &data);
        assert_eq!(
            s.check_chunk(&bytes, false),
            Ok(CheckedBy::Decode),
            "{codec:?}"
        );
        let short = &bytes[..bytes.len() - 1];
        assert!(s.check_chunk(short, false).is_err(), "{codec:?} cut");
    }
    // A frame of the wrong size: one decoding to half a chunk.
    let s = store(Codec::zstd(1), false, IndexLocation::End);
    let half = encode(Codec::zstd(1), false, &data[..data.len() / 2]);
    assert!(matches!(
        s.check_chunk(&half, false),
        Err(ChunkFault::WrongSize { got: 1024, .. })
    ));
}

#[test]
fn gap_bytes_count_what_is_neither_chunk_nor_index() {
    let s = store(Codec::none(), true, IndexLocation::End);
    let entries = [Some((0, 100)), None, Some((4096, 50))];
    let len = 4096 + 50 + s.index_size();
    assert_eq!(s.gap_bytes(&shard(len), &entries), 4096 - 100);
    assert_eq!(s.gap_bytes(&shard(3), &entries), 0);
}

#[test]
fn shard_keys_resolve_to_files() {
    let dir = tempfile::tempdir().unwrap();
    let spec = store(Codec::none(), true, IndexLocation::End)
        .spec()
        .clone();
    let s = StoreReader::for_tests(dir.path(), spec);
    std::fs::create_dir_all(dir.path().join("c/1/0")).unwrap();
    std::fs::write(dir.path().join("c/1/0/0"), b"x").unwrap();
    std::fs::write(dir.path().join("c/1/0/.0.compact-tmp"), b"x").unwrap();
    assert_eq!(s.shards().unwrap().len(), 1);
    for key in ["c/1/0/0", "1/0/0", "/c/1/0/0/"] {
        assert_eq!(s.shard(key).unwrap().coords, vec![1, 0, 0], "{key}");
    }
    for key in ["c/0/0/0", "c/1/0", "c/1/0/0/0", "c/a/0/0", ""] {
        assert!(
            matches!(s.shard(key), Err(StoreError::NoSuchShard { .. })),
            "{key}"
        );
    }
}
