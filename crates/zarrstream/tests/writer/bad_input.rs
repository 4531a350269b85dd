//! Bad input and misuse: each is refused with its specific
//! error variant, carrying the path, frame index or field; nothing panics; and the store
//! still reads back correctly after the bad call (checked with `zarrs` through
//! `common::verify`, or by comparing what is on disk before and after).
//!
//! The read-only filesystem cases run in a child process in a private mount namespace
//! (see `support_fs`), because root ignores permission bits.

// Linux only: read-only and missing-parent cases use mount namespaces, symlinks and errno
// values; the Windows build's error paths are exercised by the C API's errors.c under Wine.
#![cfg(target_os = "linux")]

use crate::common;
use crate::support_fs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Case, Recorded, frame, record_while, run, run_while, verify};
use zarrstream::{
    ArraySpec, ArraySpecBuilder, Backpressure, BloscCompressor, BloscShuffle, Codec, DataType,
    Durability, Error, SinkChoice, SpecError, Writer, WriterOptions,
};

const ENTRY: &str = "bad_input::scenario_entry";

/// The entry point of the child processes; a no-op in the parent.
#[test]
fn scenario_entry() {
    let Some(s) = support_fs::scenario() else {
        return;
    };
    match s.as_str() {
        "read-only-tmpfs" => read_only_tmpfs(),
        "read-only-bind" => read_only_bind(),
        _ => panic!("unknown scenario {s}"),
    }
}

/// Every file under `p` with its bytes (directories as empty entries ending in `/`).
fn snapshot(p: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if p.is_file() {
        out.insert(String::new(), std::fs::read(p).unwrap());
        return out;
    }
    for rel in support_fs::listing(p) {
        let bytes = if rel.ends_with('/') {
            Vec::new()
        } else {
            std::fs::read(p.join(&rel)).unwrap()
        };
        out.insert(rel, bytes);
    }
    out
}

/// A small shallow-chunk case: 40×56 u16 frames (edge chunks on both axes), 3-frame
/// shards of two shard columns.
fn small(name: &'static str) -> Case {
    Case {
        threads: 2,
        ..Case::new(name, &[0, 40, 56], &[1, 16, 16], &[3, 32, 32], 0)
    }
}

/// Pushes frames `0..frames` of `case` (calling `bad(writer, k)` before frame `k`, which
/// must leave the writer usable), then finishes or drops the writer per `case.finish`,
/// and runs every check of `common::verify` on the store.
fn record_with(
    case: &Case,
    path: &Path,
    frames: u64,
    mut bad: impl FnMut(&mut Writer, u64),
) -> Recorded {
    record_with_options(case, path, frames, case.options(), &mut bad)
}

/// [`record_with`] with other options than `case.options()` (e.g. `overwrite`).
fn record_with_options(
    case: &Case,
    path: &Path,
    frames: u64,
    options: WriterOptions,
    bad: &mut dyn FnMut(&mut Writer, u64),
) -> Recorded {
    let mut w = Writer::create(path, case.spec::<u16>(), options).unwrap();
    let n = case.plane();
    let mut accepted = Vec::new();
    for k in 0..frames {
        bad(&mut w, k);
        assert_eq!(w.frames_pushed(), k, "a refused frame is not counted");
        accepted.push(w.push(&frame::<u16>(k, n)).unwrap().is_accepted());
    }
    let stats = if case.finish {
        Some(w.finish().unwrap())
    } else {
        drop(w);
        None
    };
    let rec = Recorded { stats, accepted };
    verify::<u16>(case, path, &rec);
    rec
}

// ---------------------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------------------

#[test]
fn frame_of_the_wrong_length_is_refused_with_its_index() {
    for finish in [true, false] {
        let case = Case {
            finish,
            ..small(if finish {
                "wrong_length_finish"
            } else {
                "wrong_length_drop"
            })
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zarr");
        let n = case.plane();
        let expected = n * 2;
        record_with(&case, &path, 7, |w, k| {
            if k % 3 != 1 {
                return;
            }
            // One element short, one too many, empty, and an odd byte count.
            let short = vec![1u16; n - 1];
            let long = vec![1u16; n + 1];
            for (what, r, got) in [
                ("short", w.push(&short), expected - 2),
                ("long", w.push_at(&long, Instant::now()), expected + 2),
                ("empty", w.push::<u16>(&[]), 0),
                (
                    "odd bytes",
                    w.push_bytes(&vec![0u8; expected + 1], Instant::now()),
                    expected + 1,
                ),
            ] {
                match r {
                    Err(
                        ref e @ Error::FrameSize {
                            frame,
                            expected: want,
                            got: have,
                        },
                    ) => {
                        assert_eq!((frame, want, have), (k, expected, got), "{what}");
                        assert_eq!(
                            e.to_string(),
                            format!("frame {k}: expected {expected} bytes, got {got}"),
                            "{what}"
                        );
                    }
                    other => panic!("{what} frame {k}: want FrameSize, got {other:?}"),
                }
            }
        });
    }
}

#[test]
fn frame_of_the_wrong_element_type_is_refused() {
    let case = small("wrong_type");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let n = case.plane();
    record_with(&case, &path, 5, |w, k| {
        if k != 2 {
            return;
        }
        // Same byte length as a u16 frame, other element types.
        let bytes = vec![7u8; n * 2];
        let signed = vec![-1i16; n];
        let half_floats = vec![0.5f32; n / 2];
        for (r, got) in [
            (w.push(&bytes), DataType::UInt8),
            (w.push(&signed), DataType::Int16),
            (w.push(&half_floats), DataType::Float32),
        ] {
            match r {
                Err(
                    ref e @ Error::DataType {
                        frame,
                        expected,
                        got: have,
                    },
                ) => {
                    assert_eq!((frame, expected, have), (2, DataType::UInt16, got));
                    let msg = e.to_string();
                    assert!(
                        msg.contains("frame 2")
                            && msg.contains("uint16")
                            && msg.contains(got.zarr_name()),
                        "{msg}"
                    );
                }
                other => panic!("{got} frame: want DataType, got {other:?}"),
            }
        }
    });
}

// ---------------------------------------------------------------------------------------
// A closed writer
// ---------------------------------------------------------------------------------------

/// `.zarrstream-partial` vanishes while recording (someone deletes it): the next shard
/// set cannot be created, the frame that needs it is refused with `Error::Io` naming the
/// file, and from then on the writer is closed: every call returns `Error::Closed`, and
/// the published rows stay valid.
#[test]
fn push_after_a_failure_is_closed() {
    for sink in [SinkChoice::Pwrite, SinkChoice::Mmap] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zarr");
        let case = Case {
            sink,
            threads: 1,
            durability: Durability::None,
            ..Case::new("closed", &[0, 64, 64], &[1, 32, 32], &[2, 64, 64], 0)
        };
        let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
        let n = case.plane();
        for k in 0..2 {
            assert!(w.push(&frame::<u16>(k, n)).unwrap().is_accepted());
        }
        // Row 0 is complete; wait for it to be published.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !path.join("c/0/0/0").exists() || shape0(&path) < 2 {
            assert!(Instant::now() < deadline, "row 0 was not published");
            std::thread::sleep(Duration::from_millis(2));
        }
        std::fs::remove_dir_all(path.join(".zarrstream-partial")).unwrap();
        // Set 1 was prepared before the removal; set 2 cannot be created.
        for k in 2..4 {
            assert!(w.push(&frame::<u16>(k, n)).unwrap().is_accepted());
        }
        let e = w.push(&frame::<u16>(4, n)).unwrap_err();
        let Error::Io { op, path: file, .. } = &e else {
            panic!("want Error::Io, got {e:?}");
        };
        // The first operation on the vanished directory fails: the free-space check
        // before the reservation or the creation of set 2 (the preparer), or, when the
        // finisher gets there first, the rename of set 1's temporary shard into `c/`.
        assert!(matches!(*op, "statvfs" | "create" | "rename"), "{e}");
        if *op == "rename" {
            assert!(file.starts_with(path.join("c")), "{e}");
        } else {
            // The temporary file of shard c/2/0/0 or its directory (the exact name is
            // the preparer's business).
            assert!(file.starts_with(path.join(".zarrstream-partial")), "{e}");
        }
        assert!(e.to_string().contains(&file.display().to_string()), "{e}");
        assert_eq!(w.frames_pushed(), 4);

        let f = frame::<u16>(4, n);
        assert!(matches!(w.push(&f), Err(Error::Closed)));
        assert!(matches!(
            w.push_bytes(bytemuck::cast_slice(&f), Instant::now()),
            Err(Error::Closed)
        ));
        assert!(matches!(w.buffer(), Err(Error::Closed)));
        assert!(matches!(w.skip(), Err(Error::Closed)));
        assert!(matches!(w.push(&[0u8; 3]), Err(Error::Closed)));
        assert_eq!(Error::Closed.to_string(), "the writer is closed");
        assert!(matches!(w.finish(), Err(Error::Closed)));

        // The published row reads back; the metadata records the abort and why.
        let doc = metadata(&path);
        let ours = &doc["attributes"]["zarrstream"];
        assert_eq!(ours["state"], "aborted", "{ours}");
        // The error text, possibly followed by a hint about `zarrstream recover`.
        let text = ours["error"].as_str().unwrap_or_default();
        assert!(text.starts_with(&e.to_string()), "{text}");
        let published = doc["shape"][0].as_u64().unwrap();
        assert!(
            (2..=4).contains(&published) && published.is_multiple_of(2),
            "shape[0] {published}"
        );
        assert_eq!(ours["frames_committed"], published);
        let m = common::Model::new(&case, &vec![true; published as usize]);
        common::check_read::<u16>(&m, &path);
    }
}

fn metadata(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path.join("zarr.json")).unwrap()).unwrap()
}

fn shape0(path: &Path) -> u64 {
    std::fs::read(path.join("zarr.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|d| d["shape"][0].as_u64())
        .unwrap_or(0)
}

/// Dropping a writer without `finish` finishes it (documented on `Writer`): every frame
/// accepted is written, `zarr.json` says "finished", nothing temporary is left.
#[test]
fn drop_without_finish_finishes() {
    // Mid-shard (5 frames, shards of 3), every sink; the direct sink needs 64 KiB chunks.
    for sink in [SinkChoice::Mmap, SinkChoice::Pwrite] {
        run::<u16>(&Case {
            sink,
            finish: false,
            frames: 5,
            ..small("drop_mid_shard")
        });
    }
    run::<u16>(&Case {
        sink: SinkChoice::Direct,
        finish: false,
        threads: 2,
        ..Case::new(
            "drop_mid_shard_direct",
            &[0, 256, 512],
            &[1, 128, 256],
            &[3, 256, 512],
            5,
        )
    });
    // Deep chunks: a staged, incomplete chunk group must be flushed by the drop.
    run::<u16>(&Case {
        finish: false,
        durability: Durability::Shard,
        ..Case::new(
            "drop_mid_deep_chunk",
            &[0, 2, 40, 40],
            &[3, 1, 16, 16],
            &[6, 2, 32, 32],
            11,
        )
    });
    // Right after a refused frame.
    let dir = tempfile::tempdir().unwrap();
    let case = Case {
        finish: false,
        ..small("drop_after_bad_frame")
    };
    record_with(&case, &dir.path().join("a.zarr"), 4, |w, k| {
        if k == 3 {
            assert!(matches!(w.push(&[0u16; 3]), Err(Error::FrameSize { .. })));
        }
    });
}

// ---------------------------------------------------------------------------------------
// The store path
// ---------------------------------------------------------------------------------------

fn exists_error(path: &Path, options: WriterOptions) {
    let spec = small("exists").spec::<u16>();
    match Writer::create(path, spec, options) {
        Err(ref e @ Error::Exists { path: ref p }) => {
            assert_eq!(p, path);
            assert_eq!(
                e.to_string(),
                format!(
                    "{}: already exists (set overwrite to replace it)",
                    path.display()
                )
            );
        }
        Err(e) => panic!("{}: want Exists, got {e:?}", path.display()),
        Ok(_) => panic!("{}: create succeeded over an existing path", path.display()),
    }
}

#[test]
fn existing_store_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let case = small("existing_store");
    let rec = record_while::<u16>(&case, &path, |k, _, _| k < 5);
    verify::<u16>(&case, &path, &rec);
    let before = snapshot(&path);
    exists_error(&path, WriterOptions::default());
    assert_eq!(snapshot(&path), before, "the existing store was changed");
    verify::<u16>(&case, &path, &rec);

    // With overwrite it is replaced (a different, shorter recording).
    let case = Case {
        sink: SinkChoice::Pwrite,
        ..small("overwritten_store")
    };
    let options = case.options().overwrite(true);
    record_with_options(&case, &path, 2, options, &mut |_, _| {});
}

#[test]
fn empty_directory_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.zarr");
    std::fs::create_dir(&path).unwrap();
    exists_error(&path, WriterOptions::default());
    assert!(path.is_dir() && support_fs::listing(&path).is_empty());
}

#[test]
fn regular_file_at_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    std::fs::write(&path, b"not a store").unwrap();
    exists_error(&path, WriterOptions::default());
    assert_eq!(std::fs::read(&path).unwrap(), b"not a store");

    // With overwrite the file is replaced by the store.
    let case = small("file_replaced");
    let options = case.options().overwrite(true);
    record_with_options(&case, &path, 4, options, &mut |_, _| {});
    assert!(path.is_dir());
}

/// A symbolic link at the path is refused; with overwrite the link is replaced, and what
/// it pointed to is left alone.
#[test]
fn symbolic_link_at_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), b"precious").unwrap();
    let path = dir.path().join("a.zarr");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    exists_error(&path, WriterOptions::default());
    let case = small("symlink_replaced");
    let options = case.options().overwrite(true);
    record_with_options(&case, &path, 3, options, &mut |_, _| {});
    assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    assert_eq!(std::fs::read(target.join("keep")).unwrap(), b"precious");
    assert_eq!(support_fs::listing(&target), ["keep"]);
}

fn io_error(path: &Path, options: WriterOptions, want_op: &str) -> Error {
    let spec = small("io").spec::<u16>();
    match Writer::create(path, spec, options) {
        Err(e @ Error::Io { .. }) => {
            let Error::Io { op, path: p, .. } = &e else {
                unreachable!()
            };
            assert_eq!(*op, want_op, "{e}");
            assert_eq!(p, path, "{e}");
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("{want_op} {}: ", path.display())),
                "{msg}"
            );
            e
        }
        Err(e) => panic!("{}: want Error::Io, got {e:?}", path.display()),
        Ok(_) => panic!("{}: create succeeded", path.display()),
    }
}

/// Places where no directory can be made, without privileges: under /proc and /sys, and
/// below a regular file.
#[test]
fn store_path_that_cannot_be_created() {
    for parent in ["/proc", "/sys"] {
        let path =
            PathBuf::from(parent).join(format!("zarrstream-bad-input-{}", std::process::id()));
        let path = path.join("a.zarr");
        let e = io_error(&path, WriterOptions::default(), "create directory");
        println!("{e}");
        assert!(!path.exists());
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let path = file.join("a.zarr");
    let e = io_error(&path, WriterOptions::default(), "stat");
    println!("{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// Root ignores permission bits (chmod 0555 stops nobody here), so the unwritable
/// directory is a read-only filesystem: a tmpfs remounted read-only, and a read-only bind
/// mount, each in a child process with its own mount namespace.
#[test]
fn read_only_filesystem() {
    support_fs::run_child(ENTRY, "read-only-tmpfs", Duration::from_secs(60));
}

#[test]
fn read_only_bind_mount() {
    support_fs::run_child(ENTRY, "read-only-bind", Duration::from_secs(60));
}

/// In the child: what a read-only directory `ro` (holding a file `existing` and an
/// existing store `store.zarr`) refuses, and that it stays unchanged.
fn check_read_only(ro: &Path) {
    let before = snapshot(ro);
    let path = ro.join("a.zarr");
    let e = io_error(&path, WriterOptions::default(), "create directory");
    println!("REPORT {e}");
    let Error::Io { source, .. } = &e else {
        unreachable!()
    };
    assert_eq!(source.raw_os_error(), Some(libc::EROFS), "{e}");
    // Existing paths: Exists without overwrite; with overwrite the removal fails.
    exists_error(&ro.join("existing"), WriterOptions::default());
    let overwrite = WriterOptions::default().overwrite(true);
    let e = io_error(&ro.join("existing"), overwrite.clone(), "remove");
    println!("REPORT {e}");
    let e = io_error(&ro.join("store.zarr"), overwrite, "remove");
    println!("REPORT {e}");
    assert_eq!(snapshot(ro), before, "the read-only directory changed");
    // The existing store still reads back.
    let case = small("read_only_store");
    let m = common::Model::new(&case, &[true; 4]);
    common::check_read::<u16>(&m, &ro.join("store.zarr"));
}

/// Makes `dir/existing` and a 4-frame store `dir/store.zarr`.
fn populate(dir: &Path) {
    std::fs::write(dir.join("existing"), b"keep me").unwrap();
    let case = small("read_only_store");
    let rec = record_while::<u16>(&case, &dir.join("store.zarr"), |k, _, _| k < 4);
    verify::<u16>(&case, &dir.join("store.zarr"), &rec);
}

fn read_only_tmpfs() {
    let ro = support_fs::dir().join("ro");
    support_fs::mount_tmpfs(&ro, "size=8m");
    populate(&ro);
    support_fs::remount_read_only(&ro);
    check_read_only(&ro);
    support_fs::unmount(&ro);
}

fn read_only_bind() {
    let base = support_fs::dir();
    let rw = base.join("rw");
    support_fs::mount_tmpfs(&rw, "size=8m");
    populate(&rw);
    let ro = base.join("ro");
    support_fs::bind_read_only(&rw, &ro);
    check_read_only(&ro);
    support_fs::unmount(&ro);
    support_fs::unmount(&rw);
}

// ---------------------------------------------------------------------------------------
// Invalid specifications
// ---------------------------------------------------------------------------------------

/// The caller's usual path: build the spec and create the writer in one `Result`
/// function, so a `SpecError` arrives as `Error::Spec`.
fn open(path: &Path, b: ArraySpecBuilder) -> zarrstream::Result<Writer> {
    let spec = b.build()?;
    Writer::create(path, spec, WriterOptions::default())
}

#[test]
fn invalid_specs_are_spec_errors() {
    use SpecError::*;
    let base = || {
        ArraySpec::builder()
            .shape([0, 64, 64])
            .chunk_shape([1, 32, 32])
            .shard_shape([4, 64, 64])
    };
    let cases: Vec<(ArraySpecBuilder, SpecError, &str)> = vec![
        (
            ArraySpec::builder()
                .shape([4])
                .chunk_shape([4])
                .shard_shape([4]),
            RankTooSmall(1),
            "rank 1 is too small",
        ),
        (
            // A single frame (rank 2) has no append axis to leave unbounded.
            ArraySpec::builder()
                .shape([0, 4])
                .chunk_shape([1, 4])
                .shard_shape([1, 4]),
            ZeroExtent { axis: 0 },
            "axis 0 has size 0",
        ),
        (
            ArraySpec::builder()
                .shape([1u64; 32])
                .chunk_shape([1u64; 32])
                .shard_shape([1u64; 32]),
            RankTooLarge(32),
            "rank 32 is too large",
        ),
        (
            ArraySpec::builder()
                .chunk_shape([1, 1, 1])
                .shard_shape([1, 1, 1]),
            Missing("shape"),
            "shape was not set",
        ),
        (
            ArraySpec::builder().shape([0, 1, 1]).shard_shape([1, 1, 1]),
            Missing("chunk_shape"),
            "chunk_shape was not set",
        ),
        (
            ArraySpec::builder().shape([0, 1, 1]).chunk_shape([1, 1, 1]),
            Missing("shard_shape"),
            "shard_shape was not set",
        ),
        (
            base().chunk_shape([1, 32]),
            RankMismatch {
                what: "chunk_shape",
                got: 2,
                rank: 3,
            },
            "chunk_shape has 2 entries but the array has rank 3",
        ),
        (
            base().shard_shape([4, 64, 64, 1]),
            RankMismatch {
                what: "shard_shape",
                got: 4,
                rank: 3,
            },
            "shard_shape has 4 entries",
        ),
        (
            base().dimension_names(["t", "y"]),
            RankMismatch {
                what: "dimension_names",
                got: 2,
                rank: 3,
            },
            "dimension_names has 2 entries",
        ),
        (
            base().dimension_names(["t", "y", "t"]),
            DuplicateDimensionName("t".into()),
            "dimension name \"t\" is used twice",
        ),
        (
            base().shape([0, 64, 0]),
            ZeroExtent { axis: 2 },
            "axis 2 has size 0",
        ),
        (
            base().chunk_shape([0, 32, 32]),
            ZeroChunk {
                what: "chunk_shape",
                axis: 0,
            },
            "chunk_shape is 0 on axis 0",
        ),
        (
            base().shard_shape([4, 0, 64]),
            ZeroChunk {
                what: "shard_shape",
                axis: 1,
            },
            "shard_shape is 0 on axis 1",
        ),
        (
            base().chunk_shape([1, 32, 24]),
            ChunkNotDividingShard {
                axis: 2,
                chunk: 24,
                shard: 64,
            },
            "inner chunk 24 does not divide shard 64 on axis 2",
        ),
        (
            base()
                .chunk_shape([1, 1, 1])
                .shard_shape([1 << 10, 1 << 10, 1 << 11]),
            TooManyChunksPerShard(1 << 31),
            "2147483648 inner chunks",
        ),
        (
            base().shape([0, u64::MAX, 2]),
            Overflow("frame size"),
            "frame size overflows",
        ),
        (
            base()
                .shape([0, 1 << 40, 1 << 20, 1 << 10])
                .chunk_shape([1, 1, 32, 32])
                .shard_shape([1, 1, 64, 64]),
            Overflow("array size"),
            "array size overflows",
        ),
        (
            base().codec(Codec::zstd(23)),
            LevelOutOfRange {
                codec: "zstd",
                level: 23,
                min: -131072,
                max: 22,
            },
            "zstd level 23 is out of range -131072..=22",
        ),
        (
            base().codec(Codec::zstd(-131073)),
            LevelOutOfRange {
                codec: "zstd",
                level: -131073,
                min: -131072,
                max: 22,
            },
            "zstd level -131073",
        ),
        (
            base().codec(Codec::blosc_lz4(10)),
            LevelOutOfRange {
                codec: "blosc",
                level: 10,
                min: 0,
                max: 9,
            },
            "blosc level 10 is out of range 0..=9",
        ),
        (
            base().codec(Codec::blosc_zstd(10)),
            LevelOutOfRange {
                codec: "blosc",
                level: 10,
                min: 0,
                max: 9,
            },
            "blosc level 10 is out of range 0..=9",
        ),
        // A byte shuffle of 1-byte elements does nothing: asked for explicitly, it is
        // refused (the default shuffle, and bit shuffle, are fine).
        (
            base()
                .dtype(DataType::UInt8)
                .codec(Codec::blosc_zstd(3).with_shuffle(BloscShuffle::Shuffle)),
            ShuffleDoesNotFit {
                compressor: BloscCompressor::Zstd,
                shuffle: BloscShuffle::Shuffle,
                dtype: DataType::UInt8,
            },
            "blosc-zstd with shuffle does not fit uint8: byte shuffle needs elements of 2 bytes",
        ),
        (
            base()
                .dtype(DataType::UInt8)
                .codec(Codec::blosc_lz4(1).with_shuffle(BloscShuffle::Shuffle)),
            ShuffleDoesNotFit {
                compressor: BloscCompressor::Lz4,
                shuffle: BloscShuffle::Shuffle,
                dtype: DataType::UInt8,
            },
            "blosc-lz4 with shuffle does not fit uint8",
        ),
        (
            base()
                .shape([0, 1 << 15, 1 << 15])
                .chunk_shape([1, 1 << 15, 1 << 15])
                .shard_shape([1, 1 << 15, 1 << 15]),
            ChunkTooLargeForBlosc(1 << 31),
            "an inner chunk of 2147483648 bytes is too large for the blosc codec",
        ),
        (
            base().fill_value(70000.0),
            FillValue {
                value: 70000.0,
                dtype: DataType::UInt16,
            },
            "fill value 70000 is not representable as uint16",
        ),
        (
            base().dtype(DataType::UInt8).fill_value(-1.0),
            FillValue {
                value: -1.0,
                dtype: DataType::UInt8,
            },
            "as uint8",
        ),
        (
            base().fill_value(1.5),
            FillValue {
                value: 1.5,
                dtype: DataType::UInt16,
            },
            "fill value 1.5",
        ),
        (
            base().dtype(DataType::Int16).fill_value(40000.0),
            FillValue {
                value: 40000.0,
                dtype: DataType::Int16,
            },
            "as int16",
        ),
        (
            base().dtype(DataType::Float32).fill_value(1e39),
            FillValue {
                value: 1e39,
                dtype: DataType::Float32,
            },
            "as float32",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, (b, want, text)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("{i}.zarr"));
        match open(&path, b) {
            Err(ref e @ Error::Spec(ref got)) => {
                assert_eq!(got, &want);
                let msg = e.to_string();
                assert!(
                    msg.starts_with("invalid array specification: ") && msg.contains(text),
                    "{msg:?} should contain {text:?}"
                );
            }
            Err(e) => panic!("{want:?}: want Error::Spec, got {e:?}"),
            Ok(_) => panic!("{want:?}: accepted"),
        }
        assert!(!path.exists(), "{want:?}: something was written");
    }
    // NaN is not an integer fill value either.
    let e = base().fill_value(f64::NAN).build().unwrap_err();
    assert!(
        matches!(e, FillValue { value, dtype: DataType::UInt16 } if value.is_nan()),
        "{e:?}"
    );
    // Codec parameters given as text are checked too.
    for bad in [
        "zstd:x",
        "lz4:-1",
        "lz4:300",
        "none:1",
        "gzip",
        "",
        "blosc-zstd:1:bits",
        "blosc-zstd::shuffle",
        "blosc-zstd:1:",
        "blosc-gzip:1",
    ] {
        assert_eq!(bad.parse::<Codec>().ok(), None, "{bad:?}");
    }
    // The text form of a shuffle that does not fit parses, and the spec refuses it.
    let e = open(
        &dir.path().join("parsed-shuffle.zarr"),
        base()
            .dtype(DataType::UInt8)
            .codec("blosc-zstd:1:shuffle".parse::<Codec>().unwrap()),
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            Error::Spec(ShuffleDoesNotFit {
                shuffle: BloscShuffle::Shuffle,
                dtype: DataType::UInt8,
                ..
            })
        ),
        "{e:?}"
    );
    // The shuffles that do fit 1-byte elements are accepted.
    for text in [
        "blosc-zstd:1:bitshuffle",
        "blosc-zstd:1:noshuffle",
        "blosc-zstd:1",
    ] {
        let codec = text.parse::<Codec>().unwrap();
        let spec = base().dtype(DataType::UInt8).codec(codec).build();
        assert!(spec.is_ok(), "{text}: {spec:?}");
    }
    let e = open(
        &dir.path().join("parsed.zarr"),
        base().codec("lz4:12".parse::<Codec>().unwrap()),
    )
    .err()
    .unwrap();
    assert!(
        matches!(e, Error::Spec(LevelOutOfRange { level: 12, .. })),
        "{e:?}"
    );
}

// ---------------------------------------------------------------------------------------
// A bounded array
// ---------------------------------------------------------------------------------------

/// Past the end of a bounded append axis every push is refused with `ArrayFull`, the
/// writer stays usable, and `finish` publishes exactly the array.
#[test]
fn bounded_array_pushed_past_its_end() {
    for (name, shape, cap) in [
        ("bounded_3d", vec![6u64, 40, 40], 6u64),
        ("bounded_4d", vec![2, 3, 40, 40], 6),
        ("bounded_3d_shard_multiple", vec![8, 40, 40], 8),
    ] {
        let r = shape.len();
        let mut chunk = vec![1u64; r];
        let mut shard = vec![1u64; r];
        chunk[0] = 1;
        shard[0] = 4;
        if r == 4 {
            shard[1] = 3;
        }
        chunk[r - 2..].copy_from_slice(&[16, 16]);
        shard[r - 2..].copy_from_slice(&[32, 32]);
        let case = Case::new(name, &shape, &chunk, &shard, 0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zarr");
        let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
        let n = case.plane();
        for k in 0..cap {
            assert!(w.push(&frame::<u16>(k, n)).unwrap().is_accepted());
        }
        for attempt in 0..3 {
            let f = frame::<u16>(cap + attempt, n);
            let results = [
                w.push(&f),
                w.push_bytes(bytemuck::cast_slice(&f), Instant::now()),
                match w.buffer().unwrap() {
                    Some(mut b) => {
                        b.copy_from_slice(bytemuck::cast_slice(&f));
                        w.push_buffer(b, Instant::now())
                    }
                    None => panic!("[{name}] no free buffer under Block"),
                },
            ];
            for r in results {
                match r {
                    Err(ref e @ Error::ArrayFull { frames }) => {
                        assert_eq!(frames, cap, "[{name}]");
                        assert_eq!(
                            e.to_string(),
                            format!("the array is full: it holds {cap} frames")
                        );
                    }
                    other => panic!("[{name}] push past the end: want ArrayFull, got {other:?}"),
                }
            }
        }
        assert_eq!(w.frames_pushed(), cap, "[{name}]");
        let stats = w.finish().unwrap();
        let rec = Recorded {
            stats: Some(stats),
            accepted: vec![true; cap as usize],
        };
        verify::<u16>(&case, &path, &rec);
    }
}

/// `skip()` (a frame the camera lost) past the end of a bounded array is refused like a
/// push, and the array is still finished normally.
#[test]
fn bounded_array_skipped_past_its_end() {
    for (name, shape) in [("skip_end_6", [6u64, 40, 40]), ("skip_end_8", [8, 40, 40])] {
        let case = Case::new(name, &shape, &[1, 16, 16], &[4, 32, 32], 0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zarr");
        let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
        let cap = shape[0];
        for k in 0..cap {
            assert!(
                w.push(&frame::<u16>(k, case.plane()))
                    .unwrap()
                    .is_accepted()
            );
        }
        match w.skip() {
            Err(Error::ArrayFull { frames }) => assert_eq!(frames, cap),
            other => panic!("[{name}] skip past the end: want ArrayFull, got {other:?}"),
        }
        let stats = w
            .finish()
            .unwrap_or_else(|e| panic!("[{name}] finish after the refused skip: {e}"));
        let rec = Recorded {
            stats: Some(stats),
            accepted: vec![true; cap as usize],
        };
        verify::<u16>(&case, &path, &rec);
    }
}

// ---------------------------------------------------------------------------------------
// A camera faster than the encoders
// ---------------------------------------------------------------------------------------

/// 256×256 u16 frames into 128×128 chunks at zstd level 12, one worker, a two-frame
/// pool, and a producer that never waits: the encoders cannot keep up.
fn fast_camera(name: &'static str, backpressure: Backpressure) -> Case {
    Case {
        codec: Codec::zstd(12),
        threads: 1,
        pool_frames: 2,
        backpressure,
        ..Case::new(name, &[0, 256, 256], &[1, 128, 128], &[4, 256, 256], 0)
    }
}

/// Drop: every frame is accounted exactly (pushed = written + dropped); dropped frames
/// read as the fill value, accepted ones exactly (checked element by element by
/// `common::verify`).
#[test]
fn camera_faster_than_the_encoders_drop() {
    let case = fast_camera("fast_camera_drop", Backpressure::Drop);
    let rec = run_while::<u16>(&case, |k, ok, dropped| {
        k < 120 || ((ok < 5 || dropped < 5) && k < 3000)
    });
    let s = rec.stats();
    assert_eq!(s.frames_pushed, s.frames_written + s.frames_dropped);
    assert_eq!(s.frames_written, rec.written());
    assert!(
        s.frames_dropped >= 5 && s.frames_written >= 5,
        "the camera should outrun the encoder: {} written, {} dropped",
        s.frames_written,
        s.frames_dropped
    );
    println!(
        "drop: {} pushed, {} written, {} dropped",
        s.frames_pushed, s.frames_written, s.frames_dropped
    );
}

/// Block: the same camera loses nothing; `push` waits instead.
#[test]
fn camera_faster_than_the_encoders_block() {
    let case = fast_camera("fast_camera_block", Backpressure::Block);
    let rec = run_while::<u16>(&case, |k, _, _| k < 40);
    let s = rec.stats();
    assert_eq!(
        (s.frames_pushed, s.frames_written, s.frames_dropped),
        (40, 40, 0)
    );
    let slowest = s.push_latency_ns.max;
    assert!(
        slowest > 500_000,
        "push never waited for the encoder (slowest push {slowest} ns)"
    );
}

/// Options whose derived sizes would overflow are refused before anything is created.
#[test]
fn out_of_range_writer_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let case = Case::new("options", &[0, 16, 16], &[1, 16, 16], &[2, 16, 16], 0);
    for (option, opts) in [
        ("spare_groups", case.options().spare_groups(usize::MAX)),
        ("pool_frames", case.options().pool_frames(usize::MAX / 2)),
        ("threads", case.options().threads(1 << 20)),
    ] {
        let e = Writer::create(&path, case.spec::<u16>(), opts)
            .err()
            .expect("refused");
        assert!(
            matches!(&e, Error::InvalidOption { option: o, .. } if *o == option),
            "{option}: {e:?}"
        );
        assert!(e.to_string().contains(option), "{e}");
        assert!(!path.exists(), "nothing is created");
    }
}
