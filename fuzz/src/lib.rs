//! The checks behind every fuzz target. Each takes arbitrary bytes, must not panic on
//! any of them, and asserts what holds for every input (a clean `Ok` or `Err`, and
//! agreement with the reference decoders where they apply).
//!
//! `tests/writer/fuzz_regressions.rs` includes this file, so the saved inputs under
//! `tests/fuzz_regressions/<target>/` run through the same code in `cargo test`, on
//! stable, without libFuzzer. Keep it to dependencies the main crate has too
//! (`zarrstream`, `blosc-src`, `zstd`, `serde_json`, `crc32c`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;
use zarrstream::read::index::{EMPTY, parse_index, raw_entries};
use zarrstream::read::{ReadError, blosc, metadata::parse_array_json, zstd as zread};
use zarrstream::recover::{ShardOutcome, recover_store};
use zarrstream::store::ShardLayout;
use zarrstream::{
    ArraySpec, BloscShuffle, Checksum, ChunkEncoder, Codec, DataType, IndexLocation, Writer,
    WriterOptions,
};

/// A target's check of one input.
pub type Check = fn(&[u8]);

/// Every target: its name (the `fuzz_targets/<name>.rs` file and the regression
/// directory) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("shard_index", shard_index),
    ("blosc_decode", blosc_decode),
    ("blosc_roundtrip", blosc_roundtrip),
    ("zstd_decode", zstd_decode),
    ("metadata", metadata),
    ("recover", recover),
];

/// Reads fields off the front of the input; bytes past the end read as 0.
pub struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes(data)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        let t = self.take(N);
        a[..t.len()].copy_from_slice(t);
        a
    }
    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }
    pub fn rest(self) -> &'a [u8] {
        self.0
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Largest decoded size any target lets a decoder allocate.
const MAX_DECODED: usize = 1 << 22;

// ---------------------------------------------------------------------------------------
// Shard index
// ---------------------------------------------------------------------------------------

/// `read::index::parse_index` on arbitrary bytes and chunk counts: `Ok` exactly for
/// `16 n + 4` bytes with a matching crc32c, and then the entries encode back to the
/// same bytes; otherwise the error that says which check failed.
pub fn shard_index(data: &[u8]) {
    let mut b = Bytes::new(data);
    let mode = b.u8();
    let given = usize::from(b.u16());
    let mut bytes = b.rest().to_vec();
    let n = match mode % 4 {
        0 => given,
        1 => bytes.len().saturating_sub(4) / 16,
        2 => usize::MAX - given,
        _ => {
            let n = bytes.len() / 16;
            bytes.resize(16 * n + 4, 0xff);
            n
        }
    };
    if mode & 4 != 0 && bytes.len() >= 4 {
        let at = bytes.len() - 4;
        let crc = crc32c::crc32c(&bytes[..at]);
        put_u32(&mut bytes, at, crc);
    }
    let raw: Vec<(u64, u64)> = raw_entries(&bytes).collect();
    assert_eq!(raw.len(), bytes.len() / 16, "raw_entries count");
    let size = n.checked_mul(16).and_then(|s| s.checked_add(4));
    match parse_index(&bytes, n) {
        Ok(entries) => {
            assert_eq!(
                size,
                Some(bytes.len()),
                "accepted an index of the wrong length"
            );
            assert_eq!(entries.len(), n);
            let mut again = Vec::with_capacity(bytes.len());
            for (e, r) in entries.iter().zip(&raw) {
                let (o, l) = e.unwrap_or((EMPTY, EMPTY));
                assert_eq!((o, l), *r, "entry differs from the raw bytes");
                assert!(
                    e.is_none() || *r != (EMPTY, EMPTY),
                    "empty marker read as a chunk"
                );
                again.extend(o.to_le_bytes());
                again.extend(l.to_le_bytes());
            }
            again.extend(crc32c::crc32c(&again).to_le_bytes());
            assert_eq!(again, bytes, "entries do not encode back to the index");
        }
        Err(ReadError::IndexLength { expected, got }) => {
            assert_eq!(got, bytes.len() as u64);
            assert_ne!(size, Some(bytes.len()), "right length refused");
            assert_eq!(expected, size.map_or(u64::MAX, |s| s as u64));
        }
        Err(ReadError::IndexChecksum { stored, computed }) => {
            assert_eq!(size, Some(bytes.len()));
            assert_ne!(stored, computed);
            assert_eq!(computed, crc32c::crc32c(&bytes[..16 * n]));
            assert_eq!(stored, get_u32(&bytes, 16 * n));
        }
        Err(e) => panic!("unexpected error from parse_index: {e}"),
    }
}

// ---------------------------------------------------------------------------------------
// Blosc
// ---------------------------------------------------------------------------------------

/// c-blosc's decode of a frame (validate, then `blosc_decompress_ctx`), or `None` when
/// c-blosc refuses it. Only called on frames our decoder accepted or our encoder wrote.
fn cblosc_decode(f: &[u8]) -> Option<Vec<u8>> {
    let mut nbytes = 0usize;
    // SAFETY: `f` is a live slice of `f.len()` bytes and `nbytes` a valid out-pointer;
    // validate reads at most the 16 header bytes it checks `f.len()` against.
    let rc = unsafe {
        blosc_src::blosc_cbuffer_validate(f.as_ptr().cast::<c_void>(), f.len(), &raw mut nbytes)
    };
    if rc != 0 || nbytes > MAX_DECODED {
        return None;
    }
    let mut dest = vec![0xC3u8; nbytes + 64];
    // SAFETY: the frame passed validation (its cbytes is `f.len()`); `dest` holds
    // `nbytes + 64` writable bytes and destsize is `nbytes`; the ctx variant keeps no
    // global state.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            f.as_ptr().cast::<c_void>(),
            dest.as_mut_ptr().cast::<c_void>(),
            nbytes,
            1,
        )
    };
    assert!(
        dest[nbytes..].iter().all(|&b| b == 0xC3),
        "c-blosc wrote past destsize"
    );
    if n < 0 || n as usize != nbytes {
        return None;
    }
    dest.truncate(nbytes);
    Some(dest)
}

/// `read::blosc::decompress` on arbitrary frames (optionally with plausible header
/// fields patched in, so the fuzzer gets past the header): never more than the limit,
/// `Ok` only for frames whose header validates and which c-blosc decodes to the same
/// bytes.
pub fn blosc_decode(data: &[u8]) {
    let mut b = Bytes::new(data);
    let mode = b.u8();
    let limit_sel = b.u8();
    let mut frame = b.rest().to_vec();
    if frame.len() >= 16 {
        if mode & 2 != 0 {
            // version 2, compressor version 1, no reserved bit, lz4 (or zstd) compressor
            let compressor = if mode & 8 != 0 { 0x80 } else { 0x20 };
            frame[0] = 2;
            frame[1] = 1;
            frame[2] = (frame[2] & 0x17) | compressor;
            frame[3] = frame[3].max(1);
        }
        if mode & 4 != 0 {
            // nbytes small, 0 < blocksize <= nbytes
            let nb = u32::from(u16::from_le_bytes([frame[4], frame[5]])) + 1;
            let bs = u32::from(u16::from_le_bytes([frame[8], frame[9]])) % nb + 1;
            put_u32(&mut frame, 4, nb);
            put_u32(&mut frame, 8, bs);
        }
        if mode & 1 != 0 {
            let len = frame.len() as u32;
            put_u32(&mut frame, 12, len);
        }
    }
    let declared = if frame.len() >= 16 {
        get_u32(&frame, 4) as usize
    } else {
        0
    };
    let limit = match limit_sel % 4 {
        0 => MAX_DECODED,
        1 => declared.min(MAX_DECODED),
        2 => usize::from(limit_sel) * 64,
        _ => declared.saturating_sub(1).min(MAX_DECODED),
    };
    let header = blosc::header(&frame, limit);
    match blosc::decompress(&frame, limit) {
        Ok(d) => {
            let h = header.expect("a frame that decodes has a valid header");
            assert_eq!(d.len(), h.nbytes, "decoded size differs from nbytes");
            assert!(d.len() <= limit, "decoded past the limit");
            assert_eq!(h.cbytes, frame.len());
            match cblosc_decode(&frame) {
                Some(c) => assert!(c == d, "c-blosc decodes this frame differently"),
                None => panic!("decoded a frame that c-blosc refuses"),
            }
        }
        Err(e) => {
            if let Err(he) = header {
                // A header error is reported as such by the decoder too.
                assert_eq!(e, he, "decoder and header disagree");
            }
            if let Err(ReadError::TooLarge {
                nbytes, limit: l, ..
            }) = blosc::header(&frame, limit)
            {
                assert!(nbytes > l && l == limit as u64);
            }
        }
    }
}

/// Our encoder's frames: for arbitrary bytes (optionally repeated up to 256 KiB, to get
/// several blocks), element sizes, levels, compressors (lz4, zstd) and shuffles, the header is right (`cbytes` = frame
/// length ≤ `nbytes + 16`), and both `read::blosc::decompress` and c-blosc give back
/// the input.
pub fn blosc_roundtrip(data: &[u8]) {
    let mut b = Bytes::new(data);
    let ts_sel = b.u8();
    let level_sel = b.u8();
    let clevel = level_sel % 10;
    let flags = b.u8();
    let rest = b.rest();
    let ts = if ts_sel & 0x80 == 0 {
        [1usize, 2, 4, 8, 3, 16, 12, 6][usize::from(ts_sel & 7)]
    } else {
        1 + usize::from(ts_sel & 0x7f) * 2
    };
    let crc = flags & 1 != 0;
    let input: Vec<u8> = if flags & 2 != 0 && !rest.is_empty() {
        let len = (rest.len() * (1 + usize::from(flags >> 2) * 97)).min(1 << 18);
        rest.iter().copied().cycle().take(len).collect()
    } else {
        rest.to_vec()
    };
    // Past the clevel, the level byte picks the compressor and shuffle (0: lz4 with the
    // default shuffle, as before these were added).
    let setting = level_sel / 10 % 8;
    let codec = if setting & 1 == 0 {
        Codec::blosc_lz4(clevel)
    } else {
        Codec::blosc_zstd(clevel)
    };
    let codec = match setting >> 1 {
        1 => codec.with_shuffle(BloscShuffle::NoShuffle),
        2 => codec.with_shuffle(BloscShuffle::Shuffle),
        3 => codec.with_shuffle(BloscShuffle::BitShuffle),
        _ => codec,
    };
    let mut enc =
        ChunkEncoder::new(codec, ts, Checksum::crc32c_if(crc)).expect("typesize in 1..=255");
    let bound = enc.slot_bound(input.len());
    let mut out = vec![0xA5u8; bound];
    let n = enc.encode_slice(&input, &mut out).expect("encode");
    assert!(n <= bound, "{n} bytes > slot bound {bound}");
    out.truncate(n);
    if crc {
        let at = out.len() - 4;
        assert_eq!(get_u32(&out, at), crc32c::crc32c(&out[..at]), "crc32c");
        out.truncate(at);
    }
    let f = out;
    assert!(f.len() >= 16);
    assert_eq!((f[0], f[1], usize::from(f[3])), (2, 1, ts), "header bytes");
    assert_eq!(get_u32(&f, 4) as usize, input.len(), "nbytes");
    assert_eq!(
        get_u32(&f, 12) as usize,
        f.len(),
        "cbytes is not the frame length"
    );
    assert!(f.len() <= input.len() + 16, "cbytes > nbytes + 16");
    let ours = blosc::decompress(&f, input.len()).expect("our decoder refuses our frame");
    assert!(ours == input, "our decoder gives different bytes");
    if !input.is_empty() {
        assert!(matches!(
            blosc::decompress(&f, input.len() - 1),
            Err(ReadError::TooLarge { .. })
        ));
    }
    let theirs = cblosc_decode(&f).expect("c-blosc refuses our frame");
    assert!(theirs == input, "c-blosc gives different bytes");
}

// ---------------------------------------------------------------------------------------
// zstd
// ---------------------------------------------------------------------------------------

/// `read::zstd::decompress` on arbitrary frames: never past the limit, and what it
/// accepts libzstd decodes to the same bytes.
pub fn zstd_decode(data: &[u8]) {
    let mut b = Bytes::new(data);
    let mode = b.u8();
    let limit_sel = b.u8();
    let mut frame = b.rest().to_vec();
    if mode & 1 != 0 && frame.len() >= 4 {
        frame[..4].copy_from_slice(&0xFD2F_B528u32.to_le_bytes());
    }
    let declared = zstd::zstd_safe::get_frame_content_size(&frame)
        .ok()
        .flatten()
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let limit = match limit_sel % 4 {
        0 => MAX_DECODED,
        1 => declared.min(MAX_DECODED),
        2 => usize::from(limit_sel) * 64,
        _ => declared.saturating_sub(1).min(MAX_DECODED),
    };
    if let Ok(d) = zread::decompress(&frame, limit) {
        assert!(d.len() <= limit, "decoded past the limit");
        assert_eq!(
            d.len(),
            declared,
            "decoded size differs from the content size"
        );
        let reference = zstd::bulk::decompress(&frame, limit).expect("libzstd refuses the frame");
        assert!(reference == d, "libzstd decodes this frame differently");
    }
}

// ---------------------------------------------------------------------------------------
// zarr.json
// ---------------------------------------------------------------------------------------

/// `read::metadata::parse_array_json` on arbitrary JSON: what it accepts is a valid
/// spec with a shard layout.
pub fn metadata(data: &[u8]) {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(meta) = parse_array_json(&doc) {
        let spec = &meta.spec;
        assert!(spec.rank() >= 3);
        let layout = ShardLayout::new(spec).expect("accepted spec without a layout");
        assert_eq!(layout.n() as usize, spec.chunks_per_shard());
        assert_eq!(doc["shape"].as_array().map(Vec::len), Some(spec.rank()));
    }
}

// ---------------------------------------------------------------------------------------
// Recovery
// ---------------------------------------------------------------------------------------

/// The arrays the recovery target crashes: codec (none, lz4, zstd) × crc32c × index
/// location × 3 shapes (rank 3; rank 4 with a short shard row; bounded with deep
/// chunks and a partial shard along x).
fn recover_spec(sel: u8) -> ArraySpec {
    let codec = match sel % 3 {
        0 => Codec::none(),
        1 => Codec::blosc_lz4(1),
        _ => Codec::zstd(1),
    };
    let (shape, chunk, shard): (&[u64], &[u64], &[u64]) = match (sel / 12) % 3 {
        0 => (&[0, 8, 8], &[1, 4, 4], &[2, 8, 8]),
        1 => (&[0, 3, 6, 5], &[1, 1, 3, 5], &[2, 3, 6, 5]),
        _ => (&[6, 8, 10], &[2, 4, 4], &[2, 8, 8]),
    };
    ArraySpec::builder()
        .shape(shape)
        .chunk_shape(chunk)
        .shard_shape(shard)
        .dtype(DataType::UInt16)
        .fill_value(3.0)
        .codec(codec)
        .crc32c((sel / 3) % 2 == 1)
        .index_location(if (sel / 6) % 2 == 1 {
            IndexLocation::Start
        } else {
            IndexLocation::End
        })
        .build()
        .expect("recover spec")
}

fn scratch_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn unique_dir(what: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    scratch_root().join(format!("zarrstream-fuzz-{what}-{}-{n}", std::process::id()))
}

/// The `zarr.json` the writer publishes for `recover_spec(sel)` (made once per spec by
/// an empty recording).
fn zarr_json(sel: u8) -> Value {
    static CACHE: OnceLock<Mutex<HashMap<u8, Value>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.entry(sel)
        .or_insert_with(|| {
            let dir = unique_dir("template");
            let path = dir.join("a.zarr");
            let opts = WriterOptions::default().threads(1).pin_threads(false);
            let w = Writer::create(&path, recover_spec(sel), opts).expect("template writer");
            w.finish().expect("template finish");
            let text = std::fs::read(path.join("zarr.json")).expect("template zarr.json");
            let _ = std::fs::remove_dir_all(&dir);
            serde_json::from_slice(&text).expect("template JSON")
        })
        .clone()
}

/// Removes a directory tree when dropped (also when a check panics).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Keys (shard coordinates) the fuzzer may name a temporary shard with. Axis 0 is any
/// `u64` only when the input asks for it.
fn partial_coords(b: &mut Bytes<'_>, spec: &ArraySpec) -> Vec<u64> {
    let wild = b.u8();
    let rank = spec.rank();
    (0..rank)
        .map(|a| {
            let grid = spec.shape()[a].div_ceil(spec.shard_shape()[a]).max(1);
            match (a, wild) {
                (0, 0xff) => b.u64(),
                (0, _) => u64::from(wild % 4),
                // Mostly inside the grid, sometimes just outside (a stranger file).
                _ => u64::from(b.u8()) % (grid + u64::from(wild & 1)),
            }
        })
        .collect()
}

/// A crashed temporary shard built by a sequence of operations: chunks encoded into
/// their slots with their working-index entries (as the workers write them), raw
/// entries, byte flips, truncation, and the finisher's compaction interrupted after any
/// number of moves (with or without its final index and truncation).
struct Partial {
    file: Vec<u8>,
    /// Whether only whole chunks and their entries were written (nothing corrupted).
    pristine: bool,
    /// Slots written with a valid chunk (pristine files keep exactly these).
    written: Vec<bool>,
}

fn chunk_bytes(spec: &ArraySpec, seed: u8) -> Vec<u8> {
    let n = spec.chunk_bytes();
    (0..n)
        .map(|i| match seed % 3 {
            0 => seed,
            1 => (i / 3) as u8 ^ seed,
            _ => (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed,
        })
        .collect()
}

fn build_partial(b: &mut Bytes<'_>, spec: &ArraySpec, l: &ShardLayout) -> Partial {
    let n = l.n() as usize;
    let mut file = vec![0u8; l.file_size() as usize];
    let mut entries: Vec<Option<(u64, u64)>> = vec![None; n];
    let mut p = Partial {
        file: Vec::new(),
        pristine: true,
        written: vec![false; n],
    };
    let set_entry = |file: &mut Vec<u8>, i: usize, o: u64, len: u64| {
        let at = (l.index_offset() + 16 * i as u64) as usize;
        if at + 16 <= file.len() {
            file[at..at + 8].copy_from_slice(&o.to_le_bytes());
            file[at + 8..at + 16].copy_from_slice(&len.to_le_bytes());
        }
    };
    for i in 0..n {
        set_entry(&mut file, i, EMPTY, EMPTY);
    }
    let mut enc =
        ChunkEncoder::new(spec.codec(), spec.dtype().size(), spec.checksum()).expect("encoder");
    let mut ops = 0;
    while !b.is_empty() && ops < 64 {
        ops += 1;
        match b.u8() % 6 {
            0 => {
                let i = usize::from(b.u8()) % n;
                let data = chunk_bytes(spec, b.u8());
                let slot = l.slot_offset(i as u64) as usize;
                if slot + l.slot_size() as usize > file.len() {
                    continue;
                }
                let out = &mut file[slot..slot + l.slot_size() as usize];
                let len = enc.encode_slice(&data, out).expect("encode") as u64;
                set_entry(&mut file, i, slot as u64, len);
                entries[i] = Some((slot as u64, len));
                p.written[i] = true;
            }
            1 => {
                let i = usize::from(b.u8()) % n;
                let kind = b.u8();
                let (o, len) = match kind % 4 {
                    0 => (b.u64(), b.u64()),
                    1 => (
                        l.slot_offset(i as u64) + u64::from(b.u8()),
                        u64::from(b.u16()),
                    ),
                    2 => (EMPTY, u64::from(b.u16())),
                    _ => (0, 0),
                };
                set_entry(&mut file, i, o, len);
                p.pristine = false;
            }
            2 => {
                if !file.is_empty() {
                    let at = b.u32() as usize % file.len();
                    file[at] ^= b.u8() | 1;
                    p.pristine = false;
                }
            }
            3 => {
                let len = b.u32() as u64 % (l.file_size() + 64);
                file.resize(len as usize, 0);
                p.pristine = false;
            }
            4 => {
                finish(&mut file, l, &entries, b.u8(), b.u8());
                p.pristine = false;
            }
            _ => {
                file.clear();
                p.pristine = false;
            }
        }
    }
    p.file = file;
    p
}

/// The finisher's compaction (chunks in slot order packed from the start, or after the
/// index), stopped after `moves` moves; if it got through all of them, the final index
/// is written (`stage` bit 0) and the file cut to its final length (bit 1).
fn finish(
    file: &mut Vec<u8>,
    l: &ShardLayout,
    entries: &[Option<(u64, u64)>],
    moves: u8,
    stage: u8,
) {
    let start = l.location() == IndexLocation::Start;
    let mut pos = if start { l.index_size() } else { 0 };
    let mut done = 0u8;
    let mut fin = Vec::with_capacity(entries.len());
    for e in entries {
        let Some((o, len)) = *e else {
            fin.push(None);
            continue;
        };
        if o != pos {
            if done == moves || (o + len) as usize > file.len() {
                return; // interrupted: no final index yet
            }
            file.copy_within(o as usize..(o + len) as usize, pos as usize);
            done += 1;
        }
        fin.push(Some((pos, len)));
        pos += len;
    }
    if stage & 1 == 0 {
        return;
    }
    let (at, len) = if start {
        (0, pos.max(l.index_size()))
    } else {
        (pos, pos + l.index_size())
    };
    let mut index = Vec::with_capacity(l.index_size() as usize);
    for e in &fin {
        let (o, n) = e.unwrap_or((EMPTY, EMPTY));
        index.extend(o.to_le_bytes());
        index.extend(n.to_le_bytes());
    }
    index.extend(crc32c::crc32c(&index).to_le_bytes());
    let at = at as usize;
    if at + index.len() <= file.len() {
        file[at..at + index.len()].copy_from_slice(&index);
    }
    if stage & 2 != 0 {
        file.truncate(len as usize);
    }
}

/// Whether `bytes` are a valid encoded chunk of `spec` (crc32c, or a full decode to the
/// chunk size).
fn chunk_is_valid(spec: &ArraySpec, bytes: &[u8]) -> bool {
    if spec.crc32c() {
        return bytes.len() > 4 && {
            let at = bytes.len() - 4;
            get_u32(bytes, at) == crc32c::crc32c(&bytes[..at])
        };
    }
    let want = spec.chunk_bytes();
    match spec.codec() {
        Codec::None => bytes.len() == want,
        Codec::Blosc { .. } => blosc::decompress(bytes, want).is_ok_and(|d| d.len() == want),
        Codec::Zstd { .. } => zread::decompress(bytes, want).is_ok_and(|d| d.len() == want),
        // A codec this harness cannot decode: its chunks cannot be shown valid.
        _ => false,
    }
}

/// Checks a finished shard file: a final index with its crc32c at its place, entries
/// inside the data region and apart, every chunk valid. Returns the chunks present.
fn check_finished_shard(spec: &ArraySpec, l: &ShardLayout, bytes: &[u8]) -> Vec<bool> {
    let size = l.index_size() as usize;
    assert!(bytes.len() >= size, "rebuilt shard shorter than its index");
    let (at, lo, hi) = match l.location() {
        IndexLocation::Start => (0, size, bytes.len()),
        IndexLocation::End => (bytes.len() - size, 0, bytes.len() - size),
        other => panic!("index location {other} not covered"),
    };
    let entries = parse_index(&bytes[at..at + size], l.n() as usize).expect("rebuilt index");
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for e in entries.iter().flatten() {
        let (o, n) = (e.0 as usize, e.1 as usize);
        assert!(
            o >= lo && o + n <= hi,
            "rebuilt entry {e:?} outside {lo}..{hi}"
        );
        assert!(
            chunk_is_valid(spec, &bytes[o..o + n]),
            "rebuilt chunk {e:?} is invalid"
        );
        spans.push((o, n));
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "rebuilt chunks overlap: {w:?}");
    }
    entries.iter().map(Option::is_some).collect()
}

/// `recover::recover_store` on a store whose writer "crashed" with one temporary shard
/// of arbitrary (or arbitrarily damaged) content, and `zarr.json` in state `finished`
/// or `running` with any published extent: recovery succeeds, every shard it
/// rebuilds is a valid finished shard of verified chunks, an undamaged temporary shard
/// keeps all its chunks, the temporary file is gone (or set aside), `zarr.json` reads
/// back with the reported shape, and a second run changes nothing.
pub fn recover(data: &[u8]) {
    let mut b = Bytes::new(data);
    let sel = b.u8() % 36;
    let meta_mode = b.u8();
    // The published append-axis extent, when the input sets one.
    let shape0 = (meta_mode & 2 != 0).then(|| b.u64());
    let spec = recover_spec(sel);
    let layout = ShardLayout::new(&spec).expect("layout");
    let coords = partial_coords(&mut b, &spec);
    let raw = b.u8() & 1 == 1;
    let partial = if raw {
        let rest = b.rest();
        Partial {
            file: rest.to_vec(),
            pristine: false,
            written: Vec::new(),
        }
    } else {
        build_partial(&mut b, &spec, &layout)
    };

    let mut doc = zarr_json(sel);
    if meta_mode & 1 != 0 {
        doc["attributes"]["zarrstream"]["state"] = Value::from("running");
    }
    if let Some(v) = shape0 {
        doc["shape"][0] = Value::from(v);
    }
    let dir = TempDir(unique_dir("recover"));
    let store = dir.0.join("a.zarr");
    let tmp = store.join(zarrstream::store::PARTIAL_DIR);
    std::fs::create_dir_all(&tmp).expect("mkdir");
    std::fs::write(store.join("zarr.json"), serde_json::to_vec(&doc).unwrap()).expect("zarr.json");
    let name = coords
        .iter()
        .fold(String::from("c"), |k, c| format!("{k}.{c}"))
        + ".partial";
    std::fs::write(tmp.join(&name), &partial.file).expect("partial");

    let report = match recover_store(&store) {
        Ok(r) => r,
        Err(e) => panic!("recovery failed: {e}"),
    };
    let files: Vec<String> = std::fs::read_dir(&tmp)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !files.iter().any(|f| f.ends_with(".recovering")),
        "{files:?}"
    );
    for s in &report.shards {
        assert!(
            !files.contains(&s.file),
            "{} left behind after {:?}",
            s.file,
            s.outcome
        );
        match s.outcome {
            ShardOutcome::Rebuilt => {
                let bytes = std::fs::read(store.join(&s.key)).expect("rebuilt shard");
                assert_eq!(bytes.len() as u64, s.bytes);
                let present = check_finished_shard(&spec, &layout, &bytes);
                let kept = present.iter().filter(|&&p| p).count() as u64;
                assert_eq!(kept, s.chunks_kept, "index and report disagree");
                if partial.pristine {
                    assert_eq!(present, partial.written, "an undamaged chunk was lost");
                }
            }
            ShardOutcome::Empty => {
                assert_eq!(s.chunks_kept, 0);
                if partial.pristine {
                    assert!(!partial.written.contains(&true), "undamaged chunks lost");
                }
            }
            ShardOutcome::Unrecoverable => {
                assert!(!partial.pristine, "an undamaged shard is unrecoverable");
            }
        }
    }
    let text = std::fs::read(store.join("zarr.json")).expect("zarr.json after recovery");
    let after: Value = serde_json::from_slice(&text).expect("zarr.json is JSON");
    let meta = parse_array_json(&after).expect("zarr.json after recovery parses");
    assert_eq!(meta.spec.shape(), &report.shape[..]);
    assert!(report.frames_committed <= report.shape[0].saturating_mul(spec.frames_per_step()));
    let again = recover_store(&store).expect("second recovery");
    assert!(
        again
            .shards
            .iter()
            .all(|s| s.outcome != ShardOutcome::Rebuilt)
    );
    assert_eq!(
        again.frames_committed, report.frames_committed,
        "second run differs"
    );
    assert_eq!(again.shape, report.shape, "second run differs");
}
