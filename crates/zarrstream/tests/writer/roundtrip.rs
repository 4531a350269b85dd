//! Round-trip matrix: arrays written with zarrstream are read back element by element with
//! the `zarrs` crate and compared with what was pushed (and with the fill value where
//! nothing was). Each test is one configuration; failures name it in brackets.
//!
//! Besides the data, every case checks `zarr.json`, the files left in the store, each
//! shard's index (crc, empty entries, packing) and the writer's statistics; see
//! `common.rs`.

use crate::common;

use common::{Case, PushMode, Recorded, run, run_while};
use zarrstream::{
    Backpressure, BloscShuffle, Codec, Durability, IndexLocation, Packing, SinkChoice,
};

// ---------------------------------------------------------------------------------------
// Rank 3: (t, y, x)
// ---------------------------------------------------------------------------------------

/// The original smoke test: 100x70 frames in 32x32 chunks and 64x64 shards, so edge
/// shards have inner chunks partly (y 96..128, x 64..96) and wholly (x 96..128) outside
/// the array; 10 frames stop in the middle of a 4-deep shard.
#[test]
fn r3_u16_lz4_edge_tiles_stop_mid_shard() {
    run::<u16>(&Case {
        push: PushMode::PushAt,
        ..Case::new(
            "r3_u16_lz4_edge_tiles_stop_mid_shard",
            &[0, 100, 70],
            &[1, 32, 32],
            &[4, 64, 64],
            10,
        )
    });
}

/// Deep chunks (4, 32, 32): 13 frames stop in the middle of a deep chunk and of a shard.
#[test]
fn r3_u8_deep_zstd1_pwrite_sparse_start_nocrc() {
    run::<u8>(&Case {
        fill: 200.0,
        codec: Codec::zstd(1),
        crc32c: false,
        index: IndexLocation::Start,
        sink: SinkChoice::Pwrite,
        packing: Packing::Sparse,
        threads: 1,
        ..Case::new(
            "r3_u8_deep_zstd1_pwrite_sparse_start_nocrc",
            &[0, 100, 70],
            &[4, 32, 32],
            &[8, 64, 64],
            13,
        )
    });
}

/// float32 with NaN fill, NaN/-0/-inf/subnormal content, no compression, raw byte pushes.
#[test]
fn r3_f32_nan_fill_codec_none_start() {
    run::<f32>(&Case {
        fill: f64::NAN,
        codec: Codec::none(),
        index: IndexLocation::Start,
        durability: Durability::Shard,
        push: PushMode::Bytes,
        ..Case::new(
            "r3_f32_nan_fill_codec_none_start",
            &[0, 50, 45],
            &[1, 16, 16],
            &[2, 32, 32],
            7,
        )
    });
}

/// 2048 inner chunks per shard (2 x 32 x 32 of 4x4), with inner chunks wholly outside a
/// 120x100 plane on both y and x; negative zstd level.
#[test]
fn r3_i16_2048_inner_chunks_zstd_negative() {
    run::<i16>(&Case {
        fill: -3.0,
        codec: Codec::zstd(-1),
        sink: SinkChoice::Pwrite,
        ..Case::new(
            "r3_i16_2048_inner_chunks_zstd_negative",
            &[0, 120, 100],
            &[1, 4, 4],
            &[2, 128, 128],
            5,
        )
    });
}

/// Single-chunk shards (chunk == shard), edge shards partly outside the plane.
#[test]
fn r3_u32_single_chunk_shards_lz4_5() {
    run::<u32>(&Case {
        fill: 4_000_000_000.0,
        codec: Codec::blosc_lz4(5),
        crc32c: false,
        sink: SinkChoice::Pwrite,
        packing: Packing::Sparse,
        threads: 1,
        ..Case::new(
            "r3_u32_single_chunk_shards_lz4_5",
            &[0, 100, 70],
            &[1, 64, 64],
            &[1, 64, 64],
            5,
        )
    });
}

/// Bounded axis 0 written completely; the last shard (t 4..8) is partly outside the
/// array; one more push is refused with `ArrayFull`.
#[test]
fn r3_u16_bounded_full_deep() {
    run::<u16>(&Case {
        fill: 7.0,
        codec: Codec::zstd(5),
        index: IndexLocation::Start,
        packing: Packing::Sparse,
        ..Case::new(
            "r3_u16_bounded_full_deep",
            &[6, 40, 50],
            &[2, 16, 16],
            &[4, 32, 32],
            6,
        )
    });
}

/// Bounded axis 0 written partially: shape stays 10, frames 6..10 read as fill.
#[test]
fn r3_u16_bounded_partial_buffers_lz4_0() {
    let r = run::<u16>(&Case {
        fill: 7.0,
        codec: Codec::blosc_lz4(0),
        crc32c: false,
        threads: 1,
        push: PushMode::Buffer,
        ..Case::new(
            "r3_u16_bounded_partial_buffers_lz4_0",
            &[10, 40, 50],
            &[1, 16, 16],
            &[4, 32, 32],
            6,
        )
    });
    assert_eq!(r.stats().frames_dropped, 0);
}

/// Sparse packing with the index at the end and a large index (256 inner chunks of
/// 16 KiB slots, 4100-byte index): the stream stops after 10 frames, so the index follows
/// the 10th chunk and runs into the page-aligned gaps of the empty slots after it.
#[test]
fn r3_u32_sparse_end_large_index() {
    run::<u32>(&Case {
        codec: Codec::none(),
        packing: Packing::Sparse,
        threads: 1,
        ..Case::new(
            "r3_u32_sparse_end_large_index",
            &[0, 64, 64],
            &[1, 64, 64],
            &[256, 64, 64],
            10,
        )
    });
}

/// The same with compressible chunks through pwrite: each chunk uses a small part of its
/// slot, so the index following the last chunk runs into that slot's own gap.
#[test]
fn r3_u16_sparse_end_large_index_lz4_pwrite() {
    run::<u16>(&Case {
        codec: Codec::blosc_lz4(5),
        packing: Packing::Sparse,
        sink: SinkChoice::Pwrite,
        ..Case::new(
            "r3_u16_sparse_end_large_index_lz4_pwrite",
            &[0, 64, 64],
            &[1, 64, 64],
            &[256, 64, 64],
            256,
        )
    });
}

/// Blosc with zstd (clevel 3: 128 KiB blocks, so a 96 KiB deep chunk is one block) and
/// edge tiles, read back with zarrs.
#[test]
fn r3_u16_blosc_zstd3_deep_edge_tiles() {
    run::<u16>(&Case {
        fill: 9.0,
        codec: Codec::blosc_zstd(3),
        ..Case::new(
            "r3_u16_blosc_zstd3_deep_edge_tiles",
            &[0, 200, 120],
            &[3, 128, 128],
            &[6, 256, 128],
            8,
        )
    });
}

/// Blosc-zstd with bit shuffle on 4-byte floats (NaN fill) and 1-byte elements, through
/// the pwrite sink; read back with zarrs.
#[test]
fn r3_blosc_zstd_bitshuffle_f32_and_u8() {
    run::<f32>(&Case {
        fill: f64::NAN,
        codec: Codec::blosc_zstd(1).with_shuffle(BloscShuffle::BitShuffle),
        sink: SinkChoice::Pwrite,
        ..Case::new(
            "r3_f32_blosc_zstd1_bitshuffle",
            &[0, 70, 90],
            &[1, 32, 64],
            &[2, 64, 128],
            5,
        )
    });
    run::<u8>(&Case {
        fill: 3.0,
        codec: Codec::blosc_zstd(5).with_shuffle(BloscShuffle::BitShuffle),
        crc32c: false,
        ..Case::new(
            "r3_u8_blosc_zstd5_bitshuffle",
            &[0, 70, 90],
            &[2, 32, 64],
            &[2, 64, 128],
            5,
        )
    });
}

/// Large deep chunks (3 x 128 x 128 u16 = 96 KiB, page-aligned slots) over 128x120
/// frames: blosc-lz4 at clevel 1 splits them into a 64 KiB block and a 32 KiB leftover.
#[test]
fn r3_u16_lz4_multiblock_deep() {
    run::<u16>(&Case {
        fill: 7.0,
        codec: Codec::blosc_lz4(1),
        ..Case::new(
            "r3_u16_lz4_multiblock_deep",
            &[0, 128, 120],
            &[3, 128, 128],
            &[6, 128, 128],
            7,
        )
    });
}

/// A writer dropped without `finish` finishes the store (deep chunks half filled, a
/// shard half filled, all published).
#[test]
fn r3_drop_without_finish() {
    run::<u16>(&Case {
        finish: false,
        fill: 7.0,
        ..Case::new(
            "r3_drop_without_finish",
            &[0, 40, 40],
            &[2, 16, 16],
            &[4, 32, 32],
            7,
        )
    });
}

/// A stream with no frames at all.
#[test]
fn r3_empty_stream() {
    let r = run::<u16>(&Case::new(
        "r3_empty_stream",
        &[0, 10, 10],
        &[1, 8, 8],
        &[2, 8, 8],
        0,
    ));
    assert_eq!(r.stats().shards, 0);
}

/// Back-pressure Block with a one-frame pool: the producer waits, nothing is lost.
#[test]
fn r3_block_one_frame_pool() {
    let r = run::<u16>(&Case {
        pool_frames: 1,
        codec: Codec::zstd(10),
        ..Case::new(
            "r3_block_one_frame_pool",
            &[0, 64, 64],
            &[1, 16, 16],
            &[4, 64, 64],
            40,
        )
    });
    assert_eq!(r.stats().frames_dropped, 0, "Block must not drop");
    assert_eq!(r.stats().frames_written, 40);
}

/// Frames smaller than one inner chunk (5x3 in 4x4 chunks, 8x8 shards), deep chunks,
/// bounded axis 0 of 9 with chunk t 2 (the last deep chunk is half outside), full.
#[test]
fn r3_u8_tiny_frames_bounded_odd_extent() {
    run::<u8>(&Case {
        fill: 9.0,
        codec: Codec::blosc_lz4(1),
        ..Case::new(
            "r3_u8_tiny_frames_bounded_odd_extent",
            &[9, 5, 3],
            &[2, 4, 4],
            &[4, 8, 8],
            9,
        )
    });
}

// ---------------------------------------------------------------------------------------
// Rank 4: (t, z, y, x)
// ---------------------------------------------------------------------------------------

/// z extent 5 with shard z 4 (second z shard mostly outside); 13 frames stop in the
/// middle of t step 2, so shape[0] = 3 and frames 13, 14 read as fill.
#[test]
fn r4_u16_z5_shard_z4_stop_mid_t() {
    run::<u16>(&Case {
        fill: 7.0,
        codec: Codec::blosc_lz4(9),
        dimension_names: true,
        ..Case::new(
            "r4_u16_z5_shard_z4_stop_mid_t",
            &[0, 5, 100, 70],
            &[1, 1, 32, 32],
            &[1, 4, 64, 64],
            13,
        )
    });
}

/// Deep chunks (3, 2, 16, 16) over z extent 5 (last z group half outside), stopping in
/// the middle of t step 4 and of a deep chunk, with some frames skipped.
#[test]
fn r4_i16_deep_3_2_stop_mid_t_with_skips() {
    let r = run::<i16>(&Case {
        fill: -3.0,
        codec: Codec::zstd(1),
        crc32c: false,
        index: IndexLocation::Start,
        sink: SinkChoice::Pwrite,
        packing: Packing::Sparse,
        threads: 1,
        skip: |k| k % 7 == 6,
        ..Case::new(
            "r4_i16_deep_3_2_stop_mid_t_with_skips",
            &[0, 5, 40, 36],
            &[3, 2, 16, 16],
            &[6, 4, 32, 32],
            22,
        )
    });
    assert_eq!(r.stats().frames_dropped, 3);
}

/// Bounded rank 4 written completely with deep float chunks (t extent 3, chunk t 2),
/// fill -0.0 (distinct from 0.0 by bits).
#[test]
fn r4_f32_bounded_full_deep() {
    run::<f32>(&Case {
        fill: -0.0,
        codec: Codec::blosc_lz4(1),
        index: IndexLocation::Start,
        sink: SinkChoice::Pwrite,
        ..Case::new(
            "r4_f32_bounded_full_deep",
            &[3, 2, 20, 20],
            &[2, 2, 8, 8],
            &[2, 2, 16, 16],
            6,
        )
    });
}

/// `skip()` of every frame of the first z shard of t 0 (shards are 2 deep in t and split
/// z 0..4 / 4..5): the first shard set the writer opens is then (0, 1), and the next
/// frame, t 1 z 0, needs the earlier set (0, 0) again. The same happens under
/// Backpressure::Drop when a shard's first frames are dropped.
#[test]
fn r4_skip_first_frames_of_a_shard() {
    run::<u16>(&Case {
        skip: |k| k < 4,
        ..Case::new(
            "r4_skip_first_frames_of_a_shard",
            &[0, 5, 16, 16],
            &[1, 1, 16, 16],
            &[2, 4, 16, 16],
            12,
        )
    });
}

/// As above on a bounded array.
#[test]
fn r4_skip_first_frames_of_a_shard_bounded() {
    run::<u16>(&Case {
        skip: |k| k < 4,
        ..Case::new(
            "r4_skip_first_frames_of_a_shard_bounded",
            &[4, 5, 16, 16],
            &[1, 1, 16, 16],
            &[2, 4, 16, 16],
            12,
        )
    });
}

/// float32 chunks of 128 KiB (2 x 128 x 128 over (z, y, x)): two blosc blocks of
/// 64 KiB at clevel 1; NaN fill, sparse, pwrite.
#[test]
fn r4_f32_lz4_multiblock_sparse() {
    run::<f32>(&Case {
        fill: f64::NAN,
        codec: Codec::blosc_lz4(1),
        packing: Packing::Sparse,
        sink: SinkChoice::Pwrite,
        ..Case::new(
            "r4_f32_lz4_multiblock_sparse",
            &[0, 2, 100, 128],
            &[1, 2, 128, 128],
            &[2, 2, 128, 128],
            5,
        )
    });
}

/// Back-pressure Drop, one-frame pool, one worker and a producer that never waits:
/// exactly the frames `push` accepted read back, dropped ones read as fill.
#[test]
fn r4_drop_one_frame_pool() {
    let case = Case {
        codec: Codec::zstd(3),
        threads: 1,
        pool_frames: 1,
        backpressure: Backpressure::Drop,
        ..Case::new(
            "r4_drop_one_frame_pool",
            &[0, 2, 64, 64],
            &[1, 1, 32, 32],
            &[4, 2, 64, 64],
            0,
        )
    };
    let r = drop_run::<u16>(&case, true);
    assert_mixed(&r);
}

/// The same through the zero-copy buffer API: `buffer()` returns `None` when the pool is
/// empty and the frame is `skip()`ped.
#[test]
fn r3_drop_buffer_api() {
    let case = Case {
        codec: Codec::zstd(3),
        threads: 1,
        pool_frames: 1,
        backpressure: Backpressure::Drop,
        push: PushMode::Buffer,
        ..Case::new(
            "r3_drop_buffer_api",
            &[0, 64, 64],
            &[1, 32, 32],
            &[8, 64, 64],
            0,
        )
    };
    let r = drop_run::<u8>(&case, true);
    assert_mixed(&r);
}

/// Drop with a producer paced at ~60 µs per frame over shards that are 2 deep in t and
/// split z 0..4 / 4..5: the first frames of a shard set are sometimes dropped while later
/// ones are accepted, so sets are needed out of their first-frame order (see
/// `r4_skip_first_frames_of_a_shard` for the deterministic version).
#[test]
fn r4_drop_paced_shards_revisited() {
    let case = Case {
        codec: Codec::zstd(3),
        threads: 1,
        pool_frames: 1,
        backpressure: Backpressure::Drop,
        ..Case::new(
            "r4_drop_paced_shards_revisited",
            &[0, 5, 64, 64],
            &[1, 1, 32, 32],
            &[2, 4, 64, 64],
            0,
        )
    };
    run_while::<u16>(&case, |k, _, _| {
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_micros(60) {
            std::hint::spin_loop();
        }
        k < 400
    });
}

/// Drop with deep chunks: frames are dropped when no staging group is free; whatever was
/// accepted must read back.
#[test]
fn r4_drop_deep_chunks() {
    let case = Case {
        codec: Codec::zstd(3),
        threads: 1,
        backpressure: Backpressure::Drop,
        ..Case::new(
            "r4_drop_deep_chunks",
            &[0, 3, 48, 48],
            &[2, 1, 16, 16],
            &[4, 3, 48, 48],
            0,
        )
    };
    drop_run::<u16>(&case, false);
}

/// Records until at least 5 frames were accepted and 5 dropped (or a cap is reached),
/// then verifies.
///
/// The producer never waits for the writer; only if the worker got no CPU at all during
/// the first 200 frames (a loaded machine) does it pause 2 ms between frames, so that the
/// test still ends with both accepted and dropped frames.
fn drop_run<T: common::Sample>(case: &Case, need_drops: bool) -> Recorded {
    run_while::<T>(case, move |k, ok, dropped| {
        let done = ok >= 5 && (dropped >= 5 || (!need_drops && k >= 200));
        if !done && k >= 200 && ok < 5 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        k < 3000 && !done
    })
}

fn assert_mixed(r: &Recorded) {
    let (pushed, written) = (r.pushed(), r.written());
    assert!(
        written >= 5 && pushed - written >= 5,
        "too few accepted or dropped frames: pushed {pushed}, written {written}"
    );
}

// ---------------------------------------------------------------------------------------
// Rank 5: (t, c, z, y, x)
// ---------------------------------------------------------------------------------------

/// float32 (fill -1.5) over (t, c, z) = (∞, 2, 3), z shard 2 so the second z shard is
/// half outside; 22 frames stop in the middle of t step 3.
#[test]
fn r5_f32_tczyx_zstd5_mmap_sparse() {
    run::<f32>(&Case {
        fill: -1.5,
        codec: Codec::zstd(5),
        packing: Packing::Sparse,
        durability: Durability::Shard,
        dimension_names: true,
        ..Case::new(
            "r5_f32_tczyx_zstd5_mmap_sparse",
            &[0, 2, 3, 100, 70],
            &[1, 1, 1, 32, 32],
            &[2, 1, 2, 64, 64],
            22,
        )
    });
}

/// Deep chunks (1, 2, 1, 16, 16) over c extent 3 (last c group half outside), pushed
/// through pool buffers, stopping mid t step.
#[test]
fn r5_u32_deep_1_2_1_buffers() {
    run::<u32>(&Case {
        fill: 13.0,
        codec: Codec::blosc_lz4(1),
        index: IndexLocation::Start,
        sink: SinkChoice::Pwrite,
        push: PushMode::Buffer,
        ..Case::new(
            "r5_u32_deep_1_2_1_buffers",
            &[0, 3, 2, 50, 40],
            &[1, 2, 1, 16, 16],
            &[2, 2, 2, 32, 32],
            21,
        )
    });
}

/// Deep chunks (3, 1, 2, 16, 16) over z extent 5, 33x47 frames, 47 frames (mid t step 4).
#[test]
fn r5_u16_deep_3_1_2_lz4_5() {
    run::<u16>(&Case {
        fill: 7.0,
        codec: Codec::blosc_lz4(5),
        crc32c: false,
        packing: Packing::Sparse,
        threads: 1,
        ..Case::new(
            "r5_u16_deep_3_1_2_lz4_5",
            &[0, 2, 5, 33, 47],
            &[3, 1, 2, 16, 16],
            &[3, 2, 4, 32, 32],
            47,
        )
    });
}

/// Bounded rank 5 written partially (10 of 24 frames), uint8 with fill 1.
#[test]
fn r5_u8_bounded_partial_none() {
    run::<u8>(&Case {
        fill: 1.0,
        codec: Codec::none(),
        index: IndexLocation::Start,
        sink: SinkChoice::Pwrite,
        ..Case::new(
            "r5_u8_bounded_partial_none",
            &[4, 2, 3, 24, 24],
            &[1, 1, 1, 8, 8],
            &[2, 2, 2, 16, 16],
            10,
        )
    });
}

/// 1024 deep inner chunks per shard, i16, 2 threads, stop mid deep chunk; zstd frames
/// carrying their own content checksum.
#[test]
fn r5_i16_1024_deep_inner_chunks() {
    run::<i16>(&Case {
        fill: -3.0,
        codec: Codec::Zstd {
            level: 1,
            checksum: true,
        },
        dimension_names: true,
        ..Case::new(
            "r5_i16_1024_deep_inner_chunks",
            &[0, 1, 2, 64, 64],
            &[2, 1, 1, 4, 4],
            &[4, 1, 2, 64, 64],
            7,
        )
    });
}
