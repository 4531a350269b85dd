//! Recording in a hostile environment: the store made read-only mid-run, a shard file
//! truncated by another process mid-run, too few file descriptors (`ulimit -n`), a file
//! size limit (`RLIMIT_FSIZE`, with SIGXFSZ ignored and with its default action), and the
//! wall clock jumping.
//!
//! Every scenario runs in a child process of its own (see `support_fs`): this test
//! binary re-executed with only its entry test, in a private mount namespace, so a
//! signal (SIGBUS from a cut mapping, SIGXFSZ) can only end the child, and every mount
//! the child makes disappears with it. Each child records onto a tmpfs it mounts itself,
//! except the one meant to be killed, which records into the parent's scenario
//! directory so that the parent can look at what it left. The children check outcomes,
//! not timings: every wait has a generous deadline and fails the test only when it
//! passes.
//!
//! `cargo test -p zarrstream --test writer hostile:: -- --nocapture` prints one `REPORT` line per scenario with
//! the error the writer returned.

// Linux only: resource limits, signals and errno values of a hostile Linux host.
#![cfg(target_os = "linux")]

use crate::common;
use crate::support_fs;
use zarrstream_testkit::layout;

use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Case, frame};
use serde_json::Value;
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrstream::{Codec, Durability, Error, IndexLocation, SinkChoice, SinkKind, Writer};

const ENTRY: &str = "hostile::scenario_entry";
const TIMEOUT: Duration = Duration::from_secs(180);
/// How long a child waits for the writer to publish or write something before failing.
const PATIENCE: Duration = Duration::from_secs(60);

/// 256 × 256 frames of u16.
const SIDE: u64 = 256;
/// Frames per shard row (the shard's extent on the append axis).
const ROW: u64 = 4;

/// The entry point of the child processes; a no-op in the parent.
#[test]
fn scenario_entry() {
    let Some(s) = support_fs::scenario() else {
        return;
    };
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        ["read-only", sink] => read_only(&s, sink_of(sink)),
        ["truncated", sink] => truncated(&s, sink_of(sink)),
        ["nofile", sink] => nofile(&s, sink_of(sink)),
        ["fsize", sink] => fsize_ignored(&s, sink_of(sink)),
        ["fsize-default"] => fsize_default(&s),
        _ => panic!("unknown scenario {s}"),
    }
}

fn sink_of(s: &str) -> SinkChoice {
    s.parse().expect("a sink name")
}

fn child(scenario: &str) {
    support_fs::run_child(ENTRY, scenario, TIMEOUT);
}

// ---------------------------------------------------------------------------------------
// The parent's tests
// ---------------------------------------------------------------------------------------

#[test]
fn read_only_mid_run_pwrite() {
    child("read-only:pwrite");
}
#[test]
fn read_only_mid_run_mmap() {
    child("read-only:mmap");
}
#[test]
fn read_only_mid_run_direct() {
    child("read-only:direct");
}

/// The mmap sink meets the cut as SIGBUS in its workers and finisher: caught, reported.
#[test]
fn shard_truncated_mid_run_mmap() {
    child("truncated:mmap");
}
/// The direct sink stores index entries through a mapping: SIGBUS there too.
#[test]
fn shard_truncated_mid_run_direct() {
    child("truncated:direct");
}
/// `pwrite` just extends the cut file: seen when the shard is finished.
#[test]
fn shard_truncated_mid_run_pwrite() {
    child("truncated:pwrite");
}

#[test]
fn few_file_descriptors_pwrite() {
    child("nofile:pwrite");
}
#[test]
fn few_file_descriptors_mmap() {
    child("nofile:mmap");
}

#[test]
fn file_size_limit_sigxfsz_ignored_pwrite() {
    child("fsize:pwrite");
}
#[test]
fn file_size_limit_sigxfsz_ignored_mmap() {
    child("fsize:mmap");
}
#[test]
fn file_size_limit_sigxfsz_ignored_direct() {
    child("fsize:direct");
}

/// With SIGXFSZ at its default action, a file growing past `RLIMIT_FSIZE` kills the
/// process (the library cannot prevent that for its host; the book and the C header
/// tell hosts to ignore SIGXFSZ). What was published before stays intact, and
/// `recover` works on what the dead process left.
#[test]
fn file_size_limit_sigxfsz_default_kills_the_process() {
    let scenario = "fsize-default";
    let (run, dir) = match support_fs::spawn_child(ENTRY, scenario, TIMEOUT) {
        Ok(r) => r,
        Err(why) => return support_fs::skip(scenario, &why),
    };
    let text = format!(
        "{:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.status, run.stdout, run.stderr
    );
    if run.status.code() == Some(support_fs::UNSUPPORTED) || !support_fs::started(&run) {
        return support_fs::skip(scenario, &text);
    }
    assert_eq!(
        run.status.signal(),
        Some(libc::SIGXFSZ),
        "the child must be killed by SIGXFSZ: {text}"
    );
    let line = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("PUBLISHED "))
        .unwrap_or_else(|| panic!("the child published rows before the limit: {text}"));
    let published: u64 = line.trim().parse().unwrap();
    println!("REPORT {scenario}: killed by SIGXFSZ after {published} frames were published");
    let path = dir.path().join("a.zarr");
    let before = shape0(&path);
    assert!(
        before >= published,
        "zarr.json publishes {before} frames, {published} before the kill"
    );
    check_frames(scenario, &path, before);
    let report = zarrstream::recover::recover_store(&path)
        .unwrap_or_else(|e| panic!("[{scenario}] recover: {e}"));
    println!("REPORT {scenario}: recover: {report:?}");
    let after = shape0(&path);
    assert!(
        after >= before,
        "recover kept the {before} published frames"
    );
    check_frames(scenario, &path, before);
    check_recovered_tail(scenario, &path, before, after);
}

/// The writer must never read the wall clock for timing: latency, pacing, the periodic
/// flush interval and the uploader's timeouts use `Instant` (CLOCK_MONOTONIC), so a
/// clock jump (NTP step, an operator setting the date) changes nothing. A wall-clock time
/// that is data (a file's modification time compared for equality) is allowed where
/// listed here, with the reason.
#[test]
fn the_library_never_times_anything_with_the_wall_clock() {
    const ALLOWED: &[(&str, &str, &str)] = &[(
        "remote/mirror.rs",
        "SystemTime",
        "a file's mtime, compared for equality to tell whether it changed: data, not timing",
    )];
    const FORBIDDEN: &[&str] = &[
        "SystemTime",
        "UNIX_EPOCH",
        "CLOCK_REALTIME",
        "gettimeofday",
        "chrono::",
        "Utc::now",
        "Local::now",
        "libc::time(",
    ];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "the library's sources were found");
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in FORBIDDEN {
                if code.contains(word)
                    && !ALLOWED.iter().any(|(file, w, _)| rel == *file && w == word)
                {
                    found.push(format!("src/{rel}:{}: {}", n + 1, line.trim()));
                }
            }
            // `SystemTime::now()` is timing even in a file allowed to hold mtimes.
            if code.contains("SystemTime::now") {
                found.push(format!("src/{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the library reads the wall clock (use Instant, or add the place to ALLOWED with \
         why it is data, not timing):\n{}",
        found.join("\n")
    );
    // And the timing code does use the monotonic clock.
    let uses_instant = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains("Instant"))
        .count();
    assert!(
        uses_instant >= 5,
        "timing uses Instant ({uses_instant} files)"
    );
}

/// The per-chunk path takes no lock (issue 31): a worker hands itself an append
/// position with one atomic step (`sink/bump.rs`), stores the working-index entry
/// through a slot it alone holds (`slots.rs`, `shard/index.rs`), encodes with its own
/// encoders (`codec/`), and records frame latency into its own histogram, merged into
/// the array's when it goes idle (`writer/threads/worker.rs`). A lock in any of these
/// files, outside their test modules, would serialise the workers on every chunk; the
/// loom model (`src/model.rs`, `--features loom`) checks that the lock-free code is right.
#[test]
fn the_per_chunk_path_takes_no_lock() {
    const PER_CHUNK: &[&str] = &[
        "sink/mod.rs",
        "sink/bump.rs",
        "sink/mmap.rs",
        "sink/pwrite.rs",
        "sink/direct.rs",
        "slots.rs",
        "shard/index.rs",
        "shard/order.rs",
        "tile.rs",
        "codec/mod.rs",
        "codec/encoder.rs",
        "codec/blosc.rs",
        "codec/shuffle.rs",
        "codec/zstd.rs",
        "codec/raw.rs",
        "writer/threads/worker.rs",
        "writer/threads/write_behind.rs",
        "writer/state/job.rs",
        "writer/state/pool.rs",
    ];
    const LOCKS: &[&str] = &[
        "Mutex",
        "RwLock",
        "Condvar",
        ".lock()",
        "parking_lot",
        "flock",
    ];
    // Where a lock is there on purpose, with why: none of these guards state.
    const ALLOWED: &[(&str, &str, &str)] = &[(
        "sink/pwrite.rs",
        "Mutex",
        "the writes' turn: the kernel serialises buffered writes to one file anyway, and \
         waiting here sleeps where the kernel would spin (BENCHMARKS.md §20)",
    )];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for rel in PER_CHUNK {
        let text = std::fs::read_to_string(src.join(rel))
            .unwrap_or_else(|e| panic!("src/{rel} is on the per-chunk path: {e}"));
        // Top-level test items (the panic hooks, the unit tests) may lock: they are not
        // the path. An indented `#[cfg(test)]` inside a function is not cut.
        let code = text.split("\n#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in LOCKS {
                let allowed = ALLOWED
                    .iter()
                    .any(|(file, w, _)| rel == file && (word == w || *word == ".lock()"));
                if code.contains(word) && !allowed {
                    found.push(format!("src/{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a lock on the per-chunk path:\n{}",
        found.join("\n")
    );
    // And the path does hand out its positions with the atomic bump.
    for rel in ["sink/pwrite.rs", "sink/direct.rs"] {
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        assert!(
            text.contains(".reserve("),
            "src/{rel} takes positions from the bump"
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Shared helpers of the children
// ---------------------------------------------------------------------------------------

/// Frames of 256 × 256 u16, inner chunks of 128 × 128 (128 × 256 for the direct sink,
/// which needs 64 KiB slots), shards of 4 frames × 128 × 256: two shards per row of 4
/// frames, so a row can fail in one shard while the other finishes.
fn case(name: &str, sink: SinkChoice) -> Case {
    let chunk: &[u64] = if sink == SinkChoice::Direct {
        &[1, 128, 256]
    } else {
        &[1, 128, 128]
    };
    Case {
        codec: Codec::blosc_lz4(1),
        index: IndexLocation::End,
        sink,
        threads: 2,
        durability: Durability::Shard,
        ..Case::new(
            Box::leak(name.to_string().into_boxed_str()),
            &[0, SIDE, SIDE],
            chunk,
            &[ROW, 128, SIDE],
            0,
        )
    }
}

/// A tmpfs of the child's own at `<scenario dir>/mnt`.
fn tmpfs() -> PathBuf {
    let mnt = support_fs::dir().join("mnt");
    support_fs::mount_tmpfs(&mnt, "size=96m");
    mnt
}

fn create(case: &Case, path: &Path) -> Writer {
    let w = Writer::create(path, case.spec::<u16>(), case.options())
        .unwrap_or_else(|e| panic!("[{}] create: {e}", case.name));
    let name = case.name;
    match (case.sink, w.sink()) {
        (SinkChoice::Mmap, SinkKind::Mmap)
        | (SinkChoice::Pwrite, SinkKind::Pwrite)
        | (SinkChoice::Direct, SinkKind::Direct) => {}
        (asked, got) => {
            // Not a failure of the scenario (the fallback is documented), but then it
            // tests another sink: say so loudly.
            eprintln!("[{name}] NOTE: sink {asked} fell back to {got} on this machine");
            println!("REPORT {name}: NOTE sink {asked} fell back to {got}");
        }
    }
    w
}

fn push(case: &Case, w: &mut Writer, k: u64) -> Result<(), Error> {
    let n = case.plane();
    match w.push(&frame::<u16>(k, n)) {
        Ok(o) if o.is_accepted() => Ok(()),
        Ok(_) => panic!(
            "[{}] frame {k} dropped under Backpressure::Block",
            case.name
        ),
        Err(e) => Err(e),
    }
}

/// Pushes frames `from..` until a push fails (at most `max` frames in all); returns the
/// error and the frames accepted.
fn push_until_error(case: &Case, w: &mut Writer, from: u64, max: u64) -> (Error, u64) {
    let mut k = from;
    loop {
        assert!(
            k < max,
            "[{}] {max} frames were accepted: no error",
            case.name
        );
        match push(case, w, k) {
            Ok(()) => k += 1,
            Err(e) => return (e, k),
        }
    }
}

/// After an error the writer is closed for good.
fn check_closed(case: &Case, mut w: Writer, k: u64) {
    let name = case.name;
    assert!(
        matches!(push(case, &mut w, k), Err(Error::Closed)),
        "[{name}] push after the error"
    );
    match w.finish() {
        Err(Error::Closed) => {}
        other => panic!("[{name}] finish after the error: {other:?}"),
    }
}

fn metadata(path: &Path) -> Value {
    let text = std::fs::read(path.join("zarr.json")).expect("zarr.json exists");
    serde_json::from_slice(&text).expect("zarr.json parses")
}

/// `zarr.json`'s `shape[0]`.
fn shape0(path: &Path) -> u64 {
    metadata(path)["shape"][0].as_u64().expect("shape[0]")
}

/// Waits until `zarr.json` publishes at least `frames` frames.
fn wait_published(name: &str, path: &Path, frames: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if path.join("zarr.json").exists() && shape0(path) >= frames {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "[{name}] zarr.json did not publish {frames} frames within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads frames `0..frames` with `zarrs` and compares every element with its input.
fn check_frames(name: &str, path: &Path, frames: u64) {
    if frames == 0 {
        return;
    }
    let store = Arc::new(FilesystemStore::new(path).expect("store"));
    let array = Array::open(store, "/").unwrap_or_else(|e| panic!("[{name}] zarrs open: {e}"));
    let subset = ArraySubset::new_with_shape(vec![frames, SIDE, SIDE]);
    let got: Vec<u16> = array
        .retrieve_array_subset::<Vec<u16>>(&subset)
        .unwrap_or_else(|e| panic!("[{name}] zarrs read of {frames} frames: {e}"));
    let n = (SIDE * SIDE) as usize;
    for k in 0..frames {
        let want = frame::<u16>(k, n);
        assert!(
            got[k as usize * n..(k as usize + 1) * n] == want[..],
            "[{name}] frame {k} read back differs from its input"
        );
    }
}

/// Frames `from..to` (rows that `recover` rebuilt from temporary shards): each 128 × 128
/// block is either its input (a chunk that verified) or the fill value (one that did
/// not, or a frame that was never pushed).
fn check_recovered_tail(name: &str, path: &Path, from: u64, to: u64) {
    if to <= from {
        return;
    }
    let store = Arc::new(FilesystemStore::new(path).expect("store"));
    let array = Array::open(store, "/").unwrap_or_else(|e| panic!("[{name}] zarrs open: {e}"));
    let n = (SIDE * SIDE) as usize;
    for k in from..to {
        let subset =
            ArraySubset::new_with_start_shape(vec![k, 0, 0], vec![1, SIDE, SIDE]).expect("subset");
        let got: Vec<u16> = array
            .retrieve_array_subset::<Vec<u16>>(&subset)
            .unwrap_or_else(|e| panic!("[{name}] zarrs read of frame {k}: {e}"));
        let want = frame::<u16>(k, n);
        for by in 0..2usize {
            for bx in 0..2usize {
                let (mut same, mut fill) = (true, true);
                for y in by * 128..(by + 1) * 128 {
                    for x in bx * 128..(bx + 1) * 128 {
                        let i = y * SIDE as usize + x;
                        same &= got[i] == want[i];
                        fill &= got[i] == 0;
                    }
                }
                assert!(
                    same || fill,
                    "[{name}] recovered frame {k}, block ({by}, {bx}): neither its input nor fill"
                );
            }
        }
    }
}

/// The published part of a store whose writer failed: `zarr.json` publishes whole rows,
/// at least `min` frames, and they read back exactly.
fn check_published(name: &str, path: &Path, min: u64) -> u64 {
    let frames = shape0(path);
    assert!(
        frames >= min && frames.is_multiple_of(ROW),
        "[{name}] zarr.json publishes {frames} frames (at least {min}, whole rows)"
    );
    check_frames(name, path, frames);
    frames
}

/// After the failure: `recover` runs, keeps every published frame, and whatever it
/// rebuilt after them is input or fill.
fn check_recover(name: &str, path: &Path, published: u64) {
    let report = zarrstream::recover::recover_store(path)
        .unwrap_or_else(|e| panic!("[{name}] recover: {e}"));
    println!(
        "REPORT {name}: recover: {} shards recovered, {} chunks kept, {} rejected",
        report.shards_recovered, report.chunks_kept, report.chunks_rejected
    );
    let after = shape0(path);
    assert!(
        after >= published,
        "[{name}] after recover zarr.json publishes {after} < {published} frames"
    );
    check_frames(name, path, published);
    check_recovered_tail(name, path, published, after);
}

fn report(name: &str, accepted: u64, e: &Error) {
    println!("REPORT {name}: {accepted} frames accepted | error: {e} | {e:?}");
}

fn errno_of(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

/// The error is `Error::Io` with `errno` and names a path inside `store`, or a directory
/// above it (creating a store flushes the directories it created it in).
fn check_io_error(name: &str, e: &Error, errno: i32, store: &Path) {
    let Error::Io { path, .. } = e else {
        panic!("[{name}] want Error::Io (errno {errno}), got {e:?}");
    };
    assert_eq!(errno_of(e), Some(errno), "[{name}] errno of {e:?}");
    assert!(
        path.starts_with(store) || store.starts_with(path),
        "[{name}] the error names a path of the store: {}",
        path.display()
    );
    assert!(
        e.to_string().contains(&path.display().to_string()),
        "[{name}] the message names the path: {e}"
    );
}

fn set_limit(resource: libc::__rlimit_resource_t, soft: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(resource, &mut lim) }, 0);
    lim.rlim_cur = soft.min(lim.rlim_max);
    // SAFETY: a valid rlimit value.
    let r = unsafe { libc::setrlimit(resource, &lim) };
    assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

fn soft_limit(resource: libc::__rlimit_resource_t) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(resource, &mut lim) }, 0);
    lim.rlim_cur
}

fn set_sigxfsz(disposition: libc::sighandler_t) {
    // SAFETY: SIG_IGN or SIG_DFL only; no handler code runs.
    unsafe { libc::signal(libc::SIGXFSZ, disposition) };
}

/// A child meant to die leaves no core file: RLIMIT_CORE 0, and not dumpable, for a
/// piped `core_pattern` (systemd-coredump, apport) ignores RLIMIT_CORE.
fn no_core_files() {
    set_limit(libc::RLIMIT_CORE, 0);
    // SAFETY: PR_SET_DUMPABLE takes an integer argument; no pointers.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

// ---------------------------------------------------------------------------------------
// Scenarios (run in the child)
// ---------------------------------------------------------------------------------------

/// Two rows are published, then the store directory becomes read-only (a read-only bind
/// mount over it): the writer fails with `Error::Io` EROFS naming a path of the store;
/// the published rows read back exactly; once the mount is gone `recover` works and
/// keeps every published frame.
fn read_only(name: &str, sink: SinkChoice) {
    let mnt = tmpfs();
    let case = case(name, sink);
    let path = mnt.join("a.zarr");
    let mut w = create(&case, &path);
    for k in 0..2 * ROW {
        push(&case, &mut w, k).unwrap_or_else(|e| panic!("[{name}] push {k}: {e}"));
    }
    wait_published(name, &path, 2 * ROW);
    support_fs::bind_read_only(&path, &path);
    let (e, accepted) = push_until_error(&case, &mut w, 2 * ROW, 2000);
    report(name, accepted, &e);
    check_io_error(name, &e, libc::EROFS, &path);
    check_closed(&case, w, accepted);
    let published = check_published(name, &path, 2 * ROW);
    support_fs::unmount(&path);
    check_recover(name, &path, published);
    support_fs::unmount(&mnt);
}

/// Two rows are published, two frames of row 2 are written, then another process cuts
/// the temporary shard of row 2's first tile to 0 bytes and the row is completed. The
/// writer must not die (the mmap and direct sinks meet SIGBUS) and fails with
/// `Error::ShardTruncated` naming that file, which it keeps for `recover`; the published
/// rows read back exactly, and `recover` keeps them.
fn truncated(name: &str, sink: SinkChoice) {
    let mnt = tmpfs();
    let case = case(name, sink);
    let path = mnt.join("a.zarr");
    let mut w = create(&case, &path);
    let kind = w.sink();
    for k in 0..2 * ROW {
        push(&case, &mut w, k).unwrap_or_else(|e| panic!("[{name}] push {k}: {e}"));
    }
    wait_published(name, &path, 2 * ROW);
    for k in 2 * ROW..2 * ROW + 2 {
        push(&case, &mut w, k).unwrap_or_else(|e| panic!("[{name}] push {k}: {e}"));
    }
    let layout = layout::reserved(&case.spec::<u16>());
    // The temporary shard of key c/2/0/0, as the format chapter names it.
    let victim = path.join(".zarrstream-partial").join("c.2.0.0.partial");
    wait_for_entries(name, &victim, &layout);
    // What another process would do (`truncate -s 0`): the kernel cannot tell.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .and_then(|f| f.set_len(0))
        .unwrap_or_else(|e| panic!("[{name}] truncate {}: {e}", victim.display()));
    let (e, accepted) = push_until_error(&case, &mut w, 2 * ROW + 2, 2000);
    report(name, accepted, &e);
    let Error::ShardTruncated { path: file, reason } = &e else {
        panic!("[{name}] want Error::ShardTruncated, got {e:?}");
    };
    assert_eq!(file, &victim, "[{name}] the error names the cut shard");
    let msg = e.to_string();
    assert!(
        msg.contains(&victim.display().to_string()) && msg.contains("truncated"),
        "[{name}] message: {msg}"
    );
    if matches!(kind, SinkKind::Mmap | SinkKind::Direct) {
        // The writes through the mapping after the cut met it: the guard caught SIGBUS.
        assert!(
            reason.contains("SIGBUS"),
            "[{name}] the guard caught the SIGBUS: {reason}"
        );
    }
    check_closed(&case, w, accepted);
    assert!(
        victim.exists(),
        "[{name}] the cut shard is kept for recover"
    );
    let doc = metadata(&path);
    let ours = &doc["attributes"]["zarrstream"];
    assert_eq!(ours["state"], "aborted", "[{name}] state: {ours}");
    assert!(
        ours["error"].as_str().unwrap_or_default().starts_with(&msg),
        "[{name}] zarr.json records the error: {ours}"
    );
    let published = check_published(name, &path, 2 * ROW);
    assert!(
        published < 3 * ROW,
        "[{name}] row 2, whose shard was cut, is not published ({published} frames)"
    );
    check_recover(name, &path, published);
    support_fs::unmount(&mnt);
}

/// Waits until the working index of the temporary shard at `p` holds an entry (a chunk
/// of it was written).
fn wait_for_entries(name: &str, p: &Path, layout: &layout::Reserved) {
    let deadline = Instant::now() + PATIENCE;
    let mut index = vec![0u8; 16 * layout.n as usize];
    loop {
        if let Ok(f) = std::fs::File::open(p)
            && f.read_exact_at(&mut index, layout.index_offset).is_ok()
            && index.chunks_exact(16).any(|e| e.iter().any(|&b| b != 0xff))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "[{name}] no chunk reached {} within {PATIENCE:?}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// File descriptors open in this process.
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// `ulimit -n` of 3 (no descriptor can be opened), then 1 to 24 above what is open: each writer
/// either records 6 rows or fails with `Error::Io` EMFILE naming a path of its store,
/// at create or later; no panic; whatever it published reads back. At least one limit
/// must fail after frames were accepted (the preparer's or finisher's files).
fn nofile(name: &str, sink: SinkChoice) {
    let mnt = tmpfs();
    let case = case(name, sink);
    let original = soft_limit(libc::RLIMIT_NOFILE);
    let (mut at_create, mut later, mut none) = (Vec::new(), Vec::new(), Vec::new());
    // A limit of 3 (below the descriptors open: no new one can be opened), then a few
    // above what is open.
    for extra in 0..=24u64 {
        let path = mnt.join(format!("a{extra}.zarr"));
        let limit = match extra {
            0 => 3,
            _ => open_fds() + extra,
        };
        set_limit(libc::RLIMIT_NOFILE, limit);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut w = match Writer::create(&path, case.spec::<u16>(), case.options()) {
                Ok(w) => w,
                Err(e) => return Some((e, 0, None)),
            };
            for k in 0..6 * ROW {
                if let Err(e) = push(&case, &mut w, k) {
                    return Some((e, k, Some(w)));
                }
            }
            w.finish().err().map(|e| (e, 6 * ROW, None))
        }));
        set_limit(libc::RLIMIT_NOFILE, original);
        let outcome = outcome.unwrap_or_else(|_| panic!("[{name}] a panic with {extra} fds"));
        let Some((e, accepted, w)) = outcome else {
            check_frames(name, &path, 6 * ROW);
            none.push(extra);
            continue;
        };
        println!("REPORT {name}: limit open + {extra}: {accepted} frames accepted | {e}");
        check_io_error(name, &e, libc::EMFILE, &path);
        let created = w.is_some() || accepted > 0;
        if let Some(w) = w {
            check_closed(&case, w, accepted);
        }
        if path.join("zarr.json").exists() {
            let published = shape0(&path);
            assert!(published <= accepted, "[{name}] published {published}");
            check_frames(name, &path, published);
        }
        if created {
            later.push(extra);
        } else {
            at_create.push(extra);
        }
    }
    println!(
        "REPORT {name}: EMFILE at create with limit {at_create:?} (0: a limit of 3), later \
         with open + {later:?}, none with open + {none:?}"
    );
    assert!(
        !at_create.is_empty(),
        "[{name}] a writer was created without a free descriptor"
    );
    assert!(
        !later.is_empty(),
        "[{name}] no limit failed while recording (after create)"
    );
    support_fs::unmount(&mnt);
}

/// SIGXFSZ ignored; two rows published; then `RLIMIT_FSIZE` of 16 KiB (below a shard's
/// size): the writer fails with `Error::Io` EFBIG naming a shard; the process lives; the
/// published rows read back exactly and `zarr.json` records the error.
fn fsize_ignored(name: &str, sink: SinkChoice) {
    set_sigxfsz(libc::SIG_IGN);
    let mnt = tmpfs();
    let case = case(name, sink);
    let path = mnt.join("a.zarr");
    let mut w = create(&case, &path);
    for k in 0..2 * ROW {
        push(&case, &mut w, k).unwrap_or_else(|e| panic!("[{name}] push {k}: {e}"));
    }
    wait_published(name, &path, 2 * ROW);
    let original = soft_limit(libc::RLIMIT_FSIZE);
    set_limit(libc::RLIMIT_FSIZE, 16 << 10);
    let (e, accepted) = push_until_error(&case, &mut w, 2 * ROW, 2000);
    report(name, accepted, &e);
    check_io_error(name, &e, libc::EFBIG, &path);
    let Error::Io { path: file, .. } = &e else {
        unreachable!()
    };
    let file_name = file.file_name().unwrap_or_default().to_string_lossy();
    // A temporary shard, the fresh file a finished one is compacted into, or a shard
    // in place: the one whose write met the limit.
    assert!(
        file_name.ends_with(".partial")
            || file_name.ends_with(".compacting")
            || file.starts_with(path.join("c")),
        "[{name}] the error names a shard: {}",
        file.display()
    );
    check_closed(&case, w, accepted);
    set_limit(libc::RLIMIT_FSIZE, original);
    let published = check_published(name, &path, 2 * ROW);
    let doc = metadata(&path);
    assert_eq!(doc["attributes"]["zarrstream"]["state"], "aborted");
    check_recover(name, &path, published);
    support_fs::unmount(&mnt);
}

/// SIGXFSZ at its default action; two rows published into the parent's scenario
/// directory; then `RLIMIT_FSIZE` below a shard's size: the process is killed by
/// SIGXFSZ (the parent checks that, and what was left).
fn fsize_default(name: &str) {
    set_sigxfsz(libc::SIG_DFL);
    no_core_files();
    let case = case(name, SinkChoice::Pwrite);
    let path = support_fs::dir().join("a.zarr");
    let mut w = create(&case, &path);
    for k in 0..2 * ROW {
        push(&case, &mut w, k).unwrap_or_else(|e| panic!("[{name}] push {k}: {e}"));
    }
    wait_published(name, &path, 2 * ROW);
    println!("PUBLISHED {}", shape0(&path));
    set_limit(libc::RLIMIT_FSIZE, 16 << 10);
    let (e, accepted) = push_until_error(&case, &mut w, 2 * ROW, 2000);
    // Reached only if the kernel did not send SIGXFSZ.
    panic!("[{name}] still alive after {accepted} frames, with error {e:?}");
}
