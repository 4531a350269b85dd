//! The durability options: each writes the same data, and they differ in when the
//! metadata makes finished shards visible.

use crate::common;
use zarrstream_testkit::layout;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Case, run};
use zarrstream::{ArraySpec, Codec, Durability, Writer, WriterOptions};

fn case(name: &'static str, durability: Durability) -> Case {
    Case {
        durability,
        codec: Codec::zstd(1),
        ..Case::new(name, &[0, 48, 40], &[1, 16, 16], &[4, 48, 48], 14)
    }
}

#[test]
fn every_durability_mode_writes_the_same_array() {
    run::<u16>(&case("durability_shard", Durability::Shard));
    run::<u16>(&case(
        "durability_periodic",
        Durability::Periodic {
            interval: Duration::from_millis(20),
        },
    ));
    run::<u16>(&case("durability_none", Durability::None));
}

/// 32×32 frames in 4 chunks, one shard per row of 2 frames.
fn rows_of_two() -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 32, 32])
        .chunk_shape([1, 16, 16])
        .shard_shape([2, 32, 32])
        .build()
        .unwrap()
}

fn document(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path.join("zarr.json")).unwrap()).unwrap()
}

fn shape0(path: &Path) -> u64 {
    document(path)["shape"][0].as_u64().unwrap()
}

/// Shard files in place (`c/<t>/0/0`, one per row here; the preparer may have made
/// the directories of later rows already).
fn shard_files(path: &Path) -> usize {
    fn files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| match e.file_type() {
                        Ok(t) if t.is_dir() => files(&e.path()),
                        Ok(_) => 1,
                        Err(_) => 0,
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    files(&path.join("c"))
}

/// Temporary shards the finisher has finished (cut below their reserved size) but not
/// renamed into place.
fn finished_unrenamed(path: &Path, reserved: u64) -> usize {
    let tmp = path.join(".zarrstream-partial");
    std::fs::read_dir(&tmp)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
                .filter(|e| e.metadata().is_ok_and(|m| m.len() < reserved))
                .count()
        })
        .unwrap_or(0)
}

/// What was visible while recording: shard files in place, and `shape[0]`.
#[derive(Debug, PartialEq, Eq)]
struct Visible {
    in_place: usize,
    shape0: u64,
}

/// Pushes 3 full rows of shards (and one frame more), waits until the finisher has
/// finished those 3 shards (in place, or cut to their final size under their temporary
/// names), and returns what was visible then, with the final `shape[0]`.
fn visible_while_running(durability: Durability) -> (Visible, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let spec = rows_of_two();
    let reserved = layout::reserved(&spec).file_size;
    let opts = WriterOptions::default().durability(durability).threads(1);
    let mut w = Writer::create(&path, spec, opts).unwrap();
    let frame = vec![5u16; 32 * 32];
    for _ in 0..7 {
        let _ = w.push(&frame).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while shard_files(&path) + finished_unrenamed(&path, reserved) < 3 {
        assert!(
            Instant::now() < deadline,
            "shards were not finished in time"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // A publication that is due happens within moments: wait for it (or, where none is
    // due, give it every chance to happen wrongly).
    let settle = Instant::now() + Duration::from_millis(300);
    let due = !matches!(durability, Durability::Periodic { interval } if interval > Duration::from_secs(60));
    while Instant::now() < settle || (due && shape0(&path) < 6 && Instant::now() < deadline) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let running = Visible {
        in_place: shard_files(&path),
        shape0: shape0(&path),
    };
    w.finish().unwrap();
    assert_eq!(
        shard_files(&path),
        4,
        "every shard is in place after finish"
    );
    (running, shape0(&path))
}

#[test]
fn per_shard_durability_publishes_each_finished_row() {
    let (running, last) = visible_while_running(Durability::Shard);
    assert_eq!(
        running,
        Visible {
            in_place: 3,
            shape0: 6
        },
        "three finished rows of 2 frames are visible while recording"
    );
    assert_eq!(last, 7);
}

#[test]
fn group_commit_shows_shards_only_after_their_flush() {
    // With an interval longer than the test, nothing is flushed while recording: the
    // finished shards stay under their temporary names (where `recover` finds them), and
    // neither they nor the metadata are visible.
    let (running, last) = visible_while_running(Durability::Periodic {
        interval: Duration::from_secs(3600),
    });
    assert_eq!(
        running,
        Visible {
            in_place: 0,
            shape0: 0
        },
        "no unflushed shard is in place or published"
    );
    assert_eq!(last, 7, "finish flushes and publishes everything");
    let (running, _) = visible_while_running(Durability::Periodic {
        interval: Duration::from_millis(10),
    });
    assert_eq!(
        running,
        Visible {
            in_place: 3,
            shape0: 6
        },
        "a short interval publishes while recording"
    );
}

/// `(frames_committed, frames_dropped)` as `zarr.json` says.
fn counts(path: &Path) -> (u64, u64) {
    let doc = document(path);
    let ours = &doc["attributes"]["zarrstream"];
    (
        ours["frames_committed"].as_u64().unwrap(),
        ours["frames_dropped"].as_u64().unwrap(),
    )
}

#[test]
fn every_publication_counts_written_and_dropped_frames_exactly() {
    for durability in [
        Durability::Shard,
        Durability::Periodic {
            interval: Duration::from_millis(10),
        },
        Durability::None,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zarr");
        let spec = rows_of_two();
        let opts = WriterOptions::default().durability(durability).threads(1);
        let mut w = Writer::create(&path, spec, opts).unwrap();
        let frame = vec![9u16; 32 * 32];
        // Rows of 2 frames: written 2 + 1 + 0, dropped 0 + 1 + 2; then one more frame.
        for keep in [true, true, true, false, false, false, true] {
            if keep {
                let _ = w.push(&frame).unwrap();
            } else {
                w.skip().unwrap();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while shape0(&path) < 6 {
            assert!(
                Instant::now() < deadline,
                "{durability:?}: rows not published"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(shape0(&path), 6, "{durability:?}");
        assert_eq!(
            counts(&path),
            (3, 3),
            "{durability:?}: the 6 published frames, 3 written and 3 dropped"
        );
        w.finish().unwrap();
        assert_eq!(
            (shape0(&path), counts(&path)),
            (7, (4, 3)),
            "{durability:?}"
        );
    }
}
