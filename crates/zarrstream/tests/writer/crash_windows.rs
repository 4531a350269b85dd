//! Kills inside the writer's two narrowest crash windows, at exactly the instruction
//! that opens them, then `recover` and a reader we did not write (`zarrs`):
//!
//! - **compaction**: the finisher is copying a finished shard's chunks to their final
//!   places (mmap sink, and pwrite or mmap with a Morton chunk order). The kill comes
//!   after the 5th of 16 copies. Every chunk of that shard must come back.
//! - **torn working-index entry**: a worker has stored a chunk's offset in the mapped
//!   working index but not yet its length (mmap and direct sinks). The kill comes there,
//!   at the 7th chunk. That chunk must come back, its length read off the chunk itself
//!   and verified by its crc32c.
//!
//! Each case runs in a child process (this test binary again, running only
//! [`child_entry`]) that records with a fail point whose callback sends the process
//! SIGKILL: what is left on disk is what a real kill at that point leaves, with no
//! other thread paused or copied mid-way. The fail points are compiled in only for the
//! crate's own tests (the `fail` dev-dependency turns on `failpoints`).

// Linux only: the fail point kills the process with a signal. Under Wine a killed
// `zarrstream.exe record` is recovered instead (crates/zarrstream-cli/tests/crash_recovery.rs).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream::{
    ArraySpec, ChunkOrder, Codec, Durability, IndexLocation, SinkChoice, SinkKind, Writer,
    WriterOptions,
};

/// Environment variable naming the case a child runs.
const CASE: &str = "ZARRSTREAM_CRASH_WINDOW_CASE";
/// Environment variable naming the child's store.
const STORE: &str = "ZARRSTREAM_CRASH_WINDOW_STORE";
/// Exit code of a child that was not killed (the fail point was never reached).
const NOT_KILLED: i32 = 3;

const Y: u64 = 256;
const X: u64 = 256;
/// Two 64 KiB chunks per frame (the direct sink needs slots of at least 64 KiB), 8
/// frames per shard: 16 chunks per shard.
const CHUNK: [u64; 3] = [1, 128, 256];
const SHARD: [u64; 3] = [8, 256, 256];
const FRAMES: u64 = 24;

#[derive(Debug, Clone, Copy)]
enum Window {
    Compaction,
    TornEntry,
}

impl Window {
    fn point(self) -> &'static str {
        match self {
            Window::Compaction => "compaction-after-copy",
            Window::TornEntry => "working-entry-between-offset-and-length",
        }
    }

    /// The fail point's hit at which the child is killed.
    fn kill_at(self) -> usize {
        match self {
            Window::Compaction => 5,
            Window::TornEntry => 7,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Case {
    window: Window,
    sink: SinkChoice,
    order: ChunkOrder,
    codec: Codec,
    codec_name: &'static str,
    index: IndexLocation,
}

impl Case {
    fn name(&self) -> String {
        format!(
            "{:?}-{}-{:?}-{}-{:?}",
            self.window, self.sink, self.order, self.codec_name, self.index
        )
    }

    fn expected_sink(&self) -> SinkKind {
        match self.sink {
            SinkChoice::Direct => SinkKind::Direct,
            SinkChoice::Pwrite => SinkKind::Pwrite,
            _ => SinkKind::Mmap,
        }
    }
}

fn cases() -> Vec<Case> {
    let codecs = [(Codec::blosc_lz4(1), "blosc-lz4"), (Codec::zstd(1), "zstd")];
    let mut cases = Vec::new();
    for (codec, codec_name) in codecs {
        for (sink, order, index) in [
            (SinkChoice::Mmap, ChunkOrder::C, IndexLocation::End),
            (SinkChoice::Mmap, ChunkOrder::Morton, IndexLocation::Start),
            (SinkChoice::Pwrite, ChunkOrder::Morton, IndexLocation::End),
        ] {
            cases.push(Case {
                window: Window::Compaction,
                sink,
                order,
                codec,
                codec_name,
                index,
            });
        }
    }
    let codecs = [
        (Codec::blosc_lz4(1), "blosc-lz4"),
        (Codec::zstd(1), "zstd"),
        (Codec::None, "none"),
    ];
    for (codec, codec_name) in codecs {
        for (sink, index) in [
            (SinkChoice::Mmap, IndexLocation::End),
            (SinkChoice::Direct, IndexLocation::Start),
        ] {
            cases.push(Case {
                window: Window::TornEntry,
                sink,
                order: ChunkOrder::C,
                codec,
                codec_name,
                index,
            });
        }
    }
    cases
}

/// Sample `i` of frame `k`: partly compressible, different in every frame.
fn sample(k: u64, i: u64) -> u16 {
    let v = k.wrapping_mul(977) ^ i.wrapping_mul(13) ^ (i >> 7).wrapping_mul(2_654_435_761);
    (v & 0x0fff) as u16
}

fn frame(k: u64) -> Vec<u16> {
    (0..Y * X).map(|i| sample(k, i)).collect()
}

fn spec(case: &Case) -> ArraySpec {
    ArraySpec::builder()
        .shape([0, Y, X])
        .chunk_shape(CHUNK)
        .shard_shape(SHARD)
        .codec(case.codec)
        .crc32c(true)
        .index_location(case.index)
        .build()
        .expect("a valid spec")
}

/// The child: records with the fail point armed to kill this process.
#[test]
fn child_entry() {
    let Ok(name) = std::env::var(CASE) else {
        return; // in the parent: nothing to do here
    };
    let store = PathBuf::from(std::env::var_os(STORE).expect("the store is set"));
    let case = cases()
        .into_iter()
        .find(|c| c.name() == name)
        .expect("a known case");
    let hits = AtomicUsize::new(0);
    let at = case.window.kill_at();
    fail::cfg_callback(case.window.point(), move || {
        if hits.fetch_add(1, Ordering::SeqCst) + 1 == at {
            let me = rustix::process::getpid();
            let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
            // The signal is delivered before the kill returns to this thread.
            std::thread::sleep(Duration::from_secs(60));
        }
    })
    .expect("the fail point is configured");
    let opts = WriterOptions::default()
        .sink(case.sink)
        .chunk_order(case.order)
        .durability(Durability::None)
        .threads(1);
    let mut w = Writer::create(&store, spec(&case), opts).expect("the writer starts");
    println!("sink {}", w.sink());
    for k in 0..FRAMES {
        let _ = w.push(&frame(k)).expect("push");
    }
    w.finish().expect("finish");
    std::process::exit(NOT_KILLED);
}

/// Runs `case` in a child until the fail point kills it; returns the child's output.
fn run_child(case: &Case, store: &Path) -> String {
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "crash_windows::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CASE, case.name())
        .env(STORE, store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("[{}] the child did not end in 120 s", case.name());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = child.wait_with_output().expect("the child's output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "[{}] the child must die by SIGKILL at the fail point; it ended with {status}:\n{text}",
        case.name()
    );
    let sink = format!("sink {}", case.expected_sink());
    assert!(
        text.contains(&sink),
        "[{}] the child must record with `{sink}`:\n{text}",
        case.name()
    );
    text
}

/// Reads every frame below `shape[0]` with `zarrs`; returns, per chunk row of each
/// frame, whether it holds its input (`true`) or the fill value (`false`), and fails on
/// anything else.
fn read_back(case: &Case, store: &Path) -> Vec<[bool; 2]> {
    let fs = Arc::new(FilesystemStore::new(store).expect("the store opens"));
    let array = Array::open(fs, "/").expect("zarrs opens the recovered array");
    let frames = array.shape()[0];
    let rows = (Y / CHUNK[1]) as usize;
    let half = (CHUNK[1] * X) as usize;
    (0..frames)
        .map(|k| {
            let got: Vec<u16> = array
                .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_ranges(&[
                    k..k + 1,
                    0..Y,
                    0..X,
                ]))
                .unwrap_or_else(|e| panic!("[{}] zarrs reads frame {k}: {e}", case.name()));
            let want = frame(k);
            let mut present = [false; 2];
            for (r, p) in present.iter_mut().enumerate().take(rows) {
                let (g, w) = (&got[r * half..][..half], &want[r * half..][..half]);
                *p = g == w;
                assert!(
                    *p || g.iter().all(|&v| v == 0),
                    "[{}] frame {k}, chunk row {r}: neither its input nor fill",
                    case.name()
                );
            }
            present
        })
        .collect()
}

fn run_case(case: &Case) -> String {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = dir.path().join("a.zarr");
    run_child(case, &store);
    let report = zarrstream::recover::recover_store(&store)
        .unwrap_or_else(|e| panic!("[{}] recover: {e}", case.name()));
    let name = case.name();
    assert_eq!(
        report.chunks_rejected, 0,
        "[{name}] no chunk was rejected: {:?}",
        report.rejected
    );
    let present = read_back(case, &store);
    let kept_chunks: usize = present.iter().flatten().filter(|p| **p).count();
    let first = report
        .shards
        .iter()
        .find(|s| s.key == "c/0/0/0")
        .unwrap_or_else(|| panic!("[{name}] shard 0 was recovered: {report:?}"));
    match case.window {
        Window::Compaction => {
            // The whole first shard was written before it was compacted.
            assert_eq!(first.chunks_kept, 16, "[{name}] every chunk of shard 0");
            assert!(
                present[..8].iter().flatten().all(|p| *p),
                "[{name}] frames 0..8 read back exactly"
            );
        }
        Window::TornEntry => {
            // The kill comes at the 7th entry; the pushing thread and the worker may
            // each have one more in flight, so at least 7 are kept, the torn one
            // among them (with its length read off the chunk).
            assert!(
                first.chunks_kept >= 7 && first.chunks_from_torn_entries >= 1,
                "[{name}] the 6 chunks before the kill and the torn one are kept: {first:?}"
            );
        }
    }
    assert_eq!(
        kept_chunks as u64, report.chunks_kept,
        "[{name}] every kept chunk, and only those, holds its input"
    );
    let again = zarrstream::recover::recover_store(&store).expect("a second recover");
    assert!(
        again.shards.is_empty() && again.chunks_kept == 0,
        "[{name}] a second recover has nothing to do: {again:?}"
    );
    format!(
        "{name:<48} kept {:>3} (shard 0: {:>2}, torn {}), rejected {}",
        report.chunks_kept,
        first.chunks_kept,
        first.chunks_from_torn_entries,
        report.chunks_rejected
    )
}

#[test]
fn kills_inside_the_crash_windows_lose_no_chunk() {
    if std::env::var_os(CASE).is_some() {
        return; // a child runs only `child_entry`
    }
    let lines: Vec<String> = cases().iter().map(run_case).collect();
    println!("{}", lines.join("\n"));
}
