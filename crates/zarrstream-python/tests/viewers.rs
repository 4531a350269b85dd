//! The viewer tests, run by `cargo test`: what zarrstream writes opens in the viewers
//! people use, in real windows, at a readable contrast (issue 29).
//!
//! Installs the Debian packages they need (`tools/viewers/install-deps`: Xvfb, the X11
//! libraries of Qt's wheels, Chromium), builds the pinned environment
//! `target/viewer-venv` from `tests/viewers/requirements.txt` (napari with PyQt6,
//! napari-ome-zarr, pytest, and the neuroglancer test's pins), builds the wheel with its maturin and installs
//! it, builds the `record` example, starts Xvfb on a free display and runs pytest over
//! `tests/viewers/` there. Screenshots land in `target/viewer-screenshots/`
//! (`ZARRSTREAM_UPDATE_SCREENSHOTS=1` also copies them to `docs/images/`).
//!
//! Every wait has a deadline. When something cannot be had (no Python >= 3.11, no apt,
//! no Xvfb) the test is skipped loudly; with `CI=true` that is a failure.

#[path = "../../zarrstream/tests/support/python.rs"]
mod python;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn repo() -> PathBuf {
    crate_dir().join("../..")
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .to_path_buf()
}

/// Runs `cmd` in its own process group and waits at most `limit`; past it the whole
/// group is killed and the result is an error naming `what`.
fn run(mut cmd: Command, limit: Duration, what: &str) -> Result<ExitStatus, String> {
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

fn kill_group(child: &Child) {
    let pid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

/// A loud skip outside CI, a failure (panic) in CI.
fn unavailable(why: &str) {
    let _ = python::require::<()>(Err(why.to_string()), "the viewer tests");
}

/// An Xvfb server on a display no one uses, killed when dropped.
struct Xvfb {
    child: Child,
    display: String,
}

impl Xvfb {
    /// Starts Xvfb on the first free display from :90 on, waiting at most 10 s for its
    /// socket; a display another server takes meanwhile makes it try the next.
    fn start() -> Result<Xvfb, String> {
        let log = tempfile::NamedTempFile::new().map_err(|e| format!("Xvfb log: {e}"))?;
        let mut said = String::new();
        for n in 90..140 {
            let socket = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
            if socket.exists() || Path::new(&format!("/tmp/.X{n}-lock")).exists() {
                continue;
            }
            let stderr = log.reopen().map_err(|e| format!("Xvfb log: {e}"))?;
            let mut child = Command::new("Xvfb")
                .arg(format!(":{n}"))
                .args(["-screen", "0", "1280x1024x24", "-nolisten", "tcp"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .process_group(0)
                .spawn()
                .map_err(|e| format!("cannot start Xvfb: {e}"))?;
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    // Most likely another server took the display: try the next one.
                    said = format!(
                        "Xvfb :{n} exited ({status}): {}",
                        std::fs::read_to_string(log.path()).unwrap_or_default()
                    );
                    break;
                }
                if socket.exists() {
                    return Ok(Xvfb {
                        child,
                        display: format!(":{n}"),
                    });
                }
                if Instant::now() > deadline {
                    kill_group(&child);
                    let _ = child.wait();
                    return Err(format!("Xvfb :{n} did not start within 10 s"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Err(format!(
            "no X display from :90 to :139 could be had; last: {said}"
        ))
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        kill_group(&self.child);
        let _ = self.child.wait();
    }
}

/// Builds the wheel with the environment's maturin into `target/viewer-wheels` and
/// installs it there; returns the wheel.
fn install_wheel(py: &Path) -> PathBuf {
    let out = target_dir().join("viewer-wheels");
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
        .arg(crate_dir().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir());
    let status = run(maturin, Duration::from_secs(1800), "maturin build").unwrap();
    assert!(status.success(), "maturin build failed: {status}");
    let wheel = std::fs::read_dir(&out)
        .expect("wheel directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("maturin wrote a wheel");
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
    let status = run(pip, Duration::from_secs(300), "pip install").unwrap();
    assert!(status.success(), "pip install {} failed", wheel.display());
    wheel
}

/// Builds the `record` example (once; a no-op when current) with this test's profile
/// and target directory and returns its path.
fn record_example() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("profile directory")
        .to_path_buf();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(repo())
        .args([
            "build",
            "--quiet",
            "-p",
            "zarrstream",
            "--example",
            "record",
        ])
        .arg("--target-dir")
        .arg(target_dir());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    let status = run(
        cargo,
        Duration::from_secs(1800),
        "cargo build --example record",
    )
    .unwrap();
    assert!(
        status.success(),
        "cargo build --example record failed: {status}"
    );
    let bin = profile_dir.join("examples/record");
    assert!(bin.exists(), "{} missing after the build", bin.display());
    bin
}

#[test]
fn viewers() {
    let started = Instant::now();
    // Debian packages: Xvfb, Qt's X11 libraries, Chromium (a no-op when installed).
    let mut deps = Command::new("bash");
    deps.arg(repo().join("tools/viewers/install-deps"));
    match run(
        deps,
        Duration::from_secs(1200),
        "tools/viewers/install-deps",
    ) {
        Ok(s) if s.success() => {}
        Ok(s) => {
            unavailable(&format!("tools/viewers/install-deps failed ({s})"));
            return;
        }
        Err(e) => {
            unavailable(&e);
            return;
        }
    }
    let requirements = crate_dir().join("tests/viewers/requirements.txt");
    let env = python::venv_from("interop/venv.py", "viewer-venv", Some(&requirements));
    let Some(py) = python::require(env, "the viewer tests") else {
        return;
    };
    let setup = started.elapsed();
    let wheel = install_wheel(&py);
    let record = record_example();
    python::shout(&format!(
        "viewers: installed {} ({:.0?} for packages and environment, {:.0?} with wheel and \
         record example)",
        wheel.display(),
        setup,
        started.elapsed()
    ));
    let xvfb = match Xvfb::start() {
        Ok(x) => x,
        Err(e) => {
            unavailable(&e);
            return;
        }
    };
    // A private runtime directory and napari settings file, so that no user's are read
    // or written; from a directory outside the source tree, so `import zarrstream` is
    // the installed wheel.
    let work = tempfile::tempdir().expect("tempdir");
    let runtime = work.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime dir");
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod runtime dir");
    let junit = target_dir().join("viewer-tests.xml");
    let mut pytest = Command::new(&py);
    pytest
        .args([
            "-m",
            "pytest",
            "-q",
            "-rfEs",
            "-p",
            "no:cacheprovider",
            // napari's dependencies' deprecation notices would bury the results.
            "-W",
            "ignore::DeprecationWarning",
            "--timeout=240",
            "--junitxml",
        ])
        .arg(&junit)
        .arg(crate_dir().join("tests/viewers"))
        .current_dir(work.path())
        .env("DISPLAY", &xvfb.display)
        .env("QT_QPA_PLATFORM", "xcb")
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("NAPARI_CONFIG", work.path().join("napari-settings.yaml"))
        .env("ZARRSTREAM_RECORD", &record)
        .env("ZARRSTREAM_TARGET_DIR", target_dir())
        .env(
            "ZARRSTREAM_SCREENSHOTS",
            target_dir().join("viewer-screenshots"),
        );
    let status = run(
        pytest,
        Duration::from_secs(900),
        "pytest over tests/viewers",
    );
    drop(xvfb);
    python::shout(&format!("viewers: done in {:.0?}", started.elapsed()));
    let status = status.unwrap();
    assert!(
        status.success(),
        "pytest failed ({status}); see its output above"
    );
}
