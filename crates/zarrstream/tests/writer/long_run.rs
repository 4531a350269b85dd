//! Days of acquisition in seconds: 1,200 one-frame shards per durability option, with a
//! data mover beside the writer that deletes every finished shard as soon as it
//! appears and prunes the directories it empties (as a transfer to a file server does).
//!
//! At checkpoints while recording, and after `finish`, the writer must hold nothing of a
//! finished shard: no descriptor on a file under `c/`, no descriptor on a deleted store
//! file (whose space would then never come back), no mapping of a file under `c/`. Every
//! shard must reach the mover, and the writer must not fail when the mover removes a
//! directory it is about to use. The long form, with 100,000 shards and per-second
//! samples, is the `longrun` bench (BENCHMARKS.md).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use zarrstream_testkit::mover;

use zarrstream::{ArraySpec, Codec, Durability, SinkChoice, Writer, WriterOptions};

const SHARDS: u64 = 1_200;
const CHECKPOINT: u64 = 300;

/// What this process holds of the store's finished shards.
#[derive(Debug, Default, PartialEq, Eq)]
struct Held {
    /// Descriptors on files under `c/`, or on deleted store files.
    fds: Vec<String>,
    /// Mappings of files under `c/`.
    maps: Vec<String>,
}

fn held(store: &Path) -> Held {
    let chunks = store.join("c");
    let mut h = Held::default();
    for e in std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(target) = std::fs::read_link(e.path()) {
            let text = target.to_string_lossy().into_owned();
            let deleted = text.ends_with(" (deleted)");
            if text.starts_with(&*chunks.to_string_lossy())
                || (deleted && text.starts_with(&*store.to_string_lossy()))
            {
                h.fds.push(text);
            }
        }
    }
    let chunks = chunks.to_string_lossy().into_owned();
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        h.maps = maps
            .lines()
            .filter(|l| l.contains(&chunks))
            .map(str::to_string)
            .collect();
    }
    h
}

/// Nothing of a finished shard is held. What is seen once may be a shard between its
/// rename and the finisher's close; what is still held a moment later is a leak.
fn assert_nothing_held(store: &Path, what: &str) {
    if held(store) == Held::default() {
        return;
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        held(store),
        Held::default(),
        "{what}: finished shards still held"
    );
}

fn run(name: &str, durability: Durability, sink: SinkChoice) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("a.zarr");
    let spec = ArraySpec::builder()
        .shape([0, 64, 64])
        .chunk_shape([1, 64, 64])
        .shard_shape([1, 64, 64])
        .codec(Codec::blosc_lz4(1))
        .build()
        .unwrap();
    let opts = WriterOptions::default()
        .durability(durability)
        .sink(sink)
        .threads(1);
    let mut w = Writer::create(&store, spec, opts).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let moved = Arc::new(AtomicU64::new(0));
    let mover_thread = {
        let (store, done, moved) = (store.clone(), done.clone(), moved.clone());
        std::thread::spawn(move || mover::run(&store, Duration::ZERO, &done, &moved))
    };
    let mut frame = vec![0u16; 64 * 64];
    for k in 0..SHARDS {
        frame.iter_mut().enumerate().for_each(|(i, v)| {
            *v = (k as usize * 31 + i) as u16;
        });
        let _ = w
            .push(&frame)
            .unwrap_or_else(|e| panic!("[{name}] push {k}: {e}"));
        if (k + 1) % CHECKPOINT == 0 {
            // Let the finisher catch up with what was pushed, then look.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while moved.load(Ordering::Relaxed) + 8 < k + 1 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "[{name}] the mover fell behind"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_nothing_held(&store, &format!("[{name}] after {} shards", k + 1));
        }
    }
    let stats = w
        .finish()
        .unwrap_or_else(|e| panic!("[{name}] finish: {e}"));
    done.store(true, Ordering::Release);
    mover_thread.join().unwrap();
    assert_eq!(stats.shards, SHARDS, "[{name}] one shard per frame");
    assert_eq!(
        moved.load(Ordering::Relaxed),
        SHARDS,
        "[{name}] every shard reached the mover"
    );
    assert_nothing_held(&store, &format!("[{name}] after finish"));
}

#[test]
fn a_data_mover_gets_every_shard_and_the_writer_holds_none() {
    run("shard/auto", Durability::Shard, SinkChoice::Auto);
    run("none/mmap", Durability::None, SinkChoice::Mmap);
    run(
        "periodic/pwrite",
        Durability::Periodic {
            interval: Duration::from_millis(50),
        },
        SinkChoice::Pwrite,
    );
}
