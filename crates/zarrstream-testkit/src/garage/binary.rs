//! The `garage` binary: `$ZARRSTREAM_GARAGE` as it is, else the one `tools/garage/build`
//! builds into the cache (once per machine; the script holds the recipe and the lock),
//! checked with `garage --version`. The tests run the script's default build (opt-level
//! 1); the object-store benchmark asks for the release build with [`use_release_build`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{VERSION, in_ci, shout};
use crate::windows::wait_output;

/// How long `tools/garage/build` may take: a cold build is 10 to 15 minutes on two idle
/// cores, and the tests share them with compilers.
const BUILD_DEADLINE: Duration = Duration::from_secs(60 * 60);

/// Set by [`use_release_build`].
static RELEASE: AtomicBool = AtomicBool::new(false);

/// Makes this process run Garage as released (`tools/garage/build --release`) rather than
/// the tests' build at opt-level 1: for a benchmark, whose figures depend on the server.
/// Takes effect when called before the first [`garage_binary`].
pub fn use_release_build() {
    RELEASE.store(true, Ordering::Relaxed);
}

/// The Garage binary, built first if it is missing (see the module docs), and checked with
/// `garage --version`. Worked out once per process; the error says why it cannot be had.
pub fn garage_binary() -> Result<PathBuf, String> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY.get_or_init(find_or_build).clone()
}

/// `Ok` as `Some`; an error is a panic in CI and a loud skip of `what` elsewhere.
pub fn require(what: &str) -> Option<PathBuf> {
    match garage_binary() {
        Ok(p) => Some(p),
        Err(e) if in_ci() => panic!("{what}: the Garage S3 server is missing: {e}"),
        Err(e) => {
            shout(&format!(
                "\n{bar}\n{what} SKIPPED: no Garage S3 server.\n{e}\n\
                 (With CI=true this is a failure.)\n{bar}\n",
                bar = "!".repeat(78)
            ));
            None
        }
    }
}

fn find_or_build() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("ZARRSTREAM_GARAGE").filter(|p| !p.is_empty()) {
        // A binary the user named is used as it is, never built over.
        let bin = PathBuf::from(bin);
        return check_version(&bin).map(|()| bin);
    }
    let bin = build()?;
    check_version(&bin).map(|()| bin)
}

/// `tools/garage/build`: the binary's path, built first when missing (the script holds the
/// recipe and the lock that makes concurrent callers wait for one build).
fn build() -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/garage/build");
    let mut cmd = Command::new(&script);
    if RELEASE.load(Ordering::Relaxed) {
        cmd.arg("--release");
    }
    // Its banner and progress (stderr) go straight to the terminal, where a build of
    // minutes is worth seeing as it starts.
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run {} ({e})", script.display()))?;
    let started = Instant::now();
    let ran = wait_output(child, BUILD_DEADLINE).map_err(|_| {
        format!(
            "{} ran past its deadline of {BUILD_DEADLINE:?} and was killed",
            script.display()
        )
    })?;
    if !ran.status.success() {
        return Err(format!(
            "{} failed ({}) after {:.0?}; its log is named above",
            script.display(),
            ran.status,
            started.elapsed()
        ));
    }
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let bin = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    if bin.as_os_str().is_empty() {
        return Err(format!("{} printed no path", script.display()));
    }
    Ok(bin)
}

fn check_version(bin: &Path) -> Result<(), String> {
    let out = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {} ({e})", bin.display()))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} --version failed ({}): {said}{}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if !said.contains(VERSION) {
        shout(&format!(
            "warning: {} is `{}`, the tests are written against Garage {VERSION}",
            bin.display(),
            said.trim()
        ));
    }
    Ok(())
}
