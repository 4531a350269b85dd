//! Cross-checks every chunk frame we write against the reference C implementations:
//! c-blosc 1.x (through `blosc-src`, the library zarrs links) for the `blosc`/lz4 codec,
//! libzstd (through the `zstd` crate) for the `zstd` codec, and an independent bitwise
//! CRC-32C for the `crc32c` codec.
//!
//! For blosc each frame is
//! * validated and decoded byte-exactly with `blosc_cbuffer_validate` + `blosc_decompress_ctx`
//!   (what zarrs does) and partially with `blosc_getitem` (zarrs' partial decoding);
//! * walked by a small Rust reader that asserts the Blosc1 format version 2 layout
//!   (packed absolute bstarts, split/non-split streams as the decoder re-derives them,
//!   `csize == neblock` for raw streams, `cbytes == nbytes + 16` for memcpyed frames);
//! * compared with c-blosc's own frame for the same input: header bytes 0..12 must agree and
//!   the sizes must be close.

use std::ffi::{CStr, c_void};
use std::path::Path;

use blosc_src::{
    blosc_cbuffer_complib, blosc_cbuffer_metainfo, blosc_cbuffer_sizes, blosc_cbuffer_validate,
    blosc_cbuffer_versions, blosc_compress_ctx, blosc_decompress_ctx, blosc_getitem,
};
use zarrstream::{
    ArraySpec, BloscCompressor, BloscShuffle, Checksum, ChunkEncoder, Codec, DataType, Writer,
    WriterOptions,
};

// ---------------------------------------------------------------------------------------
// Deterministic test data
// ---------------------------------------------------------------------------------------

/// xorshift64: tiny, deterministic, good enough for test images.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Approximately normal (Irwin-Hall of 4 uniforms), mean 0, std `sigma`.
    fn normal(&mut self, sigma: f64) -> f64 {
        let s: f64 = (0..4).map(|_| self.unit()).sum::<f64>() - 2.0;
        s * 3f64.sqrt() * sigma
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> 24) as u8).collect()
    }
}

/// A camera-like image: a dark offset, read noise (std `read_noise`) + shot noise, and a
/// few gaussian blobs. `gain` scales the blobs (use a small gain for u8).
fn camera(h: usize, w: usize, seed: u64, offset: f64, gain: f64, read_noise: f64) -> Vec<f64> {
    let mut r = Rng::new(seed);
    let blobs: Vec<(f64, f64, f64, f64)> = (0..4)
        .map(|_| {
            let cy = r.unit() * h as f64;
            let cx = r.unit() * w as f64;
            let sigma = 4.0 + r.unit() * 0.08 * (h.min(w) as f64);
            let amp = (300.0 + r.unit() * 2700.0) * gain;
            (cy, cx, sigma, amp)
        })
        .collect();
    let mut out = Vec::with_capacity(h * w);
    for y in 0..h {
        for x in 0..w {
            let signal: f64 = blobs
                .iter()
                .map(|&(cy, cx, s, a)| {
                    let d2 = (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2);
                    a * (-d2 / (2.0 * s * s)).exp()
                })
                .sum();
            let sigma = read_noise + (signal * 0.05).sqrt();
            out.push((offset + signal + r.normal(sigma)).max(0.0));
        }
    }
    out
}

fn camera_u16(h: usize, w: usize, seed: u64) -> Vec<u8> {
    camera(h, w, seed, 100.0, 1.0, 2.0)
        .iter()
        .flat_map(|&v| (v.min(65535.0) as u16).to_le_bytes())
        .collect()
}

fn camera_u8(h: usize, w: usize, seed: u64) -> Vec<u8> {
    camera(h, w, seed, 12.0, 0.05, 2.0)
        .iter()
        .map(|&v| v.min(255.0) as u8)
        .collect()
}

fn camera_u32(h: usize, w: usize, seed: u64) -> Vec<u8> {
    camera(h, w, seed, 100.0, 1.0, 2.0)
        .iter()
        .flat_map(|&v| (v as u32).to_le_bytes())
        .collect()
}

/// 8-byte elements (as uint64) of the same camera.
fn camera_u64(h: usize, w: usize, seed: u64) -> Vec<u8> {
    camera(h, w, seed, 100.0, 1.0, 2.0)
        .iter()
        .flat_map(|&v| (v as u64).to_le_bytes())
        .collect()
}

/// A noisy camera (read noise 25 ADU): the low-byte plane is close to uniform noise.
fn noisy_camera_u16(h: usize, w: usize, seed: u64) -> Vec<u8> {
    camera(h, w, seed, 100.0, 1.0, 25.0)
        .iter()
        .flat_map(|&v| (v.min(65535.0) as u16).to_le_bytes())
        .collect()
}

fn constant(value: &[u8], n_elems: usize) -> Vec<u8> {
    value
        .iter()
        .copied()
        .cycle()
        .take(value.len() * n_elems)
        .collect()
}

// ---------------------------------------------------------------------------------------
// CRC-32C (Castagnoli), bitwise, independent of the crate the library uses
// ---------------------------------------------------------------------------------------

fn crc32c_ref(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn crc32c_reference_check_value() {
    assert_eq!(crc32c_ref(b"123456789"), 0xE306_9283);
}

/// Strips and checks the crc32c suffix when `crc` is on.
fn strip_crc(bytes: &[u8], crc: bool, what: &str) -> Vec<u8> {
    if !crc {
        return bytes.to_vec();
    }
    assert!(
        bytes.len() >= 4,
        "{what}: crc32c frame shorter than 4 bytes"
    );
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    assert_eq!(
        u32::from_le_bytes(tail.try_into().unwrap()),
        crc32c_ref(body),
        "{what}: crc32c suffix is not the LE CRC-32C of the preceding bytes"
    );
    body.to_vec()
}

// ---------------------------------------------------------------------------------------
// Encoding through the public API
// ---------------------------------------------------------------------------------------

/// Encodes `data` into a slot of exactly `slot_bound` bytes (pre-filled with garbage), and
/// again into a much larger one (so lz4 streams go straight into the slot instead of the
/// scratch buffer): both must give the same bytes.
fn encode(enc: &mut ChunkEncoder, data: &[u8], what: &str) -> Vec<u8> {
    let bound = enc.slot_bound(data.len());
    let mut out = vec![0xA5u8; bound];
    let n = enc
        .encode_slice(data, &mut out)
        .unwrap_or_else(|e| panic!("{what}: encode failed: {e}"));
    assert!(n <= bound, "{what}: {n} bytes used > slot_bound {bound}");
    out.truncate(n);

    let mut big = vec![0x5Au8; 2 * bound + 4096];
    let m = enc
        .encode_slice(data, &mut big)
        .unwrap_or_else(|e| panic!("{what}: encode (big slot) failed: {e}"));
    assert!(
        big[..m] == out[..],
        "{what}: output depends on the slot size ({n} vs {m} bytes)"
    );
    out
}

// ---------------------------------------------------------------------------------------
// Blosc frames
// ---------------------------------------------------------------------------------------

const FLAG_SHUFFLE: u8 = 0x01;
const FLAG_MEMCPYED: u8 = 0x02;
const FLAG_BITSHUFFLE: u8 = 0x04;
const FLAG_RESERVED: u8 = 0x08;
const FLAG_DONT_SPLIT: u8 = 0x10;
const FLAG_LZ4: u8 = 0x20;
const FLAG_ZSTD: u8 = 0x80;

fn rd_i32(b: &[u8], at: usize) -> usize {
    let v = i32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert!(v >= 0, "negative int32 {v} at offset {at}");
    v as usize
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    version: u8,
    versionlz: u8,
    flags: u8,
    typesize: usize,
    nbytes: usize,
    blocksize: usize,
    cbytes: usize,
}

impl Header {
    fn parse(f: &[u8]) -> Header {
        assert!(f.len() >= 16, "frame shorter than the 16-byte header");
        Header {
            version: f[0],
            versionlz: f[1],
            flags: f[2],
            typesize: usize::from(f[3]),
            nbytes: rd_i32(f, 4),
            blocksize: rd_i32(f, 8),
            cbytes: rd_i32(f, 12),
        }
    }
}

/// What the frame walk found.
#[derive(Debug, Default, Clone)]
struct Layout {
    memcpyed: bool,
    nblocks: usize,
    leftover: usize,
    /// Streams per block, as the c-blosc decoder derives them.
    streams: Vec<usize>,
    raw_streams: usize,
    packed_streams: usize,
    /// Each block as the compressor saw it (after the shuffle): what c-blosc's
    /// `blosc_c` hands to LZ4 or zstd.
    shuffled: Vec<Vec<u8>>,
}

fn unshuffle(block: &[u8], ts: usize) -> Vec<u8> {
    if ts <= 1 {
        return block.to_vec();
    }
    let n = block.len() / ts;
    let mut out = block.to_vec(); // the trailing `len % ts` bytes stay in place
    for i in 0..n {
        for j in 0..ts {
            out[i * ts + j] = block[j * n + i];
        }
    }
    out
}

/// Inverse bit shuffle of one block by its definition (c-blosc's bitshuffle-generic.c):
/// when the whole elements number a multiple of 8, bit `i % 8` of byte `i / 8` of row
/// `8 j + b` is bit `b` of byte `j` of element `i`, and a trailing partial element is as
/// is; any other block is stored as is.
fn bitunshuffle(block: &[u8], ts: usize) -> Vec<u8> {
    let n = block.len() / ts;
    let mut out = block.to_vec();
    if !n.is_multiple_of(8) || block.len() < ts {
        return out;
    }
    out[..n * ts].fill(0);
    for i in 0..n {
        for j in 0..ts {
            for b in 0..8 {
                let bit = (block[(8 * j + b) * (n / 8) + i / 8] >> (i % 8)) & 1;
                out[i * ts + j] |= bit << b;
            }
        }
    }
    out
}

/// One stream with the decoder c-blosc would use (`LZ4_decompress_safe`, `ZSTD_decompress`).
fn decode_stream(flags: u8, payload: &[u8], neblock: usize, what: &str) -> Vec<u8> {
    match flags & 0xE0 {
        FLAG_LZ4 => lz4_flex::block::decompress(payload, neblock)
            .unwrap_or_else(|e| panic!("{what}: lz4_flex: {e}")),
        FLAG_ZSTD => {
            let mut d = vec![0u8; neblock];
            let n = zstd::zstd_safe::decompress(&mut d[..], payload)
                .unwrap_or_else(|e| panic!("{what}: libzstd: {e}"));
            d.truncate(n);
            d
        }
        other => panic!("{what}: compressor bits {other:#04x}"),
    }
}

/// Walks a non-memcpyed frame with the c-blosc decoder's rules (blosc_d) and decodes it
/// with lz4_flex or libzstd + a reference unshuffle, independently of c-blosc.
fn walk_frame(f: &[u8], data: &[u8], what: &str) -> Layout {
    let h = Header::parse(f);
    if h.flags & FLAG_MEMCPYED != 0 {
        assert_eq!(
            h.cbytes,
            h.nbytes + 16,
            "{what}: memcpyed frame needs cbytes == nbytes + 16"
        );
        assert_eq!(
            &f[16..],
            data,
            "{what}: memcpyed payload is not the raw input"
        );
        return Layout {
            memcpyed: true,
            ..Layout::default()
        };
    }
    let (ts, bs, nbytes) = (h.typesize, h.blocksize, h.nbytes);
    let nblocks = nbytes.div_ceil(bs);
    let leftover = nbytes % bs;
    assert!(
        nblocks < (h.cbytes - 16) / 4,
        "{what}: getitem's nblocks < (cbytes-16)/4 check fails"
    );
    // Our writer only clears DONT_SPLIT when c-blosc's split rule holds for the frame's
    // blocksize, so flag and layout always agree (spec 4.2).
    let dont_split = h.flags & FLAG_DONT_SPLIT != 0;
    if !dont_split {
        assert!(
            ts <= 16 && bs / ts >= 128,
            "{what}: split flag on blocks too small to split"
        );
        assert_eq!(
            bs % ts,
            0,
            "{what}: split frame with blocksize not a multiple of typesize"
        );
    }
    let shuffle = h.flags & FLAG_SHUFFLE != 0 && ts > 1;
    let bitshuffle = !shuffle && h.flags & FLAG_BITSHUFFLE != 0;
    let mut layout = Layout {
        nblocks,
        leftover,
        ..Layout::default()
    };
    let mut pos = 16 + 4 * nblocks;
    for j in 0..nblocks {
        assert_eq!(
            rd_i32(f, 16 + 4 * j),
            pos,
            "{what}: bstarts[{j}] is not the packed absolute offset"
        );
        let last = j == nblocks - 1 && leftover > 0;
        let bsize = if last { leftover } else { bs };
        // blosc_d l.748-757
        let nsplits = if !dont_split && ts <= 16 && bsize / ts >= 128 && !last {
            ts
        } else {
            1
        };
        let neblock = bsize / nsplits;
        let mut block = Vec::with_capacity(bsize);
        for s in 0..nsplits {
            assert!(
                pos + 4 <= h.cbytes,
                "{what}: block {j} stream {s} prefix past cbytes"
            );
            let csize = rd_i32(f, pos);
            assert!(
                csize <= h.cbytes - pos - 4,
                "{what}: block {j} stream {s} csize {csize} past cbytes"
            );
            let payload = &f[pos + 4..pos + 4 + csize];
            if csize == neblock {
                layout.raw_streams += 1;
                block.extend_from_slice(payload);
            } else {
                assert!(
                    csize < neblock,
                    "{what}: block {j} stream {s}: csize {csize} > neblock {neblock}"
                );
                layout.packed_streams += 1;
                let d = decode_stream(
                    h.flags,
                    payload,
                    neblock,
                    &format!("{what}: block {j} stream {s}"),
                );
                assert_eq!(
                    d.len(),
                    neblock,
                    "{what}: block {j} stream {s} decodes to the wrong size"
                );
                block.extend_from_slice(&d);
            }
            pos += 4 + csize;
        }
        layout.streams.push(nsplits);
        layout.shuffled.push(block.clone());
        let block = if shuffle {
            unshuffle(&block, ts)
        } else if bitshuffle && bsize >= ts {
            bitunshuffle(&block, ts)
        } else {
            block
        };
        assert!(
            block == data[j * bs..j * bs + bsize],
            "{what}: block {j} differs (Rust reference decode)"
        );
    }
    assert_eq!(pos, h.cbytes, "{what}: blocks do not end at cbytes");
    layout
}

/// Decodes `f` with c-blosc exactly as zarrs does and checks every header accessor.
fn cblosc_decode(f: &[u8], what: &str) -> Vec<u8> {
    let h = Header::parse(f);
    let mut nbytes = usize::MAX;
    // SAFETY: `f` is a live slice of `f.len()` bytes and `nbytes` a valid out-pointer;
    // blosc_cbuffer_validate reads at most `f.len()` bytes.
    let rc =
        unsafe { blosc_cbuffer_validate(f.as_ptr().cast::<c_void>(), f.len(), &raw mut nbytes) };
    assert_eq!(rc, 0, "{what}: blosc_cbuffer_validate rejected the frame");
    assert_eq!(nbytes, h.nbytes, "{what}: validate nbytes");

    let (mut nb, mut cb, mut bs) = (0usize, 0usize, 0usize);
    // SAFETY: the frame has at least the 16 header bytes these accessors read (validated
    // above); the out-pointers are valid locals.
    unsafe {
        blosc_cbuffer_sizes(
            f.as_ptr().cast::<c_void>(),
            &raw mut nb,
            &raw mut cb,
            &raw mut bs,
        )
    };
    assert_eq!(
        (nb, cb, bs),
        (h.nbytes, f.len(), h.blocksize),
        "{what}: blosc_cbuffer_sizes"
    );
    let (mut ts, mut flags) = (0usize, 0i32);
    // SAFETY: as above, 16 header bytes are readable and the out-pointers are valid.
    unsafe { blosc_cbuffer_metainfo(f.as_ptr().cast::<c_void>(), &raw mut ts, &raw mut flags) };
    assert_eq!(
        (ts, flags),
        (h.typesize, i32::from(h.flags & 7)),
        "{what}: blosc_cbuffer_metainfo (flag bits 0-2)"
    );
    let (mut ver, mut verlz) = (0i32, 0i32);
    // SAFETY: as above.
    unsafe { blosc_cbuffer_versions(f.as_ptr().cast::<c_void>(), &raw mut ver, &raw mut verlz) };
    assert_eq!((ver, verlz), (2, 1), "{what}: blosc_cbuffer_versions");
    // SAFETY: as above; the returned pointer is a static NUL-terminated string in c-blosc.
    let complib = unsafe { CStr::from_ptr(blosc_cbuffer_complib(f.as_ptr().cast::<c_void>())) };
    assert_eq!(
        complib.to_str().unwrap(),
        if h.flags & 0xE0 == FLAG_ZSTD {
            "Zstd"
        } else {
            "LZ4"
        },
        "{what}: blosc_cbuffer_complib"
    );

    // Sentinel tail to catch writes past destsize.
    let mut dest = vec![0xC3u8; nbytes + 64];
    // SAFETY: the frame was validated (cbytes == f.len()); `dest` has `nbytes + 64` writable
    // bytes and we pass destsize = nbytes; one internal thread, no global state.
    let n = unsafe {
        blosc_decompress_ctx(
            f.as_ptr().cast::<c_void>(),
            dest.as_mut_ptr().cast::<c_void>(),
            nbytes,
            1,
        )
    };
    if nbytes == 0 {
        assert_eq!(n, 0, "{what}: empty frame");
    } else {
        assert_eq!(
            n, nbytes as i32,
            "{what}: blosc_decompress_ctx returned {n}, expected {nbytes}"
        );
    }
    assert!(
        dest[nbytes..].iter().all(|&b| b == 0xC3),
        "{what}: c-blosc wrote past destsize"
    );
    dest.truncate(nbytes);
    dest
}

/// `blosc_getitem` on `nitems` elements from element `start`.
fn cblosc_getitem(f: &[u8], start: usize, nitems: usize, ts: usize, what: &str) -> Vec<u8> {
    // getitem writes `nitems * header typesize` bytes: make sure that is what we allocate.
    assert_eq!(usize::from(f[3]), ts, "{what}: header typesize");
    let len = nitems * ts;
    let mut dest = vec![0xC3u8; len + 64];
    // SAFETY: the frame was validated by `cblosc_decode` first (cbytes == f.len()), the
    // range is within nbytes (checked by the callers and by c-blosc), and `dest` holds
    // `nitems * typesize + 64` bytes, more than getitem writes.
    let n = unsafe {
        blosc_getitem(
            f.as_ptr().cast::<c_void>(),
            i32::try_from(start).unwrap(),
            i32::try_from(nitems).unwrap(),
            dest.as_mut_ptr().cast::<c_void>(),
        )
    };
    assert_eq!(
        n, len as i32,
        "{what}: blosc_getitem({start}, {nitems}) returned {n}"
    );
    assert!(
        dest[len..].iter().all(|&b| b == 0xC3),
        "{what}: getitem wrote past its items"
    );
    dest.truncate(len);
    dest
}

/// A Blosc setting under test: compressor and shuffle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Setting {
    compressor: BloscCompressor,
    shuffle: BloscShuffle,
}

const LZ4_SHUFFLE: Setting = Setting {
    compressor: BloscCompressor::Lz4,
    shuffle: BloscShuffle::Shuffle,
};

impl Setting {
    fn codec(self, clevel: u8) -> Codec {
        let c = match self.compressor {
            BloscCompressor::Lz4 => Codec::blosc_lz4(clevel),
            _ => Codec::blosc_zstd(clevel),
        };
        c.with_shuffle(self.shuffle)
    }
    fn encoder(self, clevel: u8, ts: usize, crc: bool) -> ChunkEncoder {
        ChunkEncoder::new(self.codec(clevel), ts, Checksum::crc32c_if(crc)).unwrap()
    }
    /// c-blosc's `clevel`-independent flag bits for this setting.
    fn flag_bits(self) -> u8 {
        let shuffle = match self.shuffle {
            BloscShuffle::NoShuffle => 0,
            BloscShuffle::Shuffle => FLAG_SHUFFLE,
            _ => FLAG_BITSHUFFLE,
        };
        let compressor = match self.compressor {
            BloscCompressor::Lz4 => FLAG_LZ4,
            _ => FLAG_ZSTD,
        };
        shuffle | compressor
    }
}

/// c-blosc's own frame for `data` with `setting` (automatic blocksize).
fn cblosc_compress_with(setting: Setting, data: &[u8], ts: usize, clevel: u8) -> Vec<u8> {
    let doshuffle = match setting.shuffle {
        BloscShuffle::NoShuffle => 0,
        BloscShuffle::Shuffle => 1,
        _ => 2,
    };
    let cname = match setting.compressor {
        BloscCompressor::Lz4 => c"lz4",
        _ => c"zstd",
    };
    let cap = data.len() + 16;
    let mut dest = vec![0u8; cap];
    // SAFETY: `data` is readable for `data.len()` bytes, `dest` writable for `cap` bytes
    // (nbytes + BLOSC_MAX_OVERHEAD, enough for any input); the compressor name is a
    // NUL-terminated literal; the ctx variant uses no global state.
    let n = unsafe {
        blosc_compress_ctx(
            i32::from(clevel),
            doshuffle,
            ts,
            data.len(),
            data.as_ptr().cast::<c_void>(),
            dest.as_mut_ptr().cast::<c_void>(),
            cap,
            cname.as_ptr(),
            0,
            1,
        )
    };
    assert!(n > 0, "c-blosc failed to compress ({n})");
    dest.truncate(n as usize);
    dest
}

struct BloscReport {
    header: Header,
    layout: Layout,
    ours: usize,
    theirs: usize,
}

/// Full blosc check of one input: encode (with and without crc32c), decode with c-blosc and
/// with the Rust walker, getitem on a few ranges, compare with c-blosc's own frame.
fn check_blosc(
    enc: &mut ChunkEncoder,
    data: &[u8],
    ts: usize,
    clevel: u8,
    crc: bool,
    what: &str,
) -> BloscReport {
    check_blosc_with(LZ4_SHUFFLE, enc, data, ts, clevel, crc, what)
}

/// [`check_blosc`] for any compressor and shuffle (`enc` must encode with `setting`).
fn check_blosc_with(
    setting: Setting,
    enc: &mut ChunkEncoder,
    data: &[u8],
    ts: usize,
    clevel: u8,
    crc: bool,
    what: &str,
) -> BloscReport {
    let what = &format!(
        "{what} [{}, ts {ts}, clevel {clevel}, {} B, crc {crc}]",
        setting.codec(clevel),
        data.len()
    );
    let framed = encode(enc, data, what);
    let f = strip_crc(&framed, crc, what);
    let h = Header::parse(&f);

    // Header fields (spec section 2).
    assert_eq!(h.version, 2, "{what}: version");
    assert_eq!(h.versionlz, 1, "{what}: versionlz");
    assert_eq!(
        h.flags & FLAG_RESERVED,
        0,
        "{what}: reserved flag bit 3 set"
    );
    assert_eq!(
        h.flags & (0xE0 | FLAG_SHUFFLE | FLAG_BITSHUFFLE),
        setting.flag_bits(),
        "{what}: compressor and shuffle bits"
    );
    assert_eq!(h.typesize, ts, "{what}: typesize");
    assert_eq!(h.nbytes, data.len(), "{what}: nbytes");
    assert_eq!(h.cbytes, f.len(), "{what}: cbytes is not the frame length");
    assert!(
        h.cbytes <= h.nbytes + 16,
        "{what}: frame larger than nbytes + 16"
    );
    assert!(
        h.blocksize > 0 && h.blocksize <= h.nbytes.max(1),
        "{what}: blocksize {}",
        h.blocksize
    );
    if clevel == 0 || data.len() < 128 {
        assert_ne!(
            h.flags & FLAG_MEMCPYED,
            0,
            "{what}: clevel 0 / tiny input must be memcpyed"
        );
    }

    // c-blosc: validate + full decode, byte-exact.
    let decoded = cblosc_decode(&f, what);
    if let Some(i) = decoded.iter().zip(data).position(|(a, b)| a != b) {
        panic!(
            "{what}: c-blosc decode differs from the input at byte {i} of {}",
            data.len()
        );
    }
    assert_eq!(decoded.len(), data.len(), "{what}: c-blosc decoded length");

    // Independent structural walk.
    let layout = walk_frame(&f, data, what);

    // Partial decoding with blosc_getitem (zarrs' partial decoder).
    let n = data.len() / ts;
    if n > 0 {
        let bs_el = h.blocksize / ts;
        let mut ranges = vec![
            (0, 1),
            (0, n),
            (n / 2, (n - n / 2).min(37)),
            (n.saturating_sub(5), n.min(5)),
        ];
        if bs_el > 3 && bs_el + 3 <= n {
            ranges.push((bs_el - 3, 6)); // straddles the first block boundary
        }
        if !h.nbytes.is_multiple_of(h.blocksize) && n > 2 {
            let left_start = (h.nbytes / h.blocksize) * h.blocksize / ts;
            ranges.push((
                left_start.saturating_sub(1),
                n - left_start.saturating_sub(1),
            )); // into the leftover
        }
        for (start, k) in ranges {
            let got = cblosc_getitem(&f, start, k, ts, what);
            assert!(
                got == data[start * ts..(start + k) * ts],
                "{what}: getitem({start}, {k}) differs"
            );
        }
    }

    // c-blosc's own frame: same header bytes 0..12 (version, flags, typesize, nbytes,
    // blocksize) and a comparable size.
    let theirs = cblosc_compress_with(setting, data, ts, clevel);
    let th = Header::parse(&theirs);
    assert_eq!(
        (
            th.version,
            th.versionlz,
            th.typesize,
            th.nbytes,
            th.blocksize,
            th.flags & !FLAG_MEMCPYED
        ),
        (
            h.version,
            h.versionlz,
            h.typesize,
            h.nbytes,
            h.blocksize,
            h.flags & !FLAG_MEMCPYED
        ),
        "{what}: header differs from c-blosc's (flags {:#04x} vs ours {:#04x})",
        th.flags,
        h.flags
    );
    // c-blosc's memcpyed decision is deterministic for clevel 0, tiny inputs and (below)
    // incompressible data; for the rest its liblz4 may land on the other side of nbytes+16.
    if clevel == 0 || data.len() < 128 {
        assert_eq!(th.flags, h.flags, "{what}: flags differ from c-blosc's");
    }
    // Same blocks and streams per block as c-blosc (our walker also reads c-blosc's frame).
    if th.flags & FLAG_MEMCPYED == 0 {
        let their_layout = walk_frame(&theirs, data, &format!("{what} (c-blosc's frame)"));
        if !layout.memcpyed {
            assert_eq!(
                their_layout.streams, layout.streams,
                "{what}: streams per block differ from c-blosc's"
            );
            // The shuffled blocks (what the compressor is given) are c-blosc's.
            for (j, (a, b)) in layout
                .shuffled
                .iter()
                .zip(&their_layout.shuffled)
                .enumerate()
            {
                if let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) {
                    panic!("{what}: shuffled block {j} differs from c-blosc's at byte {i}");
                }
            }
        }
    }
    // With c-blosc's block size, split rule and LZ4 acceleration or zstd level, and the
    // same liblz4 and libzstd for the streams, our frame is c-blosc's frame, byte for
    // byte.
    if let Some(i) = f.iter().zip(&theirs).position(|(a, b)| a != b) {
        panic!("{what}: frame differs from c-blosc's at byte {i}");
    }
    assert_eq!(
        f.len(),
        theirs.len(),
        "{what}: frame length differs from c-blosc's"
    );
    BloscReport {
        header: h,
        layout,
        ours: f.len(),
        theirs: theirs.len(),
    }
}

fn lz4_encoder(clevel: u8, ts: usize, crc: bool) -> ChunkEncoder {
    ChunkEncoder::new(Codec::blosc_lz4(clevel), ts, Checksum::crc32c_if(crc)).unwrap()
}

#[test]
fn blosc_split_512x512_u16_clevel1() {
    let data = camera_u16(512, 512, 1);
    for crc in [false, true] {
        let mut enc = lz4_encoder(1, 2, crc);
        let r = check_blosc(&mut enc, &data, 2, 1, crc, "camera 512x512 u16");
        assert_eq!(
            r.header.flags, 0x21,
            "ordinary camera chunk must be shuffle+split+lz4"
        );
        assert_eq!(r.header.typesize, 2);
        assert_eq!(r.header.blocksize, 65536);
        assert_eq!(r.layout.nblocks, 8);
        assert_eq!(r.layout.leftover, 0);
        assert_eq!(
            r.layout.streams,
            vec![2; 8],
            "every full block must hold 2 streams"
        );
        assert!(!r.layout.memcpyed);
        assert!(
            r.layout.packed_streams == 16,
            "both byte planes compress: {:?}",
            r.layout
        );
        let ratio = data.len() as f64 / r.ours as f64;
        println!(
            "camera 512x512 u16 lz4:1: ours {} B (ratio {ratio:.2}, {} raw + {} lz4 streams), c-blosc {} B",
            r.ours, r.layout.raw_streams, r.layout.packed_streams, r.theirs
        );
        assert!(
            ratio > 1.5,
            "realistic u16 chunk compressed only {ratio:.2}x"
        );
    }
}

#[test]
fn blosc_raw_streams_noisy_low_byte() {
    let data = noisy_camera_u16(512, 512, 7);
    let mut enc = lz4_encoder(1, 2, true);
    let r = check_blosc(&mut enc, &data, 2, 1, true, "noisy camera 512x512 u16");
    assert_eq!(r.header.flags, 0x21);
    assert!(!r.layout.memcpyed);
    assert_eq!(r.layout.streams, vec![2; 8]);
    // Every low-byte stream is stored raw (csize == neblock), every high-byte one is lz4.
    assert_eq!(
        (r.layout.raw_streams, r.layout.packed_streams),
        (8, 8),
        "{:?}",
        r.layout
    );
    println!(
        "noisy camera 512x512 u16 lz4:1: ours {} B, c-blosc {} B",
        r.ours, r.theirs
    );
}

#[test]
fn blosc_leftover_block_300x300_u16() {
    let data = camera_u16(300, 300, 2);
    assert_eq!(data.len(), 180_000);
    let mut enc = lz4_encoder(1, 2, false);
    let r = check_blosc(&mut enc, &data, 2, 1, false, "camera 300x300 u16");
    assert_eq!(r.header.flags, 0x21);
    assert_eq!(r.header.blocksize, 65536);
    assert_eq!(r.layout.nblocks, 3);
    assert_eq!(r.layout.leftover, 180_000 - 2 * 65536);
    assert_eq!(
        r.layout.streams,
        vec![2, 2, 1],
        "the leftover block is never split"
    );
    // Higher clevels put everything in one (non-leftover) block.
    let mut enc5 = lz4_encoder(5, 2, false);
    let r5 = check_blosc(&mut enc5, &data, 2, 5, false, "camera 300x300 u16");
    assert_eq!(
        (r5.header.blocksize, r5.layout.nblocks, r5.layout.leftover),
        (180_000, 1, 0)
    );
    assert_eq!(r5.layout.streams, vec![2]);
}

#[test]
fn blosc_dont_split_small_blocks() {
    // blocksize / typesize < 128 -> DONT_SPLIT, one stream per block, still compressed.
    for (ts, n_elems) in [(2usize, 100usize), (4, 100), (4, 127), (2, 127)] {
        let mut enc = lz4_encoder(1, ts, false);
        let mut value = vec![0u8; ts];
        value[0] = 0x34;
        value[1] = 0x12;
        let data = constant(&value, n_elems);
        let r = check_blosc(&mut enc, &data, ts, 1, false, "constant, small");
        assert_eq!(
            r.header.flags, 0x31,
            "ts {ts}: expected shuffle + DONT_SPLIT + lz4"
        );
        assert_eq!(r.layout.streams, vec![1]);
        assert_eq!(r.layout.packed_streams, 1);
    }
    // Exactly 128 elements: split again.
    let data = constant(&[0x34, 0x12], 128);
    let r = check_blosc(
        &mut lz4_encoder(1, 2, false),
        &data,
        2,
        1,
        false,
        "constant, 128 elements",
    );
    assert_eq!(r.header.flags, 0x21);
    assert_eq!(r.layout.streams, vec![2]);
    // Typesizes above MAX_SPLITS (16) are never split.
    let mut r = Rng::new(9);
    let data: Vec<u8> = (0..4096)
        .map(|i| {
            if i % 32 < 2 {
                (r.next_u64() & 3) as u8
            } else {
                0
            }
        })
        .collect();
    let rep = check_blosc(
        &mut lz4_encoder(1, 32, false),
        &data,
        32,
        1,
        false,
        "sparse ts 32",
    );
    assert_eq!(rep.header.flags & FLAG_DONT_SPLIT, FLAG_DONT_SPLIT);
    assert!(!rep.layout.memcpyed);
}

#[test]
fn blosc_memcpyed_frames() {
    // Random data: incompressible -> memcpyed, flag 0x02, cbytes == nbytes + 16.
    let mut rng = Rng::new(3);
    let data = rng.bytes(512 * 512 * 2);
    let mut enc = lz4_encoder(1, 2, false);
    let r = check_blosc(&mut enc, &data, 2, 1, false, "random 512x512 u16");
    assert!(r.layout.memcpyed);
    assert_eq!(r.header.flags, 0x23);
    assert_eq!(r.header.cbytes, data.len() + 16);
    assert_eq!(
        r.theirs,
        data.len() + 16,
        "c-blosc also memcpys random data"
    );

    // clevel 0: always memcpyed, blocksize still chosen like c-blosc (8192 for >= 32 KiB).
    let data = camera_u16(256, 256, 4);
    let mut enc0 = lz4_encoder(0, 2, false);
    let r = check_blosc(&mut enc0, &data, 2, 0, false, "camera 256x256 u16");
    assert!(r.layout.memcpyed);
    assert_eq!(r.header.flags, 0x23);
    assert_eq!(r.header.blocksize, 8192);
    assert_eq!(r.header.cbytes, data.len() + 16);

    // Input below 128 bytes: memcpyed and DONT_SPLIT (0x33 for typesize 2).
    for len in [2usize, 16, 100, 126] {
        let data = constant(&[7, 0], len / 2);
        let r = check_blosc(&mut lz4_encoder(5, 2, false), &data, 2, 5, false, "tiny");
        assert!(r.layout.memcpyed);
        assert_eq!(r.header.flags, 0x33, "{len} B");
    }
    // Typesize 1 and 4 tiny inputs.
    let r = check_blosc(
        &mut lz4_encoder(1, 1, false),
        &[9u8; 127],
        1,
        1,
        false,
        "tiny u8",
    );
    assert_eq!(r.header.flags, 0x33);
    let r = check_blosc(
        &mut lz4_encoder(1, 4, false),
        &constant(&[1, 2, 3, 4], 31),
        4,
        1,
        false,
        "tiny u32",
    );
    assert_eq!(r.header.flags, 0x33);
}

#[test]
fn blosc_odd_sizes_and_typesizes() {
    let mut rng = Rng::new(5);
    // Realistic-ish byte content with odd element counts.
    let u8_img = camera_u8(41, 61, 6); // 2501 B
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (1, u8_img[..1001].to_vec(), "1001 u8 elements"),
        (1, u8_img.clone(), "41x61 u8"),
        (4, camera_u32(1, 257, 7), "257 u32 elements"),
        (4, camera_u32(33, 31, 8), "33x31 u32"),
        (2, camera_u16(1, 1001, 10), "1001 u16 elements"),
        (2, camera_u16(3, 43, 11), "3x43 u16"),
        (
            1,
            (0..128u32).map(|i| (i / 3) as u8).collect(),
            "128 u8 (smallest compressed)",
        ),
        (1, (0..129u32).map(|i| (i / 3) as u8).collect(), "129 u8"),
        (
            2,
            (0..65u16)
                .flat_map(|i| (i / 4 + 100).to_le_bytes())
                .collect(),
            "65 u16 (130 B)",
        ),
        (
            1,
            camera_u8(256, 512, 12).into_iter().chain([1u8]).collect(),
            "131073 u8",
        ),
        (4, rng.bytes(4 * 257), "257 random u32"),
        (1, vec![42u8], "1 u8"),
        (4, vec![1, 0, 0, 0], "1 u32"),
    ];
    for clevel in [1u8, 5, 9] {
        // One encoder per typesize for the whole sweep: scratch reuse must not leak.
        let mut encs = [
            lz4_encoder(clevel, 1, false),
            lz4_encoder(clevel, 2, false),
            lz4_encoder(clevel, 4, false),
        ];
        for (ts, data, what) in &cases {
            let enc = &mut encs[ts.trailing_zeros() as usize];
            let r = check_blosc(enc, data, *ts, clevel, false, what);
            if data.len() >= 128 && r.ours < data.len() {
                assert!(!r.layout.memcpyed);
            }
        }
    }
}

#[test]
fn blosc_zero_and_constant_input() {
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (2, vec![0u8; 512 * 512 * 2], "zeros 512x512 u16"),
        (2, constant(&[0x34, 0x12], 512 * 512), "0x1234 512x512 u16"),
        (1, vec![0xFFu8; 100_000], "0xff x 100000 u8"),
        (
            4,
            constant(&[0x78, 0x56, 0x34, 0x12], 300 * 300),
            "0x12345678 300x300 u32",
        ),
        (2, vec![0u8; 180_000], "zeros 300x300 u16"),
    ];
    for clevel in [1u8, 9] {
        for (ts, data, what) in &cases {
            let mut enc = lz4_encoder(clevel, *ts, false);
            let r = check_blosc(&mut enc, data, *ts, clevel, false, what);
            assert!(!r.layout.memcpyed, "{what}");
            assert!(
                r.ours * 50 < data.len(),
                "{what}: constant input compressed only to {} B",
                r.ours
            );
            assert_eq!(r.layout.raw_streams, 0, "{what}");
        }
    }
}

#[test]
fn blosc_clevel_sweep_realistic() {
    let inputs: Vec<(usize, Vec<u8>, &str)> = vec![
        (2, camera_u16(256, 256, 20), "camera 256x256 u16"),
        (2, camera_u16(512, 512, 21), "camera 512x512 u16"),
        (1, camera_u8(512, 512, 22), "camera 512x512 u8"),
        (4, camera_u32(200, 300, 23), "camera 200x300 u32"),
    ];
    for clevel in 0..=9u8 {
        for (ts, data, what) in &inputs {
            let mut enc = lz4_encoder(clevel, *ts, clevel % 2 == 1);
            let r = check_blosc(&mut enc, data, *ts, clevel, clevel % 2 == 1, what);
            if clevel > 0 && *ts == 2 {
                assert!(
                    !r.layout.memcpyed,
                    "{what} clevel {clevel}: realistic u16 chunk memcpyed"
                );
                let ratio = data.len() as f64 / r.ours as f64;
                assert!(ratio > 1.5, "{what} clevel {clevel}: ratio {ratio:.2}");
            }
        }
    }
}

#[test]
fn blosc_size_vs_c_blosc() {
    println!(
        "{:<22} {:>6} {:>9} {:>10} {:>10} {:>8}",
        "input", "clevel", "nbytes", "ours", "c-blosc", "ours/c"
    );
    let inputs: Vec<(usize, Vec<u8>, &str)> = vec![
        (2, camera_u16(512, 512, 30), "camera 512x512 u16"),
        (2, camera_u16(256, 256, 31), "camera 256x256 u16"),
        (2, camera_u16(300, 300, 32), "camera 300x300 u16"),
        (1, camera_u8(512, 512, 33), "camera 512x512 u8"),
        (4, camera_u32(256, 256, 34), "camera 256x256 u32"),
    ];
    for (ts, data, what) in &inputs {
        for clevel in [1u8, 5, 9] {
            let r = check_blosc(
                &mut lz4_encoder(clevel, *ts, false),
                data,
                *ts,
                clevel,
                false,
                what,
            );
            let rel = r.ours as f64 / r.theirs as f64;
            println!(
                "{what:<22} {clevel:>6} {:>9} {:>10} {:>10} {rel:>8.3}",
                data.len(),
                r.ours,
                r.theirs
            );
            // The layout is identical (check_blosc compares blocksize and streams per block);
            // only the LZ4 payloads differ: lz4_flex has no acceleration while c-blosc uses
            // accel = 10 - clevel (so we are smaller at low clevels), and for streams under
            // 64 KiB + 11 B liblz4 hashes into 8192 u16 entries where lz4_flex uses 4096, so
            // c-blosc finds more matches in noisy 64 KiB planes (256x256 u16 at clevel >= 5,
            // one 128 KiB block = two 64 KiB streams: c-blosc ~3-6% smaller).
            assert!(
                (0.85..1.08).contains(&rel),
                "{what} clevel {clevel}: ours {} B vs c-blosc {} B",
                r.ours,
                r.theirs
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Blosc with zstd, and the other shuffles (no shuffle, bit shuffle), against c-blosc
// ---------------------------------------------------------------------------------------

const SETTINGS: [Setting; 6] = {
    use BloscCompressor::{Lz4, Zstd};
    use BloscShuffle::{BitShuffle, NoShuffle, Shuffle};
    [
        Setting {
            compressor: Zstd,
            shuffle: Shuffle,
        },
        Setting {
            compressor: Zstd,
            shuffle: BitShuffle,
        },
        Setting {
            compressor: Zstd,
            shuffle: NoShuffle,
        },
        Setting {
            compressor: Lz4,
            shuffle: BitShuffle,
        },
        Setting {
            compressor: Lz4,
            shuffle: NoShuffle,
        },
        Setting {
            compressor: Lz4,
            shuffle: Shuffle,
        },
    ]
};

/// Realistic chunks of 1, 2, 4 and 8-byte elements, with several blocks and leftover
/// blocks whose element count is and is not a multiple of 8 (bit shuffle's condition),
/// under every setting at the clevels ome-writers and our defaults use: the frames are
/// c-blosc's, byte for byte, and decode with c-blosc, getitem and the Rust walker.
#[test]
fn blosc_zstd_and_shuffles_equal_c_blosc_frames() {
    let inputs: Vec<(usize, Vec<u8>, &str)> = vec![
        (2, camera_u16(512, 512, 70), "camera 512x512 u16"),
        (2, camera_u16(300, 300, 71), "camera 300x300 u16"),
        (
            2,
            noisy_camera_u16(256, 256, 72),
            "noisy camera 256x256 u16",
        ),
        (1, camera_u8(300, 301, 73), "camera 300x301 u8"),
        (4, camera_u32(200, 300, 74), "camera 200x300 u32"),
        (8, camera_u64(128, 131, 75), "camera 128x131 u64"),
        // Leftover blocks of 1004 / 1001 elements (1004 = 8 × 125 + 4).
        (4, camera_u32(1, 8192 + 1004, 76), "9196 u32"),
        (2, camera_u16(1, 16384 + 1001, 77), "17385 u16"),
    ];
    let mut sizes = Vec::new();
    for setting in SETTINGS {
        for clevel in [1u8, 3, 5] {
            for (ts, data, what) in &inputs {
                let mut enc = setting.encoder(clevel, *ts, clevel == 3);
                let r = check_blosc_with(setting, &mut enc, data, *ts, clevel, clevel == 3, what);
                if !what.starts_with("noisy") {
                    assert!(!r.layout.memcpyed, "{what} {setting:?} clevel {clevel}");
                }
                if setting.compressor == BloscCompressor::Zstd {
                    // zstd never splits blocks (c-blosc's FORWARD_COMPAT rule).
                    assert_ne!(r.header.flags & FLAG_DONT_SPLIT, 0, "{what}");
                    assert!(r.layout.streams.iter().all(|&s| s == 1), "{what}");
                }
                if *what == "camera 512x512 u16" {
                    sizes.push((setting.codec(clevel), r.ours));
                }
            }
        }
    }
    for (codec, n) in &sizes {
        println!(
            "camera 512x512 u16 {codec:<24}: {n:>7} B (ratio {:.2})",
            524288.0 / *n as f64
        );
    }
}

/// Block sizes of zstd frames: twice LZ4's, four times at clevel 9, never enlarged by a
/// split, as c-blosc picks them (`check_blosc_with` compares them with c-blosc's).
#[test]
fn blosc_zstd_block_sizes() {
    let data = camera_u16(1024, 1024, 80);
    let zstd = Setting {
        compressor: BloscCompressor::Zstd,
        shuffle: BloscShuffle::Shuffle,
    };
    for (clevel, blocksize) in [(1u8, 32768), (3, 131072), (5, 262144), (9, 1 << 20)] {
        let r = check_blosc_with(
            zstd,
            &mut zstd.encoder(clevel, 2, false),
            &data,
            2,
            clevel,
            false,
            "camera 1024x1024 u16",
        );
        assert_eq!(r.header.blocksize, blocksize, "clevel {clevel}");
        assert_eq!(r.layout.nblocks, data.len() / blocksize, "clevel {clevel}");
    }
}

/// Edge inputs under every setting: memcpyed frames (clevel 0, tiny and random input),
/// constant input, element counts that are not a multiple of 8, partial trailing
/// elements, typesizes up to 16.
#[test]
fn blosc_zstd_and_shuffles_edge_inputs() {
    let mut rng = Rng::new(81);
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (2, vec![0u8; 512 * 512 * 2], "zeros 512x512 u16"),
        (
            8,
            constant(&[1, 2, 3, 4, 0, 0, 0, 0], 20000),
            "constant u64",
        ),
        (2, rng.bytes(100_000), "random u16"),
        (1, rng.bytes(5000), "random u8"),
        (2, camera_u16(1, 63, 82), "63 u16 (126 B, memcpyed)"),
        (2, camera_u16(1, 100, 83), "100 u16"),
        (4, camera_u32(1, 1001, 84), "1001 u32"),
        (8, camera_u64(1, 999, 85), "999 u64"),
        (1, camera_u8(1, 1001, 86), "1001 u8"),
        (2, camera_u16(1, 501, 87)[..1001].to_vec(), "1001 B of u16"),
        (4, camera_u32(1, 300, 88)[..1198].to_vec(), "1198 B of u32"),
        (16, camera_u64(32, 64, 89), "2048 x 16 B"),
    ];
    for setting in SETTINGS {
        for clevel in [0u8, 1, 9] {
            for (ts, data, what) in &cases {
                let mut enc = setting.encoder(clevel, *ts, false);
                let r = check_blosc_with(setting, &mut enc, data, *ts, clevel, false, what);
                if clevel == 0 || what.starts_with("random") || data.len() < 128 {
                    assert!(r.layout.memcpyed, "{what} {setting:?} clevel {clevel}");
                }
            }
        }
    }
}

/// Byte counts that are not a multiple of the typesize: not reachable through `Writer`
/// (chunks hold whole elements) but accepted by the public `ChunkEncoder::encode_slice`.
/// c-blosc copies the trailing partial element unchanged (spec 5.1).
#[test]
fn blosc_nbytes_not_multiple_of_typesize() {
    for (ts, len) in [(2usize, 1001usize), (2, 131_073), (4, 1030), (4, 3)] {
        let data: Vec<u8> = camera_u16(1, len.div_ceil(2), 40)
            .into_iter()
            .take(len)
            .collect();
        for clevel in [1u8, 9] {
            check_blosc(
                &mut lz4_encoder(clevel, ts, false),
                &data,
                ts,
                clevel,
                false,
                "partial element",
            );
        }
    }
}

/// The Blosc1 header stores the typesize in one byte (1..=255). `ChunkEncoder` takes any
/// `usize`: it must either refuse a typesize above 255 or write a frame that c-blosc decodes
/// (c-blosc itself falls back to typesize 1, i.e. no shuffle). Not reachable through `Writer`
/// (element sizes are 1..=4).
#[test]
fn blosc_typesize_limits() {
    let data: Vec<u8> = (0..255 * 200).map(|i| (i % 7) as u8).collect();
    check_blosc(
        &mut lz4_encoder(1, 255, false),
        &data,
        255,
        1,
        false,
        "typesize 255",
    );
    for ts in [256usize, 300] {
        let data: Vec<u8> = (0..ts * 200).map(|i| (i % 7) as u8).collect();
        let Ok(mut enc) = ChunkEncoder::new(Codec::blosc_lz4(1), ts, Checksum::None) else {
            continue; // refusing is fine
        };
        let what = format!("typesize {ts}");
        let f = encode(&mut enc, &data, &what);
        let h = Header::parse(&f);
        assert!(
            (1..=255).contains(&h.typesize),
            "{what}: header typesize byte is {} (c-blosc rejects 0; any other value \
             unshuffles with the wrong element size)",
            h.typesize
        );
        assert!(
            cblosc_decode(&f, &what) == data,
            "{what}: c-blosc decode differs"
        );
    }
}

#[test]
fn blosc_empty_input() {
    let mut enc = lz4_encoder(1, 2, true);
    let framed = encode(&mut enc, &[], "empty");
    let f = strip_crc(&framed, true, "empty");
    let h = Header::parse(&f);
    assert_eq!(f.len(), 16);
    assert_eq!(
        (h.nbytes, h.cbytes, h.flags & FLAG_MEMCPYED),
        (0, 16, FLAG_MEMCPYED)
    );
    assert!(cblosc_decode(&f, "empty").is_empty());
}

// ---------------------------------------------------------------------------------------
// zstd frames
// ---------------------------------------------------------------------------------------

/// Checks one zstd frame with libzstd and returns the decoded bytes.
fn zstd_decode(f: &[u8], expected_len: usize, checksum: bool, what: &str) -> Vec<u8> {
    assert!(f.len() >= 6, "{what}: frame too short");
    assert_eq!(&f[..4], &[0x28, 0xB5, 0x2F, 0xFD], "{what}: zstd magic");
    let fhd = f[4];
    assert_eq!(fhd & 0x08, 0, "{what}: reserved FHD bit");
    assert_eq!(
        (fhd >> 2) & 1 == 1,
        checksum,
        "{what}: Content_Checksum_flag (FHD {fhd:#04x})"
    );
    let fcs_present = (fhd >> 6) != 0 || (fhd >> 5) & 1 == 1;
    assert!(
        fcs_present,
        "{what}: no Frame_Content_Size field (FHD {fhd:#04x})"
    );
    let fcs = zstd::zstd_safe::get_frame_content_size(f)
        .unwrap_or_else(|_| panic!("{what}: content size error"));
    assert_eq!(fcs, Some(expected_len as u64), "{what}: frame content size");
    let csize =
        zstd::zstd_safe::find_frame_compressed_size(f).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        csize,
        f.len(),
        "{what}: trailing bytes after the zstd frame"
    );
    let d =
        zstd::bulk::decompress(f, expected_len).unwrap_or_else(|e| panic!("{what}: libzstd: {e}"));
    if checksum {
        // The checksum is real: corrupting it must fail the decode.
        let mut bad = f.to_vec();
        *bad.last_mut().unwrap() ^= 0xFF;
        assert!(
            zstd::bulk::decompress(&bad, expected_len).is_err(),
            "{what}: corrupted checksum accepted"
        );
    }
    d
}

#[test]
fn zstd_frames_decode_with_libzstd() {
    let mut rng = Rng::new(50);
    let inputs: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "empty"),
        (vec![7], "1 B"),
        (b"abcdefg".to_vec(), "7 B"),
        (vec![0; 128], "128 zeros"),
        (camera_u8(1, 1001, 51), "1001 u8"),
        (camera_u32(1, 257, 52), "257 u32"),
        (rng.bytes(4097), "4097 random"),
        (camera_u16(256, 256, 53), "camera 256x256 u16"),
        (camera_u16(512, 512, 54), "camera 512x512 u16"),
        (vec![0; 512 * 512 * 2], "zeros 512x512 u16"),
    ];
    let mut sizes = Vec::new();
    for level in [-1, 1, 3, 19] {
        for checksum in [false, true] {
            for crc in [false, true] {
                let mut enc =
                    ChunkEncoder::new(Codec::Zstd { level, checksum }, 2, Checksum::crc32c_if(crc))
                        .unwrap();
                for (data, name) in &inputs {
                    let what = format!("zstd level {level} checksum {checksum} crc {crc}: {name}");
                    let framed = encode(&mut enc, data, &what);
                    let f = strip_crc(&framed, crc, &what);
                    let d = zstd_decode(&f, data.len(), checksum, &what);
                    assert!(d == *data, "{what}: libzstd decode differs");
                    if !checksum && !crc && name.starts_with("camera 512") {
                        sizes.push((level, f.len()));
                    }
                }
            }
        }
    }
    for (level, n) in &sizes {
        println!(
            "zstd level {level:>3}: camera 512x512 u16 -> {n} B (ratio {:.2})",
            524288.0 / *n as f64
        );
    }
    // Realistic data compresses at every level.
    assert!(sizes.iter().all(|&(_, n)| n * 3 < 524288 * 2));
}

// ---------------------------------------------------------------------------------------
// crc32c and the `none` codec
// ---------------------------------------------------------------------------------------

#[test]
fn crc32c_suffix_on_every_codec() {
    let data = camera_u16(64, 64, 60);
    for codec in [
        Codec::none(),
        Codec::blosc_lz4(1),
        Codec::blosc_lz4(0),
        Codec::blosc_zstd(1),
        Codec::blosc_zstd(3).with_shuffle(BloscShuffle::BitShuffle),
        Codec::zstd(1),
        Codec::Zstd {
            level: 3,
            checksum: true,
        },
    ] {
        let plain = encode(
            &mut ChunkEncoder::new(codec, 2, Checksum::None).unwrap(),
            &data,
            "no crc",
        );
        let with = encode(
            &mut ChunkEncoder::new(codec, 2, Checksum::Crc32c).unwrap(),
            &data,
            "crc",
        );
        assert_eq!(with.len(), plain.len() + 4, "{codec:?}");
        assert_eq!(
            &with[..plain.len()],
            &plain[..],
            "{codec:?}: crc32c changed the frame"
        );
        let body = strip_crc(&with, true, &format!("{codec:?}"));
        match codec {
            Codec::None => assert_eq!(body, data),
            Codec::Blosc { .. } => assert_eq!(cblosc_decode(&body, "crc blosc"), data),
            Codec::Zstd { checksum, .. } => {
                assert_eq!(zstd_decode(&body, data.len(), checksum, "crc zstd"), data)
            }
            other => panic!("codec {other} not covered"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// End to end: every chunk frame of arrays written by `Writer` (edge tiles, fill padding,
// worker threads, compaction), read back from the shard files.
// ---------------------------------------------------------------------------------------

/// Checks and decodes one stored chunk with the reference implementations.
fn decode_chunk(
    codec: Codec,
    ts: usize,
    crc: bool,
    stored: &[u8],
    expected_len: usize,
    what: &str,
) -> Vec<u8> {
    let body = strip_crc(stored, crc, what);
    match codec {
        Codec::None => body,
        Codec::Blosc { .. } => {
            let h = Header::parse(&body);
            assert_eq!(
                (h.typesize, h.nbytes, h.cbytes),
                (ts, expected_len, body.len()),
                "{what}: header"
            );
            let d = cblosc_decode(&body, what);
            let n = expected_len / ts;
            if n > 0 {
                let got = cblosc_getitem(&body, n / 3, n - n / 3, ts, what);
                assert!(
                    got == d[n / 3 * ts..],
                    "{what}: getitem differs from the full decode"
                );
            }
            d
        }
        Codec::Zstd { checksum, .. } => zstd_decode(&body, expected_len, checksum, what),
        other => panic!("{what}: codec {other} not covered"),
    }
}

struct E2e {
    dtype: DataType,
    frame: [usize; 2],
    chunk: [usize; 3],
    shard: [usize; 3],
    frames: usize,
    fill: f64,
    codec: Codec,
    crc: bool,
}

fn frame_bytes(dtype: DataType, h: usize, w: usize, seed: u64) -> Vec<u8> {
    match dtype {
        DataType::UInt8 => camera_u8(h, w, seed),
        DataType::UInt16 => camera_u16(h, w, seed),
        DataType::UInt32 => camera_u32(h, w, seed),
        other => panic!("unused dtype {other:?}"),
    }
}

fn fill_bytes(dtype: DataType, fill: f64) -> Vec<u8> {
    match dtype {
        DataType::UInt8 => vec![fill as u8],
        DataType::UInt16 => (fill as u16).to_le_bytes().to_vec(),
        DataType::UInt32 => (fill as u32).to_le_bytes().to_vec(),
        other => panic!("unused dtype {other:?}"),
    }
}

fn run_e2e(c: &E2e) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let [h, w] = c.frame;
    let spec = ArraySpec::builder()
        .shape([0, h as u64, w as u64])
        .chunk_shape(c.chunk.map(|v| v as u64))
        .shard_shape(c.shard.map(|v| v as u64))
        .dtype(c.dtype)
        .fill_value(c.fill)
        .codec(c.codec)
        .crc32c(c.crc)
        .build()
        .unwrap();
    let opts = WriterOptions::default().threads(2).pin_threads(false);
    let mut writer = Writer::create(&path, spec, opts).unwrap();
    let frames: Vec<Vec<u8>> = (0..c.frames)
        .map(|t| frame_bytes(c.dtype, h, w, 100 + t as u64))
        .collect();
    for f in &frames {
        let _ = writer.push_bytes(f, std::time::Instant::now()).unwrap();
    }
    let stats = writer.finish().unwrap();
    assert_eq!(stats.frames_written, c.frames as u64);

    let ts = c.dtype.size();
    let fill = fill_bytes(c.dtype, c.fill);
    let chunk_len = c.chunk.iter().product::<usize>() * ts;
    let per = [0, 1, 2].map(|a| c.shard[a] / c.chunk[a]);
    let n = per.iter().product::<usize>();
    let extent = [c.frames, h, w];
    let nshards = [0, 1, 2].map(|a| extent[a].div_ceil(c.shard[a]));
    let mut checked = 0;
    for s0 in 0..nshards[0] {
        for s1 in 0..nshards[1] {
            for s2 in 0..nshards[2] {
                let file = path.join(format!("c/{s0}/{s1}/{s2}"));
                let bytes =
                    std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                checked += check_shard(
                    c,
                    &bytes,
                    [s0, s1, s2],
                    per,
                    n,
                    chunk_len,
                    &fill,
                    &frames,
                    &file,
                );
            }
        }
    }
    checked
}

#[allow(clippy::too_many_arguments)]
fn check_shard(
    c: &E2e,
    bytes: &[u8],
    sc: [usize; 3],
    per: [usize; 3],
    n: usize,
    chunk_len: usize,
    fill: &[u8],
    frames: &[Vec<u8>],
    file: &Path,
) -> usize {
    let ts = c.dtype.size();
    let [h, w] = c.frame;
    let index = &bytes[bytes.len() - (16 * n + 4)..];
    assert_eq!(
        u32::from_le_bytes(index[16 * n..].try_into().unwrap()),
        crc32c_ref(&index[..16 * n]),
        "{}: index crc32c",
        file.display()
    );
    let mut checked = 0;
    for i in 0..n {
        let (i0, i1, i2) = (i / (per[1] * per[2]), (i / per[2]) % per[1], i % per[2]);
        let cc = [
            sc[0] * per[0] + i0,
            sc[1] * per[1] + i1,
            sc[2] * per[2] + i2,
        ];
        let off = u64::from_le_bytes(index[16 * i..16 * i + 8].try_into().unwrap());
        let len = u64::from_le_bytes(index[16 * i + 8..16 * i + 16].try_into().unwrap());
        let what = format!(
            "{} chunk {cc:?} ({:?}, {:?})",
            file.display(),
            c.codec,
            c.dtype
        );
        if off == u64::MAX {
            assert_eq!(len, u64::MAX, "{what}: half-empty index entry");
            let inside =
                cc[0] * c.chunk[0] < c.frames && cc[1] * c.chunk[1] < h && cc[2] * c.chunk[2] < w;
            assert!(
                !inside,
                "{what}: chunk inside the array is missing from the index"
            );
            continue;
        }
        let stored = &bytes[off as usize..(off + len) as usize];
        let got = decode_chunk(c.codec, ts, c.crc, stored, chunk_len, &what);
        // Expected chunk: frame pixels where inside the array, fill elsewhere.
        let mut expected = Vec::with_capacity(chunk_len);
        for t in 0..c.chunk[0] {
            for y in 0..c.chunk[1] {
                for x in 0..c.chunk[2] {
                    let (gt, gy, gx) = (
                        cc[0] * c.chunk[0] + t,
                        cc[1] * c.chunk[1] + y,
                        cc[2] * c.chunk[2] + x,
                    );
                    if gt < c.frames && gy < h && gx < w {
                        let at = (gy * w + gx) * ts;
                        expected.extend_from_slice(&frames[gt][at..at + ts]);
                    } else {
                        expected.extend_from_slice(fill);
                    }
                }
            }
        }
        if let Some(p) = got.iter().zip(&expected).position(|(a, b)| a != b) {
            panic!("{what}: decoded chunk differs at byte {p}");
        }
        assert_eq!(got.len(), expected.len(), "{what}: decoded length");
        checked += 1;
    }
    checked
}

#[test]
fn e2e_writer_chunks_decode_with_reference_libraries() {
    let cases = [
        // Edge tiles in y and x (100x150 frames, 64x64 chunks), fill padding, split frames.
        E2e {
            dtype: DataType::UInt16,
            frame: [100, 150],
            chunk: [1, 64, 64],
            shard: [2, 128, 128],
            frames: 5,
            fill: 7.0,
            codec: Codec::blosc_lz4(1),
            crc: true,
        },
        // Bigger chunks with several blocks and a leftover block per chunk at clevel 1.
        E2e {
            dtype: DataType::UInt16,
            frame: [300, 310],
            chunk: [1, 300, 300],
            shard: [2, 300, 600],
            frames: 3,
            fill: 0.0,
            codec: Codec::blosc_lz4(1),
            crc: false,
        },
        E2e {
            dtype: DataType::UInt8,
            frame: [70, 90],
            chunk: [1, 32, 64],
            shard: [1, 64, 128],
            frames: 3,
            fill: 255.0,
            codec: Codec::blosc_lz4(5),
            crc: true,
        },
        E2e {
            dtype: DataType::UInt32,
            frame: [50, 60],
            chunk: [1, 32, 32],
            shard: [3, 64, 64],
            frames: 4,
            fill: 65536.0 + 3.0,
            codec: Codec::blosc_lz4(9),
            crc: false,
        },
        // Deep chunks (staged contiguously).
        E2e {
            dtype: DataType::UInt16,
            frame: [40, 50],
            chunk: [2, 32, 32],
            shard: [4, 64, 64],
            frames: 5,
            fill: 1.0,
            codec: Codec::blosc_lz4(1),
            crc: true,
        },
        E2e {
            dtype: DataType::UInt16,
            frame: [100, 150],
            chunk: [1, 64, 64],
            shard: [2, 128, 128],
            frames: 5,
            fill: 7.0,
            codec: Codec::Zstd {
                level: 3,
                checksum: true,
            },
            crc: true,
        },
        E2e {
            dtype: DataType::UInt8,
            frame: [70, 90],
            chunk: [2, 32, 64],
            shard: [2, 64, 128],
            frames: 3,
            fill: 9.0,
            codec: Codec::zstd(-1),
            crc: false,
        },
        // Blosc with zstd: edge tiles, several blocks and leftovers per chunk.
        E2e {
            dtype: DataType::UInt16,
            frame: [300, 310],
            chunk: [1, 300, 300],
            shard: [2, 300, 600],
            frames: 3,
            fill: 5.0,
            codec: Codec::blosc_zstd(1),
            crc: true,
        },
        // Bit shuffle through the writer's tiling (edge tiles with fill), 1 and 4-byte
        // elements, deep chunks.
        E2e {
            dtype: DataType::UInt8,
            frame: [70, 90],
            chunk: [2, 32, 64],
            shard: [2, 64, 128],
            frames: 3,
            fill: 200.0,
            codec: Codec::blosc_zstd(3).with_shuffle(BloscShuffle::BitShuffle),
            crc: true,
        },
        E2e {
            dtype: DataType::UInt32,
            frame: [50, 60],
            chunk: [1, 32, 32],
            shard: [3, 64, 64],
            frames: 4,
            fill: 65536.0 + 3.0,
            codec: Codec::blosc_lz4(5).with_shuffle(BloscShuffle::BitShuffle),
            crc: false,
        },
        E2e {
            dtype: DataType::UInt16,
            frame: [100, 150],
            chunk: [1, 64, 64],
            shard: [2, 128, 128],
            frames: 5,
            fill: 7.0,
            codec: Codec::blosc_zstd(5).with_shuffle(BloscShuffle::NoShuffle),
            crc: true,
        },
    ];
    for c in &cases {
        let checked = run_e2e(c);
        println!(
            "e2e {:?} {:?} crc {}: {checked} chunks checked",
            c.codec, c.dtype, c.crc
        );
        assert!(checked > 0);
    }
}
