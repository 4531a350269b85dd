//! Inner-chunk encoders against the reference C implementations, on the same realistic
//! chunks (the `record` example's synthetic sCMOS camera): our blosc-lz4 container
//! (lz4_flex with a fused shuffle) vs c-blosc 1.x lz4 with byte shuffle (blosc-src), and
//! our zstd path vs libzstd called directly. One thread each; throughput is raw MiB/s.
//!
//! `cargo bench --bench codecs`

mod support;

use support::{c_blosc_lz4, camera};

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use zarrstream::{ChunkEncoder, Codec, DataType};

/// The 512×512 tiles of one 2048×2048 u16 camera frame (C1's inner chunks).
fn chunks() -> Vec<Vec<u8>> {
    let cam = camera::Camera {
        height: 2048,
        width: 2048,
        blobs: camera::default_blobs(2048, 2048),
        seed: 20240611,
        dtype: DataType::UInt16,
    };
    let frame = cam.render(1).remove(0);
    let mut out = Vec::new();
    for ty in 0..4 {
        for tx in 0..4 {
            let mut c = Vec::with_capacity(512 * 512 * 2);
            for y in 0..512 {
                let at = ((ty * 512 + y) * 2048 + tx * 512) * 2;
                c.extend_from_slice(&frame[at..at + 1024]);
            }
            out.push(c);
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let chunks = chunks();
    let raw: usize = chunks.iter().map(Vec::len).sum();
    let mut out = vec![0u8; 2 * 512 * 512 * 2];
    let mut group = c.benchmark_group("c1_chunk_512x512_u16");
    group.throughput(Throughput::Bytes(raw as u64));

    for clevel in [1u8, 5] {
        let mut enc = ChunkEncoder::new(Codec::lz4(clevel), 2, false).unwrap();
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

    let mut enc = ChunkEncoder::new(Codec::zstd(1), 2, false).unwrap();
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

criterion_group!(benches, bench);
criterion_main!(benches);
