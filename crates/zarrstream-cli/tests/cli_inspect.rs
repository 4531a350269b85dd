//! The `inspect`, `verify` and `compact` subcommands of the `zarrstream` binary,
//! run as a user would: stores written by the library, the built binary, assertions on
//! its JSON, its exit status and its stderr.
//!
//! * `inspect` numbers equal the writer's `Stats` (shards, stored bytes, empty chunks of
//!   skipped frames) and the index table equals the shard file's own index;
//! * `verify` passes good stores and names the shard key and inner-chunk coordinates of
//!   a flipped byte, a bad index crc32c, a truncated shard and overlapping entries;
//! * `compact` turns a sparse (mmap sink, `Packing::Sparse`) store into a dense one that
//!   the `zarrs` crate — and, where the interop Python environment is available (see
//!   `tests/readers/interop.rs`), zarr-python and tensorstore — read identically;
//!   `compact --order morton|c` puts every shard's chunks in that order (the index
//!   stays in C order), `verify` passes and the same readers read the array exactly;
//!   without `--order` a shard keeps its order;
//! * bad input (missing store, no zarr.json, unsupported codec, corrupted shard, a live
//!   writer) gives one line on stderr and exit status 1, never a panic.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream::{
    ArraySpec, ChunkOrder, Codec, DataType, IndexLocation, Packing, SinkChoice, SinkKind, Stats,
    Writer, WriterOptions,
};

const H: usize = 64;
const W: usize = 64;

// ---------------------------------------------------------------- helpers

use zarrstream_testkit::python as pyenv;

/// Frame `k`: smooth with a noisy stripe, so chunk sizes differ.
fn frame(k: u64) -> Vec<u16> {
    (0..H * W)
        .map(|i| {
            let (y, x) = ((i / W) as u64, (i % W) as u64);
            if (y + k).is_multiple_of(5) {
                ((x * 2_654_435_761 + k * 40_503) >> 7) as u16
            } else {
                (x + y * 3 + k * 11) as u16
            }
        })
        .collect()
}

fn spec(codec: Codec, crc32c: bool, location: IndexLocation) -> ArraySpec {
    ArraySpec::builder()
        .shape([0, H as u64, W as u64])
        .chunk_shape([1, 32, 32])
        .shard_shape([4, H as u64, W as u64])
        .dtype(DataType::UInt16)
        .codec(codec)
        .crc32c(crc32c)
        .index_location(location)
        .dimension_names(["t", "y", "x"])
        .build()
        .expect("spec")
}

fn options(sink: SinkChoice, packing: Packing) -> WriterOptions {
    WriterOptions::default()
        .threads(2)
        .pin_threads(false)
        .sink(sink)
        .packing(packing)
}

/// Writes `frames` frames (`None` = skipped) and returns the stats and the expected
/// array (skipped frames read as the fill value 0).
fn write(path: &Path, spec: ArraySpec, opts: WriterOptions, frames: &[bool]) -> (Stats, Vec<u16>) {
    let mut w = Writer::create(path, spec, opts).expect("create");
    let mut expected = Vec::new();
    for (k, &push) in frames.iter().enumerate() {
        if push {
            let f = frame(k as u64);
            let _ = w.push(&f).expect("push");
            expected.extend(f);
        } else {
            w.skip().expect("skip");
            expected.extend(std::iter::repeat_n(0u16, H * W));
        }
    }
    (w.finish().expect("finish"), expected)
}

/// 10 frames, lz4, crc32c, index at the end, default sink: three shards, the last half
/// outside the array.
fn good_store(dir: &Path) -> (PathBuf, Stats, Vec<u16>) {
    let path = dir.join("good.zarr");
    let (stats, expected) = write(
        &path,
        spec(Codec::blosc_lz4(1), true, IndexLocation::End),
        options(SinkChoice::Auto, Packing::Compact),
        &[true; 10],
    );
    (path, stats, expected)
}

fn zarrstream(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrstream"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run zarrstream")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = zarrstream(args);
    let code = out.status.code().expect("exit code (not a signal)");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
    )
}

/// Runs with `--json` and parses stdout.
fn run_json(args: &[&str]) -> (i32, Value, String) {
    let mut a = args.to_vec();
    a.push("--json");
    let (code, stdout, stderr) = run(&a);
    let v = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{a:?}: stdout is not JSON ({e}):\n{stdout}\n{stderr}"));
    (code, v, stderr)
}

/// Asserts a failure: exit status 1, exactly one line on stderr naming the command and
/// containing `needle`.
fn assert_one_line_error(cmd: &str, stderr: &str, code: i32, needle: &str) {
    assert_eq!(code, 1, "{cmd}: exit status; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{cmd}: one line on stderr, got:\n{stderr}");
    assert!(
        lines[0].starts_with(&format!("zarrstream {cmd}: error: ")),
        "{cmd}: {stderr}"
    );
    assert!(
        lines[0].contains(needle),
        "{cmd}: expected {needle:?} in {stderr}"
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The shard's `(offset, nbytes)` entries as its own index bytes say (parsed here
/// independently of the tool).
fn index_of(path: &Path, n: usize, location: IndexLocation) -> Vec<Option<(u64, u64)>> {
    let bytes = fs::read(path).expect("read shard");
    let size = 16 * n + 4;
    let idx = match location {
        IndexLocation::End => &bytes[bytes.len() - size..],
        IndexLocation::Start => &bytes[..size],
        other => panic!("index location {other} not covered"),
    };
    assert_eq!(
        crc32c::crc32c(&idx[..16 * n]).to_le_bytes(),
        idx[16 * n..],
        "index crc32c"
    );
    idx[..16 * n]
        .chunks_exact(16)
        .map(|e| {
            let o = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
            let b = u64::from_le_bytes(e[8..].try_into().expect("8 bytes"));
            (o != u64::MAX).then_some((o, b))
        })
        .collect()
}

/// Rewrites an index-at-end shard's index (with a valid crc32c).
fn rewrite_index(path: &Path, entries: &[Option<(u64, u64)>]) {
    let mut v: Vec<u8> = entries
        .iter()
        .flat_map(|e| {
            let (o, b) = e.unwrap_or((u64::MAX, u64::MAX));
            o.to_le_bytes().into_iter().chain(b.to_le_bytes())
        })
        .collect();
    v.extend(crc32c::crc32c(&v).to_le_bytes());
    let len = fs::metadata(path).expect("stat").len();
    let f = fs::OpenOptions::new().write(true).open(path).expect("open");
    f.write_all_at(&v, len - v.len() as u64)
        .expect("write index");
}

fn flip_byte(path: &Path, at: u64) {
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).expect("read");
    b[0] ^= 0x5a;
    f.write_all_at(&b, at).expect("write");
}

/// The whole array as the `zarrs` crate reads it.
fn read_with_zarrs(path: &Path) -> Vec<u16> {
    let store = std::sync::Arc::new(FilesystemStore::new(path).expect("zarrs store"));
    let array = Array::open(store, "/").expect("zarrs open");
    array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(array.shape().to_vec()))
        .expect("zarrs read")
}

// ---------------------------------------------------------------- inspect

#[test]
fn inspect_numbers_match_the_writer_stats() {
    let dir = zarrstream_testkit::scratch!("cli-inspect");
    let path = dir.path().join("skips.zarr");
    // Frames 2 and 5 skipped: their chunks are empty inside the array.
    let pushes: Vec<bool> = (0..10).map(|k| k != 2 && k != 5).collect();
    let (stats, _) = write(
        &path,
        spec(Codec::zstd(1), true, IndexLocation::End),
        options(SinkChoice::Auto, Packing::Compact),
        &pushes,
    );
    assert_eq!(stats.frames_dropped, 2);

    let (code, v, stderr) = run_json(&["inspect", s(&path)]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["shards"], stats.shards);
    assert_eq!(v["shards"], 3);
    assert_eq!(v["stored_bytes"], stats.bytes_stored);
    assert_eq!(v["raw_bytes"], 10 * (H * W * 2) as u64);
    assert_eq!(v["chunks_stored"], 8 * 4);
    assert_eq!(v["empty_chunks_in_array"], 2 * 4);
    // The last shard holds frames 8..12 of which 10 and 11 are outside the array.
    assert_eq!(v["empty_chunks"], 2 * 4 + 2 * 4);
    assert_eq!(v["gap_bytes"], 0);
    let ratio = v["ratio"].as_f64().expect("ratio");
    assert!(
        (ratio - 10.0 * (H * W * 2) as f64 / stats.bytes_stored as f64).abs() < 1e-9,
        "{ratio}"
    );

    let a = &v["array"];
    assert_eq!(a["shape"], serde_json::json!([10, H, W]));
    assert_eq!(a["dtype"], "uint16");
    assert_eq!(a["chunk_shape"], serde_json::json!([1, 32, 32]));
    assert_eq!(a["shard_shape"], serde_json::json!([4, H, W]));
    assert_eq!(a["chunks_per_shard"], serde_json::json!([4, 2, 2]));
    assert_eq!(a["codec"], "zstd:1");
    assert_eq!(a["index_location"], "end");
    assert_eq!(a["dimension_names"], serde_json::json!(["t", "y", "x"]));
    let names: Vec<&str> = a["codecs"]
        .as_array()
        .expect("codecs")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["bytes", "zstd", "crc32c"]);
    assert_eq!(a["attributes"]["zarrstream"]["frames_dropped"], 2);
    assert_eq!(a["attributes"]["zarrstream"]["state"], "finished");

    let per_shard: u64 = v["shard_list"]
        .as_array()
        .expect("shard_list")
        .iter()
        .map(|s| s["bytes"].as_u64().expect("bytes"))
        .sum();
    assert_eq!(per_shard, stats.bytes_stored);

    // The text summary says the same.
    let (code, text, _) = run(&["inspect", s(&path)]);
    assert_eq!(code, 0);
    assert!(
        text.contains(&format!("{} stored", stats.bytes_stored)),
        "{text}"
    );
    assert!(text.contains("zstd"), "{text}");
}

#[test]
fn inspect_shard_prints_the_shards_own_index() {
    let dir = zarrstream_testkit::scratch!("cli-inspect-shard");
    let (path, _, _) = good_store(dir.path());
    let shard = path.join("c/1/0/0");
    let truth = index_of(&shard, 16, IndexLocation::End);

    let (code, v, stderr) = run_json(&["inspect", s(&path), "--shard", "c/1/0/0"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["key"], "c/1/0/0");
    assert_eq!(v["bytes"], fs::metadata(&shard).expect("stat").len());
    let rows = v["chunks"].as_array().expect("chunks");
    assert_eq!(rows.len(), 16);
    for (i, (row, t)) in rows.iter().zip(&truth).enumerate() {
        let (o, n) = t.expect("all chunks present");
        assert_eq!(row["offset"], o, "row {i}");
        assert_eq!(row["nbytes"], n, "row {i}");
        let c = [i / 4, (i / 2) % 2, i % 2];
        assert_eq!(row["chunk"], serde_json::json!(c), "row {i}");
    }

    // The last shard: chunks of frames 10 and 11 are empty. Key without the c/ prefix.
    let (code, text, _) = run(&["inspect", s(&path), "--shard", "2/0/0"]);
    assert_eq!(code, 0);
    assert!(text.contains("offset") && text.contains("nbytes"), "{text}");
    assert_eq!(text.matches("empty").count(), 8, "{text}");

    let (code, _, stderr) = run(&["inspect", s(&path), "--shard", "c/9/0/0"]);
    assert_one_line_error("inspect", &stderr, code, "no shard c/9/0/0");
}

// ---------------------------------------------------------------- verify

fn problems(v: &Value) -> Vec<(String, Value, String)> {
    v["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| {
            (
                p["shard"].as_str().expect("shard").to_string(),
                p["chunk"].clone(),
                p["message"].as_str().expect("message").to_string(),
            )
        })
        .collect()
}

#[test]
fn verify_passes_good_stores() {
    let dir = zarrstream_testkit::scratch!("cli-verify-good");
    let (path, _, _) = good_store(dir.path());
    for extra in [&[][..], &["--decode"][..]] {
        let mut args = vec!["verify", s(&path)];
        args.extend(extra);
        let (code, v, stderr) = run_json(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert_eq!(v["shards"], 3);
        assert_eq!(v["chunks_checked"], 40);
        assert_eq!(v["chunks_empty"], 8);
        assert!(problems(&v).is_empty(), "{v}");
        assert!(stderr.is_empty(), "{stderr}");
    }
    // Without crc32c every chunk is decoded; codec none, index at the start.
    for (name, codec) in [("none", Codec::none()), ("zstd", Codec::zstd(3))] {
        let p = dir.path().join(format!("nocrc-{name}.zarr"));
        write(
            &p,
            spec(codec, false, IndexLocation::Start),
            options(SinkChoice::Auto, Packing::Compact),
            &[true; 6],
        );
        let (code, v, stderr) = run_json(&["verify", s(&p)]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert_eq!(v["checked_by"], "decode");
        assert_eq!(v["chunks_checked"], 24);
    }
}

#[test]
fn verify_names_the_shard_and_chunk_of_each_problem() {
    let dir = zarrstream_testkit::scratch!("cli-verify-bad");
    let (path, _, _) = good_store(dir.path());

    // A byte flipped inside chunk [1, 0, 1] of shard c/1/0/0.
    let shard = path.join("c/1/0/0");
    let entries = index_of(&shard, 16, IndexLocation::End);
    let (o, n) = entries[5].expect("chunk 5");
    flip_byte(&shard, o + n / 2);
    // The index crc32c of c/0/0/0 broken (its last byte).
    let first = path.join("c/0/0/0");
    flip_byte(&first, fs::metadata(&first).expect("stat").len() - 1);

    let (code, v, stderr) = run_json(&["verify", s(&path)]);
    let got = problems(&v);
    assert_eq!(got.len(), 2, "{v}");
    assert_eq!(got[0].0, "c/0/0/0");
    assert_eq!(got[0].1, Value::Null);
    assert!(got[0].2.contains("index crc32c mismatch"), "{}", got[0].2);
    assert_eq!(got[1].0, "c/1/0/0");
    assert_eq!(got[1].1, serde_json::json!([1, 0, 1]));
    assert!(got[1].2.contains("crc32c mismatch"), "{}", got[1].2);
    assert_one_line_error("verify", &stderr, code, "2 problem(s)");

    // The text report names them the same way.
    let (code, text, _) = run(&["verify", s(&path)]);
    assert_eq!(code, 1);
    assert!(
        text.contains("c/1/0/0 chunk [1, 0, 1]: crc32c mismatch"),
        "{text}"
    );
    assert!(
        text.contains("c/0/0/0: shard index crc32c mismatch"),
        "{text}"
    );
}

#[test]
fn verify_finds_truncated_shards_and_overlapping_entries() {
    let dir = zarrstream_testkit::scratch!("cli-verify-trunc");
    // Index at the start: cutting the file leaves the index readable, so the cut
    // chunk itself is named.
    let path = dir.path().join("start.zarr");
    write(
        &path,
        spec(Codec::blosc_lz4(1), true, IndexLocation::Start),
        options(SinkChoice::Auto, Packing::Compact),
        &[true; 8],
    );
    let shard = path.join("c/1/0/0");
    let entries = index_of(&shard, 16, IndexLocation::Start);
    let (last, &(o, n)) = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
        .max_by_key(|(_, e)| e.0)
        .expect("a chunk");
    fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .expect("open")
        .set_len(o + n - 3)
        .expect("truncate");
    let (code, v, stderr) = run_json(&["verify", s(&path)]);
    let got = problems(&v);
    assert_eq!(got.len(), 1, "{v}");
    let c = [last / 4, (last / 2) % 2, last % 2];
    assert_eq!(
        (got[0].0.as_str(), &got[0].1),
        ("c/1/0/0", &serde_json::json!(c))
    );
    assert!(got[0].2.contains("past the end"), "{}", got[0].2);
    assert_one_line_error("verify", &stderr, code, "c/1/0/0 chunk");

    // Index at the end: a truncated file has lost its index.
    let (path, _, _) = good_store(dir.path());
    let shard = path.join("c/0/0/0");
    let len = fs::metadata(&shard).expect("stat").len();
    fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .expect("open")
        .set_len(len - 100)
        .expect("truncate");
    // And c/1/0/0 gets an index (with a valid crc32c) whose chunk [0, 0, 1] overlaps
    // chunk [0, 0, 0].
    let other = path.join("c/1/0/0");
    let mut entries = index_of(&other, 16, IndexLocation::End);
    let (o0, _) = entries[0].expect("chunk 0");
    let (_, n1) = entries[1].expect("chunk 1");
    entries[1] = Some((o0 + 1, n1));
    rewrite_index(&other, &entries);
    let (code, v, _) = run_json(&["verify", s(&path)]);
    assert_eq!(code, 1);
    let got = problems(&v);
    assert_eq!((got[0].0.as_str(), &got[0].1), ("c/0/0/0", &Value::Null));
    assert!(got[0].2.contains("index"), "{}", got[0].2);
    assert!(
        got.iter().any(|(shard, chunk, msg)| shard == "c/1/0/0"
            && *chunk == serde_json::json!([0, 0, 1])
            && msg.contains("overlap inner chunk [0, 0, 0]")),
        "{v}"
    );
    // The pwrite sink appends chunks in completion order, so the moved chunk may also
    // overlap the chunk that happens to follow chunk [0, 0, 0] in the file; every other
    // problem must be such an overlap involving the moved chunk [0, 0, 1].
    for (shard, chunk, msg) in &got[1..] {
        assert_eq!(shard, "c/1/0/0", "{v}");
        assert!(
            *chunk == serde_json::json!([0, 0, 1]) || msg.contains("overlap inner chunk [0, 0, 1]"),
            "{v}"
        );
    }
}

// ---------------------------------------------------------------- compact

/// Writes a sparse store with the mmap sink, or returns `None` (loudly) where the
/// filesystem made the writer fall back to pwrite (no slots, no gaps).
fn sparse_store(dir: &Path, name: &str, location: IndexLocation) -> Option<(PathBuf, Vec<u16>)> {
    let path = dir.join(name);
    let pushes: Vec<bool> = (0..10).map(|k| k != 3).collect();
    let (stats, expected) = write(
        &path,
        spec(Codec::zstd(1), true, location),
        options(SinkChoice::Mmap, Packing::Sparse),
        &pushes,
    );
    if stats.sink != SinkKind::Mmap {
        let _ = writeln!(
            std::io::stderr(),
            "cli_inspect: SKIPPED sparse compaction: the mmap sink fell back to {:?} on {}",
            stats.sink,
            dir.display()
        );
        return None;
    }
    Some((path, expected))
}

#[test]
fn compact_turns_sparse_shards_dense_and_readers_agree() {
    let dir = zarrstream_testkit::scratch!("cli-compact");
    for location in [IndexLocation::End, IndexLocation::Start] {
        let name = format!("sparse-{}.zarr", location.as_str());
        let Some((path, expected)) = sparse_store(dir.path(), &name, location) else {
            return;
        };
        let (_, before, _) = run_json(&["inspect", s(&path)]);
        assert_eq!(before["sparse_shards"], 3, "{name}: {before}");
        let gaps = before["gap_bytes"].as_u64().expect("gaps");
        assert!(gaps > 0, "{name}: sparse packing left no gaps");
        assert_eq!(read_with_zarrs(&path), expected, "{name}: sparse original");

        // A temporary file a crashed run left behind is not a shard and is removed.
        fs::write(path.join("c/1/0/.0.compact-tmp"), b"stale").expect("stale temp");
        let (code, report, stderr) = run_json(&["compact", s(&path)]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert_eq!(report["compacted"], 3, "{report}");
        assert_eq!(report["failed"], 0);

        let (_, after, _) = run_json(&["inspect", s(&path)]);
        assert_eq!(after["gap_bytes"], 0, "{name}: {after}");
        assert_eq!(after["sparse_shards"], 0);
        assert_eq!(after["chunks_stored"], before["chunks_stored"]);
        assert_eq!(after["empty_chunks_in_array"], 4);
        let (b, a) = (
            before["stored_bytes"].as_u64().expect("before"),
            after["stored_bytes"].as_u64().expect("after"),
        );
        assert_eq!(a, b - gaps, "{name}: exactly the gaps are gone");
        for shard in ["c/0/0/0", "c/1/0/0", "c/2/0/0"] {
            let p = path.join(shard);
            let entries = index_of(&p, 16, location);
            let used: u64 = entries.iter().flatten().map(|(_, n)| n).sum();
            let len = fs::metadata(&p).expect("stat").len();
            assert_eq!(len, used + 16 * 16 + 4, "{name} {shard}: dense");
            let start = if location == IndexLocation::Start {
                260
            } else {
                0
            };
            let mut pos = start;
            for (o, n) in entries.iter().flatten() {
                assert_eq!(*o, pos, "{name} {shard}: C order, back to back");
                pos += n;
            }
            let leftovers: Vec<_> = fs::read_dir(p.parent().expect("dir"))
                .expect("list")
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
                .collect();
            assert!(leftovers.is_empty(), "{name}: temporary files left");
        }
        assert!(!path.join(".zarrstream-partial").exists(), "lock dir left");

        let (code, v, stderr) = run_json(&["verify", s(&path), "--decode"]);
        assert_eq!(code, 0, "{name}: {stderr} {v}");
        assert_eq!(
            read_with_zarrs(&path),
            expected,
            "{name}: zarrs after compact"
        );
        python_readers_agree(dir.path(), &path, &expected);

        // A second run has nothing to do.
        let (code, again, _) = run_json(&["compact", s(&path)]);
        assert_eq!(code, 0);
        assert_eq!(again["already_dense"], 3, "{again}");
        assert_eq!(again["compacted"], 0);
    }
}

/// The C-order indexes of a shard's present chunks in the order of their offsets, from
/// its own index bytes.
fn stored_order(path: &Path, location: IndexLocation) -> Vec<u64> {
    let entries = index_of(path, 16, location);
    let mut present: Vec<(u64, u64)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.map(|(o, _)| (o, i as u64)))
        .collect();
    present.sort_unstable();
    present.into_iter().map(|(_, i)| i).collect()
}

/// `order`'s sequence of the chunks `0..present` (those of a shard's first frames).
fn order_of(order: ChunkOrder, location: IndexLocation, present: u64) -> Vec<u64> {
    let spec = spec(Codec::zstd(1), true, location);
    let all = order.sequence(&spec);
    all.into_iter().filter(|&i| i < present).collect()
}

/// Asserts that every shard of the 10-frame store at `path` is dense and its chunks lie
/// in `order` (the last shard holds frames 8 and 9: chunks 0..8).
fn assert_dense_in(path: &Path, location: IndexLocation, order: ChunkOrder) {
    for (shard, present) in [("c/0/0/0", 16), ("c/1/0/0", 16), ("c/2/0/0", 8)] {
        let p = path.join(shard);
        let entries = index_of(&p, 16, location);
        let used: u64 = entries.iter().flatten().map(|(_, n)| n).sum();
        let len = fs::metadata(&p).expect("stat").len();
        assert_eq!(len, used + 16 * 16 + 4, "{shard}: dense");
        assert_eq!(
            stored_order(&p, location),
            order_of(order, location, present),
            "{shard}: {order} order"
        );
    }
}

#[test]
fn compact_order_rewrites_shards_in_morton_or_c_order_and_readers_agree() {
    let dir = zarrstream_testkit::scratch!("cli-compact-order");
    let spec = || spec(Codec::zstd(1), true, IndexLocation::End);
    let morton = order_of(ChunkOrder::Morton, IndexLocation::End, 16);
    assert_ne!(morton, order_of(ChunkOrder::C, IndexLocation::End, 16));

    // A dense C-order store (mmap sink, 10 frames: the last shard half full).
    let path = dir.path().join("c-order.zarr");
    let (_, expected) = write(
        &path,
        spec(),
        options(SinkChoice::Mmap, Packing::Compact),
        &[true; 10],
    );
    assert_dense_in(&path, IndexLocation::End, ChunkOrder::C);
    let (code, report, stderr) = run_json(&["compact", s(&path), "--order", "morton"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["order"], "morton", "{report}");
    assert_eq!(report["compacted"], 3, "{report}");
    assert_eq!(report["bytes_after"], report["bytes_before"], "{report}");
    assert_dense_in(&path, IndexLocation::End, ChunkOrder::Morton);
    let (code, v, stderr) = run_json(&["verify", s(&path), "--decode"]);
    assert_eq!(code, 0, "{stderr} {v}");
    assert_eq!(
        read_with_zarrs(&path),
        expected,
        "zarrs after compact --order morton"
    );
    python_readers_agree(dir.path(), &path, &expected);

    // In order already: nothing to do, with --order morton or without --order (a shard
    // keeps the order it is in).
    for args in [&["--order", "morton"][..], &[]] {
        let mut a = vec!["compact", s(&path)];
        a.extend_from_slice(args);
        let (code, again, _) = run_json(&a);
        assert_eq!(code, 0);
        assert_eq!(again["already_dense"], 3, "{args:?}: {again}");
    }
    assert_dense_in(&path, IndexLocation::End, ChunkOrder::Morton);

    // And back to C order.
    let (code, report, stderr) = run_json(&["compact", s(&path), "--order", "c"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["compacted"], 3, "{report}");
    assert_dense_in(&path, IndexLocation::End, ChunkOrder::C);
    assert_eq!(
        read_with_zarrs(&path),
        expected,
        "zarrs after compact --order c"
    );

    // A sparse Morton store (chunks in their slots along the Z curve, gaps after them,
    // index at the start; with the mmap sink, or pwrite writing slots where mapping is
    // unsafe): compact without --order makes it dense and keeps the order.
    let path = dir.path().join("sparse-morton.zarr");
    let pushes = [true; 10];
    let (_, expected) = write(
        &path,
        spec_start(),
        options(SinkChoice::Mmap, Packing::Sparse).chunk_order(ChunkOrder::Morton),
        &pushes,
    );
    let (code, report, stderr) = run_json(&["compact", s(&path)]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["order"], "kept", "{report}");
    assert_eq!(report["compacted"], 3, "{report}");
    assert_dense_in(&path, IndexLocation::Start, ChunkOrder::Morton);
    let (code, v, stderr) = run_json(&["verify", s(&path)]);
    assert_eq!(code, 0, "{stderr} {v}");
    assert_eq!(
        read_with_zarrs(&path),
        expected,
        "zarrs after compacting sparse Morton"
    );
    python_readers_agree(dir.path(), &path, &expected);

    // A bad order is a usage error naming the accepted ones.
    let (code, _, stderr) = run(&["compact", s(&path), "--order", "hilbert"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("is not a chunk order (c, morton)"),
        "{stderr}"
    );
}

fn spec_start() -> ArraySpec {
    spec(Codec::zstd(1), true, IndexLocation::Start)
}

#[test]
fn compact_leaves_dense_and_damaged_shards_alone() {
    let dir = zarrstream_testkit::scratch!("cli-compact-bad");
    let (path, _, _) = good_store(dir.path());
    let (code, report, _) = run_json(&["compact", s(&path)]);
    assert_eq!(code, 0);
    assert_eq!(report["already_dense"], 3, "{report}");

    let Some((path, _)) = sparse_store(dir.path(), "damaged.zarr", IndexLocation::End) else {
        return;
    };
    let shard = path.join("c/1/0/0");
    let entries = index_of(&shard, 16, IndexLocation::End);
    let (o, n) = entries[6].expect("chunk 6");
    flip_byte(&shard, o + n / 3);
    let original = fs::read(&shard).expect("read");
    let (code, report, stderr) = run_json(&["compact", s(&path)]);
    assert_eq!(report["compacted"], 2, "{report}");
    assert_eq!(report["failed"], 1);
    assert_one_line_error(
        "compact",
        &stderr,
        code,
        "c/1/0/0: original chunk [1, 1, 0]",
    );
    assert_eq!(
        fs::read(&shard).expect("read"),
        original,
        "damaged shard untouched"
    );
}

#[test]
fn compact_refuses_a_store_with_a_live_writer() {
    let dir = zarrstream_testkit::scratch!("cli-compact-live");
    let path = dir.path().join("live.zarr");
    let mut w = Writer::create(
        &path,
        spec(Codec::blosc_lz4(1), true, IndexLocation::End),
        options(SinkChoice::Mmap, Packing::Sparse),
    )
    .expect("create");
    for k in 0..5 {
        let _ = w.push(&frame(k)).expect("push");
    }
    let (code, _, stderr) = run(&["compact", s(&path)]);
    assert_one_line_error("compact", &stderr, code, "locked by a writer");
    w.finish().expect("finish");
    let (code, _, stderr) = run(&["compact", s(&path)]);
    assert_eq!(code, 0, "{stderr}");
}

/// zarr-python and tensorstore read the array and compare it with `expected`, in the
/// interop suite's Python environment; skipped loudly when there is none (a failure
/// with `CI=true`).
fn python_readers_agree(dir: &Path, path: &Path, expected: &[u16]) {
    let Some(py) = pyenv::interop(
        zarrstream_testkit::target_tmp!(),
        "cli_inspect: the zarr-python/tensorstore check of compact",
    ) else {
        return;
    };
    let raw = dir.join("expected.raw");
    let bytes: Vec<u8> = expected.iter().flat_map(|v| v.to_le_bytes()).collect();
    fs::write(&raw, bytes).expect("write expected");
    let script = r#"
import sys, numpy as np, zarr, tensorstore as ts
path, raw, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
want = np.fromfile(raw, dtype="<u2").reshape(n, 64, 64)
a = zarr.open_array(path, mode="r")[...]
t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}},
            context=ts.Context()).result().read().result()
for name, got in (("zarr-python", a), ("tensorstore", t)):
    if got.shape != want.shape or not np.array_equal(got, want):
        print(f"{name}: differs from the original", file=sys.stderr)
        sys.exit(1)
print("zarr-python and tensorstore agree")
"#;
    let n = (expected.len() / (H * W)).to_string();
    let out = Command::new(py)
        .args(["-c", script, s(path), s(&raw), &n])
        .stdin(Stdio::null())
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python readers: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    let _ = writeln!(
        std::io::stderr(),
        "cli_inspect: {}: {}",
        path.display(),
        said.trim()
    );
}

// ---------------------------------------------------------------- bad input

#[test]
fn bad_input_is_one_line_and_exit_1_for_every_subcommand() {
    let dir = zarrstream_testkit::scratch!("cli-bad");
    let missing = dir.path().join("missing.zarr");
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).expect("mkdir");
    let not_json = dir.path().join("notjson.zarr");
    fs::create_dir(&not_json).expect("mkdir");
    fs::write(not_json.join("zarr.json"), "{ not json").expect("write");
    let file = dir.path().join("file.zarr");
    fs::write(&file, "not a directory").expect("write");

    // A real store whose zarr.json is changed to an unsupported codec (gzip).
    let (good, _, _) = good_store(dir.path());
    let other = dir.path().join("other");
    fs::create_dir(&other).expect("mkdir");
    let (gzip, _, _) = good_store(&other);
    let mut doc: Value =
        serde_json::from_slice(&fs::read(gzip.join("zarr.json")).expect("read")).expect("json");
    doc["codecs"][0]["configuration"]["codecs"][1] =
        serde_json::json!({"name": "gzip", "configuration": {"level": 5}});
    fs::write(gzip.join("zarr.json"), doc.to_string()).expect("write");

    for cmd in ["inspect", "verify", "compact"] {
        for (p, needle) in [
            (&missing, "no such file or directory"),
            (&empty, "no zarr.json"),
            (&file, "not a Zarr v3 array (not a directory)"),
            (&not_json, "not JSON"),
            (&gzip, "unsupported inner codec gzip"),
        ] {
            let (code, stdout, stderr) = run(&[cmd, s(p)]);
            assert_one_line_error(cmd, &stderr, code, needle);
            assert!(stdout.is_empty(), "{cmd} {}: {stdout}", p.display());
            let (code, _, stderr) = run(&[cmd, s(p), "--json"]);
            assert_one_line_error(cmd, &stderr, code, needle);
        }
        // Usage errors exit 2.
        let (code, _, _) = run(&[cmd]);
        assert_eq!(code, 2, "{cmd} without a store");
    }

    // A corrupted shard index: inspect still summarises but fails; verify reports it;
    // compact cannot tell where its chunks are, leaves it alone and fails.
    let shard = good.join("c/2/0/0");
    flip_byte(&shard, fs::metadata(&shard).expect("stat").len() - 10);
    let (code, v, stderr) = run_json(&["inspect", s(&good)]);
    assert_one_line_error(
        "inspect",
        &stderr,
        code,
        "c/2/0/0: shard index crc32c mismatch",
    );
    assert_eq!(v["shards"], 3);
    let (code, _, stderr) = run(&["inspect", s(&good), "--shard", "c/2/0/0"]);
    assert_one_line_error(
        "inspect",
        &stderr,
        code,
        "shard c/2/0/0: shard index crc32c",
    );
    let (code, _, stderr) = run(&["verify", s(&good)]);
    assert_one_line_error("verify", &stderr, code, "c/2/0/0: shard index crc32c");
    let (code, _, stderr) = run(&["compact", s(&good)]);
    assert_one_line_error("compact", &stderr, code, "c/2/0/0");
}

#[test]
fn allocated_bytes_show_sparse_files() {
    let dir = zarrstream_testkit::scratch!("cli-alloc");
    let Some((path, _)) = sparse_store(dir.path(), "alloc.zarr", IndexLocation::End) else {
        return;
    };
    let (_, v, _) = run_json(&["inspect", s(&path)]);
    let disk: u64 = ["c/0/0/0", "c/1/0/0", "c/2/0/0"]
        .iter()
        .map(|k| fs::metadata(path.join(k)).expect("stat").blocks() * 512)
        .sum();
    assert_eq!(v["allocated_bytes"], disk);
}
