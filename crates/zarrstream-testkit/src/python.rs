//! The pinned Python environments the reader tests use (`tests/interop/venv.py`,
//! `tests/legacy/venv.py` of the library): found or built once per test binary, skipped
//! loudly outside CI and a failure with `CI=true`. The environments sit in the target
//! directory, beside the calling binary's `target/tmp`, which it passes as `tmp`
//! ([`crate::target_tmp!`]).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// Whether this run is CI (`CI` set to anything but empty, `false` or `0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Writes straight to the process's stderr, past the test harness's output capture, so
/// skips and summaries show in a plain `cargo test` run.
pub fn shout(msg: &str) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Runs `python3 tests/<script> target/<name>` (once per binary) and returns the
/// environment's interpreter, or why it could not be had. `tmp` is the calling binary's
/// `target/tmp`.
pub fn venv(tmp: &Path, script: &str, name: &str) -> Result<PathBuf, String> {
    venv_from(tmp, script, name, None)
}

/// Like [`venv`], with the pins of `requirements` instead of the script's own.
pub fn venv_from(
    tmp: &Path,
    script: &str,
    name: &str,
    requirements: Option<&Path>,
) -> Result<PathBuf, String> {
    static DONE: OnceLock<Mutex<HashMap<String, Result<PathBuf, String>>>> = OnceLock::new();
    let done = DONE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    done.entry(name.to_string())
        .or_insert_with(|| build(tmp, script, name, requirements))
        .clone()
}

fn build(
    tmp: &Path,
    script: &str,
    name: &str,
    requirements: Option<&Path>,
) -> Result<PathBuf, String> {
    if cfg!(windows) {
        return Err("the Windows build runs no Python (see `require`)".into());
    }
    let base = std::env::var("ZARRSTREAM_PYTHON").unwrap_or_else(|_| "python3".into());
    // `target/tmp` is what cargo gives integration tests; the venvs sit beside it.
    let target = tmp.parent().ok_or("no target directory")?.to_path_buf();
    // The scripts live with the library's tests; every package sits in crates/.
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../zarrstream/tests")
        .join(script);
    let o = Command::new(&base)
        .arg(&script)
        .arg(target.join(name))
        .args(requirements)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {base} ({e}); install Python >= 3.11"))?;
    let said = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(format!(
            "{base} {} failed ({}):\n{}{said}",
            script.display(),
            o.status,
            String::from_utf8_lossy(&o.stdout)
        ));
    }
    // Says so when it had to (re)build the environment.
    if !said.trim().is_empty() {
        shout(said.trim_end());
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    Ok(PathBuf::from(
        stdout.lines().last().unwrap_or_default().trim(),
    ))
}

/// The interop readers' interpreter (zarr-python, tensorstore, zarrs-python, fsspec,
/// fastparquet), or `None` after a loud message naming `what` was skipped; with `CI=true`
/// a missing environment panics. `tmp` is the calling binary's `target/tmp`.
pub fn interop(tmp: &Path, what: &str) -> Option<PathBuf> {
    require(venv(tmp, "interop/venv.py", "interop-venv"), what)
}

/// `Ok` as `Some`; an error is a panic in CI and a loud skip of `what` elsewhere. In the
/// Windows build (run under Wine) there are no Python readers by design: the same readers
/// read what the Windows build writes, from Linux (`tests/windows.rs`), so the part of a
/// test that needs them is left out there, loudly.
pub fn require<T>(env: Result<T, String>, what: &str) -> Option<T> {
    if cfg!(windows) {
        shout(&format!(
            "{what}: no Python readers in the Windows build; tests/windows.rs reads what \
             the Windows build writes with them on Linux"
        ));
        return None;
    }
    match env {
        Ok(v) => Some(v),
        Err(e) if in_ci() => panic!("{what}: the Python reader environment is missing: {e}"),
        Err(e) => {
            shout(&format!(
                "\n{bar}\n{what} SKIPPED: no Python reader environment.\n{e}\n\
                 (With CI=true this is a failure.)\n{bar}\n",
                bar = "!".repeat(78)
            ));
            None
        }
    }
}

/// Runs `tests/interop/ome_check.py MODE MANIFEST` with `py`, prints its output and fails
/// the test unless every check passed.
pub fn ome_check(py: &Path, mode: &str, manifest: &Path) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../zarrstream/tests/interop/ome_check.py");
    let out = Command::new(py)
        .arg(script)
        .arg(mode)
        .arg(manifest)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run ome_check.py: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "ome_check.py {mode} failed:\n{text}");
}
