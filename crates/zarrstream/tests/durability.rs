//! The durability options: each writes the same data, and they differ in when the
//! metadata makes finished shards visible.

mod common;

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

fn shape0(path: &Path) -> u64 {
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path.join("zarr.json")).unwrap()).unwrap();
    doc["shape"][0].as_u64().unwrap()
}

fn shard_files(path: &Path) -> usize {
    let c = path.join("c");
    std::fs::read_dir(&c).map(|d| d.count()).unwrap_or(0)
}

/// Pushes 3 full shards, waits until their files are in place, and returns the visible
/// `shape[0]` at that moment together with the final one.
fn visible_while_running(durability: Durability) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let spec = ArraySpec::builder()
        .shape([0, 32, 32])
        .chunk_shape([1, 16, 16])
        .shard_shape([2, 32, 32])
        .build()
        .unwrap();
    let opts = WriterOptions::default().durability(durability).threads(1);
    let mut w = Writer::create(&path, spec, opts).unwrap();
    let frame = vec![5u16; 32 * 32];
    for _ in 0..7 {
        let _ = w.push(&frame).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while shard_files(&path) < 3 {
        assert!(
            Instant::now() < deadline,
            "shards were not finished in time"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Give a metadata publication that is due every chance to happen.
    std::thread::sleep(Duration::from_millis(200));
    let running = shape0(&path);
    w.finish().unwrap();
    (running, shape0(&path))
}

#[test]
fn per_shard_durability_publishes_each_finished_row() {
    let (running, last) = visible_while_running(Durability::Shard);
    assert_eq!(
        running, 6,
        "three finished rows of 2 frames are visible while recording"
    );
    assert_eq!(last, 7);
}

#[test]
fn group_commit_publishes_only_after_a_flush() {
    // With an interval longer than the test, nothing is flushed while recording, so the
    // metadata must not count the (unflushed) shards that are already renamed.
    let (running, last) = visible_while_running(Durability::Periodic {
        interval: Duration::from_secs(3600),
    });
    assert_eq!(running, 0);
    assert_eq!(last, 7, "finish flushes and publishes everything");
    let (running, _) = visible_while_running(Durability::Periodic {
        interval: Duration::from_millis(10),
    });
    assert_eq!(running, 6, "a short interval publishes while recording");
}
