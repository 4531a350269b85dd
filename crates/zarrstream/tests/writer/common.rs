//! Shared helpers of the round-trip tests: deterministic frame content per element type,
//! a reference model of what the array must hold, the writer driver, and the checks
//! (metadata, files on disk, shard indexes, and every element read back with `zarrs`).

#![allow(dead_code)]

use std::fmt::{Debug, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zarrs::array::{
    Array, ArrayShardedReadableExt, ArrayShardedReadableExtCache, ArraySubset, CodecOptions,
};
use zarrs::filesystem::FilesystemStore;
use zarrstream::{
    ArraySpec, Backpressure, BloscShuffle, Codec, Durability, Error, IndexLocation, Packing,
    PushOutcome, SinkChoice, SinkKind, Stats, Writer, WriterOptions,
};
// The shard index read by the format's rule, not by the library (the testkit's oracle).
use zarrstream_testkit::layout::parse_index;

// ---------------------------------------------------------------------------------------
// Frame content
// ---------------------------------------------------------------------------------------

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Every third run of 64 elements is noise (incompressible, so blosc/zstd take their
/// "stored raw" paths there); the rest is smooth and compresses.
fn noise(k: u64, i: usize) -> Option<u64> {
    (i / 64 + k as usize)
        .is_multiple_of(3)
        .then(|| splitmix((k << 32) ^ i as u64))
}

/// An element type under test: its frame content and how to compare it.
pub(crate) trait Sample:
    zarrstream::Element + zarrs::array::ElementOwned + Copy + Debug + Send + Sync + 'static
{
    /// Element `i` (row-major in the frame plane) of frame `k`.
    fn sample(k: u64, i: usize) -> Self;
    /// The element for a fill value given as f64 (as passed to the spec builder).
    fn from_fill(v: f64) -> Self;
    /// Bit pattern (floats are compared by bits, so NaN payloads and -0.0 count).
    fn bits(self) -> u64;
    /// The `fill_value` JSON expected in `zarr.json`.
    fn fill_json(v: f64) -> Value {
        Value::from(v as i64)
    }
}

impl Sample for u8 {
    fn sample(k: u64, i: usize) -> Self {
        noise(k, i).map_or((i as u64 / 3 + k * 17) as u8, |h| h as u8)
    }
    fn from_fill(v: f64) -> Self {
        v as u8
    }
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

impl Sample for u16 {
    fn sample(k: u64, i: usize) -> Self {
        noise(k, i).map_or((i as u64 + k * 1009) as u16, |h| h as u16)
    }
    fn from_fill(v: f64) -> Self {
        v as u16
    }
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

impl Sample for i16 {
    fn sample(k: u64, i: usize) -> Self {
        noise(k, i).map_or((i as i64 % 3000 - 1500 - 7 * k as i64) as i16, |h| h as i16)
    }
    fn from_fill(v: f64) -> Self {
        v as i16
    }
    fn bits(self) -> u64 {
        u64::from(self as u16)
    }
}

impl Sample for u32 {
    fn sample(k: u64, i: usize) -> Self {
        noise(k, i).map_or(((k << 20) | i as u64) as u32 ^ 0x8000_0000, |h| h as u32)
    }
    fn from_fill(v: f64) -> Self {
        v as u32
    }
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

impl Sample for f32 {
    fn sample(k: u64, i: usize) -> Self {
        if let Some(h) = noise(k, i) {
            return f32::from_bits(h as u32);
        }
        match i % 53 {
            0 => f32::from_bits(0x7fc0_0000 | (k as u32 & 0xffff)), // NaN with a payload
            1 => -0.0,
            2 => f32::NEG_INFINITY,
            3 => f32::from_bits(0xffc0_0001), // negative NaN
            4 => f32::from_bits(1),           // subnormal
            _ => (i as f32 - 700.0) * 0.25 - k as f32 * 1.5,
        }
    }
    fn from_fill(v: f64) -> Self {
        if v.is_nan() {
            f32::from_bits(0x7fc0_0000)
        } else {
            v as f32
        }
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn fill_json(v: f64) -> Value {
        if v.is_nan() {
            json!("NaN")
        } else if v.is_infinite() {
            json!(if v > 0.0 { "Infinity" } else { "-Infinity" })
        } else {
            json!(v)
        }
    }
}

/// Frame `k` of `n` elements.
pub(crate) fn frame<T: Sample>(k: u64, n: usize) -> Vec<T> {
    (0..n).map(|i| T::sample(k, i)).collect()
}

// ---------------------------------------------------------------------------------------
// Test cases
// ---------------------------------------------------------------------------------------

/// How frames are handed to the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushMode {
    /// `push(&[T])`.
    Push,
    /// `push_at(&[T], Instant)`.
    PushAt,
    /// `push_bytes(&[u8], Instant)`.
    Bytes,
    /// `buffer()` + `push_buffer()`, and `skip()` when no buffer is free (Drop).
    Buffer,
}

/// One configuration of the matrix.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub name: &'static str,
    pub shape: Vec<u64>,
    pub chunk: Vec<u64>,
    pub shard: Vec<u64>,
    pub fill: f64,
    pub codec: Codec,
    pub crc32c: bool,
    pub index: IndexLocation,
    pub sink: SinkChoice,
    pub packing: Packing,
    pub threads: usize,
    pub durability: Durability,
    pub backpressure: Backpressure,
    pub pool_frames: usize,
    /// Frames offered (pushed or skipped).
    pub frames: u64,
    /// Frames for which this returns true are `skip()`ped instead of pushed.
    pub skip: fn(u64) -> bool,
    pub push: PushMode,
    pub dimension_names: bool,
    /// Call `finish` (else the writer is dropped, which must finish it too).
    pub finish: bool,
}

impl Case {
    /// A case with the library defaults except durability (no fsyncs, for speed).
    pub(crate) fn new(
        name: &'static str,
        shape: &[u64],
        chunk: &[u64],
        shard: &[u64],
        frames: u64,
    ) -> Case {
        Case {
            name,
            shape: shape.to_vec(),
            chunk: chunk.to_vec(),
            shard: shard.to_vec(),
            fill: 0.0,
            codec: Codec::blosc_lz4(1),
            crc32c: true,
            index: IndexLocation::End,
            sink: SinkChoice::Mmap,
            packing: Packing::Compact,
            threads: 2,
            durability: Durability::None,
            backpressure: Backpressure::Block,
            pool_frames: 0,
            frames,
            skip: |_| false,
            push: PushMode::Push,
            dimension_names: false,
            finish: true,
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Frames per step of the append axis.
    pub(crate) fn frames_per_step(&self) -> u64 {
        self.shape[1..self.rank() - 2].iter().product()
    }

    pub(crate) fn plane(&self) -> usize {
        let r = self.rank();
        (self.shape[r - 2] * self.shape[r - 1]) as usize
    }

    fn names(&self) -> Vec<String> {
        const NAMES: [&str; 5] = ["t", "c", "z", "y", "x"];
        NAMES[5 - self.rank()..]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    pub(crate) fn spec<T: Sample>(&self) -> ArraySpec {
        let mut b = ArraySpec::builder()
            .shape(&self.shape)
            .chunk_shape(&self.chunk)
            .shard_shape(&self.shard)
            .dtype(T::DTYPE)
            .fill_value(self.fill)
            .codec(self.codec)
            .crc32c(self.crc32c)
            .index_location(self.index);
        if self.dimension_names {
            b = b.dimension_names(self.names());
        }
        b.build()
            .unwrap_or_else(|e| panic!("[{}] spec: {e}", self.name))
    }

    pub(crate) fn options(&self) -> WriterOptions {
        WriterOptions::default()
            .threads(self.threads)
            .sink(self.sink)
            .pool_frames(self.pool_frames)
            .backpressure(self.backpressure)
            .durability(self.durability)
            .packing(self.packing)
    }
}

/// What a recording produced.
pub(crate) struct Recorded {
    /// `None` when the writer was dropped instead of finished.
    pub stats: Option<Stats>,
    /// Per offered frame: whether the writer accepted it (`Ok(true)`).
    pub accepted: Vec<bool>,
}

impl Recorded {
    pub(crate) fn stats(&self) -> &Stats {
        self.stats.as_ref().expect("the writer was finished")
    }
    pub(crate) fn pushed(&self) -> u64 {
        self.accepted.len() as u64
    }
    pub(crate) fn written(&self) -> u64 {
        self.accepted.iter().filter(|a| **a).count() as u64
    }
}

/// Offers frames while `more(offered, accepted, dropped)` is true, then finishes.
pub(crate) fn record_while<T: Sample>(
    case: &Case,
    path: &Path,
    mut more: impl FnMut(u64, u64, u64) -> bool,
) -> Recorded {
    let name = case.name;
    let mut w = Writer::create(path, case.spec::<T>(), case.options())
        .unwrap_or_else(|e| panic!("[{name}] create: {e}"));
    let n = case.plane();
    let mut accepted = Vec::new();
    let (mut ok, mut dropped) = (0u64, 0u64);
    while more(accepted.len() as u64, ok, dropped) {
        let k = accepted.len() as u64;
        let a = if (case.skip)(k) {
            w.skip()
                .unwrap_or_else(|e| panic!("[{name}] skip {k}: {e}"));
            false
        } else {
            let f = frame::<T>(k, n);
            let r = match case.push {
                PushMode::Push => w.push(&f).map(PushOutcome::is_accepted),
                PushMode::PushAt => w.push_at(&f, Instant::now()).map(PushOutcome::is_accepted),
                PushMode::Bytes => w
                    .push_bytes(bytemuck::cast_slice(&f), Instant::now())
                    .map(PushOutcome::is_accepted),
                PushMode::Buffer => match w.buffer() {
                    Ok(Some(mut b)) => {
                        b.copy_from_slice(bytemuck::cast_slice(&f));
                        w.push_buffer(b, Instant::now())
                            .map(PushOutcome::is_accepted)
                    }
                    Ok(None) => w.skip().map(|()| false),
                    Err(e) => Err(e),
                },
            };
            r.unwrap_or_else(|e| panic!("[{name}] push {k}: {e}"))
        };
        if a {
            ok += 1
        } else {
            dropped += 1
        }
        accepted.push(a);
    }
    assert_eq!(
        w.frames_pushed(),
        accepted.len() as u64,
        "[{name}] frames_pushed()"
    );
    if case.sink == SinkChoice::Pwrite {
        assert_eq!(w.sink(), SinkKind::Pwrite, "[{name}] sink");
    }
    if case.sink == SinkChoice::Direct {
        assert_eq!(w.sink(), SinkKind::Direct, "[{name}] sink");
    }
    // A bounded array that is full refuses one more frame, and stays usable.
    let cap = case.shape[0] * case.frames_per_step();
    if case.shape[0] > 0 && accepted.len() as u64 == cap {
        match w.push(&frame::<T>(cap, n)) {
            Err(Error::ArrayFull { frames }) => assert_eq!(frames, cap, "[{name}] ArrayFull"),
            other => panic!("[{name}] push past a full bounded array: {other:?}"),
        }
    }
    let stats = if case.finish {
        Some(
            w.finish()
                .unwrap_or_else(|e| panic!("[{name}] finish: {e}")),
        )
    } else {
        drop(w);
        None
    };
    Recorded { stats, accepted }
}

/// Records `case.frames` frames into a fresh temporary store and runs every check.
pub(crate) fn run<T: Sample>(case: &Case) -> Recorded {
    let frames = case.frames;
    run_while::<T>(case, move |k, _, _| k < frames)
}

/// Records while `more(offered, accepted, dropped)` into a fresh temporary store and runs
/// every check, under a watchdog: a writer that hangs fails the test instead of hanging it.
pub(crate) fn run_while<T: Sample>(
    case: &Case,
    more: impl FnMut(u64, u64, u64) -> bool + Send + 'static,
) -> Recorded {
    const LIMIT: Duration = Duration::from_secs(30);
    let (tx, rx) = std::sync::mpsc::channel();
    let c = case.clone();
    let worker = std::thread::spawn(move || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zarr");
        let rec = record_while::<T>(&c, &path, more);
        verify::<T>(&c, &path, &rec);
        let _ = tx.send(());
        rec
    });
    match rx.recv_timeout(LIMIT) {
        Ok(()) | Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(rec) => rec,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(RecvTimeoutError::Timeout) => {
            panic!(
                "[{}] did not finish within {LIMIT:?}: the writer hangs",
                case.name
            )
        }
    }
}

// ---------------------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------------------

/// What the finished array must hold.
pub(crate) struct Model {
    pub name: &'static str,
    /// Final shape (axis 0 resolved).
    pub shape: Vec<u64>,
    pub chunk: Vec<u64>,
    pub shard: Vec<u64>,
    pub fill: f64,
    pub accepted: Vec<bool>,
    lead: usize,
}

impl Model {
    pub(crate) fn new(case: &Case, accepted: &[bool]) -> Model {
        let mut shape = case.shape.clone();
        if shape[0] == 0 {
            // Unbounded: the last frame's append index + 1.
            shape[0] = (accepted.len() as u64).div_ceil(case.frames_per_step());
        }
        Model {
            name: case.name,
            shape,
            chunk: case.chunk.clone(),
            shard: case.shard.clone(),
            fill: case.fill,
            accepted: accepted.to_vec(),
            lead: case.rank() - 2,
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Frame index of the leading coordinates `c` (C order).
    pub(crate) fn frame_of(&self, c: &[u64]) -> u64 {
        c[..self.lead]
            .iter()
            .zip(&self.shape)
            .fold(0, |acc, (&ci, &s)| acc * s + ci)
    }

    pub(crate) fn is_accepted(&self, k: u64) -> bool {
        self.accepted.get(k as usize).copied().unwrap_or(false)
    }

    /// The element at array coordinates `c`; the fill value outside the array.
    pub(crate) fn expected<T: Sample>(&self, c: &[u64]) -> T {
        if c.iter().zip(&self.shape).any(|(a, s)| a >= s) {
            return T::from_fill(self.fill);
        }
        let k = self.frame_of(c);
        if !self.is_accepted(k) {
            return T::from_fill(self.fill);
        }
        let r = self.rank();
        T::sample(k, (c[r - 2] * self.shape[r - 1] + c[r - 1]) as usize)
    }

    /// Shards along each axis.
    pub(crate) fn shard_grid(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.shard)
            .map(|(s, c)| s.div_ceil(*c))
            .collect()
    }

    /// Frames (leading points) of the box `[start, start + size)` clipped to the array.
    pub(crate) fn frames_in_box(&self, start: &[u64], size: &[u64]) -> Vec<u64> {
        let lo: Vec<u64> = start[..self.lead].to_vec();
        let hi: Vec<u64> = (0..self.lead)
            .map(|a| (start[a] + size[a]).min(self.shape[a]))
            .collect();
        if lo.iter().zip(&hi).any(|(l, h)| l >= h) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut c = lo.clone();
        loop {
            out.push(self.frame_of(&c));
            let mut a = self.lead;
            loop {
                if a == 0 {
                    return out;
                }
                a -= 1;
                c[a] += 1;
                if c[a] < hi[a] {
                    break;
                }
                c[a] = lo[a];
            }
        }
    }
}

/// Calls `f` with every index of the box `[origin, origin + shape)` in C order.
fn for_each_index(origin: &[u64], shape: &[u64], mut f: impl FnMut(&[u64])) {
    if shape.contains(&0) {
        return;
    }
    let mut c = origin.to_vec();
    loop {
        f(&c);
        let mut a = c.len();
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            c[a] += 1;
            if c[a] < origin[a] + shape[a] {
                break;
            }
            c[a] = origin[a];
        }
    }
}

fn unravel(mut i: u64, shape: &[u64]) -> Vec<u64> {
    let mut c = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        c[a] = i % shape[a];
        i /= shape[a];
    }
    c
}

/// Compares `got` (the box `[origin, origin + shape)` in C order) with the model; panics
/// with the number of mismatches, the first few, and the inner chunks they fall in.
pub(crate) fn compare<T: Sample>(m: &Model, what: &str, origin: &[u64], shape: &[u64], got: &[T]) {
    let n: u64 = shape.iter().product();
    assert_eq!(got.len() as u64, n, "[{}] {what}: element count", m.name);
    let mut i = 0usize;
    let mut bad = 0u64;
    let mut report = String::new();
    let mut chunks: Vec<Vec<u64>> = Vec::new();
    for_each_index(origin, shape, |c| {
        let want = m.expected::<T>(c);
        let have = got[i];
        i += 1;
        if want.bits() != have.bits() {
            bad += 1;
            if bad <= 8 {
                let _ = writeln!(
                    report,
                    "  at {c:?} (frame {}): want {want:?} got {have:?}",
                    m.frame_of(c)
                );
            }
            let ch: Vec<u64> = c.iter().zip(&m.chunk).map(|(a, b)| a / b).collect();
            if chunks.len() < 8 && !chunks.contains(&ch) {
                chunks.push(ch);
            }
        }
    });
    assert!(
        bad == 0,
        "[{}] {what}: {bad} of {n} elements differ\n{report}  in inner chunks (grid coords) {chunks:?}",
        m.name
    );
}

// ---------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------

/// Every check of a finished store.
pub(crate) fn verify<T: Sample>(case: &Case, path: &Path, rec: &Recorded) {
    let m = Model::new(case, &rec.accepted);
    let Some(stats) = &rec.stats else {
        check_metadata::<T>(case, &m, path, rec);
        check_files(case, &m, path, std::mem::size_of::<T>());
        check_read::<T>(&m, path);
        return;
    };
    check_stats::<T>(case, stats, rec);
    check_metadata::<T>(case, &m, path, rec);
    let (files, bytes) = check_files(case, &m, path, std::mem::size_of::<T>());
    assert_eq!(
        stats.shards, files,
        "[{}] stats.shards vs shard files",
        case.name
    );
    assert_eq!(
        stats.bytes_stored, bytes,
        "[{}] stats.bytes_stored vs file sizes",
        case.name
    );
    check_read::<T>(&m, path);
}

pub(crate) fn check_stats<T: Sample>(case: &Case, s: &Stats, rec: &Recorded) {
    let name = case.name;
    assert_eq!(s.frames_pushed, rec.pushed(), "[{name}] frames_pushed");
    assert_eq!(
        s.frames_pushed,
        s.frames_written + s.frames_dropped,
        "[{name}] pushed = written + dropped"
    );
    assert_eq!(
        s.frames_written,
        rec.written(),
        "[{name}] frames_written vs Ok(true) pushes"
    );
    assert_eq!(
        s.bytes_in,
        s.frames_written * (case.plane() * std::mem::size_of::<T>()) as u64,
        "[{name}] bytes_in"
    );
    if case.sink == SinkChoice::Pwrite {
        assert_eq!(s.sink, SinkKind::Pwrite, "[{name}] stats.sink");
    }
    if case.sink == SinkChoice::Direct {
        assert_eq!(s.sink, SinkKind::Direct, "[{name}] stats.sink");
    }
}

/// The inner `codecs` list `zarr.json` must carry.
fn inner_codecs(codec: Codec, typesize: usize, crc32c: bool) -> Value {
    let mut v = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
    match codec {
        Codec::None => {}
        Codec::Zstd { level, checksum } => {
            v.push(json!({"name": "zstd", "configuration": {"level": level, "checksum": checksum}}))
        }
        // Byte shuffle is the default for every element size.
        Codec::Blosc {
            compressor,
            clevel,
            shuffle,
        } => v.push(json!({"name": "blosc", "configuration": {
            "cname": compressor.cname(), "clevel": clevel,
            "shuffle": shuffle.map_or("shuffle", BloscShuffle::name),
            "typesize": typesize, "blocksize": 0}})),
        other => panic!("no expected metadata for codec {other}"),
    }
    if crc32c {
        v.push(json!({"name": "crc32c"}));
    }
    Value::Array(v)
}

pub(crate) fn check_metadata<T: Sample>(case: &Case, m: &Model, path: &Path, rec: &Recorded) {
    let name = case.name;
    let text =
        std::fs::read(path.join("zarr.json")).unwrap_or_else(|e| panic!("[{name}] zarr.json: {e}"));
    let doc: Value =
        serde_json::from_slice(&text).unwrap_or_else(|e| panic!("[{name}] zarr.json: {e}"));
    let want = |key: &str, v: Value| assert_eq!(doc[key], v, "[{name}] zarr.json {key}");
    want("zarr_format", json!(3));
    want("node_type", json!("array"));
    want("shape", json!(m.shape));
    want("data_type", json!(T::DTYPE.zarr_name()));
    want(
        "chunk_grid",
        json!({"name": "regular", "configuration": {"chunk_shape": case.shard}}),
    );
    want(
        "chunk_key_encoding",
        json!({"name": "default", "configuration": {"separator": "/"}}),
    );
    want("fill_value", T::fill_json(case.fill));
    let es = std::mem::size_of::<T>();
    want(
        "codecs",
        json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": case.chunk,
            "codecs": inner_codecs(case.codec, es, case.crc32c),
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": match case.index { IndexLocation::End => "end", IndexLocation::Start => "start", other => panic!("{other}") },
        }}]),
    );
    if case.dimension_names {
        want("dimension_names", json!(case.names()));
    } else {
        assert!(
            doc.get("dimension_names").is_none_or(Value::is_null),
            "[{name}] dimension_names"
        );
    }
    let ours = &doc["attributes"]["zarrstream"];
    assert_eq!(
        ours["state"],
        json!("finished"),
        "[{name}] attributes.zarrstream.state"
    );
    assert_eq!(
        ours["frames_committed"],
        json!(rec.written()),
        "[{name}] frames_committed"
    );
    assert_eq!(
        ours["frames_dropped"],
        json!(rec.pushed() - rec.written()),
        "[{name}] frames_dropped"
    );
    assert!(
        ours.get("error").is_none(),
        "[{name}] attributes.zarrstream.error: {}",
        ours["error"]
    );
}

/// Files on disk: only `zarr.json` and shard keys; each shard's index is valid, its
/// entries are empty exactly where the design says, and the packing holds. Returns the
/// number of shard files and their total size.
pub(crate) fn check_files(case: &Case, m: &Model, path: &Path, es: usize) -> (u64, u64) {
    let name = case.name;
    let rank = m.rank();
    assert!(
        !path.join(".zarrstream-partial").exists(),
        "[{name}] .zarrstream-partial still exists"
    );
    let grid = m.shard_grid();
    let mut shards: Vec<Vec<u64>> = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let p = entry.path();
            // The key's parts, whatever the platform's separator.
            let parts: Vec<String> = p
                .strip_prefix(path)
                .unwrap()
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let rel = parts.join("/");
            let ty = entry.file_type().unwrap();
            if ty.is_file() && rel == "zarr.json" {
                continue;
            }
            let idx: Option<Vec<u64>> = parts[1..].iter().map(|s| s.parse().ok()).collect();
            let ok_key = parts[0] == "c"
                && idx
                    .as_ref()
                    .is_some_and(|i| i.iter().zip(&grid).all(|(a, g)| a < g));
            if ty.is_dir() && ok_key && parts.len() <= rank {
                stack.push(p);
            } else if ty.is_file() && ok_key && parts.len() == rank + 1 {
                shards.push(idx.unwrap_or_default());
            } else {
                panic!("[{name}] unexpected entry in the store: {rel}");
            }
        }
    }
    shards.sort();
    let mut bytes = 0u64;
    for key in &shards {
        let data = std::fs::read(path.join(shard_key(key))).unwrap();
        bytes += data.len() as u64;
        check_shard(case, m, key, &data, es);
    }
    // Shards holding an accepted frame exist; shards past the last offered frame do not.
    let mut want_all: Vec<u64> = grid.clone();
    if want_all.contains(&0) {
        want_all.clear();
    }
    if !want_all.is_empty() {
        for_each_index(&vec![0; rank], &grid, |s| {
            let origin: Vec<u64> = s.iter().zip(&m.shard).map(|(a, b)| a * b).collect();
            let frames = m.frames_in_box(&origin, &m.shard);
            let exists = shards.iter().any(|k| k.as_slice() == s);
            if frames.iter().any(|&k| m.is_accepted(k)) {
                assert!(exists, "[{name}] shard {} is missing", shard_key(s));
            }
            if frames.iter().all(|&k| k >= m.accepted.len() as u64) {
                assert!(
                    !exists,
                    "[{name}] shard {} exists but no frame of it was pushed",
                    shard_key(s)
                );
            }
        });
    }
    (shards.len() as u64, bytes)
}

pub(crate) fn shard_key(s: &[u64]) -> String {
    let mut k = String::from("c");
    for v in s {
        let _ = write!(k, "/{v}");
    }
    k
}

fn check_shard(case: &Case, m: &Model, key: &[u64], data: &[u8], es: usize) {
    let name = case.name;
    let ks = shard_key(key);
    let cps: Vec<u64> = m.shard.iter().zip(&m.chunk).map(|(s, c)| s / c).collect();
    let n: u64 = cps.iter().product();
    let index_size = 16 * n + 4;
    let entries =
        parse_index(data, n as usize, case.index).unwrap_or_else(|e| panic!("[{name}] {ks}: {e}"));
    let len = data.len() as u64;
    let (lo, hi) = match case.index {
        IndexLocation::End => (0, len - index_size),
        IndexLocation::Start => (index_size, len),
        other => panic!("[{name}] index location {other} not covered"),
    };
    let mut used: Vec<(u64, u64)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let local = unravel(i as u64, &cps);
        let origin: Vec<u64> = local
            .iter()
            .zip(key)
            .zip(cps.iter().zip(&m.chunk))
            .map(|((l, k), (p, c))| (k * p + l) * c)
            .collect();
        let inside = origin.iter().zip(&m.shape).all(|(o, s)| o < s);
        let frames = if inside {
            m.frames_in_box(&origin, &m.chunk)
        } else {
            Vec::new()
        };
        let must_exist = frames.iter().any(|&k| m.is_accepted(k));
        let must_be_empty = frames.iter().all(|&k| k >= m.accepted.len() as u64);
        match *e {
            None => assert!(
                !must_exist,
                "[{name}] {ks}: inner chunk {i} (origin {origin:?}) holds accepted frames but is empty"
            ),
            Some((o, b)) => {
                assert!(
                    !must_be_empty,
                    "[{name}] {ks}: inner chunk {i} (origin {origin:?}) is {} but stored ({b} bytes at {o})",
                    if inside {
                        "after the last frame"
                    } else {
                        "wholly outside the array"
                    }
                );
                assert!(
                    o >= lo && o.checked_add(b).is_some_and(|end| end <= hi),
                    "[{name}] {ks}: inner chunk {i} at {o}+{b} outside the data region {lo}..{hi}"
                );
                let chunk = &data[o as usize..(o + b) as usize];
                check_chunk_bytes(case, m, &ks, i, chunk, es);
                used.push((o, b));
            }
        }
    }
    used.sort();
    for w in used.windows(2) {
        assert!(
            w[0].0 + w[0].1 <= w[1].0,
            "[{name}] {ks}: inner chunks overlap: {:?} {:?}",
            w[0],
            w[1]
        );
    }
    if case.packing == Packing::Compact && case.sink == SinkChoice::Direct {
        // Chunks start at 4 KiB blocks and are padded to the next one: no other gaps.
        let block = |v: u64| v.div_ceil(4096) * 4096;
        let mut at = block(lo);
        for &(o, b) in &used {
            assert_eq!(o, at, "[{name}] {ks}: gap before the chunk at {o}");
            at = block(o + b);
        }
        assert_eq!(
            used.last().map_or(lo, |&(o, b)| o + b),
            hi,
            "[{name}] {ks}: data after the last chunk"
        );
    } else if case.packing == Packing::Compact {
        let total: u64 = used.iter().map(|u| u.1).sum();
        assert_eq!(
            total,
            hi - lo,
            "[{name}] {ks}: compact shard has gaps (data {total} bytes in {lo}..{hi})"
        );
    }
}

fn check_chunk_bytes(case: &Case, m: &Model, ks: &str, i: usize, chunk: &[u8], es: usize) {
    let name = case.name;
    let mut body = chunk;
    if case.crc32c {
        assert!(
            chunk.len() >= 4,
            "[{name}] {ks}: chunk {i} too short for its crc32c"
        );
        let (b, crc) = chunk.split_at(chunk.len() - 4);
        assert_eq!(
            crc32c::crc32c(b),
            u32::from_le_bytes(crc.try_into().unwrap()),
            "[{name}] {ks}: chunk {i} crc32c mismatch"
        );
        body = b;
    }
    let raw = m.chunk.iter().product::<u64>() as usize * es;
    match case.codec {
        Codec::None => assert_eq!(
            body.len(),
            raw,
            "[{name}] {ks}: chunk {i} size with codec none"
        ),
        Codec::Zstd { .. } => assert_eq!(
            body.get(..4),
            Some(&0xFD2F_B528u32.to_le_bytes()[..]),
            "[{name}] {ks}: chunk {i} is not a zstd frame"
        ),
        Codec::Blosc { .. } => assert_eq!(
            body.first(),
            Some(&2),
            "[{name}] {ks}: chunk {i} blosc version"
        ),
        other => panic!("[{name}] codec {other} not covered"),
    }
}

fn open(m: &Model, path: &Path) -> Array<FilesystemStore> {
    let store = Arc::new(FilesystemStore::new(path).unwrap());
    Array::open(store, "/").unwrap_or_else(|e| panic!("[{}] zarrs open: {e}", m.name))
}

/// Reads the whole array, a few inner chunks whole (padding included) and a region
/// straddling shard borders, through `zarrs`, and compares each with the model.
pub(crate) fn check_read<T: Sample>(m: &Model, path: &Path) {
    let name = m.name;
    let array = open(m, path);
    assert_eq!(array.shape(), m.shape.as_slice(), "[{name}] zarrs shape");
    let rank = m.rank();
    let zero = vec![0u64; rank];

    let all: Vec<T> = array
        .retrieve_array_subset::<Vec<T>>(&ArraySubset::new_with_shape(m.shape.clone()))
        .unwrap_or_else(|e| panic!("[{name}] zarrs read all: {e}"));
    compare(m, "whole array", &zero, &m.shape, &all);
    if m.shape.contains(&0) {
        return;
    }

    // Single inner chunks through the sharded reader: the first one, the one holding the
    // last element of the last accepted frame (an edge chunk when the plane does not
    // divide), the one holding the array's last element, and one in the middle.
    let cache = ArrayShardedReadableExtCache::new(&array);
    let mut picks: Vec<Vec<u64>> = vec![zero.clone()];
    let last: Vec<u64> = m.shape.iter().map(|s| s - 1).collect();
    picks.push(last.clone());
    if let Some(k) = m.accepted.iter().rposition(|a| *a) {
        let lead: Vec<u64> = unravel(
            k as u64 % (m.shape[1..rank - 2].iter().product::<u64>()),
            &m.shape[1..rank - 2],
        );
        let mut c = vec![k as u64 / m.shape[1..rank - 2].iter().product::<u64>()];
        c.extend(lead);
        c.extend([m.shape[rank - 2] - 1, m.shape[rank - 1] - 1]);
        picks.push(c);
    }
    picks.push(m.shape.iter().map(|s| s / 2).collect());
    for p in picks {
        let ci: Vec<u64> = p.iter().zip(&m.chunk).map(|(a, b)| a / b).collect();
        let origin: Vec<u64> = ci.iter().zip(&m.chunk).map(|(a, b)| a * b).collect();
        let got: Vec<T> = array
            .retrieve_subchunk_opt::<Vec<T>>(&cache, &ci, &CodecOptions::default())
            .unwrap_or_else(|e| panic!("[{name}] zarrs read inner chunk {ci:?}: {e}"));
        compare(
            m,
            &format!("inner chunk {ci:?} (padding included)"),
            &origin,
            &m.chunk,
            &got,
        );
    }

    // A region around the first shard border on every axis (the whole extent where the
    // axis has a single shard).
    let (mut start, mut size) = (Vec::new(), Vec::new());
    for a in 0..rank {
        let (s, sh, c) = (m.shape[a], m.shard[a], m.chunk[a]);
        let (lo, hi) = if s > sh {
            (sh.saturating_sub(c / 2 + 1), (sh + c / 2 + 1).min(s))
        } else {
            (s / 3, s)
        };
        start.push(lo);
        size.push(hi - lo);
    }
    let subset = ArraySubset::new_with_start_shape(start.clone(), size.clone()).unwrap();
    let got: Vec<T> = array
        .retrieve_array_subset::<Vec<T>>(&subset)
        .unwrap_or_else(|e| panic!("[{name}] zarrs read region: {e}"));
    compare(
        m,
        &format!("region {start:?}+{size:?}"),
        &start,
        &size,
        &got,
    );
}
