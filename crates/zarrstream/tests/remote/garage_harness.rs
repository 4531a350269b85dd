//! Proves the Garage harness (`zarrstream_testkit::garage`) and the S3 reader check
//! (`tests/interop/s3_read.py`) the object-store tests stand on, against real Garage 2.5.0
//! servers and clients we did not write (botocore, zarr-python over s3fs, tensorstore):
//!
//! * `single_node_serves_s3`: put, get, list, a multipart upload, a second bucket; a key
//!   without permission, an unknown key and a wrong secret are refused with 403.
//! * `cluster_serves_with_one_node_down`: three nodes, replication factor 3; with one
//!   node stopped the other two still serve reads and writes; the restarted node serves
//!   what was written while it was down and, after another node crashes (SIGKILL), forms
//!   the write quorum with the third; with two of three down, reads and writes are refused
//!   (503).
//! * `s3_read_checks_a_zarr_python_array`: zarr-python writes a sharded array into Garage;
//!   `s3_read.py` passes it against its values (`.npy` written by NumPy, by hand, raw) and
//!   fails it against altered values, wrong shapes and a too-long prefix.
//!
//! Run with `cargo test -p zarrstream --test remote garage_harness::` (`-- --nocapture` shows the
//! readers' lines). Without Garage or the Python environment the tests skip loudly, except
//! with `CI=true`, where that is a failure.

// Linux only: Garage runs as a Linux child process of the test (zarrstream_testkit::garage).
#![cfg(target_os = "linux")]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use zarrstream_testkit::garage;
use zarrstream_testkit::python as pyenv;

use garage::Garage;

/// Garage and the interop interpreter, or `None` after a loud skip (a panic in CI).
fn setup(what: &str) -> Option<PathBuf> {
    garage::require(what)?;
    pyenv::interop(zarrstream_testkit::target_tmp!(), what)
}

/// `n` bytes that do not repeat (splitmix64), so a misplaced part or block shows.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut z = seed;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(x ^ (x >> 31)).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// What `s3_ops.py` did: `Ok(stdout)`, or `Err((S3 error code, HTTP status))` when the
/// server refused. Anything else fails the test.
type Outcome = Result<String, (String, u16)>;

/// Runs `tests/interop/s3_ops.py ARGS` with `env` (see [`Garage::env`]).
fn ops(py: &Path, env: &[(String, String)], args: &[&OsStr]) -> Outcome {
    let out = Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/s3_ops.py"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run s3_ops.py");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    match out.status.code() {
        Some(0) => Ok(stdout),
        Some(3) => {
            let mut words = stdout
                .trim()
                .strip_prefix("REFUSED ")
                .unwrap_or("")
                .split(' ');
            let code = words.next().unwrap_or_default().to_string();
            let status = words.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            Err((code, status))
        }
        _ => panic!(
            "s3_ops.py {args:?} failed ({}):\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// `env` with `key` set to `value`.
fn with(env: &[(String, String)], key: &str, value: &str) -> Vec<(String, String)> {
    let mut env: Vec<_> = env.iter().filter(|(k, _)| k != key).cloned().collect();
    env.push((key.to_string(), value.to_string()));
    env
}

fn put(py: &Path, env: &[(String, String)], bucket: &str, key: &str, file: &Path) -> Outcome {
    ops(
        py,
        env,
        &[
            "put".as_ref(),
            bucket.as_ref(),
            key.as_ref(),
            file.as_os_str(),
        ],
    )
}

/// GetObject into `dir/got`; the object's bytes, or the refusal.
fn get(
    py: &Path,
    env: &[(String, String)],
    bucket: &str,
    key: &str,
    dir: &Path,
) -> Result<Vec<u8>, (String, u16)> {
    let out = dir.join("got");
    let _ = std::fs::remove_file(&out);
    ops(
        py,
        env,
        &[
            "get".as_ref(),
            bucket.as_ref(),
            key.as_ref(),
            out.as_os_str(),
        ],
    )?;
    Ok(std::fs::read(&out).expect("read the object got"))
}

#[test]
fn single_node_serves_s3() {
    let Some(py) = setup("GARAGE HARNESS (single node)") else {
        return;
    };
    let tmp = zarrstream_testkit::scratch!("garage-single");
    let g = Garage::single(&tmp.path().join("garage"));
    let env = g.env();
    let dir = tmp.path();

    let small = bytes(1, 100_000);
    std::fs::write(dir.join("small"), &small).expect("write");
    put(&py, &env, g.bucket(), "a/small.bin", &dir.join("small")).expect("put");
    assert_eq!(
        get(&py, &env, g.bucket(), "a/small.bin", dir).expect("get"),
        small
    );

    // 11 MiB in parts of 5 MiB: three parts, the last one short.
    let big = bytes(2, 11 << 20);
    std::fs::write(dir.join("big"), &big).expect("write");
    let said = ops(
        &py,
        &env,
        &[
            "put-multipart".as_ref(),
            g.bucket().as_ref(),
            "a/big.bin".as_ref(),
            dir.join("big").as_os_str(),
            (5u32 << 20).to_string().as_ref(),
        ],
    )
    .expect("multipart upload");
    assert_eq!(said.trim(), "3 parts");
    assert!(get(&py, &env, g.bucket(), "a/big.bin", dir).expect("get") == big);

    g.create_bucket("second-bucket");
    put(&py, &env, "second-bucket", "x/y", &dir.join("small")).expect("put");
    let listed = ops(
        &py,
        &env,
        &["list".as_ref(), "second-bucket".as_ref(), "".as_ref()],
    )
    .expect("list");
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["x/y"]);
    let listed = ops(
        &py,
        &env,
        &["list".as_ref(), g.bucket().as_ref(), "a/".as_ref()],
    )
    .expect("list");
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        ["a/big.bin", "a/small.bin"]
    );

    // A key of the cluster without permission on the bucket.
    let (id, secret) = g.create_key("no-permission");
    let nobody = with(
        &with(&env, "AWS_ACCESS_KEY_ID", &id),
        "AWS_SECRET_ACCESS_KEY",
        &secret,
    );
    let refused = get(&py, &nobody, g.bucket(), "a/small.bin", dir).expect_err("get refused");
    assert_eq!(refused, ("AccessDenied".to_string(), 403));
    let refused =
        put(&py, &nobody, g.bucket(), "a/intruder", &dir.join("small")).expect_err("put refused");
    assert_eq!(refused, ("AccessDenied".to_string(), 403));
    // A key the cluster does not know, and the right key with a wrong secret.
    let unknown = with(&env, "AWS_ACCESS_KEY_ID", "GK0123456789abcdef01234567");
    let refused = get(&py, &unknown, g.bucket(), "a/small.bin", dir).expect_err("unknown key");
    assert_eq!(refused.1, 403, "{refused:?}");
    let wrong = with(&env, "AWS_SECRET_ACCESS_KEY", &"0".repeat(64));
    let refused = get(&py, &wrong, g.bucket(), "a/small.bin", dir).expect_err("wrong secret");
    assert_eq!(refused.1, 403, "{refused:?}");
    // Nothing was written by the refused put.
    let listed = ops(
        &py,
        &env,
        &["list".as_ref(), g.bucket().as_ref(), "a/".as_ref()],
    )
    .expect("list");
    assert!(!listed.contains("intruder"), "{listed}");
}

#[test]
fn cluster_serves_with_one_node_down() {
    let Some(py) = setup("GARAGE HARNESS (3-node cluster)") else {
        return;
    };
    let tmp = zarrstream_testkit::scratch!("garage-cluster");
    let mut g = Garage::cluster(&tmp.path().join("garage"), 3);
    let dir = tmp.path();

    let first = bytes(3, 300_000);
    std::fs::write(dir.join("first"), &first).expect("write");
    put(&py, &g.env_of(0), g.bucket(), "first", &dir.join("first")).expect("put");
    for i in 0..3 {
        assert_eq!(
            get(&py, &g.env_of(i), g.bucket(), "first", dir).expect("get"),
            first
        );
    }

    g.stop_node(2);
    let (node0, node1) = (g.env_of(0), g.env_of(1));
    assert_eq!(
        get(&py, &node0, g.bucket(), "first", dir).expect("get, node 2 down"),
        first
    );
    assert_eq!(
        get(&py, &node1, g.bucket(), "first", dir).expect("get, node 2 down"),
        first
    );
    let second = bytes(4, 300_000);
    std::fs::write(dir.join("second"), &second).expect("write");
    put(&py, &node0, g.bucket(), "second", &dir.join("second")).expect("put, node 2 down");
    assert_eq!(
        get(&py, &node1, g.bucket(), "second", dir).expect("get"),
        second
    );

    g.start_node(2);
    let node2 = g.env_of(2);
    assert_eq!(
        get(&py, &node2, g.bucket(), "second", dir).expect("get"),
        second
    );
    assert_eq!(
        get(&py, &node2, g.bucket(), "first", dir).expect("get"),
        first
    );

    // Node 0 crashes: the quorum is now nodes 1 and 2, so node 2 must be a full member again.
    g.kill_node(0);
    assert_eq!(
        get(&py, &node2, g.bucket(), "second", dir).expect("get, node 0 down"),
        second
    );
    let third = bytes(5, 300_000);
    std::fs::write(dir.join("third"), &third).expect("write");
    put(&py, &node1, g.bucket(), "third", &dir.join("third")).expect("put, node 0 down");
    assert_eq!(
        get(&py, &node2, g.bucket(), "third", dir).expect("get"),
        third
    );

    // Two of three down: no quorum, so writes and reads are refused, not acknowledged.
    g.stop_node(1);
    let refused = put(&py, &node2, g.bucket(), "fourth", &dir.join("third"));
    assert_eq!(refused, Err(("ServiceUnavailable".to_string(), 503)));
    let refused = get(&py, &node2, g.bucket(), "third", dir).map(|b| b.len());
    assert_eq!(refused, Err(("ServiceUnavailable".to_string(), 503)));
}

#[test]
fn s3_read_checks_a_zarr_python_array() {
    let Some(py) = setup("GARAGE HARNESS (s3_read.py)") else {
        return;
    };
    let tmp = zarrstream_testkit::scratch!("garage-s3-read");
    let g = Garage::single(&tmp.path().join("garage"));
    let dir = tmp.path();
    let values_npy = dir.join("values.npy");
    ops(
        &py,
        &g.env(),
        &[
            "zarr-write".as_ref(),
            g.bucket().as_ref(),
            "arrays/a".as_ref(),
            values_npy.as_os_str(),
        ],
    )
    .expect("zarr-python writes the array");
    let listed = ops(
        &py,
        &g.env(),
        &["list".as_ref(), g.bucket().as_ref(), "arrays/a/".as_ref()],
    )
    .expect("list");
    assert!(
        listed.lines().any(|k| k == "arrays/a/zarr.json"),
        "{listed}"
    );
    assert!(
        listed.lines().any(|k| k.starts_with("arrays/a/c/")),
        "{listed}"
    );

    // The values, from NumPy's file: version 1.0 header, uint16, shape (5, 6, 7).
    let file = std::fs::read(&values_npy).expect("read values.npy");
    let start = 10 + usize::from(u16::from_le_bytes([file[8], file[9]]));
    assert!(String::from_utf8_lossy(&file[10..start]).contains("(5, 6, 7)"));
    let values = file[start..].to_vec();
    assert_eq!(values.len(), 5 * 6 * 7 * 2);
    let frame = 6 * 7 * 2;

    let readers = "zarr-python,tensorstore,zarrs";
    let check = |args: &[&OsStr]| {
        let mut all: Vec<&OsStr> = vec!["--readers".as_ref(), readers.as_ref()];
        all.extend_from_slice(args);
        garage::s3_read(&py, &g, g.bucket(), "arrays/a", &all)
    };
    let passes = |(ok, text): (bool, String)| {
        assert!(ok, "s3_read.py failed:\n{text}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with("PASS ")).count(),
            3,
            "{text}"
        );
    };
    let fails = |(ok, text): (bool, String), why: &str| {
        assert!(!ok, "s3_read.py passed:\n{text}");
        let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL ")).collect();
        assert_eq!(failed.len(), 3, "{text}");
        assert!(
            failed.iter().all(|l| l.contains(why)),
            "not `{why}`:\n{text}"
        );
    };
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).expect("write");
        p
    };

    passes(check(&["--expect".as_ref(), values_npy.as_os_str()]));
    // The same values under a header written here (the format Rust tests will write).
    let hand = write("hand.npy", &garage::npy("<u2", &[5, 6, 7], &values));
    passes(check(&[
        "--expect".as_ref(),
        hand.as_os_str(),
        "--expect-shape".as_ref(),
        "5,6,7".as_ref(),
    ]));
    let raw = write("values.raw", &values);
    let raw_args = |mode: &'static str| -> Vec<&OsStr> {
        vec![
            mode.as_ref(),
            raw.as_os_str(),
            "--dtype".as_ref(),
            "<u2".as_ref(),
            "--shape=-1,6,7".as_ref(),
        ]
    };
    passes(check(&raw_args("--expect")));

    // One element off by one.
    let mut altered = values.clone();
    altered[3 * frame + 17] ^= 1;
    let altered_npy = write("altered.npy", &garage::npy("<u2", &[5, 6, 7], &altered));
    fails(
        check(&["--expect".as_ref(), altered_npy.as_os_str()]),
        "values differ",
    );
    // The right values under the wrong type, and the wrong shape.
    let as_i2 = write("i2.npy", &garage::npy("<i2", &[5, 6, 7], &values));
    fails(
        check(&["--expect".as_ref(), as_i2.as_os_str()]),
        "dtype uint16 != expected int16",
    );
    fails(
        check(&[
            "--expect".as_ref(),
            values_npy.as_os_str(),
            "--expect-shape".as_ref(),
            "4,6,7".as_ref(),
        ]),
        "--expect-shape",
    );

    // A recording still running: the file holds 3 frames more than the array.
    let mut longer = values.clone();
    longer.extend(bytes(5, 3 * frame));
    let longer_npy = write("longer.npy", &garage::npy("<u2", &[8, 6, 7], &longer));
    passes(check(&[
        "--expect-prefix-of".as_ref(),
        longer_npy.as_os_str(),
    ]));
    fails(
        check(&["--expect".as_ref(), longer_npy.as_os_str()]),
        "shape (5, 6, 7) != expected (8, 6, 7)",
    );
    // ... but not when a frame present differs, nor when the file is shorter.
    let mut longer_altered = longer.clone();
    longer_altered[4 * frame] ^= 0x80;
    let la = write(
        "longer-altered.npy",
        &garage::npy("<u2", &[8, 6, 7], &longer_altered),
    );
    fails(
        check(&["--expect-prefix-of".as_ref(), la.as_os_str()]),
        "values differ",
    );
    let shorter = write(
        "shorter.npy",
        &garage::npy("<u2", &[4, 6, 7], &values[..4 * frame]),
    );
    fails(
        check(&["--expect-prefix-of".as_ref(), shorter.as_os_str()]),
        "5 frames; expected 1 to 4",
    );

    // An array that is not there.
    let (ok, text) = garage::s3_read(
        &py,
        &g,
        g.bucket(),
        "arrays/missing",
        &["--expect".as_ref(), values_npy.as_os_str()],
    );
    assert!(!ok, "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("FAIL ")).count(),
        2,
        "{text}"
    );
}
