//! The viewer tests, run by `cargo test`: what zarrstream writes opens in the viewers
//! people use, in real windows, at a readable contrast (issue 29).
//!
//! Installs the Debian packages they need (`tools/viewers/install-deps`: Xvfb, the X11
//! libraries of Qt's wheels, Chromium), builds the pinned environment
//! `target/viewer-venv` from `tests/viewers/requirements.txt` (napari with PyQt6,
//! napari-ome-zarr, pytest, and the neuroglancer test's pins), builds the wheel with its maturin and installs
//! it, builds `zarrstream record`, starts Xvfb on a free display and runs pytest over
//! `tests/viewers/` there. Screenshots land in `target/viewer-screenshots/`
//! (`ZARRSTREAM_UPDATE_SCREENSHOTS=1` also copies them to `docs/book/src/images/`).
//!
//! Every wait has a deadline. When something cannot be had (no Python >= 3.11, no apt,
//! no Xvfb) the test is skipped loudly; with `CI=true` that is a failure.

use zarrstream_testkit::cli as record_cli;
use zarrstream_testkit::python;
use zarrstream_testkit::wheel;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wheel::{kill_group, run, target_dir};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn repo() -> PathBuf {
    crate_dir().join("../..")
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
    let env = python::venv_from(
        zarrstream_testkit::target_tmp!(),
        "interop/venv.py",
        "viewer-venv",
        Some(&requirements),
    );
    let Some(py) = python::require(env, "the viewer tests") else {
        return;
    };
    let setup = started.elapsed();
    let wheel = wheel::install_wheel(
        &target_dir(zarrstream_testkit::target_tmp!()),
        &py,
        "viewer-wheels",
    );
    let record = match record_cli::binary() {
        Ok(bin) => bin,
        Err(e) => panic!("{e}"),
    };
    python::shout(&format!(
        "viewers: installed {} ({:.0?} for packages and environment, {:.0?} with wheel and \
         zarrstream record)",
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
    let mut pytest = wheel::pytest(
        &target_dir(zarrstream_testkit::target_tmp!()),
        &py,
        "viewers",
        "viewer-tests.xml",
        work.path(),
    );
    pytest
        // napari's dependencies' deprecation notices would bury the results.
        .args(["-W", "ignore::DeprecationWarning", "--timeout=240"])
        .env("DISPLAY", &xvfb.display)
        .env("QT_QPA_PLATFORM", "xcb")
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("NAPARI_CONFIG", work.path().join("napari-settings.yaml"))
        .env("ZARRSTREAM_RECORD", &record)
        .env(
            "ZARRSTREAM_SCREENSHOTS",
            target_dir(zarrstream_testkit::target_tmp!()).join("viewer-screenshots"),
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
