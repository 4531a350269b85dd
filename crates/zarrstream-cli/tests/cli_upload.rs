//! A recording to an object store killed mid-run: `zarrstream upload` recovers the
//! staging directory's temporary shards (as `zarrstream recover` does), sends everything
//! to the store (a real Garage) and removes the staging directory, and zarr-python and
//! tensorstore read every frame the recording had encoded from the bucket.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zarrstream_testkit::garage;
use zarrstream_testkit::python as pyenv;

const Y: usize = 64;
const X: usize = 64;
const FRAMES: u64 = 80;

fn sample(k: u64, i: usize) -> u16 {
    (i as u64 * 3 + k * 1009 + 1) as u16
}

fn zarrstream(args: &[&OsStr], env: &[(String, String)]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_zarrstream"))
        .args(args)
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .output()
        .expect("run zarrstream");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_killed_recording_is_recovered_and_uploaded_later() {
    if garage::require("upload after a crash").is_none() {
        return;
    }
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), "upload after a crash") else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("cli-upload")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let g = garage::Garage::single(&dir.path().join("garage"));
    let input = dir.path().join("in.raw");
    let mut bytes = Vec::new();
    for k in 0..FRAMES {
        for i in 0..Y * X {
            bytes.extend(sample(k, i).to_le_bytes());
        }
    }
    std::fs::write(&input, &bytes).unwrap();
    let staging = dir.path().join("staging");
    let url = format!("s3://{}/crash.zarr", g.bucket());
    // One frame per chunk and one worker (pwrite, one thread): frames are encoded in
    // order, so what survives is a prefix of the input.
    let mut child = zarrstream_testkit::cli_record!()
        .args(["--out", &url, "--shape", &format!("0,{Y},{X}")])
        .args([
            "--chunk",
            &format!("1,{Y},{X}"),
            "--shard",
            &format!("8,{Y},{X}"),
        ])
        .args([
            "--codec",
            "zstd:1",
            "--sink",
            "pwrite",
            "--threads",
            "1",
            "--no-pin",
        ])
        .args([
            "--frames",
            &FRAMES.to_string(),
            "--fps",
            "100",
            "--quiet",
            "--progress",
        ])
        .arg("--input")
        .arg(&input)
        .arg("--staging")
        .arg(&staging)
        .envs(g.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut encoded = 0u64;
    let t0 = Instant::now();
    let mut lines = BufReader::new(stderr).lines();
    while encoded < 30 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no progress from record"
        );
        match lines.next() {
            Some(Ok(l)) => {
                if let Some(n) = l.strip_prefix("encoded ").and_then(|n| n.parse().ok()) {
                    encoded = n;
                }
            }
            _ => panic!("record ended before it was killed"),
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert!(
        staging.join(".zarrstream-partial").is_dir(),
        "a killed writer leaves temporary shards in staging"
    );

    let env = g.env();
    let (ok, text) = zarrstream(&["upload".as_ref(), staging.as_os_str()], &env);
    assert!(ok, "upload: {text}");
    assert!(
        !staging.exists(),
        "removed once everything is uploaded: {text}"
    );

    let npy = dir.path().join("in.npy");
    std::fs::write(&npy, garage::npy("<u2", &[FRAMES as usize, Y, X], &bytes)).unwrap();
    let (ok, text) = garage::s3_read(
        &py,
        &g,
        g.bucket(),
        "crash.zarr",
        &[OsStr::new("--expect-prefix-of"), npy.as_os_str()],
    );
    assert!(ok, "{text}");
    // "PASS zarr-python: s3://b/p uint16 (N, 64, 64)"
    let shape0: u64 = text
        .lines()
        .filter(|l| l.starts_with("PASS"))
        .find_map(|l| l.rsplit('(').next())
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        shape0 >= encoded,
        "at least the {encoded} frames reported encoded are in the bucket ({text})"
    );
}
