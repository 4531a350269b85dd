//! Interoperability suite: arrays written by zarrstream are read back by
//! zarr-python 3.1 (its own codec pipeline), zarr-python with the `zarrs` Rust codec
//! pipeline, and tensorstore's `zarr3` driver, element for element.
//!
//! * `matrix`: 53 arrays (ranks 3–5, every codec, shuffle and dtype, crc32c on/off, index
//!   at end/start, all three sinks, both packings, both chunk orders, edge shards, streams
//!   stopping mid-shard and mid-deep-chunk, single-chunk shards and shards of thousands
//!   of inner chunks, fill values other than 0) read whole and in sub-regions, plus
//!   their metadata.
//! * `during_acquisition`: `zarrstream record` records at `--fps` while the three
//!   readers read everything the current `zarr.json` says exists, again and again.
//! * `corrupted_shards_are_rejected`: a byte flipped in an inner chunk or in a shard
//!   index must make the readers' crc32c checks fail.
//! * `morton_order_is_zarr_pythons`: zarr-python writes shards of several grids (not
//!   powers of two, ranks 3–5); the order of their chunks on disk is
//!   `ChunkOrder::Morton`'s. (The matrix has arrays written in Morton order.)
//!
//! The readers run in a pinned virtual environment created on first use by
//! `tests/interop/venv.py` under `target/interop-venv`; `tests/interop/check.py` does
//! the reading. Without `python3` or the package registry the tests skip loudly, except
//! with `CI=true`, where that is a failure. Run only this suite with
//! `cargo test -p zarrstream --test readers interop::` (add `-- --nocapture` to see the tables).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zarrstream::{
    ArrayConfig, ArraySpec, BloscShuffle, ChunkOrder, Codec, DataType, Durability, IndexLocation,
    Packing, Recording, SinkChoice, SinkKind, Stats, Writer, WriterOptions,
};

// ---------------------------------------------------------------- environment

use pyenv::shout;
use zarrstream_testkit::python as pyenv;

use zarrstream_testkit::cli as record_cli;

/// What a skipped reader check is called in the loud skip message.
const READERS: &str = "INTEROP TEST";

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// A scratch directory under `target/tmp`, kept (and printed) if the test fails.
struct Scratch {
    dir: Option<tempfile::TempDir>,
}

impl Scratch {
    fn new(prefix: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("scratch dir");
        Scratch { dir: Some(dir) }
    }
    fn path(&self) -> &Path {
        self.dir.as_ref().expect("scratch").path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(d) = self.dir.take()
        {
            eprintln!("interop: keeping {} for inspection", d.keep().display());
        }
    }
}

/// Runs `check.py MODE MANIFEST`, prints its output, and returns its exit status.
fn run_check(py: &Path, mode: &str, manifest: &Path) -> (ExitStatus, String) {
    let out = Command::new(py)
        .arg(interop_dir().join("check.py"))
        .arg(mode)
        .arg(manifest)
        .stdin(Stdio::null())
        .output()
        .expect("run check.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("interop matrix:") {
            shout(&format!("interop: matrix:{rest}"));
        } else if let Some(rest) = line.strip_prefix("note ") {
            shout(&format!("interop: note: {rest}"));
        }
    }
    (out.status, text)
}

// ---------------------------------------------------------------- frames

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Frame `k` of an array as little-endian bytes: smooth structure (so the codecs
/// compress) plus noise, with extremes; floats carry negatives, NaNs (canonical and
/// with payload), ±0, ±inf and subnormals.
fn frame(dtype: DataType, seed: u64, k: u64, h: usize, w: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(h * w * dtype.size());
    for y in 0..h {
        for x in 0..w {
            let n = mix(seed ^ mix(k ^ mix(((y as u64) << 32) | x as u64)));
            let (xs, ys, ks) = (x as u64, y as u64, k);
            match dtype {
                DataType::UInt8 => {
                    let v = (xs + 2 * ys + 5 * ks + n % 8) as u8;
                    out.push(v);
                }
                DataType::UInt16 => {
                    let v = match n % 997 {
                        0 => 65535 - (n >> 20) % 4,
                        _ => 100 + (xs * 7 + ys * 3) % 1000 + 37 * ks + (n >> 10) % 32,
                    } as u16;
                    out.extend_from_slice(&v.to_le_bytes());
                }
                DataType::Int16 => {
                    let v = match n % 991 {
                        0 => i16::MIN,
                        1 => i16::MAX,
                        _ => {
                            ((xs * 11 + ys * 5 + ks * 13) % 4000) as i16 - 2000
                                + ((n >> 10) % 16) as i16
                        }
                    };
                    out.extend_from_slice(&v.to_le_bytes());
                }
                DataType::UInt32 => {
                    let v = match n % 1009 {
                        0 => u32::MAX,
                        _ => (((xs * ys) * 977 + ks * 100_003 + (n >> 10) % 1024) as u32)
                            .wrapping_add(1 << 24),
                    };
                    out.extend_from_slice(&v.to_le_bytes());
                }
                DataType::Float32 => {
                    let v = match n % 1000 {
                        0 => f32::NAN,
                        1 => -0.0,
                        2 => f32::INFINITY,
                        3 => f32::NEG_INFINITY,
                        4 => f32::from_bits(1 + (n >> 20) as u32 % 1000),
                        5 => f32::from_bits(0xffc1_2345),
                        _ => {
                            (x as f32 * 0.05).sin() * (y as f32 + 1.0) * 0.5 - 10.0
                                + k as f32 * 0.25
                                + ((n >> 10) % 1000) as f32 * 1e-3
                        }
                    };
                    out.extend_from_slice(&v.to_bits().to_le_bytes());
                }
                DataType::Int8 => {
                    let v = match n % 97 {
                        0 => i8::MIN,
                        1 => i8::MAX,
                        _ => ((xs + 3 * ys + 7 * ks) % 200 + (n >> 10) % 4) as i16 as i8,
                    };
                    out.extend_from_slice(&v.to_le_bytes());
                }
                DataType::Int32 => {
                    let v = match n % 1013 {
                        0 => i32::MIN,
                        1 => i32::MAX,
                        _ => {
                            (xs * 977 + ys * 131 + ks * 100_003) as i32 - (1 << 20)
                                + ((n >> 10) % 512) as i32
                        }
                    };
                    out.extend_from_slice(&v.to_le_bytes());
                }
                DataType::Int64 => {
                    // Beyond 2^53, where a double loses integers.
                    let v = match n % 1019 {
                        0 => i64::MIN,
                        1 => i64::MAX,
                        2 => (1 << 53) + 1,
                        _ => {
                            (xs * 977 + ys * 131 + ks * 100_003) as i64 - (3 << 40)
                                + ((n >> 10) % 4096) as i64
                        }
                    };
                    out.extend_from_slice(&v.to_le_bytes());
                }
                DataType::UInt64 => {
                    let v = match n % 1021 {
                        0 => u64::MAX,
                        1 => u64::MAX - 1,
                        _ => (xs * 977 + ys * 131 + ks * 100_003 + (n >> 10) % 4096) + (1 << 60),
                    };
                    out.extend_from_slice(&v.to_le_bytes());
                }
                DataType::Float64 => {
                    let v = match n % 1000 {
                        0 => f64::NAN,
                        1 => -0.0,
                        2 => f64::INFINITY,
                        3 => f64::NEG_INFINITY,
                        4 => f64::from_bits(1 + (n >> 20) % 1000),
                        5 => f64::from_bits(0xfff8_1234_5678_9abc),
                        6 => f64::MAX,
                        _ => {
                            (x as f64 * 0.05).sin() * (y as f64 + 1.0) * 0.5 - 10.0
                                + k as f64 * 0.25
                                + ((n >> 10) % 1000) as f64 * 1e-9
                        }
                    };
                    out.extend_from_slice(&v.to_bits().to_le_bytes());
                }
                other => panic!("no frames for {other}"),
            }
        }
    }
    out
}

fn fill_bits(dtype: DataType, fill: f64) -> u64 {
    match dtype {
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => fill as u64,
        DataType::Int8 => u64::from(fill as i8 as u8),
        DataType::Int16 => u64::from(fill as i16 as u16),
        DataType::Int32 => u64::from(fill as i32 as u32),
        DataType::Int64 => fill as i64 as u64,
        DataType::Float32 if fill.is_nan() => 0x7fc0_0000,
        DataType::Float32 => u64::from((fill as f32).to_bits()),
        DataType::Float64 if fill.is_nan() => 0x7ff8_0000_0000_0000,
        DataType::Float64 => fill.to_bits(),
        other => panic!("no fill bits for {other}"),
    }
}

// ---------------------------------------------------------------- cases

#[derive(Clone)]
struct Case {
    name: &'static str,
    shape: Vec<u64>,
    chunk: Vec<u64>,
    shard: Vec<u64>,
    dtype: DataType,
    fill: f64,
    codec: Codec,
    crc32c: bool,
    index: IndexLocation,
    sink: SinkChoice,
    packing: Packing,
    chunk_order: ChunkOrder,
    durability: Durability,
    threads: usize,
    frames: u64,
    /// Frames given to `Writer::skip` (counted as dropped; they read as fill).
    skipped: &'static [u64],
    dims: Option<Vec<&'static str>>,
    /// Recorded in two sessions: finished after this many frames, then resumed.
    resume_at: Option<u64>,
    /// Recorded as array `cam` of a `Recording` (beside a second, smaller array).
    recording: bool,
}

fn case(name: &'static str, shape: &[u64], chunk: &[u64], shard: &[u64], frames: u64) -> Case {
    let dims: &[&str] = match shape.len() {
        3 => &["t", "y", "x"],
        4 => &["t", "z", "y", "x"],
        _ => &["t", "c", "z", "y", "x"],
    };
    Case {
        name,
        shape: shape.to_vec(),
        chunk: chunk.to_vec(),
        shard: shard.to_vec(),
        dtype: DataType::UInt16,
        fill: 0.0,
        codec: Codec::blosc_lz4(1),
        crc32c: true,
        index: IndexLocation::End,
        sink: SinkChoice::Mmap,
        packing: Packing::Compact,
        chunk_order: ChunkOrder::C,
        durability: Durability::None,
        threads: 2,
        frames,
        skipped: &[],
        dims: Some(dims.to_vec()),
        resume_at: None,
        recording: false,
    }
}

impl Case {
    fn rank(&self) -> usize {
        self.shape.len()
    }
    fn frame_dims(&self) -> (usize, usize) {
        let r = self.rank();
        (self.shape[r - 2] as usize, self.shape[r - 1] as usize)
    }
    fn per_step(&self) -> u64 {
        self.shape[1..self.rank() - 2].iter().product()
    }
    /// The shape readers must report once the stream is finished.
    fn final_shape(&self) -> Vec<u64> {
        let mut s = self.shape.clone();
        if s[0] == 0 && self.frames > 0 {
            s[0] = (self.frames - 1) / self.per_step() + 1;
        }
        s
    }
    fn seed(&self) -> u64 {
        self.name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
    fn spec(&self) -> ArraySpec {
        let mut b = ArraySpec::builder()
            .shape(&self.shape)
            .chunk_shape(&self.chunk)
            .shard_shape(&self.shard)
            .dtype(self.dtype)
            .fill_value(self.fill)
            .codec(self.codec)
            .crc32c(self.crc32c)
            .index_location(self.index);
        if let Some(d) = &self.dims {
            b = b.dimension_names(d.iter().copied());
        }
        b.build()
            .unwrap_or_else(|e| panic!("{}: invalid spec: {e}", self.name))
    }
    fn frame(&self, k: u64) -> Vec<u8> {
        let (h, w) = self.frame_dims();
        frame(self.dtype, self.seed(), k, h, w)
    }

    /// The expected full array (fill value wherever no frame was pushed), raw LE.
    fn expected(&self) -> Vec<u8> {
        let shape = self.final_shape();
        let es = self.dtype.size();
        let n: u64 = shape.iter().product();
        let fill = fill_bits(self.dtype, self.fill).to_le_bytes();
        let mut out: Vec<u8> = fill[..es]
            .iter()
            .copied()
            .cycle()
            .take(n as usize * es)
            .collect();
        let (h, w) = self.frame_dims();
        let fb = h * w * es;
        // Frame k sits at leading coordinates unravel(k, [inf, shape[1..r-2]]); in C
        // order over the leading axes that is simply position k.
        for k in (0..self.frames).filter(|k| !self.skipped.contains(k)) {
            let at = k as usize * fb;
            out[at..at + fb].copy_from_slice(&self.frame(k));
        }
        out
    }

    fn codec_json(&self) -> Value {
        match self.codec {
            Codec::None => json!({"name": "none"}),
            Codec::Zstd { level, .. } => json!({"name": "zstd", "level": level}),
            Codec::Blosc {
                compressor, clevel, ..
            } => json!({"name": "blosc", "cname": compressor.cname(), "clevel": clevel,
                        "shuffle": self.codec.blosc_shuffle(self.dtype).map(BloscShuffle::name)}),
            other => panic!("no reader name for codec {other}"),
        }
    }

    /// Writes the array with the library into `dir/<name>.zarr` and the expected raw
    /// array beside it; returns its manifest entry.
    fn write(&self, dir: &Path) -> Value {
        let root = dir.join(format!("{}.zarr", self.name));
        let options = WriterOptions::default()
            .threads(self.threads)
            .pin_threads(false)
            .sink(self.sink)
            .packing(self.packing)
            .chunk_order(self.chunk_order)
            .durability(self.durability);
        // One session, or two split where the case resumes.
        let split = self.resume_at.unwrap_or(self.frames);
        let sessions = [0..split, split..self.frames];
        let (mut written, mut dropped) = (0, 0);
        for (i, frames) in sessions.into_iter().enumerate() {
            if i > 0 && frames.is_empty() {
                break;
            }
            let options = options.clone().resume(i > 0);
            let stats = if self.recording {
                self.record_in_recording(&root, frames, options)
            } else {
                self.record(&root, frames, options)
            };
            if self.sink == SinkChoice::Direct {
                assert_eq!(stats.sink, SinkKind::Direct, "{}: fell back", self.name);
            }
            written += stats.frames_written;
            dropped += stats.frames_dropped;
        }
        let path = if self.recording {
            root.join("cam")
        } else {
            root
        };
        let skipped = self.skipped.len() as u64;
        assert_eq!(written, self.frames - skipped, "{}", self.name);
        assert_eq!(dropped, skipped, "{}", self.name);
        let expected = dir.join(format!("{}.expected.raw", self.name));
        fs::write(&expected, self.expected()).expect("write expected");
        self.manifest_entry(&path, &expected)
    }

    /// One session of a plain writer: `frames` into the array at `path`.
    fn record(&self, path: &Path, frames: std::ops::Range<u64>, options: WriterOptions) -> Stats {
        let mut w = Writer::create(path, self.spec(), options)
            .unwrap_or_else(|e| panic!("{}: create: {e}", self.name));
        assert_eq!(w.frames_pushed(), frames.start, "{}: resumed at", self.name);
        for k in frames {
            if self.skipped.contains(&k) {
                w.skip()
                    .unwrap_or_else(|e| panic!("{}: skip frame {k}: {e}", self.name));
                continue;
            }
            let accepted = w
                .push_bytes(&self.frame(k), Instant::now())
                .unwrap_or_else(|e| panic!("{}: push frame {k}: {e}", self.name))
                .is_accepted();
            assert!(accepted, "{}: frame {k} dropped", self.name);
        }
        w.finish()
            .unwrap_or_else(|e| panic!("{}: finish: {e}", self.name))
    }

    /// One session of a recording: `frames` into its array `cam`, each followed by a
    /// frame of the small array `side` (so the two share the workers all along).
    fn record_in_recording(
        &self,
        root: &Path,
        frames: std::ops::Range<u64>,
        options: WriterOptions,
    ) -> Stats {
        let side = ArraySpec::builder()
            .shape([0, 16, 16])
            .chunk_shape([1, 16, 16])
            .shard_shape([8, 16, 16])
            .codec(Codec::zstd(1))
            .build()
            .expect("side spec");
        let arrays = vec![
            ArrayConfig::new("cam", self.spec()),
            ArrayConfig::new("side", side),
        ];
        let rec = Recording::create(root, arrays, options)
            .unwrap_or_else(|e| panic!("{}: create: {e}", self.name));
        assert_eq!(rec.array("cam").expect("cam").frames_pushed(), frames.start);
        for k in frames {
            if self.skipped.contains(&k) {
                rec.array("cam")
                    .and_then(|mut cam| cam.skip())
                    .unwrap_or_else(|e| panic!("{}: skip frame {k}: {e}", self.name));
            } else {
                let accepted = rec
                    .array("cam")
                    .and_then(|mut cam| cam.push_bytes(&self.frame(k), Instant::now()))
                    .unwrap_or_else(|e| panic!("{}: push frame {k}: {e}", self.name))
                    .is_accepted();
                assert!(accepted, "{}: frame {k} dropped", self.name);
            }
            let _ = rec
                .array("side")
                .and_then(|mut side| side.push(&[k as u16; 256]))
                .unwrap_or_else(|e| panic!("{}: push side {k}: {e}", self.name));
        }
        let stats = rec
            .finish()
            .unwrap_or_else(|e| panic!("{}: finish: {e}", self.name));
        stats.arrays.into_iter().next().expect("cam").1
    }

    fn manifest_entry(&self, path: &Path, expected: &Path) -> Value {
        let es = self.dtype.size();
        json!({
            "name": self.name,
            "path": path,
            "expected": expected,
            // numpy's spelling: the short name's kind letter, the size in bytes.
            "dtype": format!("<{}{}", &self.dtype.short_name()[..1], es),
            "shape": self.final_shape(),
            "chunk": self.chunk,
            "shard": self.shard,
            "fill_hex": format!("0x{:0w$x}", fill_bits(self.dtype, self.fill), w = 2 * es),
            "fill_display": format!("{}", self.fill),
            "codec": self.codec_json(),
            "crc32c": self.crc32c,
            "index_location": self.index.as_str(),
            "dimension_names": self.dims,
            "frames": self.frames,
        })
    }

    /// One line of the matrix table in the test output.
    fn describe(&self) -> String {
        let d = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join("x");
        let n: u64 = self
            .chunk
            .iter()
            .zip(&self.shard)
            .map(|(c, s)| s / c)
            .product();
        format!(
            "{:<30} {:<8} {:<22} {:<18} {:<20} {:>5} {:<8} {:>3} {:<5} {:<6} {:<14} {:>6}",
            self.name,
            self.dtype.to_string(),
            d(&self.final_shape()),
            d(&self.chunk),
            d(&self.shard),
            n,
            self.codec.label(),
            if self.crc32c { "crc" } else { "-" },
            self.index.as_str(),
            match self.sink {
                SinkChoice::Pwrite => "pwrite",
                SinkChoice::Mmap => "mmap",
                SinkChoice::Auto => "auto",
                SinkChoice::Direct => "direct",
                other => panic!("sink {other} not covered"),
            },
            match (self.packing, self.chunk_order) {
                (Packing::Compact, ChunkOrder::C) => "compact",
                (Packing::Sparse, ChunkOrder::C) => "sparse",
                (Packing::Compact, ChunkOrder::Morton) => "compact+morton",
                (Packing::Sparse, ChunkOrder::Morton) => "sparse+morton",
                other => panic!("packing and order {other:?} not covered"),
            },
            if self.skipped.is_empty() {
                self.frames.to_string()
            } else {
                format!("{}-{}", self.frames, self.skipped.len())
            },
        )
    }
}

/// The matrix. Leading axes are [t], [t,z] or [t,c,z]; frames arrive in C order over
/// them. Comments say what each case adds.
fn matrix() -> Vec<Case> {
    use DataType::*;
    use IndexLocation::Start;
    let nan = f64::NAN;
    vec![
        // issue 17: resumed mid-shard (3 + 7 frames; the second session completes the
        // shard the first left partly filled, keeping its chunks), and two arrays of one
        // recording, also resumed, with a dropped frame in each session.
        Case {
            resume_at: Some(3),
            ..case(
                "r3_u16_lz4_resumed_midshard",
                &[0, 100, 70],
                &[1, 32, 32],
                &[4, 64, 64],
                10,
            )
        },
        Case {
            resume_at: Some(6),
            recording: true,
            codec: Codec::zstd(1),
            sink: SinkChoice::Pwrite,
            skipped: &[2, 9],
            ..case(
                "r4_u16_zstd_recording_resumed",
                &[0, 3, 48, 40],
                &[1, 1, 16, 40],
                &[2, 3, 48, 40],
                15,
            )
        },
        // issue 18: chunks in Morton order inside the shards. 6 x 4 x 5 chunks per
        // shard (no power of two on any axis), shards sticking out in y, stops mid-shard,
        // resumed mid-shard; the pwrite sink writing slots; sparse; rank 5.
        Case {
            chunk_order: ChunkOrder::Morton,
            codec: Codec::zstd(1),
            resume_at: Some(4),
            ..case(
                "r3_u16_zstd1_morton_resumed",
                &[0, 200, 160],
                &[1, 32, 32],
                &[6, 128, 160],
                15,
            )
        },
        Case {
            chunk_order: ChunkOrder::Morton,
            sink: SinkChoice::Pwrite,
            index: Start,
            ..case(
                "r4_u16_lz4_morton_pwrite_start",
                &[0, 3, 96, 80],
                &[1, 1, 32, 16],
                &[2, 3, 96, 80],
                13,
            )
        },
        Case {
            chunk_order: ChunkOrder::Morton,
            packing: Packing::Sparse,
            dtype: Float32,
            fill: -1.0,
            ..case(
                "r5_f32_lz4_morton_sparse",
                &[0, 2, 3, 64, 48],
                &[1, 1, 1, 16, 16],
                &[2, 2, 3, 64, 48],
                23,
            )
        },
        // rank 3 -------------------------------------------------------------------
        // 10 frames into shards of 4: stops mid-shard.
        case(
            "r3_u16_lz4_midshard",
            &[0, 256, 256],
            &[1, 64, 64],
            &[4, 256, 256],
            10,
        ),
        // 1000x700 frames: chunks do not divide them; shards stick out in y and x.
        Case {
            fill: 100.0,
            codec: Codec::zstd(1),
            sink: SinkChoice::Pwrite,
            ..case(
                "r3_u16_1000x700_zstd1",
                &[0, 1000, 700],
                &[1, 256, 256],
                &[4, 512, 512],
                6,
            )
        },
        Case {
            fill: 65535.0,
            index: Start,
            ..case(
                "r3_u16_1000x700_lz4_start",
                &[0, 1000, 700],
                &[1, 256, 192],
                &[2, 512, 384],
                5,
            )
        },
        // The direct sink (O_DIRECT, chunks padded to 4 KiB): 16 chunks per shard, so
        // the working index's last block reaches past the reserved file.
        Case {
            codec: Codec::zstd(1),
            sink: SinkChoice::Direct,
            ..case(
                "r3_u16_1000x700_zstd1_direct",
                &[0, 1000, 700],
                &[1, 256, 256],
                &[4, 512, 512],
                6,
            )
        },
        Case {
            fill: 7.0,
            index: Start,
            sink: SinkChoice::Direct,
            ..case(
                "r3_u16_lz4_start_direct",
                &[0, 600, 512],
                &[1, 256, 256],
                &[2, 512, 512],
                5,
            )
        },
        // issue 18: blosc with zstd inside (ome-writers' "blosc-zstd"): u16 edge tiles
        // with several zstd blocks per chunk and a leftover block, resumed; bit shuffle
        // on 1-byte and 4-byte elements (LZ4 and zstd); no shuffle.
        Case {
            fill: 11.0,
            codec: Codec::blosc_zstd(1),
            resume_at: Some(2),
            ..case(
                "r3_u16_bzstd1_edges_resumed",
                &[0, 300, 230],
                &[1, 160, 128],
                &[2, 320, 256],
                5,
            )
        },
        Case {
            codec: Codec::blosc_zstd(3),
            ..case(
                "r3_u16_bzstd3_deep",
                &[0, 200, 256],
                &[2, 128, 256],
                &[4, 256, 256],
                7,
            )
        },
        Case {
            dtype: UInt8,
            fill: 200.0,
            codec: Codec::blosc_zstd(5).with_shuffle(BloscShuffle::BitShuffle),
            crc32c: false,
            ..case(
                "r3_u8_bzstd5_bitshuffle",
                &[0, 100, 130],
                &[1, 64, 64],
                &[2, 128, 128],
                5,
            )
        },
        Case {
            dtype: Float32,
            fill: nan,
            codec: Codec::blosc_lz4(1).with_shuffle(BloscShuffle::BitShuffle),
            sink: SinkChoice::Pwrite,
            ..case(
                "r4_f32_lz4_bitshuffle",
                &[0, 3, 90, 100],
                &[1, 1, 64, 64],
                &[2, 3, 128, 128],
                7,
            )
        },
        Case {
            dtype: Int16,
            fill: -3.0,
            codec: Codec::blosc_zstd(2).with_shuffle(BloscShuffle::NoShuffle),
            index: Start,
            ..case(
                "r3_i16_bzstd2_noshuffle_start",
                &[0, 96, 160],
                &[1, 32, 64],
                &[3, 96, 128],
                4,
            )
        },
        // Deep uncompressed chunks go from the staging buffer straight to the device.
        Case {
            codec: Codec::none(),
            sink: SinkChoice::Direct,
            ..case(
                "r3_u16_none_deep_direct",
                &[0, 600, 512],
                &[2, 256, 256],
                &[4, 512, 512],
                7,
            )
        },
        // Deep chunks (2 frames) and 7 frames: stops mid deep chunk; inner chunks
        // wholly outside the array in x (144..192 of 130).
        Case {
            dtype: UInt8,
            fill: 255.0,
            codec: Codec::none(),
            crc32c: false,
            index: Start,
            ..case(
                "r3_u8_none_nocrc_deep",
                &[0, 100, 130],
                &[2, 32, 48],
                &[4, 64, 96],
                7,
            )
        },
        Case {
            dtype: Int16,
            fill: -7.0,
            codec: Codec::zstd(-5),
            index: Start,
            ..case(
                "r3_i16_zstd-5_start",
                &[0, 96, 160],
                &[1, 32, 64],
                &[3, 96, 128],
                8,
            )
        },
        Case {
            dtype: UInt32,
            fill: 4_294_967_295.0,
            codec: Codec::blosc_lz4(9),
            crc32c: false,
            sink: SinkChoice::Pwrite,
            ..case(
                "r3_u32_lz4-9_nocrc",
                &[0, 80, 120],
                &[1, 40, 40],
                &[2, 80, 80],
                5,
            )
        },
        Case {
            dtype: Float32,
            fill: nan,
            codec: Codec::zstd(3),
            ..case(
                "r3_f32_zstd3_fillnan",
                &[0, 90, 110],
                &[1, 32, 32],
                &[4, 64, 64],
                6,
            )
        },
        Case {
            dtype: Float32,
            fill: -1.5,
            codec: Codec::blosc_lz4(5),
            index: Start,
            sink: SinkChoice::Pwrite,
            ..case(
                "r3_f32_lz4-5_fillneg",
                &[0, 70, 90],
                &[2, 32, 32],
                &[4, 64, 64],
                9,
            )
        },
        // issue 18: the other five data types, each with a fill value at or near an
        // end of its range and a codec of its own; the 64-bit integers carry values a
        // double cannot hold, float64 NaN payloads, subnormals and ±inf.
        Case {
            dtype: Int8,
            fill: -128.0,
            codec: Codec::blosc_lz4(5),
            ..case(
                "r3_i8_lz4-5_fillmin",
                &[0, 70, 90],
                &[1, 32, 32],
                &[4, 64, 64],
                6,
            )
        },
        Case {
            dtype: Int32,
            fill: -2_147_483_648.0,
            codec: Codec::zstd(3),
            index: Start,
            sink: SinkChoice::Pwrite,
            ..case(
                "r3_i32_zstd3_start",
                &[0, 80, 100],
                &[1, 40, 48],
                &[2, 80, 96],
                5,
            )
        },
        Case {
            dtype: Int64,
            fill: -9_007_199_254_740_992.0,
            codec: Codec::blosc_lz4(1),
            ..case(
                "r4_i64_lz4_fillneg",
                &[0, 3, 48, 70],
                &[1, 1, 16, 32],
                &[1, 3, 48, 64],
                4,
            )
        },
        Case {
            dtype: UInt64,
            fill: 1_152_921_504_606_846_976.0,
            codec: Codec::none(),
            sink: SinkChoice::Pwrite,
            ..case(
                "r3_u64_none_fill2pow60",
                &[0, 50, 60],
                &[2, 25, 32],
                &[4, 50, 64],
                7,
            )
        },
        Case {
            dtype: Float64,
            fill: nan,
            codec: Codec::blosc_lz4(1),
            ..case(
                "r3_f64_lz4_fillnan",
                &[0, 60, 90],
                &[1, 32, 32],
                &[3, 64, 64],
                5,
            )
        },
        Case {
            dtype: Float64,
            fill: f64::NEG_INFINITY,
            codec: Codec::zstd(1),
            index: Start,
            ..case(
                "r3_f64_zstd_fillneginf",
                &[0, 40, 40],
                &[2, 16, 16],
                &[4, 32, 32],
                6,
            )
        },
        // Shard = inner chunk; shards stick out in y and x.
        Case {
            codec: Codec::none(),
            fill: 3.0,
            ..case(
                "r3_u16_singlechunk_shards",
                &[0, 300, 200],
                &[1, 128, 96],
                &[1, 128, 96],
                3,
            )
        },
        // 4 x 32 x 32 = 4096 inner chunks per shard; stops mid-shard.
        Case {
            codec: Codec::zstd(1),
            ..case(
                "r3_u16_4096_inner",
                &[0, 256, 256],
                &[1, 8, 8],
                &[4, 256, 256],
                6,
            )
        },
        // Fixed shape[0] = 10 (shard of 4 sticks out in t), only 5 frames pushed, deep
        // chunk of 2 left half full.
        Case {
            fill: 9.0,
            packing: Packing::Sparse,
            ..case(
                "r3_u16_bounded_partial_sparse",
                &[10, 64, 80],
                &[2, 32, 32],
                &[4, 64, 64],
                5,
            )
        },
        Case {
            codec: Codec::zstd(22),
            threads: 1,
            durability: Durability::Shard,
            ..case(
                "r3_u16_zstd22_fullshards",
                &[0, 64, 64],
                &[1, 32, 32],
                &[4, 64, 64],
                8,
            )
        },
        Case {
            codec: Codec::blosc_lz4(0),
            dims: None,
            ..case(
                "r3_u16_lz4-0_nodims_tiny",
                &[0, 3, 5],
                &[3, 2, 2],
                &[6, 4, 4],
                7,
            )
        },
        case(
            "r3_u16_zero_frames",
            &[0, 64, 64],
            &[1, 32, 32],
            &[2, 64, 64],
            0,
        ),
        // rank 4 [t, z] ------------------------------------------------------------
        // Deep in z (2); shards stick out on every axis (t 5 of 6, z 5 of 8, y, x);
        // 23 frames = 4 t + 3 z of the fifth: stops mid-shard and mid deep chunk.
        case(
            "r4_u16_lz4_deepz_alledges",
            &[0, 5, 120, 90],
            &[1, 2, 64, 64],
            &[2, 4, 128, 128],
            23,
        ),
        // Deep in t (2): 16 frames = 5 t + 1 frame of the sixth, mid deep chunk.
        Case {
            dtype: UInt8,
            codec: Codec::zstd(7),
            fill: 1.0,
            sink: SinkChoice::Pwrite,
            ..case(
                "r4_u8_zstd7_deept",
                &[0, 3, 64, 64],
                &[2, 1, 32, 32],
                &[4, 3, 64, 64],
                16,
            )
        },
        Case {
            dtype: Float32,
            fill: 0.5,
            codec: Codec::none(),
            index: Start,
            ..case(
                "r4_f32_none_start",
                &[0, 4, 50, 70],
                &[1, 2, 25, 35],
                &[2, 4, 50, 70],
                11,
            )
        },
        Case {
            dtype: Int16,
            fill: -32768.0,
            codec: Codec::blosc_lz4(1),
            crc32c: false,
            packing: Packing::Sparse,
            ..case(
                "r4_i16_lz4_nocrc_sparse",
                &[0, 3, 100, 100],
                &[1, 1, 48, 48],
                &[2, 3, 96, 96],
                9,
            )
        },
        // Fixed, fully written; shards stick out in t and z.
        Case {
            dtype: UInt32,
            fill: 12345.0,
            codec: Codec::zstd(2),
            durability: Durability::Shard,
            ..case(
                "r4_u32_zstd2_bounded_full",
                &[3, 3, 50, 60],
                &[1, 1, 25, 30],
                &[2, 2, 50, 60],
                9,
            )
        },
        // 1 x 2 x 32 x 32 = 2048 inner chunks per shard.
        Case {
            codec: Codec::zstd(1),
            ..case(
                "r4_u16_2048_inner",
                &[0, 2, 128, 128],
                &[1, 1, 4, 4],
                &[1, 2, 128, 128],
                5,
            )
        },
        // rank 5 [t, c, z] ---------------------------------------------------------
        // Deep in z; shards stick out on every axis (t 5 of 6, c 3 of 4, z 3 of 4, y,
        // x); 40 frames = 4 t + 4 frames: stops mid-shard and mid deep chunk (c 1, z 0
        // of the chunk z 0..2 pushed, z 1 not).
        Case {
            codec: Codec::zstd(1),
            fill: 42.0,
            ..case(
                "r5_u16_zstd1_deepz_alledges",
                &[0, 3, 3, 100, 70],
                &[1, 1, 2, 32, 32],
                &[2, 2, 4, 64, 64],
                40,
            )
        },
        // Deep in c.
        Case {
            dtype: UInt32,
            codec: Codec::blosc_lz4(3),
            sink: SinkChoice::Pwrite,
            index: Start,
            ..case(
                "r5_u32_lz4-3_deepc",
                &[0, 2, 2, 48, 40],
                &[1, 2, 1, 16, 16],
                &[1, 2, 2, 32, 32],
                10,
            )
        },
        Case {
            dtype: Float32,
            fill: nan,
            codec: Codec::zstd(9),
            index: Start,
            ..case(
                "r5_f32_zstd9_fillnan_start",
                &[0, 2, 2, 40, 50],
                &[1, 1, 1, 20, 25],
                &[2, 1, 2, 40, 50],
                13,
            )
        },
        Case {
            dtype: UInt8,
            fill: 7.0,
            codec: Codec::none(),
            crc32c: false,
            ..case(
                "r5_u8_none_nocrc",
                &[0, 3, 2, 33, 47],
                &[1, 1, 1, 16, 16],
                &[1, 2, 2, 32, 32],
                11,
            )
        },
        Case {
            dtype: Int16,
            fill: 5.0,
            codec: Codec::blosc_lz4(1),
            sink: SinkChoice::Pwrite,
            ..case(
                "r5_i16_singlechunk_shards",
                &[0, 2, 2, 60, 50],
                &[1, 1, 1, 64, 64],
                &[1, 1, 1, 64, 64],
                7,
            )
        },
        // 1 x 2 x 2 x 32 x 16 = 2048 inner chunks per shard; deep in t, stops mid it.
        Case {
            codec: Codec::zstd(1),
            fill: 11.0,
            ..case(
                "r5_u16_2048_inner_deept",
                &[0, 2, 2, 128, 128],
                &[2, 1, 1, 4, 8],
                &[2, 2, 2, 128, 128],
                10,
            )
        },
        Case {
            dtype: Float32,
            fill: -2.25,
            codec: Codec::blosc_lz4(1),
            packing: Packing::Sparse,
            threads: 1,
            ..case(
                "r5_f32_lz4_sparse_deepcz",
                &[0, 2, 3, 40, 44],
                &[1, 2, 3, 16, 16],
                &[2, 2, 3, 32, 32],
                15,
            )
        },
        // Fixed shape with fewer frames than fit.
        Case {
            codec: Codec::zstd(4),
            fill: 65535.0,
            durability: Durability::Shard,
            ..case(
                "r5_u16_bounded_partial",
                &[4, 2, 2, 32, 32],
                &[1, 1, 1, 16, 16],
                &[4, 2, 2, 32, 32],
                9,
            )
        },
        // Dropped frames (Writer::skip): frames 2 and 3 fill a whole shard, which is
        // then never written; the last frame is dropped too.
        Case {
            codec: Codec::zstd(1),
            fill: 8.0,
            skipped: &[2, 3, 5, 9, 11],
            ..case(
                "r3_u16_zstd1_drops",
                &[0, 64, 96],
                &[1, 32, 32],
                &[2, 64, 64],
                12,
            )
        },
        // Drops in deep chunks: a whole deep chunk (frames 0-2), part of one (7), a
        // whole shard (12-17) and the last frame.
        Case {
            codec: Codec::blosc_lz4(1),
            fill: 21.0,
            skipped: &[0, 1, 2, 7, 12, 13, 14, 15, 16, 17, 19],
            ..case(
                "r5_u16_lz4_drops_deepz",
                &[0, 2, 3, 40, 50],
                &[1, 1, 3, 32, 32],
                &[1, 2, 3, 64, 64],
                20,
            )
        },
        // The bases of the corrupted copies (codec none: only a crc32c can notice a
        // flipped data byte; without the inner crc32c only the index crc32c can notice a
        // flipped index byte).
        Case {
            codec: Codec::none(),
            ..case("neg_crc_end", &[0, 64, 64], &[1, 32, 32], &[2, 64, 64], 4)
        },
        Case {
            codec: Codec::none(),
            index: Start,
            sink: SinkChoice::Pwrite,
            ..case(
                "neg_crc_start",
                &[0, 2, 64, 64],
                &[1, 1, 32, 32],
                &[1, 2, 64, 64],
                4,
            )
        },
        Case {
            codec: Codec::none(),
            crc32c: false,
            ..case("neg_nocrc_end", &[0, 64, 64], &[1, 32, 32], &[2, 64, 64], 4)
        },
        Case {
            codec: Codec::none(),
            crc32c: false,
            index: Start,
            ..case(
                "neg_nocrc_start",
                &[0, 2, 64, 64],
                &[1, 1, 32, 32],
                &[1, 2, 64, 64],
                4,
            )
        },
    ]
}

// ---------------------------------------------------------------- corruption

/// Shard `c/0/…/0` of `case`'s store: (index byte offset, entries).
fn read_index(case: &Case, shard: &[u8]) -> (usize, Vec<(u64, u64)>) {
    let n: u64 = case
        .chunk
        .iter()
        .zip(&case.shard)
        .map(|(c, s)| s / c)
        .product();
    let size = 16 * n as usize + 4;
    let at = match case.index {
        IndexLocation::End => shard.len() - size,
        IndexLocation::Start => 0,
        other => panic!("index location {other} not covered"),
    };
    let u = |o: usize| u64::from_le_bytes(shard[o..o + 8].try_into().expect("8 bytes"));
    let entries = (0..n as usize)
        .map(|i| (u(at + 16 * i), u(at + 16 * i + 8)))
        .collect();
    (at, entries)
}

/// Element region of inner chunk `i` of shard 0, clipped to the array.
fn inner_chunk_region(case: &Case, mut i: u64) -> Vec<[u64; 2]> {
    let shape = case.final_shape();
    let cps: Vec<u64> = case
        .chunk
        .iter()
        .zip(&case.shard)
        .map(|(c, s)| s / c)
        .collect();
    let mut coord = vec![0; cps.len()];
    for a in (0..cps.len()).rev() {
        coord[a] = i % cps[a];
        i /= cps[a];
    }
    coord
        .iter()
        .zip(&case.chunk)
        .zip(&shape)
        .map(|((c, n), s)| [c * n, ((c + 1) * n).min(*s)])
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for e in fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

/// A copy of `base` with one byte flipped: in the middle of the data of the `nth`
/// stored inner chunk of shard 0 ("chunk"), or in the low byte of that chunk's offset
/// in the shard index ("index").
fn corrupt(dir: &Path, base: &Case, what: &str, nth: usize, expect: &str) -> Value {
    let src = dir.join(format!("{}.zarr", base.name));
    let name = format!("{}_{what}", base.name);
    let dst = dir.join(format!("{name}.zarr"));
    copy_dir(&src, &dst);
    let key = format!("c/{}", vec!["0"; base.rank()].join("/"));
    let file = dst.join(&key);
    let mut bytes = fs::read(&file).expect("read shard");
    let (at, entries) = read_index(base, &bytes);
    let (i, &(offset, nbytes)) = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.0 != u64::MAX)
        .nth(nth)
        .expect("a stored inner chunk");
    match what {
        "chunk" => bytes[(offset + nbytes / 2) as usize] ^= 0x10,
        _ => bytes[at + 16 * i] ^= 0x01,
    }
    fs::write(&file, bytes).expect("write shard");
    json!({
        "name": name,
        "base": base.name,
        "path": dst,
        "corrupted": if what == "chunk" { "inner chunk data" } else { "shard index" },
        "shard_key": key,
        "region": inner_chunk_region(base, i as u64),
        "expect": expect,
    })
}

fn write_manifest(dir: &Path, manifest: &Value) -> PathBuf {
    let path = dir.join("manifest.json");
    let mut f = fs::File::create(&path).expect("manifest");
    f.write_all(
        serde_json::to_string_pretty(manifest)
            .expect("json")
            .as_bytes(),
    )
    .expect("write manifest");
    path
}

// ---------------------------------------------------------------- tests

#[test]
fn matrix_reads_identically_in_three_readers() {
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), READERS) else {
        return;
    };
    let t0 = Instant::now();
    let scratch = Scratch::new("interop-matrix-");
    let dir = scratch.path();
    let cases = matrix();
    assert!(cases.len() >= 24);
    println!(
        "{:<30} {:<8} {:<22} {:<18} {:<20} {:>5} {:<8} {:>3} {:<5} {:<6} {:<14} {:>6}",
        "array",
        "dtype",
        "final shape",
        "inner chunk",
        "shard",
        "n/sh",
        "codec",
        "crc",
        "index",
        "sink",
        "pack",
        "frames"
    );
    let mut arrays = Vec::new();
    for c in &cases {
        println!("{}", c.describe());
        arrays.push(c.write(dir));
    }
    println!("written in {:.1} s", t0.elapsed().as_secs_f64());
    let manifest = write_manifest(dir, &json!({ "arrays": arrays }));
    let (status, _) = run_check(&py, "matrix", &manifest);
    println!("matrix total {:.1} s", t0.elapsed().as_secs_f64());
    assert!(
        status.success(),
        "interop matrix failed (see the FAIL lines above)"
    );
}

#[test]
fn corrupted_shards_are_rejected() {
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), READERS) else {
        return;
    };
    let scratch = Scratch::new("interop-corrupt-");
    let dir = scratch.path();
    let bases: Vec<Case> = matrix()
        .into_iter()
        .filter(|c| c.name.starts_with("neg_"))
        .collect();
    let mut arrays = Vec::new();
    let mut negative = Vec::new();
    for b in &bases {
        arrays.push(b.write(dir));
        if b.crc32c {
            // Only the inner chunk's crc32c can notice this (codec none).
            negative.push(corrupt(dir, b, "chunk", 1, "reject"));
        } else {
            // Only the index crc32c can notice this (no inner crc32c, codec none).
            negative.push(corrupt(dir, b, "index", 2, "reject"));
        }
    }
    // Control: without any crc32c the flipped data byte goes unnoticed and comes back
    // as a wrong value, so the damage above really is in the data the readers return.
    let control = bases
        .iter()
        .find(|b| !b.crc32c)
        .expect("a base without crc32c");
    negative.push(corrupt(dir, control, "chunk", 1, "silent"));
    let manifest = write_manifest(dir, &json!({ "arrays": arrays, "negative": negative }));
    let (status, _) = run_check(&py, "matrix", &manifest);
    assert!(
        status.success(),
        "corrupted-shard checks failed (see FAIL lines)"
    );
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return Some(s);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn during_acquisition_every_read_is_exact() {
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), READERS) else {
        return;
    };
    let mut record = record_cli::command().unwrap_or_else(|e| panic!("zarrstream record: {e}"));
    let scratch = Scratch::new("interop-live-");
    let dir = scratch.path();
    // [t, c, z] = [*, 2, 3], deep in z, 12 frames per shard; 245 frames at 60 fps
    // (about 4 s, 20 shards along t) ending 5 frames into a shard.
    let c = Case {
        codec: Codec::zstd(1),
        fill: 17.0,
        ..case(
            "live_r5_u16",
            &[0, 2, 3, 128, 100],
            &[1, 1, 3, 64, 64],
            &[2, 2, 3, 128, 128],
            245,
        )
    };
    let fps = 60;
    let input = dir.join("frames.raw");
    let mut raw = Vec::new();
    for k in 0..c.frames {
        raw.extend_from_slice(&c.frame(k));
    }
    fs::write(&input, raw).expect("write input");
    let expected = dir.join("live.expected.raw");
    fs::write(&expected, c.expected()).expect("write expected");
    let store = dir.join("live.zarr");
    let ready = dir.join("reader-ready");
    let mut entry = c.manifest_entry(&store, &expected);
    entry["timeout_s"] = json!(120);
    entry["ready_file"] = json!(ready);
    let manifest = write_manifest(dir, &json!({ "live": entry }));

    let log = dir.join("check-live.log");
    let mut reader = Command::new(&py)
        .arg(interop_dir().join("check.py"))
        .arg("live")
        .arg(&manifest)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&log).expect("log"))
        .stderr(fs::File::create(dir.join("check-live.err")).expect("log"))
        .spawn()
        .expect("spawn check.py live");
    // Start the camera once the readers are imported, so they see it from the start.
    let t0 = Instant::now();
    while !ready.exists() {
        if let Some(s) = reader.try_wait().expect("wait") {
            panic!(
                "check.py live exited early ({s}):\n{}{}",
                fs::read_to_string(&log).unwrap_or_default(),
                fs::read_to_string(dir.join("check-live.err")).unwrap_or_default()
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "readers never got ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let shape = c.shape.iter().map(u64::to_string).collect::<Vec<_>>();
    let chunk = c.chunk.iter().map(u64::to_string).collect::<Vec<_>>();
    let shard = c.shard.iter().map(u64::to_string).collect::<Vec<_>>();
    let mut rec = record
        .arg("--out")
        .arg(&store)
        .args(["--shape", &shape.join(",")])
        .args(["--chunk", &chunk.join(",")])
        .args(["--shard", &shard.join(",")])
        .args(["--dtype", "u16", "--codec", "zstd:1", "--fill-value", "17"])
        .args(["--frames", &c.frames.to_string(), "--fps", &fps.to_string()])
        .args(["--threads", "2", "--no-pin", "--dim-names", "t,c,z,y,x"])
        .arg("--estimate-memory")
        .arg("--input")
        .arg(&input)
        .arg("--report")
        .arg(dir.join("report.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn record");
    let rec_status = wait_timeout(&mut rec, Duration::from_secs(120));
    let rec_out = rec.wait_with_output().expect("record output");
    let rec_text = format!(
        "{}{}",
        String::from_utf8_lossy(&rec_out.stdout),
        String::from_utf8_lossy(&rec_out.stderr)
    );
    let status = wait_timeout(&mut reader, Duration::from_secs(150));
    let text = format!(
        "{}{}",
        fs::read_to_string(&log).unwrap_or_default(),
        fs::read_to_string(dir.join("check-live.err")).unwrap_or_default()
    );
    println!("record: {rec_text}");
    println!("{text}");
    for line in text.lines().filter(|l| l.starts_with("live")) {
        shout(&format!("interop: {line}"));
    }
    assert!(
        rec_status.is_some_and(|s| s.success()),
        "record failed or timed out ({rec_status:?}): {rec_text}"
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "reading during acquisition failed ({status:?}); see above"
    );
    // `--estimate-memory`: the estimate printed before the run and against the measured
    // peak after it; the report's estimate bounds the writer's own count.
    assert!(
        rec_text.contains("record: memory estimate ") && rec_text.contains("  memory: estimate "),
        "{rec_text}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("report.json")).expect("report"))
            .expect("report JSON");
    let resident = report["memory_estimate_mib"]["resident"]
        .as_f64()
        .expect("estimate");
    let counted = report["writer_memory_peak_mib"].as_f64().expect("count");
    assert!(counted > 0.0 && counted <= resident, "{report}");
}

// ---------------------------------------------------------------- chunk order

/// zarr-python writes one full shard of each grid (chunks per shard on each axis; no
/// powers of two, ranks 3–5); the order of its chunks' bytes on disk, from the shard
/// index, is `ChunkOrder::Morton`'s order for that grid.
#[test]
fn morton_order_is_zarr_pythons() {
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), READERS) else {
        return;
    };
    let scratch = Scratch::new("interop-morton-");
    let dir = scratch.path();
    let grids: [&[u64]; 7] = [
        &[8, 4, 4],
        &[3, 5, 2],
        &[1, 8, 8],
        &[5, 3, 7],
        &[6, 1, 9],
        &[2, 3, 4, 5],
        &[2, 1, 3, 2, 3],
    ];
    let script = r#"
import json, sys
import numpy as np
import zarr
out, grids = sys.argv[1], json.loads(sys.argv[2])
for i, grid in enumerate(grids):
    chunk = [1] * (len(grid) - 2) + [2, 2]
    shard = [c * g for c, g in zip(chunk, grid)]
    a = zarr.create_array(f"{out}/g{i}.zarr", shape=shard, chunks=chunk, shards=shard,
                          dtype="uint32", compressors=None, fill_value=0)
    # Every chunk differs from the fill value, so zarr-python stores all of them.
    a[...] = np.arange(1, int(np.prod(shard)) + 1, dtype="uint32").reshape(shard)
print(f"zarr-python {zarr.__version__} wrote {len(grids)} shards")
"#;
    let out = Command::new(&py)
        .args(["-c", script])
        .arg(dir)
        .arg(serde_json::to_string(&grids).expect("json"))
        .output()
        .expect("run zarr-python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "zarr-python failed: {text}");
    for (i, grid) in grids.iter().enumerate() {
        let rank = grid.len();
        let chunk: Vec<u64> = (0..rank)
            .map(|a| if a + 2 < rank { 1 } else { 2 })
            .collect();
        let shard: Vec<u64> = chunk.iter().zip(*grid).map(|(c, g)| c * g).collect();
        let mut shape = shard.clone();
        shape[0] = 0;
        let spec = ArraySpec::builder()
            .shape(&shape)
            .chunk_shape(&chunk)
            .shard_shape(&shard)
            .dtype(DataType::UInt32)
            .build()
            .expect("spec");
        let key = format!("g{i}.zarr/c/{}", vec!["0"; rank].join("/"));
        let bytes = fs::read(dir.join(&key)).unwrap_or_else(|e| panic!("{key}: {e}"));
        let n: u64 = grid.iter().product();
        let at = bytes.len() - (16 * n as usize + 4);
        let offset = |i: u64| {
            let o = at + 16 * i as usize;
            u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"))
        };
        let mut on_disk: Vec<u64> = (0..n).collect();
        assert!(
            on_disk.iter().all(|&i| offset(i) != u64::MAX),
            "{key}: a chunk is missing"
        );
        on_disk.sort_by_key(|&i| offset(i));
        assert_eq!(
            on_disk,
            ChunkOrder::Morton.sequence(&spec),
            "grid {grid:?}: zarr-python's order differs"
        );
        if grid.iter().filter(|&&g| g > 1).count() > 1 {
            assert_ne!(on_disk, ChunkOrder::C.sequence(&spec), "grid {grid:?}");
        }
    }
}
