//! The Python package's tests, run by `cargo test`: builds the wheel with maturin,
//! installs it into a pinned environment (`target/python-venv`, from
//! `tests/requirements.txt`: zarr-python, tensorstore, ome-writers, acquire-zarr,
//! pymmcore-plus, mypy) and runs pytest over `tests/python/`.
//!
//! The object-store tests (`test_s3.py`) start Garage from the binary of the Rust
//! harness (`crates/zarrstream-testkit/src/garage/`): it is found, or built once per
//! machine, here and handed to pytest in `ZARRSTREAM_GARAGE`.
//!
//! Without Python ≥ 3.11 the test is skipped loudly; with `CI=true` that is a failure
//! (so is a missing Garage; outside CI only the object-store tests skip, loudly).

use zarrstream_testkit::garage;
use zarrstream_testkit::python;
use zarrstream_testkit::wheel;
use zarrstream_testkit::wheel::target_dir;

use std::path::PathBuf;
use std::time::Duration;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn python_package() {
    let requirements = crate_dir().join("tests/requirements.txt");
    let env = python::venv_from(
        zarrstream_testkit::target_tmp!(),
        "interop/venv.py",
        "python-venv",
        Some(&requirements),
    );
    let Some(py) = python::require(env, "the Python package's tests") else {
        return;
    };
    let wheel = wheel::install_wheel(
        &target_dir(zarrstream_testkit::target_tmp!()),
        &py,
        "wheels",
    );
    python::shout(&format!("python package: installed {}", wheel.display()));
    let garage = garage::require("the Python package's object-store tests (test_s3.py)");
    // From a directory outside the source tree, so `import zarrstream` is the
    // installed wheel, never crates/zarrstream-python/python.
    let work = tempfile::tempdir().expect("tempdir");
    let mut pytest = wheel::pytest(
        &target_dir(zarrstream_testkit::target_tmp!()),
        &py,
        "python",
        "python-tests.xml",
        work.path(),
    );
    pytest.envs(garage.map(|bin| ("ZARRSTREAM_GARAGE", bin)));
    // About 4 minutes here; the deadline only stops a hung run.
    let status = wheel::run(
        pytest,
        Duration::from_secs(2400),
        "pytest over tests/python",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        status.success(),
        "pytest failed ({status}); see its output above"
    );
}
