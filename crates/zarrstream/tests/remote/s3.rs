//! Object-store destinations against a real S3-compatible server (Garage 2.5.0, started
//! by `zarrstream_testkit::garage` on 127.0.0.1), read back by readers we did not write
//! (zarr-python over s3fs, tensorstore's s3 kvstore, zarrs-python, through
//! `tests/interop/s3_read.py`):
//!
//! * `an_array_in_garage_equals_its_frames_in_three_readers`: multipart shards, a
//!   staging budget that makes every push wait for the uploader, a read of the bucket
//!   while the recording runs (a prefix of the frames, never more) and after it (all).
//! * `drop_mode_counts_the_frames_the_budget_refused`: a one-byte budget under `Drop`
//!   with the node down while a shard waits in staging, so every frame pushed then is
//!   refused: exact counts, and the dropped frames read as the fill value.
//! * `create_refuses_what_cannot_work_before_the_first_frame`: wrong secret, a key
//!   without rights, a missing bucket, a dead endpoint, an existing array: each a typed
//!   error, nothing left behind.
//! * `a_store_that_goes_away_keeps_the_shards_for_a_later_upload`: the only node stops
//!   mid-recording; `push`/`finish` report `RemoteError::Upload`, the staging directory
//!   keeps every finished shard, and `upload_staged` sends them once the node is back.
//! * `three_parts_into_a_three_node_cluster_with_a_node_down`: three writers record
//!   cameras 0, 1, 2 of one array into a 3-node cluster (replication 3); one node is
//!   stopped mid-recording and the recording carries on; the coordinator's `zarr.json`
//!   covers every frame, and the readers see each camera's frames.
//!
//! Run with `cargo test -p zarrstream --test remote s3::`. Without Garage or the Python
//! environment the tests skip loudly, except with `CI=true`, where that is a failure.

// Linux only: Garage runs as a Linux child process of the test (zarrstream_testkit::garage).
#![cfg(target_os = "linux")]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use zarrstream_testkit::garage;
use zarrstream_testkit::python as pyenv;

use garage::Garage;
use zarrstream::remote::{RemoteOptions, publish_parts, upload_staged};
use zarrstream::{ArraySpec, Backpressure, Codec, Error, RemoteError, Writer, WriterOptions};

const Y: usize = 256;
const X: usize = 256;

fn setup(what: &str) -> Option<PathBuf> {
    garage::require(what)?;
    pyenv::interop(zarrstream_testkit::target_tmp!(), what)
}

/// Endpoint, region and credentials as options, not the environment: the tests of this
/// binary run at once against servers of their own.
fn remote(g: &Garage, staging: &Path) -> RemoteOptions {
    RemoteOptions::default()
        .store_option("aws_endpoint", g.endpoint())
        .store_option("aws_region", g.region())
        .store_option("aws_access_key_id", g.key_id())
        .store_option("aws_secret_access_key", g.secret())
        .staging_dir(staging)
        .part_size(5 << 20)
}

/// `[0, Y, X]` uint16, 128 × 128 chunks, 48-frame shards of 6 MiB without compression:
/// each shard is a multipart upload of two parts.
fn spec() -> ArraySpec {
    ArraySpec::builder()
        .shape([0, Y as u64, X as u64])
        .chunk_shape([1, 128, 128])
        .shard_shape([48, Y as u64, X as u64])
        .codec(Codec::None)
        .build()
        .unwrap()
}

/// Frame `f` of camera `cam`: distinct everywhere.
fn frame(cam: u64, f: u64) -> Vec<u16> {
    (0..Y * X)
        .map(|i| (i as u64 * 31 + f * 977 + cam * 13_331 + 1) as u16)
        .collect()
}

fn bytes(frames: &[Vec<u16>]) -> Vec<u8> {
    frames
        .iter()
        .flat_map(|f| f.iter().flat_map(|v| v.to_le_bytes()))
        .collect()
}

fn write_npy(dir: &Path, name: &str, shape: &[usize], data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, garage::npy("<u2", shape, data)).unwrap();
    p
}

fn options(g: &Garage, staging: &Path) -> WriterOptions {
    WriterOptions::default()
        .threads(1)
        .remote(remote(g, staging))
}

#[test]
fn an_array_in_garage_equals_its_frames_in_three_readers() {
    let Some(py) = setup("s3 round trip") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("s3-roundtrip");
    let g = Garage::single(&dir.path().join("garage"));
    let staging = dir.path().join("staging");
    let url = format!("s3://{}/run.zarr", g.bucket());
    // A budget of one byte: every push after a finished shard waits for its upload.
    let mut o = options(&g, &staging);
    o.remote = o.remote.staging_budget(1);
    let mut w = Writer::create(&url, spec(), o).unwrap();
    let frames: Vec<Vec<u16>> = (0..144).map(|f| frame(0, f)).collect();
    for f in &frames[..96] {
        assert!(w.push(f).unwrap().is_accepted());
    }
    // Two shards are finished and (the budget saw to it) on their way: the bucket shows
    // a prefix of the frames, never a frame that is not there.
    let npy = write_npy(dir.path(), "all.npy", &[144, Y, X], &bytes(&frames));
    let mut live = (false, String::new());
    for _ in 0..100 {
        live = garage::s3_read(
            &py,
            &g,
            g.bucket(),
            "run.zarr",
            &[OsStr::new("--expect-prefix-of"), npy.as_os_str()],
        );
        if live.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(live.0, "a live read of the bucket: {}", live.1);
    for f in &frames[96..] {
        assert!(w.push(f).unwrap().is_accepted());
    }
    let stats = w.finish().unwrap();
    assert_eq!((stats.frames_written, stats.frames_dropped), (144, 0));
    assert!(
        !staging.exists(),
        "the staging directory goes once all is uploaded"
    );
    let (ok, text) = garage::s3_read(
        &py,
        &g,
        g.bucket(),
        "run.zarr",
        &[
            OsStr::new("--expect"),
            npy.as_os_str(),
            OsStr::new("--readers"),
            OsStr::new("zarr-python,tensorstore,zarrs"),
        ],
    );
    assert!(ok, "{text}");
    assert_eq!(text.matches("PASS").count(), 3, "{text}");
}

#[test]
fn drop_mode_counts_the_frames_the_budget_refused() {
    let Some(py) = setup("s3 drop mode") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("s3-drop");
    let mut g = Garage::single(&dir.path().join("garage"));
    let staging = dir.path().join("staging");
    let url = format!("s3://{}/drop.zarr", g.bucket());
    // The uploader must not give up while the node is down.
    let mut o = options(&g, &staging).backpressure(Backpressure::Drop);
    o.remote = o
        .remote
        .staging_budget(1)
        .upload_timeout(Duration::from_secs(600));
    let mut w = Writer::create(&url, spec(), o).unwrap();
    // With the only node down no staged shard can leave, so the budget's state is known
    // at every push rather than a race between the pushes and the uploads.
    g.stop_node(0);
    let mut expected = Vec::new();
    let mut dropped = 0;
    let mut push = |w: &mut Writer, f: u64| {
        let fr = frame(0, f);
        let accepted = w.push(&fr).unwrap().is_accepted();
        if accepted {
            expected.push(fr);
        } else {
            dropped += 1;
            expected.push(vec![0; Y * X]);
        }
        accepted
    };
    // Nothing is staged yet: only a full frame pool could refuse these.
    for f in 0..48 {
        push(&mut w, f);
    }
    let first = staging.join("c").join("0").join("0").join("0");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !first.exists() {
        assert!(
            Instant::now() < deadline,
            "the first shard was not staged within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A shard waits in staging: the one-byte budget refuses every frame.
    for f in 48..96 {
        assert!(
            !push(&mut w, f),
            "frame {f} accepted over the staging budget"
        );
    }
    g.start_node(0);
    // The uploads resume; these frames are taken or refused as the uploader keeps up.
    for f in 96..192 {
        push(&mut w, f);
    }
    let stats = w.finish().unwrap();
    assert!(dropped >= 48, "{dropped} frames dropped");
    assert_eq!(stats.frames_dropped, dropped);
    assert_eq!(stats.frames_written + stats.frames_dropped, 192);
    assert!(!staging.exists(), "every staged shard was uploaded");
    let npy = write_npy(dir.path(), "drop.npy", &[192, Y, X], &bytes(&expected));
    let (ok, text) = garage::s3_read(
        &py,
        &g,
        g.bucket(),
        "drop.zarr",
        &[OsStr::new("--expect"), npy.as_os_str()],
    );
    assert!(ok, "{text}");
}

#[test]
fn create_refuses_what_cannot_work_before_the_first_frame() {
    if garage::require("s3 create errors").is_none() {
        return;
    }
    let dir = zarrstream_testkit::scratch!("s3-errors");
    let g = Garage::single(&dir.path().join("garage"));
    let staging = dir.path().join("staging");
    let url = format!("s3://{}/e.zarr", g.bucket());
    let create = |url: &str, r: RemoteOptions| {
        Writer::create(url, spec(), WriterOptions::default().threads(1).remote(r))
    };
    let err = |r: Result<Writer, Error>| match r {
        Err(e) => e,
        Ok(_) => panic!("created"),
    };

    let wrong_secret = remote(&g, &staging).store_option("aws_secret_access_key", "0".repeat(64));
    let e = err(create(&url, wrong_secret));
    assert!(
        matches!(e, Error::Remote(RemoteError::Credentials { .. })),
        "{e}"
    );

    let (id, secret) = g.create_key("no-rights");
    let no_rights = remote(&g, &staging)
        .store_option("aws_access_key_id", id)
        .store_option("aws_secret_access_key", secret);
    let e = err(create(&url, no_rights));
    assert!(
        matches!(e, Error::Remote(RemoteError::Credentials { .. })),
        "{e}"
    );

    let e = err(create("s3://no-such-bucket/e.zarr", remote(&g, &staging)));
    assert!(
        matches!(e, Error::Remote(RemoteError::NoBucket { .. })),
        "{e}"
    );

    // A port nobody listens on.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let unreachable = remote(&g, &staging)
        .store_option("aws_endpoint", format!("http://127.0.0.1:{dead}"))
        .upload_timeout(Duration::from_secs(2));
    let e = err(create(&url, unreachable));
    assert!(
        matches!(e, Error::Remote(RemoteError::Unreachable { .. })),
        "{e}"
    );

    let e = err(create("s3:///e.zarr", remote(&g, &staging)));
    assert!(matches!(e, Error::Remote(RemoteError::Url { .. })), "{e}");
    assert!(
        !staging.exists(),
        "nothing staged for a destination that failed its checks"
    );

    let w = create(&url, remote(&g, &staging)).unwrap();
    w.finish().unwrap();
    let e = err(create(&url, remote(&g, &staging)));
    assert!(matches!(e, Error::Exists { .. }), "an existing array: {e}");
}

#[test]
fn a_store_that_goes_away_keeps_the_shards_for_a_later_upload() {
    let Some(py) = setup("s3 store goes away") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("s3-away");
    let mut g = Garage::single(&dir.path().join("garage"));
    let staging = dir.path().join("staging");
    let url = format!("s3://{}/away.zarr", g.bucket());
    let r = remote(&g, &staging).upload_timeout(Duration::from_secs(3));
    let mut w = Writer::create(
        &url,
        spec(),
        WriterOptions::default().threads(1).remote(r.clone()),
    )
    .unwrap();
    let mut pushed = Vec::new();
    for f in 0..48 {
        let fr = frame(0, f);
        assert!(w.push(&fr).unwrap().is_accepted());
        pushed.push(fr);
    }
    g.stop_node(0);
    // The recording goes on into staging until the uploader gives up; then pushes say so.
    let mut failed = None;
    for f in 48..100_000 {
        let fr = frame(0, f % 512);
        match w.push(&fr) {
            Ok(o) => {
                assert!(o.is_accepted());
                pushed.push(fr);
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        if f % 48 == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let e = failed.expect("push reports the failed upload");
    match &e {
        Error::Remote(RemoteError::Upload { staging: s, .. }) => assert_eq!(s, &staging),
        other => panic!("expected an upload error, got {other}"),
    }
    let e = w.finish().expect_err("finish reports it too");
    assert!(
        matches!(e, Error::Remote(RemoteError::Upload { .. })),
        "{e}"
    );
    let kept: Vec<_> = walk(&staging.join("c"));
    assert!(!kept.is_empty(), "finished shards stay in staging");

    g.start_node(0);
    let r = remote(&g, &staging);
    let report = upload_staged(&staging, &r).unwrap();
    assert_eq!(report.shards as usize, kept.len());
    assert!(!staging.exists());
    let n = pushed.len();
    let npy = write_npy(dir.path(), "away.npy", &[n, Y, X], &bytes(&pushed));
    let (ok, text) = garage::s3_read(
        &py,
        &g,
        g.bucket(),
        "away.zarr",
        &[OsStr::new("--expect"), npy.as_os_str()],
    );
    assert!(
        ok,
        "every frame pushed before the error is in the bucket: {text}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(it) = std::fs::read_dir(dir) {
        for e in it.flatten() {
            if e.file_type().unwrap().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn three_parts_into_a_three_node_cluster_with_a_node_down() {
    let Some(py) = setup("s3 parts") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("s3-parts");
    let mut g = Garage::cluster(&dir.path().join("garage"), 3);
    let url = format!("s3://{}/cams.zarr", g.bucket());
    let spec = ArraySpec::builder()
        .shape([0, 3, Y as u64, X as u64])
        .chunk_shape([1, 1, 128, 128])
        .shard_shape([48, 1, Y as u64, X as u64])
        .codec(Codec::None)
        .build()
        .unwrap();
    let frames = 96u64;
    let mut writers: Vec<Writer> = (0..3)
        .map(|k| {
            let r = remote(&g, &dir.path().join(format!("staging-{k}")))
                .part(k)
                .coordinate(k == 0);
            Writer::create(
                &url,
                spec.clone(),
                WriterOptions::default().threads(1).remote(r),
            )
            .unwrap()
        })
        .collect();
    for f in 0..frames {
        if f == frames / 2 {
            // One of three replicas gone: reads and writes go on.
            g.stop_node(2);
        }
        for (k, w) in writers.iter_mut().enumerate() {
            assert!(w.push(&frame(k as u64, f)).unwrap().is_accepted());
        }
    }
    // Parts 1 and 2 finish first, so the coordinator's last publication sees them all.
    let coordinator = writers.remove(0);
    for w in writers {
        w.finish().unwrap();
    }
    coordinator.finish().unwrap();
    let report = publish_parts(&url, &remote(&g, &dir.path().join("unused"))).unwrap();
    assert_eq!(
        (
            report.parts,
            report.parts_found,
            report.extent0,
            report.state.as_str()
        ),
        (3, 3, frames, "finished")
    );
    // [T, camera, Y, X]: frame f of camera k at [f, k].
    let mut all = Vec::new();
    for f in 0..frames {
        for k in 0..3 {
            all.push(frame(k, f));
        }
    }
    let npy = write_npy(
        dir.path(),
        "cams.npy",
        &[frames as usize, 3, Y, X],
        &bytes(&all),
    );
    let (ok, text) = garage::s3_read(
        &py,
        &g,
        g.bucket(),
        "cams.zarr",
        &[OsStr::new("--expect"), npy.as_os_str()],
    );
    assert!(ok, "{text}");
}
