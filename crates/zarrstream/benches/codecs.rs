//! Inner-chunk encoders against the reference C implementations, on the same realistic
//! chunks (the `record` example's synthetic sCMOS camera): our blosc-lz4 and blosc-zstd
//! containers (liblz4 or libzstd with a fused shuffle) vs c-blosc 1.x with the same
//! compressor, clevel and shuffle (blosc-src; our frames are byte for byte c-blosc's, so
//! the ratios printed are equal), and our zstd path vs libzstd called directly. One
//! thread each; throughput is raw MiB/s.
//!
//! A second group encodes pyramid levels 1 and 2 (2×2 means of the same frames) with our
//! blosc-lz4 at c-blosc's clevel-1 acceleration (9) and at the higher accelerations the
//! pyramid uses (`Ome::level_lz4_acceleration`), printing each one's ratio.
//!
//! `cargo bench --bench codecs`

// criterion_group! generates a public function without documentation.
#![allow(missing_docs)]

mod support;

use support::{c_blosc, c_blosc_lz4, camera};

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use zarrstream::{BloscShuffle, Checksum, ChunkEncoder, Codec, DataType};

fn camera_frames(n: usize) -> Vec<Vec<u8>> {
    camera::Camera::new(2048, 2048, DataType::UInt16).render(n)
}

/// The 512×512 tiles of a `size`×`size` u16 frame.
fn tiles(frame: &[u8], size: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for ty in 0..size / 512 {
        for tx in 0..size / 512 {
            let mut c = Vec::with_capacity(512 * 512 * 2);
            for y in 0..512 {
                let at = ((ty * 512 + y) * size + tx * 512) * 2;
                c.extend_from_slice(&frame[at..at + 1024]);
            }
            out.push(c);
        }
    }
    out
}

/// The 512×512 tiles of one 2048×2048 u16 camera frame (C1's inner chunks).
fn chunks() -> Vec<Vec<u8>> {
    tiles(&camera_frames(1)[0], 2048)
}

/// 2×2 block means (rounded half up) of a `size`×`size` u16 frame, as pyramid level
/// `k + 1` is made from level `k`.
fn mean2x2(frame: &[u8], size: usize) -> Vec<u8> {
    let px = |y: usize, x: usize| {
        u32::from(u16::from_le_bytes([
            frame[(y * size + x) * 2],
            frame[(y * size + x) * 2 + 1],
        ]))
    };
    let mut out = Vec::with_capacity(size * size / 2);
    for y in (0..size).step_by(2) {
        for x in (0..size).step_by(2) {
            let m = (px(y, x) + px(y, x + 1) + px(y + 1, x) + px(y + 1, x + 1) + 2) >> 2;
            out.extend_from_slice(&(m as u16).to_le_bytes());
        }
    }
    out
}

/// Pyramid levels 1 and 2 of 16 camera frames, blosc-lz4 at several accelerations.
fn bench_levels(c: &mut Criterion) {
    let frames = camera_frames(16);
    let level1: Vec<Vec<u8>> = frames.iter().map(|f| mean2x2(f, 2048)).collect();
    let level2: Vec<Vec<u8>> = level1.iter().map(|f| mean2x2(f, 1024)).collect();
    let mut out = vec![0u8; 2 * 512 * 512 * 2];
    for (name, size, planes) in [("level1", 1024, &level1), ("level2", 512, &level2)] {
        let chunks: Vec<Vec<u8>> = planes.iter().flat_map(|p| tiles(p, size)).collect();
        let raw: usize = chunks.iter().map(Vec::len).sum();
        let mut group = c.benchmark_group(format!("pyramid_{name}_512x512_u16"));
        group.throughput(Throughput::Bytes(raw as u64));
        for accel in [9, 32, 128] {
            let mut enc = ChunkEncoder::new(Codec::blosc_lz4(1), 2, Checksum::None)
                .unwrap()
                .lz4_acceleration(accel);
            let stored: usize = chunks
                .iter()
                .map(|ch| enc.encode_slice(ch, &mut out).unwrap())
                .sum();
            eprintln!(
                "{name} lz4 acceleration {accel}: ratio {:.3}",
                raw as f64 / stored as f64
            );
            group.bench_function(BenchmarkId::new("lz4/acceleration", accel), |b| {
                b.iter(|| {
                    for ch in &chunks {
                        black_box(enc.encode_slice(black_box(ch), &mut out).unwrap());
                    }
                })
            });
        }
        group.finish();
    }
}

fn bench(c: &mut Criterion) {
    let chunks = chunks();
    let raw: usize = chunks.iter().map(Vec::len).sum();
    let mut out = vec![0u8; 2 * 512 * 512 * 2];
    let mut group = c.benchmark_group("c1_chunk_512x512_u16");
    group.throughput(Throughput::Bytes(raw as u64));

    for clevel in [1u8, 5] {
        let mut enc = ChunkEncoder::new(Codec::blosc_lz4(clevel), 2, Checksum::None).unwrap();
        let (mut ours, mut theirs) = (0, 0);
        for ch in &chunks {
            ours += enc.encode_slice(ch, &mut out).unwrap();
            theirs += c_blosc_lz4(ch, &mut out, i32::from(clevel));
        }
        eprintln!(
            "lz4 clevel {clevel}: ratio zarrstream {:.3}, c-blosc {:.3}",
            raw as f64 / ours as f64,
            raw as f64 / theirs as f64
        );
        group.bench_function(BenchmarkId::new("lz4/zarrstream", clevel), |b| {
            b.iter(|| {
                for ch in &chunks {
                    black_box(enc.encode_slice(black_box(ch), &mut out).unwrap());
                }
            })
        });
        group.bench_function(BenchmarkId::new("lz4/c-blosc", clevel), |b| {
            b.iter(|| {
                for ch in &chunks {
                    black_box(c_blosc_lz4(black_box(ch), &mut out, i32::from(clevel)));
                }
            })
        });
    }

    // blosc-zstd: the default clevel (1), ome-writers' and acquire-zarr's (3), and 5;
    // bit shuffle at clevel 1.
    for (clevel, shuffle) in [
        (1u8, BloscShuffle::Shuffle),
        (3, BloscShuffle::Shuffle),
        (5, BloscShuffle::Shuffle),
        (1, BloscShuffle::BitShuffle),
    ] {
        let codec = Codec::blosc_zstd(clevel).with_shuffle(shuffle);
        let c_shuffle = if shuffle == BloscShuffle::BitShuffle {
            2
        } else {
            1
        };
        let mut enc = ChunkEncoder::new(codec, 2, Checksum::None).unwrap();
        let (mut ours, mut theirs) = (0, 0);
        for ch in &chunks {
            ours += enc.encode_slice(ch, &mut out).unwrap();
            theirs += c_blosc(ch, &mut out, c"zstd", i32::from(clevel), c_shuffle);
        }
        eprintln!(
            "{codec}: ratio zarrstream {:.3}, c-blosc {:.3}",
            raw as f64 / ours as f64,
            raw as f64 / theirs as f64
        );
        let id = format!("{clevel}:{shuffle}");
        group.bench_function(BenchmarkId::new("blosc-zstd/zarrstream", &id), |b| {
            b.iter(|| {
                for ch in &chunks {
                    black_box(enc.encode_slice(black_box(ch), &mut out).unwrap());
                }
            })
        });
        group.bench_function(BenchmarkId::new("blosc-zstd/c-blosc", &id), |b| {
            b.iter(|| {
                for ch in &chunks {
                    black_box(c_blosc(
                        black_box(ch),
                        &mut out,
                        c"zstd",
                        i32::from(clevel),
                        c_shuffle,
                    ));
                }
            })
        });
    }

    let mut enc = ChunkEncoder::new(Codec::zstd(1), 2, Checksum::None).unwrap();
    let mut cctx = zstd::bulk::Compressor::new(1).unwrap();
    group.bench_function("zstd1/zarrstream", |b| {
        b.iter(|| {
            for ch in &chunks {
                black_box(enc.encode_slice(black_box(ch), &mut out).unwrap());
            }
        })
    });
    group.bench_function("zstd1/libzstd", |b| {
        b.iter(|| {
            for ch in &chunks {
                black_box(
                    cctx.compress_to_buffer(black_box(ch.as_slice()), &mut out[..])
                        .unwrap(),
                );
            }
        })
    });
    group.bench_function("memcpy", |b| {
        b.iter(|| {
            for ch in &chunks {
                out[..ch.len()].copy_from_slice(black_box(ch));
            }
            black_box(&out);
        })
    });
    group.finish();
}

criterion_group!(benches, bench, bench_levels);
criterion_main!(benches);
