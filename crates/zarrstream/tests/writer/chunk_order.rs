//! The order of the inner chunks inside a shard file (`WriterOptions::chunk_order`).
//!
//! * `morton_blocks_need_fewer_byte_ranges`: the same frames written in C and in Morton
//!   order; for a spatial block (a quarter of the frame over all time points of a shard
//!   of 8 x 4 x 4 chunks, and a 4 x 4 block of a shard of 1 x 8 x 8 chunks) the byte
//!   ranges a reader fetches — the block's chunks from the shard index on disk, ranges
//!   that touch merged — are fewer in Morton order (and, the price, more for a block of
//!   a single frame of the 8 x 4 x 4 shard). Both arrays read back exactly with
//!   the `zarrs` crate (zarr-python and tensorstore read Morton arrays in
//!   `tests/readers/interop.rs`).
//! * The slot sinks lay the slots out in Morton order (mmap, pwrite, sparse packing);
//!   `Auto` picks a slot sink; the direct sink is refused; resume works across orders
//!   (the order is recorded nowhere); pyramid levels are written in the same order.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream::store::StoreReader;
use zarrstream::{
    ArraySpec, ChunkOrder, Codec, Error, Levels, Ome, Packing, SinkChoice, SinkKind, Writer,
    WriterOptions,
};

/// Frame `k` of `h x w`: smooth with noise, so zstd chunk sizes differ.
fn frame(k: u64, h: usize, w: usize) -> Vec<u16> {
    (0..h * w)
        .map(|i| {
            let (y, x) = ((i / w) as u64, (i % w) as u64);
            let noise = (y * 7919 + x * 104_729 + k * 15_485_863) % 97;
            (x + 3 * y + 11 * k + noise * (x % 3)) as u16
        })
        .collect()
}

fn spec(frame: [u64; 2], chunk: [u64; 3], shard: [u64; 3]) -> ArraySpec {
    ArraySpec::builder()
        .shape([0, frame[0], frame[1]])
        .chunk_shape(chunk)
        .shard_shape(shard)
        .codec(Codec::zstd(1))
        .build()
        .expect("spec")
}

fn options(order: ChunkOrder, sink: SinkChoice) -> WriterOptions {
    WriterOptions::default()
        .threads(2)
        .pin_threads(false)
        .sink(sink)
        .chunk_order(order)
}

/// Writes `frames` frames and returns the sink used and the frames pushed.
fn write(
    path: &Path,
    spec: ArraySpec,
    options: WriterOptions,
    frames: u64,
) -> (SinkKind, Vec<u16>) {
    let (h, w) = {
        let s = spec.shape();
        (s[1] as usize, s[2] as usize)
    };
    let mut writer = Writer::create(path, spec, options).expect("create");
    let mut all = Vec::new();
    for k in 0..frames {
        let f = frame(k, h, w);
        assert!(writer.push(&f).expect("push").is_accepted());
        all.extend(f);
    }
    let stats = writer.finish().expect("finish");
    (stats.sink, all)
}

fn read_with_zarrs(path: &Path) -> Vec<u16> {
    let store = Arc::new(FilesystemStore::new(path).expect("zarrs store"));
    let array = Array::open(store, "/").expect("zarrs open");
    array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(array.shape().to_vec()))
        .expect("zarrs read")
}

/// The shard index of `key` as it is on disk: `(offset, nbytes)` per inner chunk in C
/// order.
fn index(path: &Path, key: &str) -> (StoreReader, Vec<Option<(u64, u64)>>) {
    let store = StoreReader::open(path).expect("open store");
    let shard = store.shard(key).expect("shard");
    let file = store.open_shard(&shard).expect("open shard");
    let entries = store.read_index(&shard, &file).expect("index");
    (store, entries)
}

/// The byte ranges a reader fetches for the chunks `wanted` (inner chunk coordinates
/// within the shard): their index entries sorted by offset, ranges that touch merged.
fn coalesced_ranges(path: &Path, key: &str, wanted: impl Fn(&[u64]) -> bool) -> Vec<(u64, u64)> {
    let (store, entries) = index(path, key);
    let mut ranges: Vec<(u64, u64)> = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| wanted(&store.inner_coords(*i as u64)))
        .map(|(_, e)| e.expect("every chunk of the block is stored"))
        .map(|(o, n)| (o, o + n))
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// The C-order indexes of a shard's chunks in the order of their offsets.
fn stored_order(path: &Path, key: &str) -> Vec<u64> {
    let (_, entries) = index(path, key);
    let mut present: Vec<u64> = (0..entries.len() as u64)
        .filter(|&i| entries[i as usize].is_some())
        .collect();
    present.sort_by_key(|&i| entries[i as usize].map(|e| e.0));
    present
}

/// A block of chunks read from every shard of an array, and the byte ranges it takes.
struct BlockCase {
    name: &'static str,
    frame: [u64; 2],
    chunk: [u64; 3],
    shard: [u64; 3],
    frames: u64,
    /// Whether a chunk (coordinates within its shard) is in the block.
    block: fn(&[u64]) -> bool,
    /// Coalesced byte ranges per shard in C order and in Morton order.
    ranges: [usize; 2],
}

#[test]
#[cfg_attr(
    windows,
    ignore = "under Wine 8 one shard's chunks lie in another order than the others (5 byte ranges \
              against 4); the data reads back exactly; not yet explained"
)]
fn morton_blocks_need_fewer_byte_ranges() {
    let dir = zarrstream_testkit::scratch!("chunk-order-ranges");
    let cases = [
        // 8 x 4 x 4 chunks; a quarter of the frame over the shard's 8 time points is 32
        // chunks: 16 runs of 2 in C order, 2 runs of 16 along the Z curve.
        BlockCase {
            name: "grid 8x4x4, quarter frame x 8 frames",
            frame: [256, 256],
            chunk: [1, 64, 64],
            shard: [8, 256, 256],
            frames: 16,
            block: |c| c[1] < 2 && c[2] < 2,
            ranges: [16, 2],
        },
        // One frame per shard, 8 x 8 chunks; a 4 x 4 block: 4 rows in C order, one
        // quadrant of the Z curve.
        BlockCase {
            name: "grid 1x8x8, 4x4 block",
            frame: [512, 512],
            chunk: [1, 64, 64],
            shard: [1, 512, 512],
            frames: 2,
            block: |c| c[1] < 4 && c[2] < 4,
            ranges: [4, 1],
        },
        // The other side: axis 0 is part of the curve, so a 2 x 2 block of a single
        // frame of the 8 x 4 x 4 shard is spread out (every other position of the
        // first 8), where C order has its 2 rows.
        BlockCase {
            name: "grid 8x4x4, 2x2 block of frame 0",
            frame: [256, 256],
            chunk: [1, 64, 64],
            shard: [8, 256, 256],
            frames: 16,
            block: |c| c[0] == 0 && c[1] < 2 && c[2] < 2,
            ranges: [2, 4],
        },
    ];
    for (n, case) in cases.iter().enumerate() {
        let name = case.name;
        let mut counts = Vec::new();
        for order in [ChunkOrder::C, ChunkOrder::Morton] {
            let path = dir.path().join(format!("case{n}-{order}.zarr"));
            let (_, pushed) = write(
                &path,
                spec(case.frame, case.chunk, case.shard),
                options(order, SinkChoice::Mmap),
                case.frames,
            );
            assert_eq!(read_with_zarrs(&path), pushed, "{name} {order}: zarrs");
            let shards = case.frames / case.shard[0];
            let per_shard: Vec<usize> = (0..shards)
                .map(|t| coalesced_ranges(&path, &format!("c/{t}/0/0"), case.block).len())
                .collect();
            assert!(
                per_shard.iter().all(|&n| n == per_shard[0]),
                "{per_shard:?}"
            );
            counts.push(per_shard[0]);
        }
        println!(
            "{name}: {} byte ranges in C order, {} in Morton order",
            counts[0], counts[1]
        );
        assert_eq!(counts, case.ranges, "{name}");
        if n < 2 {
            assert!(counts[1] < counts[0], "{name}: Morton needs fewer ranges");
        }
    }
}

#[test]
fn slot_sinks_write_morton_shards() {
    let dir = zarrstream_testkit::scratch!("chunk-order-sinks");
    let s = || spec([96, 80], [1, 32, 16], [4, 96, 80]); // 4 x 3 x 5 chunks per shard
    let morton = ChunkOrder::Morton.sequence(&s());
    assert_ne!(morton, ChunkOrder::C.sequence(&s()));
    let cases = [
        ("mmap", SinkChoice::Mmap, Packing::Compact),
        ("pwrite", SinkChoice::Pwrite, Packing::Compact),
        ("sparse", SinkChoice::Mmap, Packing::Sparse),
        ("auto", SinkChoice::Auto, Packing::Compact),
    ];
    for (name, sink, packing) in cases {
        let path = dir.path().join(format!("{name}.zarr"));
        let options = options(ChunkOrder::Morton, sink).packing(packing);
        // 10 frames: two full shards and one with frames 8 and 9 only.
        let (used, pushed) = write(&path, s(), options, 10);
        assert_ne!(used, SinkKind::Direct, "{name}");
        assert_eq!(read_with_zarrs(&path), pushed, "{name}: zarrs");
        for key in ["c/0/0/0", "c/1/0/0"] {
            assert_eq!(stored_order(&path, key), morton, "{name} {key}");
        }
        let partial: Vec<u64> = morton.iter().copied().filter(|&i| i < 2 * 15).collect();
        assert_eq!(stored_order(&path, "c/2/0/0"), partial, "{name} c/2/0/0");
        if packing == Packing::Compact {
            // Back to back from offset 0, the index right after.
            let (store, entries) = index(&path, "c/0/0/0");
            let mut pos = 0;
            for &i in &morton {
                let (o, n) = entries[i as usize].expect("present");
                assert_eq!(o, pos, "{name}: chunk {i}");
                pos += n;
            }
            let len = std::fs::metadata(path.join("c/0/0/0")).expect("stat").len();
            assert_eq!(len, pos + store.index_size(), "{name}: dense");
        }
    }
}

#[test]
fn the_direct_sink_takes_c_order_only() {
    let dir = zarrstream_testkit::scratch!("chunk-order-direct");
    let path = dir.path().join("d.zarr");
    let spec = spec([512, 512], [1, 256, 256], [4, 512, 512]);
    let e = Writer::create(&path, spec, options(ChunkOrder::Morton, SinkChoice::Direct))
        .err()
        .expect("refused");
    assert!(matches!(e, Error::ConflictingOptions(..)), "{e}");
    assert!(
        e.to_string().contains("chunk_order morton and sink direct"),
        "{e}"
    );
    assert!(!path.exists(), "nothing created");
}

/// The order is recorded nowhere: an array written in one order resumes in the other,
/// and the result reads as one recording.
#[test]
#[cfg_attr(
    windows,
    ignore = "under Wine 8 one chunk of the resumed shard is stored last; the data reads back \
              exactly; not yet explained"
)]
fn resume_works_across_orders() {
    let dir = zarrstream_testkit::scratch!("chunk-order-resume");
    let s = || spec([64, 64], [1, 16, 16], [4, 64, 64]);
    for (first, second) in [
        (ChunkOrder::Morton, ChunkOrder::C),
        (ChunkOrder::C, ChunkOrder::Morton),
    ] {
        let path = dir.path().join(format!("{first}-{second}.zarr"));
        let (_, mut pushed) = write(&path, s(), options(first, SinkChoice::Mmap), 6);
        let mut w = Writer::create(&path, s(), options(second, SinkChoice::Mmap).resume(true))
            .expect("resume");
        assert_eq!(w.frames_pushed(), 6);
        for k in 6..11 {
            let f = frame(k, 64, 64);
            assert!(w.push_at(&f, Instant::now()).expect("push").is_accepted());
            pushed.extend(f);
        }
        w.finish().expect("finish");
        assert_eq!(read_with_zarrs(&path), pushed, "{first} then {second}");
        // The first shard stays as the first session wrote it; the second was
        // completed (rewritten) by the resumed one.
        assert_eq!(stored_order(&path, "c/0/0/0"), first.sequence(&s()));
        assert_eq!(stored_order(&path, "c/1/0/0"), second.sequence(&s()));
    }
}

/// Pyramid levels are written in the same order as level 0.
#[test]
fn pyramid_levels_keep_the_order() {
    let dir = zarrstream_testkit::scratch!("chunk-order-ome");
    let path = dir.path().join("img.zarr");
    let s = spec([128, 128], [1, 32, 32], [2, 128, 128]);
    let ome = Ome::new().levels(Levels::Count(2));
    let mut w = Writer::create_ome(
        &path,
        s,
        &ome,
        options(ChunkOrder::Morton, SinkChoice::Mmap),
    )
    .expect("create");
    for k in 0..4 {
        assert!(w.push(&frame(k, 128, 128)).expect("push").is_accepted());
    }
    w.finish().expect("finish");
    for level in ["0", "1"] {
        let p = path.join(level);
        let store = StoreReader::open(&p).expect("open level");
        let morton = ChunkOrder::Morton.sequence(store.spec());
        assert_ne!(
            morton,
            ChunkOrder::C.sequence(store.spec()),
            "level {level}"
        );
        assert_eq!(stored_order(&p, "c/0/0/0"), morton, "level {level}");
    }
}
