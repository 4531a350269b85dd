//! What the Python package's test binaries share: a command run with a deadline (in its
//! own process group, killed whole past it), and the wheel built with an environment's
//! maturin and installed into it. Unix only (process groups). `target` below is the
//! workspace's target directory, [`target_dir`] of the calling binary's `target/tmp`.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The Python package's directory (`crates/zarrstream-python`).
fn package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../zarrstream-python")
}

/// The workspace's target directory: the parent of `tmp`, the calling binary's
/// `target/tmp` ([`crate::target_tmp!`]).
pub fn target_dir(tmp: &Path) -> PathBuf {
    tmp.parent()
        .unwrap_or_else(|| {
            panic!(
                "{} is cargo's target/tmp, inside the target directory",
                tmp.display()
            )
        })
        .to_path_buf()
}

/// Runs `cmd` in its own process group and waits at most `limit`; past it the whole
/// group is killed and the result is an error naming `what`.
pub fn run(mut cmd: Command, limit: Duration, what: &str) -> Result<ExitStatus, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                kill_group(&child);
                let _ = child.wait();
                return Err(format!("{what}: still running after {limit:?}, killed"));
            }
            Err(e) => return Err(format!("{what}: wait failed: {e}")),
        }
    }
}

/// Kills `child`'s process group (started by [`run`] or with `process_group(0)`).
pub fn kill_group(child: &Child) {
    let pid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

/// Builds the abi3 wheel with `py`'s maturin into `target/<dir>` (the dev profile reuses
/// what `cargo test` compiled; speed is measured elsewhere) and installs it into `py`'s
/// environment; returns the wheel.
pub fn install_wheel(target: &Path, py: &Path, dir: &str) -> PathBuf {
    let out = target.join(dir);
    let _ = std::fs::remove_dir_all(&out);
    let mut maturin = Command::new(py);
    maturin
        .args([
            "-m",
            "maturin",
            "build",
            "--profile",
            "dev",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .arg("--manifest-path")
        .arg(package().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target);
    let status =
        run(maturin, Duration::from_secs(1800), "maturin build").unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "maturin build failed: {status}");
    let wheel = std::fs::read_dir(&out)
        .unwrap_or_else(|e| panic!("maturin's --out directory {}: {e}", out.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .unwrap_or_else(|| panic!("maturin succeeded but wrote no .whl in {}", out.display()));
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(
        name.contains("-abi3-"),
        "the wheel is not an abi3 wheel: {name}"
    );
    let mut pip = Command::new(py);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--force-reinstall",
    ])
    .arg(&wheel);
    let status =
        run(pip, Duration::from_secs(300), "pip install").unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "pip install {} failed", wheel.display());
    wheel
}

/// pytest from `py` over `tests/<dir>` of this package, from `work` (outside the source
/// tree, so `import zarrstream` is the installed wheel), with its JUnit report at
/// `target/<junit>`; the caller adds its own options and environment.
pub fn pytest(target: &Path, py: &Path, dir: &str, junit: &str, work: &Path) -> Command {
    let mut cmd = Command::new(py);
    // Every test gets a deadline (pytest-timeout), so a wait that never ends fails the
    // test instead of hanging `cargo test`; a caller may pass a tighter `--timeout`.
    cmd.args([
        "-m",
        "pytest",
        "-q",
        "-rfEs",
        "-p",
        "no:cacheprovider",
        "--timeout=600",
    ])
    .arg("--junitxml")
    .arg(target.join(junit))
    .arg(package().join("tests").join(dir))
    .current_dir(work)
    .env("ZARRSTREAM_TARGET_DIR", target);
    cmd
}
