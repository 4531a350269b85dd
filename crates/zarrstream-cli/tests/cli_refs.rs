//! `zarrstream refs`: kerchunk reference sets for the inner-chunk view.
//!
//! * `real_readers_read_the_reference_sets`: arrays written by the library (codecs none,
//!   zstd, blosc-lz4, blosc-zstd with bit shuffle; crc32c on and off; u16 and i16; a fill
//!   value other than 0; edge chunks; dropped frames and a whole dropped shard layer; a partial trailing shard) are
//!   turned into JSON and parquet reference sets (`--crc32c verify` and `strip`, a small
//!   `--record-size`, relative and relocated URL templates) and read through fsspec's
//!   `ReferenceFileSystem` by zarr-python 3 (`tests/interop/refs_check.py`, which also
//!   reads every parquet record file with fastparquet), element for element against what
//!   was written. A flipped byte inside a chunk must fail the readers' crc32c check.
//! * The rest need no Python: the JSON layout and the byte ranges against the shard
//!   indexes, the `--json` summary, output handling, and bad input (missing store, not a
//!   store, unsupported codec, corrupted or truncated shard, an index entry pointing
//!   outside its shard) — one-line error, exit status 1, no panic.
//!
//! The readers run in the interop suite's pinned environment (`tests/interop/venv.py`,
//! `target/interop-venv`); without Python the reader test skips loudly, except with
//! `CI=true`, where that is a failure.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use zarrstream::{ArraySpec, BloscShuffle, Codec, DataType, Writer, WriterOptions};

// ---------------------------------------------------------------- environment

use pyenv::shout;
use zarrstream_testkit::python as pyenv;

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../zarrstream/tests/interop")
}

// ---------------------------------------------------------------- stores

/// Frame height, width; chunk 16x16 (edge chunks on both axes), shard 4x32x32.
const FRAME: [u64; 2] = [40, 24];
/// Frames in the array; those in `SKIPPED` are dropped (they read as the fill value).
const FRAMES: u64 = 19;
/// Frame 2, and the whole shard layer 8..12 (its shard files are never written).
const SKIPPED: [u64; 5] = [2, 8, 9, 10, 11];
/// Inner chunks per frame: ceil(40/16) * ceil(24/16).
const CHUNKS_PER_FRAME: u64 = 6;

/// Present chunks of every test array.
fn present_chunks() -> u64 {
    (FRAMES - SKIPPED.len() as u64) * CHUNKS_PER_FRAME
}

/// A store written by the library, and the raw little-endian bytes it must read as.
struct TestStore {
    name: String,
    path: PathBuf,
    dtype: DataType,
    crc32c: bool,
    expected: Vec<u8>,
}

fn element(k: u64, i: u64) -> u16 {
    // Smooth with some noise, so the codecs compress but not trivially.
    let h = (k * 7919 + i * 104_729) % 251;
    (k * 1000 + i + if i.is_multiple_of(5) { h * 97 } else { 0 }) as u16
}

/// Writes `<dir>/<name>.zarr`: shape [19, 40, 24], chunk [1, 16, 16], shard [4, 32, 32].
fn write_store(dir: &Path, name: &str, codec: Codec, crc32c: bool, dtype: DataType) -> TestStore {
    let fill: f64 = if dtype == DataType::Int16 { -3.0 } else { 7.0 };
    let spec = ArraySpec::builder()
        .shape([0, FRAME[0], FRAME[1]])
        .chunk_shape([1, 16, 16])
        .shard_shape([4, 32, 32])
        .dtype(dtype)
        .codec(codec)
        .crc32c(crc32c)
        .fill_value(fill)
        .dimension_names(["t", "y", "x"])
        .build()
        .expect("spec");
    let path = dir.join(format!("{name}.zarr"));
    let options = WriterOptions::default().threads(2).pin_threads(false);
    let mut w = Writer::create(&path, spec, options).expect("create");
    let n = (FRAME[0] * FRAME[1]) as usize;
    let fill_bits = if dtype == DataType::Int16 {
        (fill as i16) as u16
    } else {
        fill as u16
    };
    let mut expected = Vec::new();
    for k in 0..FRAMES {
        let frame: Vec<u16> = if SKIPPED.contains(&k) {
            w.skip().expect("skip");
            vec![fill_bits; n]
        } else {
            let f: Vec<u16> = (0..n as u64).map(|i| element(k, i)).collect();
            if dtype == DataType::Int16 {
                let _ = w.push(bytemuck::cast_slice::<u16, i16>(&f)).expect("push");
            } else {
                let _ = w.push(&f).expect("push");
            }
            f
        };
        expected.extend(frame.iter().flat_map(|v| v.to_le_bytes()));
    }
    w.finish().expect("finish");
    TestStore {
        name: name.into(),
        path,
        dtype,
        crc32c,
        expected,
    }
}

/// The eight codec x crc32c combinations (one of them int16 with fill value -3).
fn all_stores(dir: &Path) -> Vec<TestStore> {
    let mut out = Vec::new();
    for (cname, codec) in [
        ("none", Codec::none()),
        ("zstd", Codec::zstd(1)),
        ("lz4", Codec::blosc_lz4(1)),
        (
            "bzstd-bitshuffle",
            Codec::blosc_zstd(3).with_shuffle(BloscShuffle::BitShuffle),
        ),
    ] {
        for crc in [true, false] {
            let name = format!("{cname}-{}", if crc { "crc" } else { "nocrc" });
            let dtype = if cname == "zstd" && !crc {
                DataType::Int16
            } else {
                DataType::UInt16
            };
            out.push(write_store(dir, &name, codec, crc, dtype));
        }
    }
    out
}

// ---------------------------------------------------------------- running the tool

fn zarrstream(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrstream"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run zarrstream")
}

/// Runs `zarrstream refs ARGS --json`, asserts success, returns the summary.
fn refs_ok(args: &[&str]) -> Value {
    let mut all = vec!["refs"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = zarrstream(&all);
    assert!(
        out.status.success(),
        "zarrstream {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json output is JSON")
}

/// Runs `zarrstream refs ARGS`, asserts a one-line error and exit status 1; returns it.
fn refs_fails(args: &[&str]) -> String {
    let mut all = vec!["refs"];
    all.extend_from_slice(args);
    let out = zarrstream(&all);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{all:?}: status, stderr {err}");
    assert!(!err.contains("panicked"), "{all:?} panicked: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{all:?}: not one line: {err}"
    );
    assert!(err.starts_with("zarrstream refs: error: "), "{err}");
    err
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn numpy_dtype(d: DataType) -> &'static str {
    if d == DataType::Int16 { "<i2" } else { "<u2" }
}

// ---------------------------------------------------------------- the reader test

#[test]
fn real_readers_read_the_reference_sets() {
    let dir = zarrstream_testkit::scratch!("refs-readers-");
    let root = dir.path();
    let stores = all_stores(root);
    let mut cases = Vec::new();
    for st in &stores {
        let expected = root.join(format!("{}.raw", st.name));
        fs::write(&expected, &st.expected).expect("expected data");
        let modes: &[&str] = if st.crc32c {
            &["verify", "strip"]
        } else {
            &["verify"]
        };
        for mode in modes {
            for format in ["json", "parquet"] {
                let out = root.join(format!("{}-{mode}.refs.{format}", st.name));
                let mut args = vec![s(&st.path), "--format", format, "--crc32c", mode];
                args.extend(["--out", s(&out)]);
                if format == "parquet" {
                    args.extend(["--record-size", "7"]);
                }
                let summary = refs_ok(&args);
                assert_eq!(summary["chunks_referenced"], json!(present_chunks()));
                assert_eq!(
                    summary["chunks_missing"],
                    json!(FRAMES * CHUNKS_PER_FRAME - present_chunks())
                );
                let shown = if st.crc32c { *mode } else { "absent" };
                assert_eq!(summary["crc32c"], json!(shown));
                cases.push(json!({
                    "label": format!("{} {format} crc32c {mode}", st.name),
                    "refs": out, "format": format, "name": st.name,
                    "expected": expected, "dtype": numpy_dtype(st.dtype),
                    "shape": [FRAMES, FRAME[0], FRAME[1]], "n_refs": present_chunks(),
                    "record_size": if format == "parquet" { 7 } else { 10000 },
                }));
            }
        }
    }
    let zstd = &stores[2];
    cases.extend(url_cases(root, zstd));
    cases.push(corrupted_chunk_case(root, zstd));
    let Some(py) = pyenv::interop(
        zarrstream_testkit::target_tmp!(),
        "cli_refs: the fsspec + zarr-python reader test",
    ) else {
        return;
    };
    let manifest = root.join("manifest.json");
    fs::write(&manifest, json!({ "cases": cases }).to_string()).expect("manifest");
    let out = Command::new(&py)
        .arg(interop_dir().join("refs_check.py"))
        .arg(&manifest)
        .stdin(Stdio::null())
        .output()
        .expect("run refs_check.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    if let Some(last) = text.lines().rfind(|l| l.starts_with("refs_check:")) {
        shout(&format!("cli_refs: {last}"));
    }
    assert!(out.status.success(), "refs_check.py failed:\n{text}");
}

/// A relative `--url-template` (read from the store's parent directory, where it
/// resolves) and a JSON set relocated with `template_overrides`.
fn url_cases(root: &Path, st: &TestStore) -> Vec<Value> {
    let expected = root.join(format!("{}.raw", st.name));
    let rel = st.path.file_name().and_then(|n| n.to_str()).expect("name");
    let mut cases = Vec::new();
    for format in ["json", "parquet"] {
        let out = root.join(format!("relative.refs.{format}"));
        let summary = refs_ok(&[
            s(&st.path),
            "--format",
            format,
            "--url-template",
            rel,
            "--out",
            s(&out),
        ]);
        assert_eq!(summary["relative_url"], json!(true));
        cases.push(json!({
            "label": format!("{} {format} relative URL {rel}", st.name),
            "refs": out, "format": format, "name": st.name, "cwd": root,
            "expected": expected, "dtype": numpy_dtype(st.dtype),
            "shape": [FRAMES, FRAME[0], FRAME[1]], "n_refs": present_chunks(),
        }));
    }
    let out = root.join("moved.refs.json");
    refs_ok(&[
        s(&st.path),
        "--format",
        "json",
        "--url-template",
        "/nowhere/moved.zarr/",
        "--out",
        s(&out),
    ]);
    cases.push(json!({
        "label": format!("{} json relocated with template_overrides", st.name),
        "refs": out, "format": "json", "name": st.name,
        "template_overrides": {"u": st.path},
        "expected": expected, "dtype": numpy_dtype(st.dtype),
        "shape": [FRAMES, FRAME[0], FRAME[1]], "n_refs": present_chunks(),
    }));
    cases
}

/// A copy of `st` with one byte flipped inside chunk 0.0.0 (the shard index stays
/// valid): with `--crc32c verify` the reader's crc32c check must fail the read.
fn corrupted_chunk_case(root: &Path, st: &TestStore) -> Value {
    let copy = root.join("corrupt.zarr");
    copy_dir(&st.path, &copy);
    let out = root.join("corrupt.refs.json");
    refs_ok(&[s(&copy), "--format", "json", "--out", s(&out)]);
    let doc: Value = serde_json::from_slice(&fs::read(&out).expect("refs")).expect("json");
    let entry = &doc["refs"]["corrupt/0.0.0"];
    let (off, n) = (
        entry[1].as_u64().expect("off"),
        entry[2].as_u64().expect("n"),
    );
    let shard = copy.join("c/0/0/0");
    let mut bytes = fs::read(&shard).expect("shard");
    bytes[(off + n / 2) as usize] ^= 0x10;
    fs::write(&shard, bytes).expect("write shard");
    json!({
        "label": "corrupted chunk, crc32c verify: the read fails",
        "refs": out, "format": "json", "name": "corrupt",
        "expected": root.join(format!("{}.raw", st.name)), "dtype": numpy_dtype(st.dtype),
        "shape": [FRAMES, FRAME[0], FRAME[1]], "n_refs": present_chunks(),
        "expect_error": "checksum",
    })
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for e in fs::read_dir(from).expect("list") {
        let e = e.expect("entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

// ---------------------------------------------------------------- without Python

/// The shard index of `c/...` (index at the end): `(offset, nbytes)` per inner chunk.
fn index_entries(shard: &Path, n: usize) -> Vec<(u64, u64)> {
    let bytes = fs::read(shard).expect("shard");
    let idx = &bytes[bytes.len() - 16 * n - 4..bytes.len() - 4];
    idx.chunks_exact(16)
        .map(|e| {
            let w = |i: usize| u64::from_le_bytes(e[i..i + 8].try_into().expect("8 bytes"));
            (w(0), w(8))
        })
        .collect()
}

#[test]
fn json_layout_and_byte_ranges_follow_the_shard_indexes() {
    let dir = zarrstream_testkit::scratch!("refs-json-");
    let st = write_store(dir.path(), "cam", Codec::zstd(1), true, DataType::UInt16);
    for (mode, trim) in [("verify", 0), ("strip", 4)] {
        let out = dir.path().join(format!("{mode}.json"));
        refs_ok(&[
            s(&st.path),
            "--format",
            "json",
            "--crc32c",
            mode,
            "--out",
            s(&out),
        ]);
        let doc: Value = serde_json::from_slice(&fs::read(&out).expect("refs")).expect("json");
        assert_eq!(doc["version"], json!(1));
        assert!(doc.get("gen").is_none());
        let abs = fs::canonicalize(&st.path).expect("abs");
        assert_eq!(doc["templates"], json!({"u": abs}));
        let refs = doc["refs"].as_object().expect("refs");
        let zarray: Value =
            serde_json::from_str(refs["cam/.zarray"].as_str().expect("string")).expect("json");
        assert_eq!(zarray["chunks"], json!([1, 16, 16]));
        assert_eq!(zarray["shape"], json!([FRAMES, 40, 24]));
        assert_eq!(zarray["fill_value"], json!(7));
        assert_eq!(zarray["dimension_separator"], json!("."));
        if mode == "verify" {
            assert_eq!(zarray["compressor"], json!({"id": "crc32c"}));
            assert_eq!(zarray["filters"], json!([{"id": "zstd", "level": 1}]));
        } else {
            assert_eq!(zarray["compressor"], json!({"id": "zstd", "level": 1}));
        }
        let zattrs: Value =
            serde_json::from_str(refs["cam/.zattrs"].as_str().expect("string")).expect("json");
        assert_eq!(zattrs["_ARRAY_DIMENSIONS"], json!(["t", "y", "x"]));
        assert!(refs.contains_key(".zgroup"));
        // Shard c/1/0/0 holds frames 4..8, rows 0..32: chunk (4, 1, 1) is entry 3.
        let index = index_entries(&st.path.join("c/1/0/0"), 16);
        let want = json!(["{{u}}/c/1/0/0", index[3].0, index[3].1 - trim]);
        assert_eq!(refs["cam/4.1.1"], want);
        assert!(!refs.contains_key("cam/2.0.0"), "dropped frame referenced");
        assert!(
            !refs.contains_key("cam/8.0.0"),
            "dropped shard layer referenced"
        );
        assert!(
            !refs.contains_key("cam/19.0.0"),
            "slot beyond the shape referenced"
        );
        assert_eq!(refs.len() as u64, 3 + present_chunks());
    }
}

#[test]
fn default_output_beside_the_store_and_overwrite() {
    let dir = zarrstream_testkit::scratch!("refs-out-");
    let st = write_store(
        dir.path(),
        "run",
        Codec::blosc_lz4(1),
        true,
        DataType::UInt16,
    );
    let summary = refs_ok(&[s(&st.path), "--format", "parquet"]);
    let want = fs::canonicalize(dir.path())
        .expect("abs")
        .join("run.refs.parq");
    assert_eq!(summary["out"], json!(want));
    assert_eq!(summary["array"], json!("run"));
    assert!(want.join(".zmetadata").is_file());
    assert!(want.join("run/refs.0.parq").is_file());
    let err = refs_fails(&[s(&st.path), "--format", "parquet"]);
    assert!(err.contains("exists"), "{err}");
    refs_ok(&[s(&st.path), "--format", "parquet", "--overwrite"]);
    // A directory that is not a reference set is never replaced.
    let other = dir.path().join("precious");
    fs::create_dir(&other).expect("mkdir");
    fs::write(other.join("data.txt"), "keep me").expect("write");
    let err = refs_fails(&[
        s(&st.path),
        "--format",
        "parquet",
        "--out",
        s(&other),
        "--overwrite",
    ]);
    assert!(err.contains("not a parquet reference set"), "{err}");
    assert!(other.join("data.txt").is_file());
    let summary = refs_ok(&[s(&st.path), "--format", "json", "--name", "frames"]);
    assert_eq!(summary["array"], json!("frames"));
    assert!(dir.path().join("run.refs.json").is_file());
    refs_fails(&[
        s(&st.path),
        "--format",
        "json",
        "--name",
        "a/b",
        "--overwrite",
    ]);
    // Human-readable output names the file and the counts.
    let out = zarrstream(&["refs", s(&st.path), "--format", "json", "--overwrite"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("84 chunks referenced"),
        "{text}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_1() {
    let dir = zarrstream_testkit::scratch!("refs-bad-");
    let root = dir.path();
    let err = refs_fails(&[s(&root.join("missing.zarr")), "--format", "json"]);
    assert!(err.contains("no such file"), "{err}");
    let err = refs_fails(&[s(root), "--format", "json"]);
    assert!(err.contains("not a Zarr v3 array"), "{err}");

    let garbage = root.join("garbage.zarr");
    fs::create_dir(&garbage).expect("mkdir");
    fs::write(garbage.join("zarr.json"), "{not json").expect("write");
    refs_fails(&[s(&garbage), "--format", "json"]);

    let gzip = write_store(root, "gzip", Codec::zstd(1), true, DataType::UInt16);
    let meta = gzip.path.join("zarr.json");
    let text = fs::read_to_string(&meta).expect("zarr.json");
    fs::write(&meta, text.replace("\"zstd\"", "\"gzip\"")).expect("write");
    let err = refs_fails(&[s(&gzip.path), "--format", "json"]);
    assert!(err.contains("gzip"), "{err}");

    // A flipped byte in a shard index: its crc32c no longer matches.
    let flipped = write_store(root, "flipped", Codec::blosc_lz4(1), true, DataType::UInt16);
    let shard = flipped.path.join("c/0/0/0");
    let mut bytes = fs::read(&shard).expect("shard");
    let at = bytes.len() - 20;
    bytes[at] ^= 1;
    fs::write(&shard, bytes).expect("write");
    let err = refs_fails(&[s(&flipped.path), "--format", "parquet"]);
    assert!(err.contains("c/0/0/0"), "{err}");

    // A shard shorter than its index.
    let cut = write_store(root, "cut", Codec::none(), false, DataType::UInt16);
    fs::write(cut.path.join("c/1/0/0"), [0u8; 10]).expect("truncate");
    let err = refs_fails(&[s(&cut.path), "--format", "json"]);
    assert!(err.contains("c/1/0/0"), "{err}");

    // An index entry (with a valid crc32c) pointing past the end of its shard.
    let wild = write_store(root, "wild", Codec::zstd(1), true, DataType::UInt16);
    let shard = wild.path.join("c/0/0/0");
    let mut bytes = fs::read(&shard).expect("shard");
    let start = bytes.len() - 16 * 16 - 4;
    bytes[start..start + 8].copy_from_slice(&1_000_000u64.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[start..bytes.len() - 4]);
    let end = bytes.len();
    bytes[end - 4..].copy_from_slice(&crc.to_le_bytes());
    fs::write(&shard, bytes).expect("write");
    let err = refs_fails(&[s(&wild.path), "--format", "json"]);
    assert!(err.contains("outside the file"), "{err}");

    // Usage errors are clap's (exit 2), not panics.
    let out = zarrstream(&["refs", s(&wild.path), "--format", "yaml"]);
    assert_eq!(out.status.code(), Some(2));
}
