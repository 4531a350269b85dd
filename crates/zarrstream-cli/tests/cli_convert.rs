//! `zarrstream convert`: legacy sharded arrays → standard `sharding_indexed`.
//!
//! * `legacy_layouts_read_back_with_real_readers`: v3-draft storage-transformer arrays
//!   written by zarr-python 2.18 itself (venv `target/legacy-venv` from
//!   `tests/legacy/requirements.txt`), plus hand-built PR 876 (`.zarray` shards) and
//!   zarrita-draft arrays (`tests/legacy/make_handbuilt.py`, numcodecs-compressed
//!   chunks), are converted and read back by zarr-python 3 and tensorstore from the
//!   interop venv, element for element. Skips loudly without Python unless `CI=true`.
//! * `converts_and_reads_back_with_zarrs`: a PR 876 array built here, read with the
//!   `zarrs` crate; `--json`, refusal of an existing OUT, `--overwrite`.
//! * `bad_input_*`: one-line errors, exit status 1, never a panic, no output left.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

const EMPTY: u64 = u64::MAX;

use pyenv::shout;
use zarrstream_testkit::python as pyenv;

/// Both environments (zarr 2.18 for the fixtures, the interop readers), or `None` after a
/// loud message (a panic with `CI=true`).
fn pythons() -> Option<(PathBuf, PathBuf)> {
    let both = pyenv::venv(
        zarrstream_testkit::target_tmp!(),
        "legacy/venv.py",
        "legacy-venv",
    )
    .and_then(|l| {
        Ok((
            l,
            pyenv::venv(
                zarrstream_testkit::target_tmp!(),
                "interop/venv.py",
                "interop-venv",
            )?,
        ))
    });
    pyenv::require(both, "CONVERT READ-BACK TEST")
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zarrstream"))
}

fn convert(args: &[&Path], flags: &[&str]) -> Output {
    let mut c = bin();
    c.arg("convert").args(args).args(flags).stdin(Stdio::null());
    c.output().expect("run zarrstream")
}

// ---------------------------------------------------------------- a PR 876 array in Rust

/// A legacy PR 876 array, uncompressed `<u2`, chunks stored in reverse order, with
/// `skip` inner chunks (global chunk coords) left empty. Returns the expected data.
fn write_l1(
    root: &Path,
    shape: [u64; 2],
    chunks: [u64; 2],
    cps: [u64; 2],
    skip: &[[u64; 2]],
) -> Vec<u16> {
    fs::create_dir_all(root).unwrap();
    let zarray = json!({"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": "<u2",
        "compressor": null, "fill_value": 3, "filters": null, "order": "C",
        "shards": cps, "shard_format": "indexed"});
    fs::write(root.join(".zarray"), zarray.to_string()).unwrap();
    let value = |y: u64, x: u64| (y * 1000 + x) as u16;
    let mut expected = vec![0u16; (shape[0] * shape[1]) as usize];
    for y in 0..shape[0] {
        for x in 0..shape[1] {
            let c = [y / chunks[0], x / chunks[1]];
            expected[(y * shape[1] + x) as usize] = if skip.contains(&c) { 3 } else { value(y, x) };
        }
    }
    let sshape = [chunks[0] * cps[0], chunks[1] * cps[1]];
    for sy in 0..shape[0].div_ceil(sshape[0]) {
        for sx in 0..shape[1].div_ceil(sshape[1]) {
            let mut body = Vec::new();
            let mut index = vec![(EMPTY, EMPTY); (cps[0] * cps[1]) as usize];
            for l in (0..cps[0] * cps[1]).rev() {
                let c = [sy * cps[0] + l / cps[1], sx * cps[1] + l % cps[1]];
                let inside = c[0] * chunks[0] < shape[0] && c[1] * chunks[1] < shape[1];
                if !inside || skip.contains(&c) {
                    continue;
                }
                let start = body.len() as u64;
                for y in 0..chunks[0] {
                    for x in 0..chunks[1] {
                        let (gy, gx) = (c[0] * chunks[0] + y, c[1] * chunks[1] + x);
                        let v = if gy < shape[0] && gx < shape[1] {
                            value(gy, gx)
                        } else {
                            3
                        };
                        body.extend(v.to_le_bytes());
                    }
                }
                index[l as usize] = (start, body.len() as u64 - start);
            }
            for (o, n) in index {
                body.extend(o.to_le_bytes());
                body.extend(n.to_le_bytes());
            }
            fs::write(root.join(format!("{sy}.{sx}")), body).unwrap();
        }
    }
    expected
}

fn read_with_zarrs(path: &Path, shape: &[u64]) -> Vec<u16> {
    let store = std::sync::Arc::new(FilesystemStore::new(path).unwrap());
    let array = Array::open(store, "/").unwrap_or_else(|e| panic!("zarrs open: {e}"));
    array
        .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(shape.to_vec()))
        .unwrap_or_else(|e| panic!("zarrs read: {e}"))
}

#[test]
fn converts_and_reads_back_with_zarrs() {
    let dir = zarrstream_testkit::scratch!("convert-zarrs");
    let legacy = dir.path().join("legacy");
    let expected = write_l1(&legacy, [13, 21], [4, 5], [2, 2], &[[0, 1], [3, 4]]);
    let out = dir.path().join("out.zarr");
    let o = convert(&[&legacy, &out], &["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).expect("--json output is JSON");
    let a = &report["arrays"][0];
    assert_eq!(a["layout"], "v2-shards");
    assert_eq!(a["shard_shape"], json!([8, 10]));
    assert_eq!(a["shards"], json!(6));
    assert_eq!(a["fill_value"], json!(3));
    assert_eq!(read_with_zarrs(&out, &[13, 21]), expected);
    // The legacy shard bytes are kept as they were; only the crc32c is appended.
    let old = fs::read(legacy.join("0.0")).unwrap();
    let new = fs::read(out.join("c/0/0")).unwrap();
    assert_eq!(&new[..old.len()], &old[..]);
    assert_eq!(
        new[old.len()..],
        crc32c::crc32c(&old[old.len() - 64..]).to_le_bytes()
    );

    // An existing OUT is refused without --overwrite and replaced with it.
    let o = convert(&[&legacy, &out], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists"));
    fs::write(out.join("stray"), b"x").unwrap();
    let o = convert(&[&legacy, &out], &["--overwrite"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.join("stray").exists());
    assert_eq!(read_with_zarrs(&out, &[13, 21]), expected);
    let o = convert(&[&legacy, &legacy], &["--overwrite"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(legacy.join(".zarray").exists());
    // Nothing temporary is left beside OUT.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

// ---------------------------------------------------------------- bad input

/// Runs convert on `legacy` and checks: exit 1, one line on stderr containing `want`,
/// no panic, no OUT.
fn assert_refused(legacy: &Path, want: &str) {
    let out = legacy.with_extension("out");
    let o = convert(&[legacy, &out], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.contains(want), "{err:?} does not mention {want:?}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "output left behind");
    let parent = out.parent().unwrap();
    let leftovers: Vec<_> = fs::read_dir(parent)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .contains("zarrstream-convert")
        })
        .collect();
    assert!(leftovers.is_empty(), "temporary output left behind");
}

#[test]
fn bad_input_missing_path_and_not_a_store() {
    let dir = zarrstream_testkit::scratch!("convert-bad");
    assert_refused(&dir.path().join("nope"), "no such file or directory");
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert_refused(&empty, "not a legacy sharded Zarr store");
    let file = dir.path().join("file");
    fs::write(&file, b"hello").unwrap();
    assert_refused(&file, "not a directory");
    let v3 = dir.path().join("v3");
    fs::create_dir(&v3).unwrap();
    fs::write(
        v3.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array"}"#,
    )
    .unwrap();
    assert_refused(&v3, "already a standard Zarr v3 store");
    let v2 = dir.path().join("v2");
    fs::create_dir(&v2).unwrap();
    fs::write(
        v2.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [4], "chunks": [2]}"#,
    )
    .unwrap();
    assert_refused(&v2, "without \"shards\"");
    let junk = dir.path().join("junk");
    fs::create_dir(&junk).unwrap();
    fs::write(junk.join(".zarray"), b"{not json").unwrap();
    assert_refused(&junk, "not JSON");
}

#[test]
fn bad_input_unsupported_compressor_and_dtype() {
    let dir = zarrstream_testkit::scratch!("convert-bad");
    let a = dir.path().join("lzma");
    write_l1(&a, [4, 4], [2, 2], [2, 2], &[]);
    let mut z: Value = serde_json::from_slice(&fs::read(a.join(".zarray")).unwrap()).unwrap();
    z["compressor"] = json!({"id": "lzma", "preset": 1});
    fs::write(a.join(".zarray"), z.to_string()).unwrap();
    assert_refused(&a, "unsupported compressor \"lzma\"");
    z["compressor"] = Value::Null;
    z["dtype"] = json!("<M8[ns]");
    fs::write(a.join(".zarray"), z.to_string()).unwrap();
    assert_refused(&a, "unsupported data type");
    z["dtype"] = json!("<u2");
    z["filters"] = json!([{"id": "delta", "dtype": "<u2"}]);
    fs::write(a.join(".zarray"), z.to_string()).unwrap();
    assert_refused(&a, "unsupported filters");
}

#[test]
fn bad_input_corrupted_shards() {
    let dir = zarrstream_testkit::scratch!("convert-bad");
    let a = dir.path().join("truncated");
    write_l1(&a, [8, 8], [2, 2], [2, 2], &[]);
    let shard = a.join("1.1");
    let bytes = fs::read(&shard).unwrap();
    fs::write(&shard, &bytes[..40]).unwrap();
    assert_refused(
        &a,
        "corrupted shard: 40 bytes, shorter than its 64-byte index",
    );
    // A truncated body: the index (last 64 bytes) now points past the data.
    let mut cut = bytes[..8].to_vec();
    cut.extend(&bytes[bytes.len() - 64..]);
    fs::write(&shard, cut).unwrap();
    assert_refused(&a, "lies outside the 8 data bytes");
    let mut half = bytes.clone();
    let n = half.len();
    half[n - 8..].copy_from_slice(&EMPTY.to_le_bytes());
    fs::write(&shard, half).unwrap();
    assert_refused(&a, "half empty");
}

// ---------------------------------------------------------------- real readers

fn run_py(py: &Path, args: &[&Path], env: &[(&str, &str)]) -> String {
    let o = Command::new(py)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{:?} failed:\n{text}", args);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The zarr 2.18 cases: zstd/blosc/none/gzip, 2-D and 3-D, partial last shards,
/// chunks never written, `fill_value: null`.
fn v3_draft_cases() -> Value {
    json!([
        {"path": "cam/zstd_3d", "shape": [7, 20, 30], "chunks": [2, 8, 8],
         "chunks_per_shard": [2, 2, 2], "dtype": "<u2", "compressor": "zstd",
         "skip": [[0, 0, 1], [3, 2, 3]]},
        {"path": "cam/blosc_2d", "shape": [20, 30], "chunks": [4, 8],
         "chunks_per_shard": [2, 2], "dtype": "|u1", "compressor": "blosc",
         "fill_value": 7, "skip": [[1, 1]]},
        {"path": "none_3d", "shape": [5, 9, 11], "chunks": [2, 4, 4],
         "chunks_per_shard": [1, 2, 2], "dtype": "<i2", "compressor": "none",
         "fill_value": null},
        {"path": "gzip_2d", "shape": [9, 10], "chunks": [3, 3],
         "chunks_per_shard": [2, 2], "dtype": "<f4", "compressor": "gzip",
         "fill_value": -1.5, "skip": [[2, 3]]}
    ])
}

#[test]
fn legacy_layouts_read_back_with_real_readers() {
    let Some((legacy_py, interop_py)) = pythons() else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("convert-readers");
    let root = dir.path();
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../zarrstream/tests/legacy");
    let mut manifest = Vec::new();

    // (a) v3-draft storage transformer, written by zarr-python 2.18 itself.
    let cases = root.join("cases.json");
    fs::write(&cases, v3_draft_cases().to_string()).unwrap();
    let draft = root.join("draft.zarr");
    let said = run_py(
        &legacy_py,
        &[&tests.join("make_v3_draft.py"), &draft, &cases],
        &[("ZARR_V3_EXPERIMENTAL_API", "1"), ("ZARR_V3_SHARDING", "1")],
    );
    shout(&format!("convert: {}", said.trim()));
    let out = root.join("draft-converted.zarr");
    let o = convert(&[&draft, &out], &["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["arrays"].as_array().unwrap().len(), 4);
    assert!(
        report["warnings"].to_string().contains("fill_value null"),
        "{report}"
    );
    for case in v3_draft_cases().as_array().unwrap() {
        let path = case["path"].as_str().unwrap();
        manifest.push(
            json!({"name": format!("v3draft {path}"), "path": out.join(path),
            "expected": root.join(format!("{}.npy", path.replace('/', "_")))}),
        );
    }

    // (b) PR 876 `.zarray` shards and (c) zarrita draft, hand-built.
    let hand = root.join("hand");
    let listing = run_py(&interop_py, &[&tests.join("make_handbuilt.py"), &hand], &[]);
    let built: Value = serde_json::from_str(listing.lines().last().unwrap()).unwrap();
    let mut converted = std::collections::HashMap::new();
    for case in built.as_array().unwrap() {
        let store = PathBuf::from(case["store"].as_str().unwrap());
        let out = converted.entry(store.clone()).or_insert_with(|| {
            let out = store.with_extension("converted");
            let o = convert(&[&store, &out], &[]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            out
        });
        manifest.push(
            json!({"name": case["name"], "path": out.join(case["array"].as_str().unwrap()),
            "expected": case["expected"]}),
        );
    }

    let manifest_path = root.join("manifest.json");
    fs::write(&manifest_path, Value::Array(manifest).to_string()).unwrap();
    let o = Command::new(&interop_py)
        .arg(tests.join("check_converted.py"))
        .arg(&manifest_path)
        .stdin(Stdio::null())
        .output()
        .expect("run check_converted.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{text}");
    if let Some(last) = text
        .lines()
        .rev()
        .find(|l| l.starts_with("converted arrays checked"))
    {
        shout(&format!("convert: {last}"));
    }
    assert!(o.status.success(), "readers disagree:\n{text}");
}
