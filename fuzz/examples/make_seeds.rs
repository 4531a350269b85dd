//! Writes the checked-in seed inputs of every fuzz target into
//! `tests/fuzz_regressions/<target>/seed-*` (run from `fuzz/`:
//! `cargo run --example make_seeds`). The inputs are deterministic, so rerunning it
//! rewrites the same files.

use std::ffi::c_void;
use std::path::Path;

use zarrstream::{
    ArraySpec, BloscShuffle, Checksum, ChunkEncoder, Codec, DataType, IndexLocation, Writer,
    WriterOptions,
};

fn sample(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|i| {
            if (i / 512) % 3 == 0 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            } else {
                (i / 7) as u8
            }
        })
        .collect()
}

fn ours(data: &[u8], ts: usize, clevel: u8) -> Vec<u8> {
    ours_with(Codec::blosc_lz4(clevel), data, ts)
}

fn ours_with(codec: Codec, data: &[u8], ts: usize) -> Vec<u8> {
    let mut enc = ChunkEncoder::new(codec, ts, Checksum::None).unwrap();
    let mut out = vec![0u8; enc.slot_bound(data.len())];
    let n = enc.encode_slice(data, &mut out).unwrap();
    out.truncate(n);
    out
}

fn cblosc(data: &[u8], ts: usize, clevel: i32, shuffle: i32, blocksize: usize) -> Vec<u8> {
    cblosc_with(c"lz4", data, ts, clevel, shuffle, blocksize)
}

fn cblosc_with(
    cname: &std::ffi::CStr,
    data: &[u8],
    ts: usize,
    clevel: i32,
    shuffle: i32,
    blocksize: usize,
) -> Vec<u8> {
    let cap = data.len() + 16;
    let mut dest = vec![0u8; cap];
    // SAFETY: `data` is readable for its length, `dest` writable for `cap` bytes (enough
    // for any input), the compressor name is a NUL-terminated literal.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            clevel,
            shuffle,
            ts,
            data.len(),
            data.as_ptr().cast::<c_void>(),
            dest.as_mut_ptr().cast::<c_void>(),
            cap,
            cname.as_ptr(),
            blocksize,
            1,
        )
    };
    assert!(n > 0);
    dest.truncate(n as usize);
    dest
}

fn index(entries: &[(u64, u64)]) -> Vec<u8> {
    let mut v: Vec<u8> = entries
        .iter()
        .flat_map(|(o, b)| o.to_le_bytes().into_iter().chain(b.to_le_bytes()))
        .collect();
    v.extend(crc32c::crc32c(&v).to_le_bytes());
    v
}

fn save(root: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = root.join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/zarrstream/tests/fuzz_regressions");
    const E: u64 = u64::MAX;

    // shard_index: [mode, n (u16), bytes]
    let ix3 = index(&[(0, 10), (E, E), (10, 5)]);
    save(&root, "shard_index", "n3", &cat(&[&[0, 3, 0], &ix3]));
    save(&root, "shard_index", "n0", &cat(&[&[0, 0, 0], &index(&[])]));
    save(
        &root,
        "shard_index",
        "n-from-length",
        &cat(&[&[1, 0, 0], &ix3]),
    );
    let mut bad = ix3.clone();
    bad[5] ^= 1;
    save(&root, "shard_index", "bad-crc", &cat(&[&[0, 3, 0], &bad]));
    save(&root, "shard_index", "fixed-crc", &cat(&[&[4, 3, 0], &bad]));
    save(&root, "shard_index", "absurd-n", &cat(&[&[2, 1, 0], &ix3]));
    save(
        &root,
        "shard_index",
        "torn",
        &cat(&[&[0, 2, 0], &index(&[(E, 3), (7, E)])]),
    );

    // blosc_decode: [mode, limit selector, frame]
    let mut frames: Vec<(String, Vec<u8>)> = Vec::new();
    for (len, ts, clevel) in [
        (100, 2, 1),
        (1001, 2, 1),
        (4096, 1, 5),
        (40000, 4, 0),
        (70000, 2, 1),
        (131073, 2, 1),
        (3000, 3, 9),
    ] {
        let data = sample(len, len as u64);
        frames.push((
            format!("ours-{len}-ts{ts}-c{clevel}"),
            ours(&data, ts, clevel),
        ));
    }
    for (len, ts, shuffle, bs) in [
        (5000, 2, 1, 0),
        (5000, 4, 0, 0),
        (70000, 2, 1, 4096),
        (300, 8, 2, 0),
    ] {
        let data = sample(len, 7 + len as u64);
        frames.push((
            format!("cblosc-{len}-ts{ts}-sh{shuffle}-bs{bs}"),
            cblosc(&data, ts, 5, shuffle, bs),
        ));
    }
    for (len, ts, clevel, shuffle) in [
        (70000, 2, 1, BloscShuffle::Shuffle),
        (70000, 4, 3, BloscShuffle::BitShuffle),
        (5003, 1, 5, BloscShuffle::BitShuffle),
        (3000, 8, 1, BloscShuffle::NoShuffle),
    ] {
        let data = sample(len, 13 + len as u64);
        frames.push((
            format!("ours-zstd-{len}-ts{ts}-c{clevel}-{shuffle}"),
            ours_with(Codec::blosc_zstd(clevel).with_shuffle(shuffle), &data, ts),
        ));
    }
    for (len, ts, shuffle) in [(70000, 2, 2), (5000, 8, 1)] {
        let data = sample(len, 17 + len as u64);
        frames.push((
            format!("cblosc-zstd-{len}-ts{ts}-sh{shuffle}"),
            cblosc_with(c"zstd", &data, ts, 3, shuffle, 0),
        ));
    }
    frames.push((
        "ours-lz4-70000-ts2-c1-bitshuffle".into(),
        ours_with(
            Codec::blosc_lz4(1).with_shuffle(BloscShuffle::BitShuffle),
            &sample(70000, 19),
            2,
        ),
    ));
    for (name, f) in &frames {
        save(&root, "blosc_decode", name, &cat(&[&[0, 0], f]));
    }
    let (_, f) = &frames[1];
    save(
        &root,
        "blosc_decode",
        "limit-too-small",
        &cat(&[&[0, 3], f]),
    );
    let mut trunc = f.clone();
    trunc.truncate(f.len() / 2);
    save(&root, "blosc_decode", "truncated", &cat(&[&[0, 0], &trunc]));
    save(
        &root,
        "blosc_decode",
        "truncated-fixed-cbytes",
        &cat(&[&[1, 0], &trunc]),
    );
    save(
        &root,
        "blosc_decode",
        "empty",
        &cat(&[&[0, 0], &ours(&[], 2, 1)]),
    );

    // blosc_roundtrip: [typesize selector, clevel, flags, data]
    save(
        &root,
        "blosc_roundtrip",
        "small",
        &cat(&[&[1, 1, 0], &sample(300, 1)]),
    );
    save(
        &root,
        "blosc_roundtrip",
        "repeated",
        &cat(&[&[2, 5, 0x0a], &sample(700, 2)]),
    );
    save(
        &root,
        "blosc_roundtrip",
        "ts255-crc",
        &cat(&[&[0xff, 9, 1], &sample(1000, 3)]),
    );
    save(&root, "blosc_roundtrip", "empty", &[0, 1, 0]);
    // The level byte's tens pick the compressor (odd: zstd) and shuffle (default,
    // noshuffle, shuffle, bitshuffle).
    save(
        &root,
        "blosc_roundtrip",
        "zstd-repeated",
        &cat(&[&[1, 13, 0x0a], &sample(700, 4)]),
    );
    save(
        &root,
        "blosc_roundtrip",
        "zstd-bitshuffle-ts4",
        &cat(&[&[2, 73, 0x0a], &sample(900, 5)]),
    );
    save(
        &root,
        "blosc_roundtrip",
        "lz4-bitshuffle-ts1",
        &cat(&[&[0, 61, 0x06], &sample(501, 6)]),
    );
    save(
        &root,
        "blosc_roundtrip",
        "zstd-noshuffle-ts8-crc",
        &cat(&[&[3, 35, 0x03], &sample(800, 7)]),
    );

    // zstd_decode: [mode, limit selector, frame]
    for (level, checksum, len) in [(1, false, 1000), (3, true, 70000), (-1, false, 0)] {
        let data = sample(len, 11);
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        c.include_checksum(checksum).unwrap();
        c.include_contentsize(true).unwrap();
        let f = c.compress(&data).unwrap();
        save(
            &root,
            "zstd_decode",
            &format!("l{level}-ck{checksum}-{len}"),
            &cat(&[&[0, 0], &f]),
        );
    }

    // metadata: zarr.json of a few arrays
    let specs = [
        ArraySpec::builder()
            .shape([0, 64, 48])
            .chunk_shape([1, 32, 16])
            .shard_shape([4, 64, 48])
            .codec(Codec::blosc_lz4(1))
            .dimension_names(["t", "y", "x"])
            .build()
            .unwrap(),
        ArraySpec::builder()
            .shape([10, 2, 3, 16, 16])
            .chunk_shape([2, 1, 3, 8, 8])
            .shard_shape([4, 2, 3, 16, 16])
            .dtype(DataType::Float32)
            .fill_value(f64::NAN)
            .codec(Codec::zstd(3))
            .crc32c(false)
            .index_location(IndexLocation::Start)
            .build()
            .unwrap(),
        ArraySpec::builder()
            .shape([0, 5, 7])
            .chunk_shape([1, 5, 7])
            .shard_shape([1, 5, 7])
            .dtype(DataType::Int16)
            .fill_value(-3.0)
            .codec(Codec::none())
            .build()
            .unwrap(),
    ];
    for (i, spec) in specs.into_iter().enumerate() {
        let dir = std::env::temp_dir().join(format!("zarrstream-seeds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("a.zarr");
        let opts = WriterOptions::default()
            .threads(1)
            .pin_threads(false);
        let mut w = Writer::create(&path, spec.clone(), opts).unwrap();
        let frame = vec![1u8; spec.frame_bytes()];
        for _ in 0..spec.frames_per_step() * 2 {
            let _ = w.push_bytes(&frame, std::time::Instant::now()).unwrap();
        }
        w.finish().unwrap();
        let json = std::fs::read(path.join("zarr.json")).unwrap();
        save(&root, "metadata", &format!("zarr-{i}.json"), &json);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // recover: [spec selector, meta mode, coords..., raw flag, ops...]
    // ops: 0 i seed = write chunk; 1 i kind ... = raw entry; 2 pos(u32) x = flip;
    //      3 len(u32) = truncate; 4 moves stage = finish; 5 = empty file
    let rank = |sel: u8| if (sel / 12) % 3 == 1 { 4 } else { 3 };
    for sel in [0u8, 1, 2, 4, 5, 7, 9, 11, 13, 17, 26, 30] {
        let coords = vec![0u8; rank(sel)]; // wild byte 0, then rank-1 coordinates
        let head = cat(&[&[sel, 0], &coords, &[0]]);
        let writes: &[u8] = &[0, 0, 1, 0, 3, 2, 0, 5, 0];
        save(
            &root,
            "recover",
            &format!("s{sel}-chunks"),
            &cat(&[&head, writes]),
        );
        let finished = cat(&[writes, &[4, 255, 3]]);
        save(
            &root,
            "recover",
            &format!("s{sel}-finished"),
            &cat(&[&head, &finished]),
        );
        let halfway = cat(&[writes, &[4, 1, 0]]);
        save(
            &root,
            "recover",
            &format!("s{sel}-compacting"),
            &cat(&[&head, &halfway]),
        );
    }
    // Every chunk of frame 0 (slots 0..4 of shard c/0/0/0): one committed frame.
    let all4: &[u8] = &[0, 0, 1, 0, 1, 2, 0, 2, 3, 0, 3, 4];
    for sel in [0u8, 1, 2, 3, 4, 5] {
        let head = cat(&[&[sel, 0], &[0, 0, 0], &[0]]);
        save(
            &root,
            "recover",
            &format!("s{sel}-frame"),
            &cat(&[&head, all4]),
        );
        let finished = cat(&[all4, &[4, 255, 1]]);
        save(
            &root,
            "recover",
            &format!("s{sel}-frame-finished"),
            &cat(&[&head, &finished]),
        );
    }
    let head = cat(&[&[1u8, 1], &[0, 0, 0], &[0]]);
    save(
        &root,
        "recover",
        "flipped",
        &cat(&[&head, &[0, 0, 1, 0, 2, 2, 40, 0, 0, 0, 0x10]]),
    );
    save(
        &root,
        "recover",
        "bad-entry",
        &cat(&[&head, &[0, 0, 1, 1, 1, 1, 8, 0, 0x20, 0]]),
    );
    save(
        &root,
        "recover",
        "truncated",
        &cat(&[&head, &[0, 0, 1, 3, 200, 0, 0, 0]]),
    );
    save(&root, "recover", "empty-file", &cat(&[&head, &[5]]));
    save(
        &root,
        "recover",
        "raw",
        &cat(&[&[1u8, 0, 0, 0, 0, 1], &[0u8; 300]]),
    );
    save(
        &root,
        "recover",
        "stranger",
        &cat(&[&[1u8, 0, 1, 9, 9, 0, 0, 0, 1, 0]]),
    );
    println!("seeds written under {}", root.display());
}
