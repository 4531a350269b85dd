//! Crash recovery of a recording written by index out of storage order: `record
//! --acquisition-order c,t` (channel-first into t, c storage) is killed with SIGKILL
//! once it has reported a given number of frames encoded, then `zarrstream recover`
//! rebuilds the store and `zarrs` reads it back.
//!
//! Each kill checks: every shard finished before the kill (renamed into `c/`) still
//! holds its frames exactly; every tile of every frame holds the camera frame the
//! acquisition put there, or the fill value, nothing else; `frames_committed` counts the
//! complete frames, which number at least the frames last reported encoded; the shape
//! stays the declared one (a bounded array); no temporary shard is left.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

use zarrstream_testkit::crash;

use crash::{Recorder, Wait, partial_files, sample};

const T: u64 = 12;
const C: u64 = 2;
const Y: usize = 64;
const X: usize = 64;
const CHUNK: usize = 32;
const FPS: u32 = 120;
const DEADLINE: Duration = Duration::from_secs(120);

/// Shard files under `c/` (finished shards).
fn finished_shards(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![store.join("c")];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The storage coordinates `(t, c)` of camera frame `k`: channel-first.
fn storage_of(k: u64) -> (u64, u64) {
    (k % T, k / T)
}

#[test]
fn killed_channel_first_recordings_are_recovered() {
    let zarrstream = PathBuf::from(env!("CARGO_BIN_EXE_zarrstream"));
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input.raw");
    crash::write_input(&input, T * C, Y * X);
    for kill_at in [3u64, 9, 17] {
        let name = format!("kill{kill_at}");
        let store = dir.path().join(format!("{name}.zarr"));
        let mut cmd = zarrstream_testkit::cli_record!();
        cmd.arg("--out")
            .arg(&store)
            .args(["--shape", &format!("{T},{C},{Y},{X}")])
            .args(["--chunk", &format!("1,1,{CHUNK},{CHUNK}")])
            .args(["--shard", &format!("4,1,{Y},{X}")])
            .args(["--dim-names", "t,c,y,x", "--acquisition-order", "c,t"])
            .args(["--dtype", "u16", "--codec", "lz4:1", "--sink", "pwrite"])
            .arg("--input")
            .arg(&input)
            .args(["--frames", &(T * C).to_string(), "--fps", &FPS.to_string()])
            .args(["--threads", "2", "--no-pin", "--quiet", "--progress"]);
        let mut child = Recorder::spawn(cmd);
        let wait = child.wait_for(child.started + Duration::from_secs(30), |p| {
            p.encoded >= kill_at
        });
        let (status, progress) = child.kill();
        assert_eq!(wait, Wait::Reached, "[{name}] {:?}", progress.other);
        assert!(crash::killed(&status), "[{name}] exited with {status}");
        let encoded = progress.encoded;
        // What was finished before the kill, byte for byte.
        let before: Vec<(PathBuf, Vec<u8>)> = finished_shards(&store)
            .into_iter()
            .map(|p| {
                let b = std::fs::read(&p).unwrap();
                (p, b)
            })
            .collect();
        assert!(
            !partial_files(&store).is_empty() || !before.is_empty(),
            "[{name}] nothing on disk"
        );

        let out = crash::run_bounded(
            {
                let mut c = Command::new(&zarrstream);
                c.arg("recover").arg(&store).arg("--json");
                c
            },
            DEADLINE,
        )
        .unwrap_or_else(|e| panic!("[{name}] recover: {e}"));
        assert!(
            out.status.success() && !out.panicked(),
            "[{name}] recover failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("recover --json");
        for (p, bytes) in &before {
            assert_eq!(
                &std::fs::read(p).unwrap(),
                bytes,
                "[{name}] finished shard {} changed",
                p.display()
            );
        }
        assert!(
            partial_files(&store).is_empty(),
            "[{name}] temporary shards left"
        );
        let doc: Value =
            serde_json::from_slice(&std::fs::read(store.join("zarr.json")).unwrap()).unwrap();
        assert_eq!(
            doc["shape"],
            serde_json::json!([T, C, Y, X]),
            "[{name}] the bounded shape"
        );
        let committed = doc["attributes"]["zarrstream"]["frames_committed"]
            .as_u64()
            .expect("frames_committed");
        assert_eq!(report["frames_committed"].as_u64(), Some(committed));

        let fs = Arc::new(FilesystemStore::new(&store).unwrap());
        let array = Array::open(fs, "/").unwrap();
        let data: Vec<u16> = array
            .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(vec![
                T, C, Y as u64, X as u64,
            ]))
            .unwrap();
        let mut complete = 0;
        for k in 0..T * C {
            let (t, c) = storage_of(k);
            let frame = &data[((t * C + c) as usize) * Y * X..][..Y * X];
            let mut same_tiles = 0;
            for ty in 0..Y / CHUNK {
                for tx in 0..X / CHUNK {
                    let (mut same, mut fill) = (true, true);
                    for y in ty * CHUNK..(ty + 1) * CHUNK {
                        for x in tx * CHUNK..(tx + 1) * CHUNK {
                            let v = frame[y * X + x];
                            same &= v == sample(k, y * X + x);
                            fill &= v == 0;
                        }
                    }
                    assert!(
                        same || fill,
                        "[{name}] camera frame {k} at ({t}, {c}), tile ({ty}, {tx}): neither \
                         its pixels nor fill"
                    );
                    same_tiles += u64::from(same);
                }
            }
            complete += u64::from(same_tiles == ((Y / CHUNK) * (X / CHUNK)) as u64);
        }
        assert_eq!(complete, committed, "[{name}] frames_committed");
        assert!(
            complete >= encoded,
            "[{name}] {complete} complete frames, {encoded} were reported encoded"
        );
        println!(
            "{name}: {encoded} encoded at the kill, {} shards finished before, {complete} \
             complete after recover",
            before.len()
        );
    }
}
