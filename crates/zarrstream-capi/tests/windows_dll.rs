//! The C API as a Windows DLL, cross-built here and run under Wine.
//!
//! `tools/windows/cargo build --suite` (the `wine` profile: dev's, with dependencies at
//! opt-level 1) gives `zarrstream.dll`,
//! its mingw import library `libzarrstream.dll.a` and the static `libzarrstream.a`;
//! `examples/c/Makefile` with `TARGET=windows` compiles the C examples against them with
//! `x86_64-w64-mingw32-gcc` (`*_shared.exe` beside a copy of the DLL, `record_static.exe`
//! with the library inside). Then, as `c_api.rs` does on Linux:
//!
//! - what is checked on the files themselves, independent of Wine: the DLL exports every
//!   `zs_*` function that `include/zarrstream.h` declares (and nothing `zs_*` it does not
//!   declare); the DLL and the programs import only DLLs that come with Windows (no mingw
//!   runtime DLL to ship); the static program does not import `zarrstream.dll` and the
//!   shared ones do; the header compiles with mingw as C and C++, and the static library
//!   links with the system libraries the Makefile names.
//! - what is run under Wine 8 (Wine's emulation of Windows, not Windows): `record.c` through
//!   the DLL and through the static library, `errors.c`'s checks of every error path
//!   (exit status 0), `recording.c` (two threads, resume), `plate.c`, panics injected
//!   into the library coming back as `ZS_E_INTERNAL`, a disk that fills (a small tmpfs in
//!   a private mount namespace), and `record.c` into a Garage S3 server over TCP. The
//!   stores the Windows programs wrote are read back on Linux by zarr-python, pixel by
//!   pixel (`check_store.py`, `check_recording.py`, `check_plate.py` in the interop
//!   environment of `zarrstream_testkit::python`). That these programs behave the same on
//!   Windows rests on Wine: its file sharing, memory mapping, threads, sockets and the
//!   error codes it reports.
//!
//! Not run here: valgrind (it instruments Linux processes; under Wine it would check
//! Wine, not the DLL) and the ctypes example with its remote error codes (it needs a
//! Windows Python, which cannot be had here).
//!
//! Needs `make`, and for the disk-full test `unshare` with the right to mount (root or user
//! namespaces), for the S3 test Garage (`zarrstream_testkit::garage` builds it once per
//! machine). Without them, or without the Windows toolchain (`tools/windows/cargo`
//! installs it as root), the tests skip loudly; with `CI=true` they fail. Every child
//! process runs under a deadline.

#![cfg(target_os = "linux")]

use zarrstream_testkit::capi as checks;
use zarrstream_testkit::garage;
use zarrstream_testkit::python;
use zarrstream_testkit::windows;

use checks::{check_recording_stats, check_stats, recording_counts};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use windows::{Win, wine_path};

/// How long one example program may run under Wine (each takes a few seconds; the first
/// also starts the wineserver), and one reader script or compiler call.
const RUN_DEADLINE: Duration = Duration::from_secs(300);

/// The Windows libraries and programs, built once per run of this binary.
struct Built {
    win: Win,
    /// Holds zarrstream.dll, libzarrstream.dll.a and libzarrstream.a.
    libdir: PathBuf,
    /// Holds the *_shared.exe and *_static.exe programs and a copy of zarrstream.dll.
    bin: PathBuf,
    /// What make printed (the compile and link lines).
    make_log: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("crates/zarrstream-capi/ is inside the repository")
}

/// The build, or `None` after a loud skip (no toolchain, outside CI). A failed build
/// fails every test with the same message instead of building again for each.
fn built(test: &str) -> Option<&'static Built> {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    let win = windows::require(test)?;
    let b = BUILT.get_or_init(|| {
        std::panic::catch_unwind(|| build(win)).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the Windows build panicked".into())
        })
    });
    match b {
        Ok(b) => Some(b),
        Err(e) => panic!("{e}"),
    }
}

fn build(win: Win) -> Built {
    let started = std::time::Instant::now();
    win.build_suite();
    windows::shout(&format!(
        "windows_dll: tools/windows/cargo build --suite took {:.1?}",
        started.elapsed()
    ));
    let libdir = win.profile_dir();
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-c-windows");
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(repo().join("examples/c"))
        .args(["TARGET=windows", "CC=x86_64-w64-mingw32-gcc"])
        .arg(format!("LIBDIR={}", libdir.display()))
        .arg(format!("OUT={}", bin.display()));
    let out = windows::run(&mut make, RUN_DEADLINE, "make TARGET=windows");
    assert!(
        out.status.success(),
        "make -C examples/c TARGET=windows failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    Built {
        win,
        libdir,
        bin,
        make_log: text(&out.stdout),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Built {
    /// Runs the Windows program `exe` (in `bin`) with `args` under Wine; its output,
    /// whatever its exit status.
    fn wine(&self, exe: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.win.command(&self.bin.join(exe));
        // Nothing but the program's own directory and Windows may provide its DLLs: a
        // WINEPATH to mingw's runtime DLLs (the wrapper's, for Rust's test binaries)
        // would hide a program that needs one.
        cmd.env_remove("WINEPATH")
            .args(args)
            .envs(env.iter().copied());
        windows::run(&mut cmd, RUN_DEADLINE, exe)
    }

    /// Runs `exe args` under Wine, which must exit 0; its stdout.
    fn wine_ok(&self, exe: &str, args: &[&str]) -> String {
        let out = self.wine(exe, args, &[]);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{exe} {args:?} under Wine failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
            out.status,
            text(&out.stderr)
        );
        stdout
    }
}

/// Runs the Linux reader script `script` (beside this file) with the interop Python,
/// which must exit 0.
fn check_script(py: &Path, script: &str, args: &[&str]) {
    let mut cmd = Command::new(py);
    cmd.arg(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join(script),
    )
    .args(args);
    let out = windows::run(&mut cmd, RUN_DEADLINE, script);
    assert!(
        out.status.success(),
        "{script} {args:?} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    println!("{}", text(&out.stdout).trim_end());
}

/// The interop environment's Python, or `None` after a loud skip (outside CI).
fn interop_python(test: &str) -> Option<PathBuf> {
    python::require(
        python::venv(
            zarrstream_testkit::target_tmp!(),
            "interop/venv.py",
            "interop-venv",
        ),
        test,
    )
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("the scratch paths are UTF-8")
}

// ------------------------------------------------------------------------ the files

/// The names of the functions `header` declares: `zs_…` identifiers followed by `(`
/// outside comments (the doc comments show calls too).
fn declared_functions(header: &str) -> BTreeSet<String> {
    let mut code = String::new();
    let mut rest = header;
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..]
            .find("*/")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    code.push_str(rest);
    let code: String = code
        .lines()
        .map(|l| l.split_once("//").map_or(l, |(c, _)| c))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names = BTreeSet::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("zs_").map(|i| from + i) {
        from = i + 3;
        if code[..i].chars().next_back().is_some_and(ident) {
            continue;
        }
        let len = code[i..]
            .find(|c: char| !ident(c))
            .unwrap_or(code.len() - i);
        if code[i + len..].trim_start().starts_with('(') {
            names.insert(code[i..i + len].to_string());
        }
    }
    names
}

/// Every DLL `objdump` lists as imported by `file` comes with Windows.
fn assert_system_imports(file: &Path, objdump: &str, also: &[&str]) {
    let imports = windows::pe_imports(objdump);
    assert!(!imports.is_empty(), "{} imports nothing?", file.display());
    let foreign: Vec<&String> = imports
        .iter()
        .filter(|d| !windows::is_system_dll(d) && !also.contains(&d.as_str()))
        .collect();
    assert!(
        foreign.is_empty(),
        "{} imports DLLs that do not come with Windows: {foreign:?} (all: {imports:?})",
        file.display()
    );
}

/// The DLL exports exactly the `zs_*` functions the header declares, and needs nothing
/// but Windows itself.
#[test]
fn dll_exports_every_function_the_header_declares() {
    let Some(b) = built("windows_dll exports") else {
        return;
    };
    let header = std::fs::read_to_string(repo().join("include/zarrstream.h")).unwrap();
    let declared = declared_functions(&header);
    // The parser misses nothing: the header declares one function per exported item of
    // the crate's sources.
    let src = repo().join("crates/zarrstream-capi/src");
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    sources(&src, &mut files);
    let exported_items: usize = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .map(|code| code.matches("#[unsafe(no_mangle)]").count())
        .sum();
    assert_eq!(declared.len(), exported_items, "{declared:?}");
    for f in ["zs_version", "zs_writer_create", "zs_recording_finish"] {
        assert!(
            declared.contains(f),
            "{f} not found in the header: {declared:?}"
        );
    }
    let dll = b.libdir.join("zarrstream.dll");
    let objdump = windows::objdump_p(&dll);
    assert!(
        objdump.contains("file format pei-x86-64"),
        "not a PE32+ x86-64 file:\n{}",
        &objdump[..objdump.len().min(400)]
    );
    let exported: BTreeSet<String> = windows::pe_exports(&objdump)
        .into_iter()
        .filter(|n| n.starts_with("zs_"))
        .collect();
    let missing: Vec<_> = declared.difference(&exported).collect();
    let undeclared: Vec<_> = exported.difference(&declared).collect();
    assert!(
        missing.is_empty(),
        "zarrstream.dll does not export {missing:?}"
    );
    assert!(
        undeclared.is_empty(),
        "zarrstream.dll exports {undeclared:?}, which the header does not declare"
    );
    let imports: BTreeSet<String> = windows::pe_imports(&objdump).into_iter().collect();
    windows::shout(&format!(
        "windows_dll: zarrstream.dll exports the {} functions of the header; imports {imports:?}",
        exported.len()
    ));
    assert_system_imports(&dll, &objdump, &[]);
    for lib in ["libzarrstream.dll.a", "libzarrstream.a"] {
        assert!(b.libdir.join(lib).is_file(), "{lib} was not built");
    }
}

/// record.c through the DLL and through the static library, under Wine; zarr-python
/// reads every pixel of both stores on Linux.
#[test]
fn c_record_with_dll_and_static_library_under_wine_read_back_by_zarr_python() {
    let Some(b) = built("windows_dll record") else {
        return;
    };
    println!("{}", b.make_log);
    let dir = zarrstream_testkit::scratch!("capi-win-record-");
    let (shared, stat) = (
        dir.path().join("shared.zarr"),
        dir.path().join("static.zarr"),
    );
    let out = b.wine_ok("record_shared.exe", &[&wine_path(&shared), "48"]);
    println!("--- record_shared.exe ---\n{out}");
    check_stats(&out, 48);
    let out = b.wine_ok("record_static.exe", &[&wine_path(&stat), "40"]);
    println!("--- record_static.exe ---\n{out}");
    check_stats(&out, 40);

    // The static program carries the library; the shared one loads the DLL beside it.
    // Neither needs a mingw runtime DLL (winpthreads and libgcc are linked in).
    let s = windows::objdump_p(&b.bin.join("record_static.exe"));
    let d = windows::objdump_p(&b.bin.join("record_shared.exe"));
    assert!(
        !windows::pe_imports(&s).contains(&"zarrstream.dll".to_string()),
        "record_static.exe imports {:?}",
        windows::pe_imports(&s)
    );
    assert!(
        windows::pe_imports(&d).contains(&"zarrstream.dll".to_string()),
        "record_shared.exe imports {:?}",
        windows::pe_imports(&d)
    );
    assert_system_imports(&b.bin.join("record_static.exe"), &s, &[]);
    for exe in [
        "record_shared.exe",
        "errors_shared.exe",
        "recording_shared.exe",
        "plate_shared.exe",
    ] {
        let o = windows::objdump_p(&b.bin.join(exe));
        assert_system_imports(&b.bin.join(exe), &o, &["zarrstream.dll"]);
    }

    let Some(py) = interop_python("windows_dll zarr-python read-back") else {
        return;
    };
    check_script(&py, "check_store.py", &[path_str(&shared), "48"]);
    check_script(&py, "check_store.py", &[path_str(&stat), "40"]);
}

/// errors.c checks every error path itself and exits 0 when all hold.
#[test]
fn c_error_paths_under_wine() {
    let Some(b) = built("windows_dll errors") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("capi-win-errors-");
    let out = b.wine_ok("errors_shared.exe", &["basic", &wine_path(dir.path())]);
    println!("{out}");
    assert!(
        out.contains(&format!("version {}", env!("CARGO_PKG_VERSION"))),
        "zs_version: {out}"
    );
    assert!(
        out.contains("errors: basic: ") && out.contains(" checks passed"),
        "{out}"
    );
}

/// recording.c: three arrays, two of them pushed from two threads at once, attributes,
/// resume; zarr-python reads everything back.
#[test]
fn c_recording_two_threads_and_resume_under_wine_read_back_by_zarr_python() {
    let Some(b) = built("windows_dll recording") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("capi-win-recording-");
    let out = b.wine_ok("recording_shared.exe", &[&wine_path(dir.path())]);
    println!("{out}");
    assert!(out.contains("checks passed"), "{out}");
    check_recording_stats(&out);
    let Some(py) = interop_python("windows_dll recording read-back") else {
        return;
    };
    let counts = recording_counts(&out);
    let mut args = vec![path_str(dir.path())];
    args.extend(counts.iter().map(String::as_str));
    check_script(&py, "check_recording.py", &args);
}

/// plate.c: an OME-Zarr plate; ome-zarr-models, the ome-zarr reader and zarr-python read
/// it back.
#[test]
fn c_plate_under_wine_read_back_by_ome_zarr_readers() {
    let Some(b) = built("windows_dll plate") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("capi-win-plate-");
    let out = b.wine_ok("plate_shared.exe", &[&wine_path(dir.path())]);
    println!("{out}");
    assert!(out.contains("checks passed"), "{out}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("stats: "))
        .unwrap_or_else(|| panic!("no stats line: {out}"));
    let s: serde_json::Value = serde_json::from_str(line).expect("stats JSON");
    assert_eq!(s["arrays"].as_object().map(|a| a.len()), Some(20), "{s}");
    assert_eq!(s["total"]["frames_written"], 20 * 3, "{s}");
    let Some(py) = interop_python("windows_dll plate read-back") else {
        return;
    };
    check_script(&py, "check_plate.py", &[path_str(dir.path())]);
}

/// A panic inside the DLL comes back as ZS_E_INTERNAL (then ZS_E_CLOSED), never
/// unwinding into C: on Windows the unwinder is SEH's, not the DWARF one of Linux. The
/// Windows build is the `wine` profile, with dev's debug assertions, where
/// ZARRSTREAM_CAPI_INJECT_PANIC is read.
#[test]
fn c_panics_come_back_as_internal_under_wine() {
    let Some(b) = built("windows_dll panics") else {
        return;
    };
    for (program, mode, inject) in [
        ("errors_shared.exe", "internal-create", "zs_writer_create"),
        ("errors_shared.exe", "internal-writer", "writer"),
        (
            "recording_shared.exe",
            "internal-create",
            "zs_recording_create",
        ),
        ("recording_shared.exe", "internal-recording", "recording"),
    ] {
        let dir = zarrstream_testkit::scratch!(&format!("capi-win-{}-", mode));
        let out = b.wine(
            program,
            &[mode, &wine_path(dir.path())],
            &[
                ("ZARRSTREAM_CAPI_INJECT_PANIC", inject),
                ("RUST_BACKTRACE", "0"),
            ],
        );
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
fn the_header_parser_finds_declarations_not_comments() {
    let h = "/* zs_commented(1) */\n// zs_line(2)\nint zs_a(const struct zs_writer *w);\n\
             const char *zs_b (void);\nstruct zs_writer;\nint not_zs_c(void);\n";
    let got: Vec<String> = declared_functions(h).into_iter().collect();
    assert_eq!(got, ["zs_a", "zs_b"]);
}

/// Whether a test needing `what` can run: a loud skip outside CI, a panic with `CI=true`.
fn available(ok: Result<(), String>, test: &str) -> bool {
    match ok {
        Ok(()) => true,
        Err(e) if windows::in_ci() => panic!("{test}: {e}\nCI=true: not skipping"),
        Err(e) => {
            windows::shout(&format!(
                "\n{bar}\nTEST SKIPPED: {test}: {e}\n(With CI=true this is a failure.)\n{bar}\n",
                bar = "!".repeat(78)
            ));
            false
        }
    }
}

/// The disk fills: ZS_E_DISK_FULL, then ZS_E_CLOSED, and every accepted frame published
/// (errors.c's disk-full mode), on a 2 MiB tmpfs in a private mount namespace as in
/// c_api.rs. Wine's files are opened by the wineserver of the prefix, so the namespace
/// also gets a /tmp of its own: there the program finds no running wineserver and starts
/// one that sees the small file system. (Two wineservers then serve one prefix for a
/// moment; a wineserver writes the prefix's registry back only where it changed, which
/// running a console program does not.) What Windows reports when a volume fills, and
/// how a mapped page that cannot be backed fails, is Wine's emulation here.
#[test]
fn c_disk_full_then_closed_under_wine() {
    const UNSUPPORTED: i32 = 77;
    let Some(b) = built("windows_dll disk full") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("capi-win-disk-full-");
    let script = format!(
        "mount -t tmpfs -o size=2m zarrstream-capi-win \"$1\" || exit {UNSUPPORTED}; \
         mount -t tmpfs zarrstream-capi-win-tmp /tmp || exit {UNSUPPORTED}; \
         echo mounted; exec \"$2\" \"$3\" disk-full \"$4\""
    );
    let mut cmd = Command::new("unshare");
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
    .arg(b.win.wine())
    .arg(b.bin.join("errors_shared.exe"))
    .arg(wine_path(dir.path()))
    .env_remove("WINEPATH")
    .envs(["WINEPREFIX", "WINEDEBUG"].map(|k| (k, &b.win.env[k])))
    .stdin(Stdio::null());
    let supported = Command::new("unshare")
        .args(["--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run unshare: {e}"))
        .map(|_| ());
    if !available(supported, "c_disk_full_then_closed_under_wine") {
        return;
    }
    let out = windows::run(&mut cmd, RUN_DEADLINE, "errors_shared.exe disk-full");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let mounted = stdout.starts_with("mounted") && out.status.code() != Some(UNSUPPORTED);
    let why = format!(
        "cannot mount a tmpfs in a private mount namespace ({}): {}",
        out.status,
        stderr.trim()
    );
    if !available(
        if mounted { Ok(()) } else { Err(why) },
        "c_disk_full_then_closed_under_wine",
    ) {
        return;
    }
    println!("{stdout}");
    assert!(
        out.status.success(),
        "errors_shared.exe disk-full failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("disk full after "), "{stdout}");
    assert!(stdout.contains("checks passed"), "{stdout}");
}

/// The C library records into an object store from Windows as into a directory:
/// record.c with an `s3://` path (endpoint and credentials from the `AWS_*` environment,
/// which Wine hands to the program) into Garage on this machine, read back from the
/// bucket by zarr-python; and the remote failures come back as messages naming them (the
/// numeric codes of each are c_api.rs's, through the ctypes example, which needs a
/// Windows Python here).
#[test]
fn c_records_into_s3_under_wine() {
    if garage::require("windows_dll object store").is_none() {
        return;
    }
    let Some(b) = built("windows_dll object store") else {
        return;
    };
    let Some(py) = interop_python("windows_dll object store") else {
        return;
    };
    let dir = zarrstream_testkit::scratch!("capi-win-s3-");
    let g = garage::Garage::single(&dir.path().join("garage"));
    let staging = wine_path(&dir.path().join("staging"));
    let record = |url: &str, frames: &str, env: &[(String, String)]| {
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (&**k, &**v)).collect();
        env.push(("ZARRSTREAM_STAGING", &staging));
        b.wine("record_shared.exe", &[url, frames], &env)
    };
    let url = format!("s3://{}/c.zarr", g.bucket());
    let out = record(&url, "40", &g.env());
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "record_shared.exe into S3 failed ({}):\n{stdout}\n{}",
        out.status,
        text(&out.stderr)
    );
    println!("--- record_shared.exe s3 ---\n{stdout}");
    check_stats(&stdout, 40);
    let mut cmd = Command::new(&py);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_store.py"))
        .args([url.as_str(), "40"])
        .envs(g.env());
    let o = windows::run(&mut cmd, RUN_DEADLINE, "check_store.py s3");
    assert!(
        o.status.success(),
        "check_store.py {url} failed ({}):\n{}\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
    println!("{}", text(&o.stdout).trim_end());

    let refused = |url: &str, env: Vec<(String, String)>| {
        let out = record(url, "1", &env);
        assert!(!out.status.success(), "{url} is refused");
        text(&out.stderr)
    };
    let mut wrong = g.env();
    wrong.retain(|(k, _)| k != "AWS_SECRET_ACCESS_KEY");
    wrong.push(("AWS_SECRET_ACCESS_KEY".into(), "0".repeat(64)));
    let e = refused(&format!("s3://{}/d.zarr", g.bucket()), wrong);
    assert!(e.contains("refused the credentials"), "{e}");
    let e = refused("s3://no-such-bucket/d.zarr", g.env());
    assert!(e.contains("bucket does not exist"), "{e}");
    let e = refused(&url, g.env());
    assert!(e.contains("already exists"), "{e}");
}
