//! The C API used from C and Python, as instrument software would.
//!
//! The libraries are built once per run of this binary, with its own profile and target
//! directory (`cargo build --lib --test c_api` from the workspace root: the same package
//! selection as `cargo test` there, so the shared dependencies are not built again), then
//! `examples/c/Makefile` compiles the C programs against `libzarrstream.so` and
//! `libzarrstream.a`. The tests run them (one under valgrind), read the stores back with
//! zarr-python (the interop environment of `zarrstream_testkit::python`), and run the ctypes
//! example. `errors.c` holds the C-level checks of every error path; `recording.c`
//! those of `zs_recording` (several arrays pushed from two threads, resume); `plate.c`
//! those of an OME-Zarr plate. `record.c` and the ctypes example also record into a
//! Garage S3 server (`zarrstream_testkit::garage`), to check the object-store codes.
//!
//! Needs `make`, a C and a C++ compiler, `valgrind` and, for the disk-full test, a tmpfs
//! mount in a private mount namespace (`unshare`, root or user namespaces). Outside CI a
//! missing piece skips its test with a loud message; with `CI=true` it is a failure
//! (valgrind is installed with apt-get when missing and we are root).
//!
//! `cargo test -p zarrstream-capi --test c_api -- --nocapture` shows the programs' output.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use zarrstream_testkit::capi as checks;
use zarrstream_testkit::garage;
use zarrstream_testkit::python;

use checks::{check_recording_stats, check_stats, recording_counts};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use python::{in_ci, shout};

/// The built libraries and programs.
struct Built {
    /// Holds libzarrstream.so and libzarrstream.a.
    libdir: PathBuf,
    /// Holds record_shared, record_static, errors_shared, recording_shared and
    /// plate_shared.
    bin: PathBuf,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("crates/zarrstream-capi/ is inside the repository")
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

fn build() -> Result<Built, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target[/<triple>]/<profile>/deps/c_api-<hash> -> target[/<triple>]/<profile>
    let libdir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("no profile directory")?
        .to_path_buf();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .ok_or("no target directory")?
        .to_path_buf();
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(repo())
        .args([
            "build",
            "--quiet",
            "--lib",
            "--test",
            "c_api",
            "--target-dir",
        ])
        .arg(&target)
        .stdin(Stdio::null());
    match libdir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => {}
        Some("release") => {
            cargo.arg("--release");
        }
        Some(profile) => {
            cargo.args(["--profile", profile]);
        }
        None => return Err("no profile name".into()),
    }
    // Cross builds put the profile under target/<triple>.
    if let Some(triple) = libdir
        .parent()
        .filter(|p| *p != target)
        .and_then(Path::file_name)
    {
        cargo.arg("--target").arg(triple);
    }
    run_ok(&mut cargo, "cargo build (the C libraries)")?;

    let profile = libdir.file_name().unwrap_or_default().to_string_lossy();
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-c-{profile}"));
    if !tool("make", &["--version"]) {
        return Err(missing("make"));
    }
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(repo().join("examples/c"))
        .arg(format!("LIBDIR={}", libdir.display()))
        .arg(format!("OUT={}", bin.display()))
        .stdin(Stdio::null());
    let out = run_ok(&mut make, "make -C examples/c")?;
    // What the compiler was asked (so a reader of the log sees the link lines).
    println!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(Built { libdir, bin })
}

/// Runs `cmd`; its output, or an error with everything it printed.
fn run_ok(cmd: &mut Command, what: &str) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{what} failed ({}):\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn tool(name: &str, version_args: &[&str]) -> bool {
    Command::new(name)
        .args(version_args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn missing(name: &str) -> String {
    format!("`{name}` is not installed; the C API tests need it (apt-get install {name})")
}

/// Whether a test needing `what` can run: a loud skip outside CI, a panic with `CI=true`.
fn available(ok: Result<(), String>, test: &str) -> bool {
    match ok {
        Ok(()) => true,
        Err(e) if in_ci() => panic!("{test}: {e}\nCI=true: not skipping"),
        Err(e) => {
            shout(&format!(
                "\n{bar}\nTEST SKIPPED: {test}: {e}\n(With CI=true this is a failure.)\n{bar}\n",
                bar = "!".repeat(78)
            ));
            false
        }
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|u| u.split_whitespace().nth(1))
            == Some("0")
    })
}

/// valgrind, installed with apt-get under CI when we may; `Err` says why not.
fn valgrind() -> Result<(), String> {
    static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if tool("valgrind", &["--version"]) {
                return Ok(());
            }
            if in_ci() && is_root() {
                shout("c_api: valgrind is missing; installing it with apt-get");
                let install = |args: &[&str]| {
                    Command::new("apt-get")
                        .args(args)
                        .env("DEBIAN_FRONTEND", "noninteractive")
                        .stdin(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                };
                if !install(&["install", "-y", "valgrind"]) {
                    install(&["update"]);
                    install(&["install", "-y", "valgrind"]);
                }
                if tool("valgrind", &["--version"]) {
                    return Ok(());
                }
            }
            Err(missing("valgrind"))
        })
        .clone()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs a program that must succeed; its stdout.
fn run(cmd: &mut Command, what: &str) -> String {
    match run_ok(cmd.stdin(Stdio::null()), what) {
        Ok(out) => text(&out.stdout),
        Err(e) => panic!("{e}"),
    }
}

fn interop_python(test: &str) -> Option<PathBuf> {
    // The environment and its script are the library's (crates/zarrstream/tests).
    python::require(
        python::venv(
            zarrstream_testkit::target_tmp!(),
            "interop/venv.py",
            "interop-venv",
        ),
        test,
    )
}

/// zarr-python reads `store` and finds exactly `frames` frames of the camera.
fn check_store(py: &Path, store: &Path, frames: u64) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_store.py");
    let out = run(
        Command::new(py)
            .arg(script)
            .arg(store)
            .arg(frames.to_string()),
        "check_store.py",
    );
    println!("{}", out.trim_end());
}

fn readelf_needed(bin: &Path) -> Option<String> {
    let out = Command::new("readelf").arg("-d").arg(bin).output().ok()?;
    out.status.success().then(|| {
        text(&out.stdout)
            .lines()
            .filter(|l| l.contains("(NEEDED)"))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

#[test]
fn c_record_with_shared_and_static_library_read_back_by_zarr_python() {
    let b = built();
    let dir = zarrstream_testkit::scratch!("capi-record-");
    let (shared, stat) = (
        dir.path().join("shared.zarr"),
        dir.path().join("static.zarr"),
    );
    let out = run(
        Command::new(b.bin.join("record_shared"))
            .arg(&shared)
            .arg("48"),
        "record_shared",
    );
    println!("--- record_shared ---\n{out}");
    check_stats(&out, 48);
    let out = run(
        Command::new(b.bin.join("record_static"))
            .arg(&stat)
            .arg("40"),
        "record_static",
    );
    println!("--- record_static ---\n{out}");
    check_stats(&out, 40);

    // The static program does not load the shared library (and has no rpath to it).
    if let (Some(s), Some(d)) = (
        readelf_needed(&b.bin.join("record_static")),
        readelf_needed(&b.bin.join("record_shared")),
    ) {
        assert!(!s.contains("libzarrstream"), "record_static needs:\n{s}");
        assert!(d.contains("libzarrstream.so"), "record_shared needs:\n{d}");
    }

    let Some(py) = interop_python("c_api zarr-python read-back") else {
        return;
    };
    check_store(&py, &shared, 48);
    check_store(&py, &stat, 40);
}

#[test]
fn c_record_under_valgrind_is_clean() {
    let b = built();
    if !available(valgrind(), "c_record_under_valgrind_is_clean") {
        return;
    }
    let dir = zarrstream_testkit::scratch!("capi-valgrind-");
    let store = dir.path().join("v.zarr");
    let out = valgrind_run(
        &b.bin.join("record_shared"),
        &[store.as_os_str(), "24".as_ref()],
    );
    check_stats(&out, 24);
    if let Some(py) = interop_python("c_api valgrind store read-back") {
        check_store(&py, &store, 24);
    }
}

/// zarr-python reads what recording.c wrote in `dir`: every array, per-frame metadata
/// value and attribute.
fn check_recording(py: &Path, dir: &Path, stdout: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_recording.py");
    let out = run(
        Command::new(py)
            .arg(script)
            .arg(dir)
            .args(recording_counts(stdout)),
        "check_recording.py",
    );
    println!("{}", out.trim_end());
}

/// recording.c: three arrays (two cameras of different shapes and dtypes pushed from
/// two threads at once, an OME-Zarr image), attributes on the root, an array and the
/// image's group, the bad inputs and configs, resume of a recording and of a
/// zs_writer; zarr-python reads everything back.
#[test]
fn c_recording_two_threads_and_resume_read_back_by_zarr_python() {
    let b = built();
    let dir = zarrstream_testkit::scratch!("capi-recording-");
    let out = run(
        Command::new(b.bin.join("recording_shared")).arg(dir.path()),
        "recording_shared",
    );
    println!("{out}");
    assert!(out.contains("checks passed"), "{out}");
    check_recording_stats(&out);
    let Some(py) = interop_python("c_api recording read-back") else {
        return;
    };
    check_recording(&py, dir.path(), &out);
}

/// plate.c: an OME-Zarr plate (2 x 3 without one well, 2 fields, 2 acquisitions) pushed
/// field by field through array keys, bad plates refused with ZS_E_INVALID_PLATE;
/// ome-zarr-models, the ome-zarr reader and zarr-python read it back.
#[test]
fn c_plate_read_back_by_ome_zarr_readers() {
    let b = built();
    let dir = zarrstream_testkit::scratch!("capi-plate-");
    let out = run(
        Command::new(b.bin.join("plate_shared")).arg(dir.path()),
        "plate_shared",
    );
    println!("{out}");
    assert!(out.contains("checks passed"), "{out}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("stats: "))
        .unwrap_or_else(|| panic!("no stats line: {out}"));
    let s: serde_json::Value = serde_json::from_str(line).expect("stats JSON");
    assert_eq!(s["arrays"].as_object().map(|a| a.len()), Some(20), "{s}");
    assert_eq!(s["total"]["frames_written"], 20 * 3, "{s}");
    let Some(py) = interop_python("c_api plate read-back") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_plate.py");
    let out = run(
        Command::new(py).arg(script).arg(dir.path()),
        "check_plate.py",
    );
    println!("{}", out.trim_end());
}

#[test]
fn c_recording_under_valgrind_is_clean() {
    let b = built();
    if !available(valgrind(), "c_recording_under_valgrind_is_clean") {
        return;
    }
    let dir = zarrstream_testkit::scratch!("capi-recording-valgrind-");
    let out = valgrind_run(&b.bin.join("recording_shared"), &[dir.path().as_os_str()]);
    assert!(out.contains("checks passed"), "{out}");
    check_recording_stats(&out);
    if let Some(py) = interop_python("c_api recording valgrind read-back") {
        check_recording(&py, dir.path(), &out);
    }
}

/// Runs `bin args` under valgrind, which must report no error (leaks included); stdout.
fn valgrind_run(bin: &Path, args: &[&std::ffi::OsStr]) -> String {
    let supp = repo().join("examples/c/valgrind.supp");
    let out = Command::new("valgrind")
        .args(["--leak-check=full", "--error-exitcode=1"])
        .arg(format!("--suppressions={}", supp.display()))
        .arg(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run valgrind");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let summary: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            [
                "definitely lost",
                "indirectly lost",
                "possibly lost",
                "suppressed:",
                "ERROR SUMMARY",
            ]
            .iter()
            .any(|k| l.contains(k))
        })
        .collect();
    println!("--- valgrind {} ---\n{}", bin.display(), summary.join("\n"));
    assert!(
        out.status.success() && stderr.contains("ERROR SUMMARY: 0 errors"),
        "valgrind found errors ({}):\n{stderr}\n--- stdout ---\n{stdout}",
        out.status
    );
    stdout
}

#[test]
fn c_error_paths() {
    let b = built();
    let dir = zarrstream_testkit::scratch!("capi-errors-");
    // errors.c keeps the deprecated flat config_json of 0.1: it must still work, and
    // warn on stderr exactly once per process.
    let output = run_ok(
        Command::new(b.bin.join("errors_shared"))
            .arg("basic")
            .arg(dir.path())
            .stdin(Stdio::null()),
        "errors basic",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (out, err) = (text(&output.stdout), text(&output.stderr));
    println!("{out}");
    assert_eq!(
        err.matches("zarrstream: warning: a flat config_json")
            .count(),
        1,
        "one deprecation warning on stderr: {err}"
    );
    assert!(
        out.contains(&format!("version {}", env!("CARGO_PKG_VERSION"))),
        "zs_version: {out}"
    );
    assert!(out.contains("checks passed"), "{out}");
    // The error paths free what they allocate, too.
    if available(valgrind(), "c_error_paths under valgrind") {
        let dir = zarrstream_testkit::scratch!("capi-errors-valgrind-");
        let out = valgrind_run(
            &b.bin.join("errors_shared"),
            &["basic".as_ref(), dir.path().as_os_str()],
        );
        assert!(out.contains("checks passed"), "{out}");
    }
}

/// Frames written by index, channel-first into t, c storage and into a single-frame
/// (rank 2) array, with every bad index refused by its code (indexed.c's own checks);
/// zarr-python and tensorstore read back exactly the frames written.
#[test]
fn c_frames_written_by_index_read_back_by_zarr_python_and_tensorstore() {
    let b = built();
    let dir = zarrstream_testkit::scratch!("capi-indexed-");
    let out = run(
        Command::new(b.bin.join("indexed_shared")).arg(dir.path()),
        "indexed",
    );
    println!("{out}");
    assert!(out.contains("checks passed"), "{out}");
    let Some(py) = interop_python("c_frames_written_by_index") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_indexed.py");
    let out = run(
        Command::new(py).arg(script).arg(dir.path()),
        "check_indexed.py",
    );
    println!("{out}");
    assert_eq!(
        out.matches("equal to the frames written").count(),
        4,
        "two readers, two stores: {out}"
    );
}

/// The disk fills: ZS_E_DISK_FULL, then ZS_E_CLOSED; on a 2 MiB tmpfs of its own, in a
/// private mount namespace (the approach of the library's tests/writer/support_fs.rs).
#[test]
fn c_disk_full_then_closed() {
    const UNSUPPORTED: i32 = 77;
    let b = built();
    let dir = zarrstream_testkit::scratch!("capi-disk-full-");
    let mut cmd = Command::new("unshare");
    if !is_root() {
        cmd.args(["--user", "--map-root-user"]);
    }
    // "mounted" tells a namespace or mount failure from a failure of the test itself.
    let script = format!(
        "mount -t tmpfs -o size=2m zarrstream-capi \"$1\" || exit {UNSUPPORTED}; \
         echo mounted; exec \"$2\" disk-full \"$1\""
    );
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "sh",
    ])
    .arg(dir.path())
    .arg(b.bin.join("errors_shared"))
    .stdin(Stdio::null());
    let out = cmd.output();
    let supported = match &out {
        Err(e) => Err(format!("cannot run unshare: {e}")),
        Ok(o) if !text(&o.stdout).starts_with("mounted") => Err(format!(
            "cannot mount a tmpfs in a private mount namespace ({}): {}",
            o.status,
            text(&o.stderr).trim()
        )),
        Ok(_) => Ok(()),
    };
    if !available(supported, "c_disk_full_then_closed") {
        return;
    }
    let Ok(out) = out else { return };
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    println!("{stdout}");
    assert!(
        out.status.success(),
        "errors disk-full failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
}

/// A panic inside the library comes back as ZS_E_INTERNAL (then ZS_E_CLOSED on the
/// poisoned writer or recording, from every thread), never crossing into C. The panics are injected through
/// ZARRSTREAM_CAPI_INJECT_PANIC, which only debug builds of the library read.
#[test]
fn c_panics_come_back_as_internal() {
    if !cfg!(debug_assertions) {
        println!("skipped: panic injection exists in debug builds of the library only");
        return;
    }
    let b = built();
    for (program, mode, inject) in [
        ("errors_shared", "internal-create", "zs_writer_create"),
        ("errors_shared", "internal-writer", "writer"),
        ("recording_shared", "internal-create", "zs_recording_create"),
        ("recording_shared", "internal-recording", "recording"),
    ] {
        let dir = zarrstream_testkit::scratch!(&format!("capi-{}-", mode));
        let out = Command::new(b.bin.join(program))
            .arg(mode)
            .arg(dir.path())
            .env("ZARRSTREAM_CAPI_INJECT_PANIC", inject)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .output()
            .expect("run errors");
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        println!("{stdout}");
        assert!(
            out.status.success(),
            "{program} {mode} ({}):\n{stdout}\n{stderr}",
            out.status
        );
        assert!(stdout.contains("checks passed"), "{stdout}");
        assert!(
            stderr.contains("asked for a panic"),
            "the panic happened: {stderr}"
        );
    }
}

#[test]
fn python_ctypes_example_read_back_by_zarr_python() {
    let b = built();
    let Some(py) = interop_python("c_api ctypes example") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("capi-python-");
    let store = dir.path().join("py.zarr");
    let out = run(
        Command::new(&py)
            .arg(repo().join("examples/python/record.py"))
            .arg(&store)
            .args(["--frames", "24", "--lib"])
            .arg(b.libdir.join("libzarrstream.so")),
        "examples/python/record.py",
    );
    println!("{out}");
    check_stats(&out, 24);
    check_store(&py, &store, 24);
    // A failure comes back as an exception with the library's message and code.
    let out = Command::new(&py)
        .arg(repo().join("examples/python/record.py"))
        .arg(&store)
        .args(["--frames", "1", "--lib"])
        .arg(b.libdir.join("libzarrstream.so"))
        .output()
        .expect("run record.py");
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "an existing store is refused");
    assert!(
        stderr.contains("already exists (set overwrite to replace it) (code -8)"),
        "{stderr}"
    );
}

/// The C library records into an object store as into a directory: `record.c` with an
/// `s3://` path (endpoint and credentials from the `AWS_*` environment, as the AWS tools
/// take them) into Garage, read back from the bucket by zarr-python over s3fs; and the
/// ctypes example, which prints the code C gets, meets each remote code: a wrong secret
/// is `ZS_E_REMOTE_CREDENTIALS`, a missing bucket `ZS_E_REMOTE_NO_BUCKET`, a URL
/// without a bucket `ZS_E_INVALID_CONFIG`, an array already in the bucket `ZS_E_EXISTS`.
#[test]
fn c_records_into_s3_and_gets_the_remote_codes() {
    if garage::require("c_api object store").is_none() {
        return;
    }
    let Some(py) = interop_python("c_api object store") else {
        return;
    };
    let b = built();
    let dir = zarrstream_testkit::scratch!("capi-s3-");
    let g = garage::Garage::single(&dir.path().join("garage"));
    let url = format!("s3://{}/c.zarr", g.bucket());
    let staging = dir.path().join("staging");
    let out = run(
        Command::new(b.bin.join("record_shared"))
            .arg(&url)
            .arg("40")
            .envs(g.env())
            .env("ZARRSTREAM_STAGING", &staging),
        "record_shared into S3",
    );
    println!("--- record_shared s3 ---\n{out}");
    check_stats(&out, 40);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_store.py");
    let out = run(
        Command::new(&py)
            .arg(script)
            .arg(&url)
            .arg("40")
            .envs(g.env()),
        "check_store.py s3",
    );
    println!("{}", out.trim_end());

    let refused = |url: &str, env: Vec<(String, String)>| {
        let out = Command::new(&py)
            .arg(repo().join("examples/python/record.py"))
            .arg(url)
            .args(["--frames", "1", "--lib"])
            .arg(b.libdir.join("libzarrstream.so"))
            .envs(env)
            .env("ZARRSTREAM_STAGING", &staging)
            .stdin(Stdio::null())
            .output()
            .expect("run record.py");
        assert!(!out.status.success(), "{url} is refused");
        text(&out.stderr)
    };
    let mut wrong = g.env();
    wrong.retain(|(k, _)| k != "AWS_SECRET_ACCESS_KEY");
    wrong.push(("AWS_SECRET_ACCESS_KEY".into(), "0".repeat(64)));
    let e = refused(&format!("s3://{}/d.zarr", g.bucket()), wrong);
    assert!(
        e.contains("refused the credentials") && e.contains("(code -16)"),
        "{e}"
    );
    let e = refused("s3://no-such-bucket/d.zarr", g.env());
    assert!(
        e.contains("bucket does not exist") && e.contains("(code -17)"),
        "{e}"
    );
    let e = refused("s3:///d.zarr", g.env());
    assert!(e.contains("(code -1)"), "{e}");
    let e = refused(&url, g.env());
    assert!(
        e.contains("already exists") && e.contains("(code -8)"),
        "{e}"
    );
}

/// `NAME = value` pairs of the return codes in `text` (C enum or Python).
fn codes(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim().trim_end_matches(',');
            let (name, value) = l.split_once('=')?;
            let name = name.trim();
            (name.starts_with("ZS_OK")
                || name.starts_with("ZS_DROPPED")
                || name.starts_with("ZS_E_"))
            .then(|| Some((name.to_string(), value.trim().parse().ok()?)))?
        })
        .collect()
}

#[test]
fn python_example_codes_match_the_header() {
    let header = std::fs::read_to_string(repo().join("include/zarrstream.h")).unwrap();
    let py = std::fs::read_to_string(repo().join("examples/python/record.py")).unwrap();
    let (h, p) = (codes(&header), codes(&py));
    assert_eq!(h.len(), 26, "{h:?}");
    assert_eq!(
        h, p,
        "examples/python/record.py's constants differ from the header"
    );
}
