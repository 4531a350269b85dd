//! The memory estimate and the writer's own count: the estimate bounds the counted peak
//! (never timed; the benchmark `memory` compares it with the measured RSS), the count
//! covers the pools from the start and returns to zero once the writer is finished, and
//! an invalid configuration fails the estimate as it fails the writer.

use std::path::Path;

use zarrstream::{
    ArrayConfig, ArraySpec, Codec, DataType, Error, Levels, MAX_LEVELS, MemoryEstimate, Ome,
    Recording, SinkChoice, Stats, Writer, WriterOptions, estimate_memory, estimate_memory_ome,
};

/// 512 × 512 `uint16` frames; `depth` frames per inner chunk of 256 × 256 (slots of
/// 128 KiB and more, so the direct sink takes them), shards of 8 frames.
fn spec(codec: Codec, depth: u64) -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 512, 512])
        .chunk_shape([depth, 256, 256])
        .shard_shape([8, 512, 512])
        .dtype(DataType::UInt16)
        .codec(codec)
        .build()
        .unwrap()
}

fn frame(k: usize) -> Vec<u16> {
    (0..512 * 512)
        .map(|i| ((i % 512) * 3 + (i / 512) * 5 + k * 101) as u16)
        .collect()
}

fn options(sink: SinkChoice) -> WriterOptions {
    WriterOptions::default()
        .threads(2)
        .pin_threads(false)
        .sink(sink)
}

/// Pushes `frames` frames, checking the live count against `est` after each; returns
/// the statistics and the largest count seen while pushing.
fn run(mut w: Writer, est: &MemoryEstimate, frames: usize) -> (Stats, u64) {
    let mut seen = 0;
    for k in 0..frames {
        let _ = w.push(&frame(k)).unwrap();
        let m = w.memory_in_use();
        assert!(m.current <= m.peak, "{m:?}");
        seen = seen.max(m.current);
    }
    let stats = w.finish().unwrap();
    assert!(
        seen <= est.resident(),
        "counted {seen} while pushing, estimate {est}"
    );
    (stats, seen)
}

/// What the writer counted stays within what the estimate gives for those buffers
/// (everything resident but the bookkeeping allowance, which nothing counts), the
/// pools it counted are the estimate's, and nothing is left counted after `finish`.
fn check(stats: &Stats, est: &MemoryEstimate, what: &str) {
    let buffers = est.resident() - est.bookkeeping;
    assert!(
        stats.memory.peak <= buffers,
        "{what}: counted peak {} > estimate of the buffers {buffers} ({est})",
        stats.memory.peak
    );
    let pools = (stats.pool_bytes + stats.staging_bytes) as u64;
    assert!(
        stats.memory.peak >= pools,
        "{what}: the pools ({pools} bytes) were counted: {:?}",
        stats.memory
    );
    assert_eq!(
        stats.memory.current, 0,
        "{what}: buffers outlived the writer"
    );
}

#[test]
#[cfg_attr(
    windows,
    ignore = "under Wine 8 the mmap case with uncompressed 4-frame chunks counts no mapped \
              pages (its shards are written another way); not yet explained"
)]
fn the_estimate_bounds_the_counted_peak_for_every_sink_and_codec() {
    let dir = tempfile::tempdir().unwrap();
    for sink in [SinkChoice::Direct, SinkChoice::Pwrite, SinkChoice::Mmap] {
        let bits = Codec::blosc_zstd(3).with_shuffle(zarrstream::BloscShuffle::BitShuffle);
        for codec in [
            Codec::blosc_lz4(1),
            Codec::zstd(1),
            Codec::none(),
            Codec::blosc_zstd(1),
            bits,
        ] {
            for depth in [1, 4] {
                let what = format!("{sink} {codec:?} depth {depth}");
                let spec = spec(codec, depth);
                let opts = options(sink);
                let est = estimate_memory(&spec, &opts).unwrap();
                // The pools are sized as the estimate says (page-rounded, already whole
                // pages here).
                let path = dir.path().join(format!(
                    "{sink}-{depth}-{}.zarr",
                    codec.to_string().replace(':', "-")
                ));
                let w = Writer::create(&path, spec, opts).unwrap();
                let (stats, seen) = run(w, &est, 24);
                assert_eq!(stats.pool_bytes as u64, est.frame_pool, "{what}");
                assert_eq!(stats.staging_bytes as u64, est.staging, "{what}");
                assert!(seen > 0, "{what}: nothing counted while pushing");
                check(&stats, &est, &what);
                if sink == SinkChoice::Mmap {
                    assert!(est.mapped_shards > 0, "{what}: mapped shards estimated");
                    assert!(
                        stats.memory.peak > stats.pool_bytes as u64 + stats.staging_bytes as u64,
                        "{what}: mapped shard pages counted: {:?}",
                        stats.memory
                    );
                }
                std::fs::remove_dir_all(&path).unwrap();
            }
        }
    }
}

#[test]
fn a_pyramid_is_estimated_level_by_level() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(Codec::blosc_lz4(1), 1);
    let opts = options(SinkChoice::Pwrite);
    let ome = Ome::new().levels(Levels::Count(3));
    let est = estimate_memory_ome(&spec, &ome, &opts).unwrap();
    let flat = estimate_memory(&spec, &opts).unwrap();
    assert!(est.pyramid > 0, "{est}");
    // Level 0 keeps its frames for the pyramid thread: the same frame pool.
    assert_eq!(est.frame_pool, flat.frame_pool);
    let w = Writer::create_ome(dir.path().join("image.ome.zarr"), spec, &ome, opts).unwrap();
    let (stats, _) = run(w, &est, 24);
    check(&stats, &est, "pyramid");
    // The levels' pools are counted too: more than level 0's alone.
    assert!(
        stats.memory.peak > stats.pool_bytes as u64,
        "{:?}",
        stats.memory
    );
}

#[test]
fn a_recording_counts_its_shared_workers_once() {
    let dir = tempfile::tempdir().unwrap();
    let arrays = || {
        vec![
            ArrayConfig::new("a", spec(Codec::blosc_lz4(1), 1)),
            ArrayConfig::new("b", spec(Codec::zstd(1), 4)),
        ]
    };
    let opts = options(SinkChoice::Direct);
    let est = Recording::estimate_memory(&arrays(), &opts).unwrap();
    let alone: u64 = arrays()
        .iter()
        .map(|a| estimate_memory(&a.spec, &opts).unwrap().encoders)
        .sum();
    // One set of workers, each with one scratch and both encoders, against two sets.
    assert!(est.encoders < alone, "{} vs {alone}", est.encoders);
    let rec = Recording::create(dir.path().join("rec"), arrays(), opts).unwrap();
    let mut seen = 0;
    for k in 0..24 {
        let _ = rec.array("a").unwrap().push(&frame(k)).unwrap();
        let _ = rec.array("b").unwrap().push(&frame(k + 1)).unwrap();
        seen = seen.max(rec.memory_in_use().current);
    }
    assert!(seen > 0 && seen <= est.resident(), "{seen} vs {est}");
    let stats = rec.finish().unwrap();
    check(&stats.total, &est, "recording");
    for (key, s) in &stats.arrays {
        assert_eq!(s.memory.current, 0, "{key}");
        assert!(
            s.memory.peak > 0 && s.memory.peak <= stats.total.memory.peak,
            "{key}"
        );
    }
}

/// The error's variant and message, for comparing two results.
fn error_of<T>(r: zarrstream::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => format!("{e:?}"),
    }
}

#[test]
fn an_invalid_configuration_fails_the_estimate_as_it_fails_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let spec = spec(Codec::blosc_lz4(1), 1);

    let bad = options(SinkChoice::Pwrite).pool_frames(1 << 20);
    let e = estimate_memory(&spec, &bad);
    assert!(matches!(
        e,
        Err(Error::InvalidOption {
            option: "pool_frames",
            ..
        })
    ));
    assert_eq!(
        error_of(e),
        error_of(Writer::create(path("a"), spec.clone(), bad))
    );

    let ome = Ome::new().levels(Levels::Count(MAX_LEVELS + 1));
    let opts = options(SinkChoice::Pwrite);
    assert_eq!(
        error_of(estimate_memory_ome(&spec, &ome, &opts)),
        error_of(Writer::create_ome(
            path("b"),
            spec.clone(),
            &ome,
            opts.clone()
        ))
    );

    let twice = vec![
        ArrayConfig::new("x", spec.clone()),
        ArrayConfig::new("x", spec.clone()),
    ];
    let e = Recording::estimate_memory(&twice, &opts);
    assert!(matches!(e, Err(Error::ArrayKey { .. })), "{e:?}");
    assert_eq!(
        error_of(e),
        error_of(Recording::create(path("c"), twice, opts))
    );
    assert!(!Path::new(&path("a")).exists() && !Path::new(&path("c")).exists());
}
