//! The Python package's tests, run by `cargo test`: builds the wheel with maturin,
//! installs it into a pinned environment (`target/python-venv`, from
//! `tests/requirements.txt`: zarr-python, tensorstore, ome-writers, acquire-zarr,
//! pymmcore-plus, mypy) and runs pytest over `tests/python/`.
//!
//! The object-store tests (`test_s3.py`) start Garage from the binary of the Rust
//! harness (`crates/zarrstream/tests/support/garage.rs`): it is found, or built once per
//! machine, here and handed to pytest in `ZARRSTREAM_GARAGE`.
//!
//! Without Python ≥ 3.11 the test is skipped loudly; with `CI=true` that is a failure
//! (so is a missing Garage; outside CI only the object-store tests skip, loudly).

#[path = "../../zarrstream/tests/support/garage.rs"]
mod garage;
#[path = "../../zarrstream/tests/support/python.rs"]
mod python;

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .to_path_buf()
}

/// Builds the wheel with the venv's maturin and installs it; returns the wheel.
fn install_wheel(py: &Path) -> PathBuf {
    let out = target_dir().join("wheels");
    let _ = std::fs::remove_dir_all(&out);
    // The dev profile reuses what `cargo test` compiled; speed is measured elsewhere
    // (tools/peers), not here.
    let status = Command::new(py)
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
        .env("CARGO_TARGET_DIR", target_dir())
        .status()
        .expect("run maturin");
    assert!(status.success(), "maturin build failed: {status}");
    let wheel = std::fs::read_dir(&out)
        .expect("wheel directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("maturin wrote a wheel");
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(
        name.contains("-abi3-"),
        "the wheel is not an abi3 wheel: {name}"
    );
    let status = Command::new(py)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--force-reinstall",
        ])
        .arg(&wheel)
        .status()
        .expect("run pip");
    assert!(status.success(), "pip install {} failed", wheel.display());
    wheel
}

#[test]
fn python_package() {
    let requirements = crate_dir().join("tests/requirements.txt");
    let env = python::venv_from("interop/venv.py", "python-venv", Some(&requirements));
    let Some(py) = python::require(env, "the Python package's tests") else {
        return;
    };
    let wheel = install_wheel(&py);
    python::shout(&format!("python package: installed {}", wheel.display()));
    let garage = garage::require("the Python package's object-store tests (test_s3.py)");
    // From a directory outside the source tree, so `import zarrstream` is the
    // installed wheel, never crates/zarrstream-python/python.
    let work = tempfile::tempdir().expect("tempdir");
    let junit = target_dir().join("python-tests.xml");
    let status = Command::new(&py)
        .args([
            "-m",
            "pytest",
            "-q",
            "-rfEs",
            "-p",
            "no:cacheprovider",
            "--junitxml",
        ])
        .arg(&junit)
        .arg(crate_dir().join("tests/python"))
        .current_dir(work.path())
        .env("ZARRSTREAM_TARGET_DIR", target_dir())
        .envs(garage.map(|bin| ("ZARRSTREAM_GARAGE", bin)))
        .status()
        .expect("run pytest");
    assert!(
        status.success(),
        "pytest failed ({status}); see its output above"
    );
}
