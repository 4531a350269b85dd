//! `zarrstream record` against object stores, as acquisition PCs run it:
//!
//! * `three_processes_record_one_array_on_a_shared_path`: three `record --part-of K/3`
//!   processes write cameras 0, 1, 2 of one array on a local path they share (taken as
//!   `file://`); `publish_parts` makes the shared `zarr.json`; the `zarrs` crate reads
//!   every camera's frames back.
//! * `record_to_garage_one_array_and_a_recording`: `record --out s3://…` of one array
//!   and of `--arrays 2` (a recording: a group of two arrays) into a real Garage,
//!   credentials from the environment, read back by zarr-python and tensorstore.
//!
//! Run with `cargo test -p zarrstream --test record_s3`.

// Linux only: Garage runs as a Linux child process of the test (zarrstream_testkit::garage).
#![cfg(target_os = "linux")]

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Stdio;

use zarrstream_testkit::garage;
use zarrstream_testkit::python as pyenv;

use garage::Garage;
use zarrs::array::Array;
use zarrs::filesystem::FilesystemStore;

const Y: usize = 128;
const X: usize = 192;

/// `n` frames of camera `cam`, distinct everywhere, as `record --input` takes them.
fn frames(cam: u64, n: u64) -> Vec<u16> {
    (0..n)
        .flat_map(|f| (0..Y * X).map(move |i| (i as u64 * 7 + f * 131 + cam * 10_007) as u16))
        .collect()
}

fn le(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn record(args: &[&OsStr], env: &[(String, String)]) -> std::process::Child {
    zarrstream_testkit::cli_record!()
        .args(args)
        .envs(env.iter().cloned())
        .env(
            "ZARRSTREAM_STAGING",
            std::env::temp_dir().join("zarrstream-staging-tests"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn check(child: std::process::Child, what: &str) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn three_processes_record_one_array_on_a_shared_path() {
    let dir = zarrstream_testkit::scratch!("record-parts");
    let out = dir.path().join("cams.zarr");
    let n = 24u64;
    let inputs: Vec<PathBuf> = (0..3)
        .map(|k| {
            let p = dir.path().join(format!("cam{k}.raw"));
            std::fs::write(&p, le(&frames(k, n))).unwrap();
            p
        })
        .collect();
    let children: Vec<_> = (0..3)
        .map(|k| {
            let part = format!("{k}/3");
            let staging = dir.path().join(format!("staging{k}"));
            record(
                &[
                    "--out".as_ref(),
                    out.as_os_str(),
                    "--part-of".as_ref(),
                    part.as_ref(),
                    "--shape".as_ref(),
                    format!("0,{Y},{X}").as_ref(),
                    "--chunk".as_ref(),
                    "1,64,96".as_ref(),
                    "--shard".as_ref(),
                    "8,128,192".as_ref(),
                    "--codec".as_ref(),
                    "lz4:1".as_ref(),
                    "--frames".as_ref(),
                    n.to_string().as_ref(),
                    "--input".as_ref(),
                    inputs[k].as_os_str(),
                    "--staging".as_ref(),
                    staging.as_os_str(),
                    "--threads".as_ref(),
                    "1".as_ref(),
                    "--quiet".as_ref(),
                ],
                &[],
            )
        })
        .collect();
    for (k, c) in children.into_iter().enumerate() {
        check(c, &format!("part {k}"));
    }
    let url = format!("file://{}", out.display());
    let r = zarrstream::remote::publish_parts(&url, &Default::default()).unwrap();
    assert_eq!((r.parts, r.parts_found, r.extent0), (3, 3, n));
    assert_eq!(r.state, "finished");
    // Every process wrote only its own shards: axis 1 of each shard key is its part.
    for k in 0..3u64 {
        let shard = out.join(format!("c/0/{k}/0/0"));
        assert!(shard.is_file(), "{}", shard.display());
    }
    let store = std::sync::Arc::new(FilesystemStore::new(&out).unwrap());
    let array = Array::open(store, "/").unwrap();
    assert_eq!(array.shape(), &[n, 3, Y as u64, X as u64]);
    let all: Vec<u16> = array
        .retrieve_array_subset::<Vec<u16>>(&array.subset_all())
        .unwrap();
    for k in 0..3u64 {
        let want = frames(k, n);
        for f in 0..n as usize {
            let at = (f * 3 + k as usize) * Y * X;
            assert!(
                all[at..at + Y * X] == want[f * Y * X..(f + 1) * Y * X],
                "camera {k}, frame {f}"
            );
        }
    }
}

#[test]
fn record_to_garage_one_array_and_a_recording() {
    if garage::require("record to s3").is_none() {
        return;
    }
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), "record to s3") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("record-s3");
    let g = Garage::single(&dir.path().join("garage"));
    let n = 20u64;
    let input = dir.path().join("cam.raw");
    std::fs::write(&input, le(&frames(0, n))).unwrap();
    let common = |out: &str| -> Vec<String> {
        [
            "--out",
            out,
            "--shape",
            &format!("0,{Y},{X}"),
            "--chunk",
            "1,64,96",
            "--shard",
            "8,128,192",
            "--codec",
            "zstd:1",
            "--frames",
            &n.to_string(),
            "--threads",
            "1",
            "--quiet",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(["--input".to_string(), input.display().to_string()])
        .collect()
    };
    let one = format!("s3://{}/one.zarr", g.bucket());
    let args = common(&one);
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    check(record(&args, &g.env()), "record one array");
    let mut args = common(&format!("s3://{}/rec.zarr", g.bucket()));
    args.extend(["--arrays".to_string(), "2".to_string()]);
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    check(record(&args, &g.env()), "record a recording");

    let npy = dir.path().join("cam.npy");
    std::fs::write(
        &npy,
        garage::npy("<u2", &[n as usize, Y, X], &le(&frames(0, n))),
    )
    .unwrap();
    for prefix in ["one.zarr", "rec.zarr/cam0", "rec.zarr/cam1"] {
        let (ok, text) = garage::s3_read(
            &py,
            &g,
            g.bucket(),
            prefix,
            &[OsStr::new("--expect"), npy.as_os_str()],
        );
        assert!(ok, "{prefix}: {text}");
    }
}
