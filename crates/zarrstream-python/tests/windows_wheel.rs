//! The Python package as an abi3 wheel for 64-bit Windows, cross-built here.
//!
//! maturin (the pinned one of `target/python-venv`, as in `pytest.rs`) builds the wheel
//! with `--target x86_64-pc-windows-gnu` through Debian's cargo with the environment of
//! `tools/windows/cargo` (`--wheel`: Debian's rustc-web with `-Z build-std`, mingw-w64's
//! linker, the `wine` profile and target directory of the Windows tests). PyO3 links the
//! stable-ABI `python3.dll` through `raw-dylib`, so no Windows Python and no import
//! library is needed to build.
//!
//! What is checked, on the files alone: the wheel is a valid zip whose `RECORD` hashes and
//! sizes match every member (`check_wheel.py`, with Python's standard library); its
//! `WHEEL` file says it is not pure and is tagged only for the stable ABI (`abi3`) on
//! `win_amd64`, as its file name says too; it holds the package's Python sources, its
//! typing stubs (`*.pyi`, `py.typed`) and `zarrstream/_native.pyd`, a PE32+ x86-64 DLL
//! that exports `PyInit__native` and imports `python3.dll` and DLLs that come with Windows
//! only (no versioned `python3XY.dll`, no mingw runtime DLL).
//!
//! What is not checked: that the wheel imports and works. No Windows CPython can be had
//! on this machine (PyPI does not distribute one), so the `.pyd` is never loaded here,
//! not even under Wine; the package's behaviour is tested on Linux by `pytest.rs`, and
//! the library's on Windows by the library's own tests under Wine.
//!
//! Without the Windows toolchain or Python ≥ 3.11 the test skips loudly; with `CI=true`
//! it fails. Every child process runs under a deadline.

#![cfg(target_os = "linux")]

use zarrstream_testkit::python;
use zarrstream_testkit::windows;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Builds the Windows wheel into `out` with the venv's maturin (`tools/windows/cargo
/// --wheel`); the wheel.
fn build_wheel(win: &windows::Win, py: &Path, out: &Path) -> PathBuf {
    let utf8 = |p: &Path| p.to_str().expect("a UTF-8 path").to_owned();
    let started = Instant::now();
    let o = win.cargo(&["--wheel", &utf8(py), &utf8(out)], windows::BUILD_DEADLINE);
    assert!(
        o.status.success(),
        "maturin build --target {} failed ({}):\n{}\n{}",
        windows::TARGET,
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
    windows::shout(&format!(
        "windows_wheel: maturin build --target {} took {:.1?}",
        windows::TARGET,
        started.elapsed()
    ));
    let wheels: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("maturin's output directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "one wheel: {wheels:?}");
    wheels.into_iter().next().unwrap_or_default()
}

/// The package's files under `python/` (relative, `/`-separated): what the wheel must
/// carry beside the native module.
fn package_sources() -> BTreeSet<String> {
    let dir = crate_dir().join("python/zarrstream");
    std::fs::read_dir(&dir)
        .expect("python/zarrstream")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .filter_map(|e| e.file_name().to_str().map(|n| format!("zarrstream/{n}")))
        .filter(|n| n.ends_with(".py") || n.ends_with(".pyi") || n.ends_with("py.typed"))
        .collect()
}

#[test]
fn windows_wheel_is_abi3_win_amd64_with_a_pyd_that_needs_only_python3_dll() {
    let Some(win) = windows::require("the Windows wheel") else {
        return;
    };
    let requirements = crate_dir().join("tests/requirements.txt");
    let env = python::venv_from(
        zarrstream_testkit::target_tmp!(),
        "interop/venv.py",
        "python-venv",
        Some(&requirements),
    );
    let Some(py) = python::require(env, "the Windows wheel (maturin)") else {
        return;
    };
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let wheel = build_wheel(&win, &py, &tmp.join("windows-wheel"));
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    python::shout(&format!("windows_wheel: built {}", wheel.display()));

    // The archive and its RECORD.
    let pyd_dir = tmp.join("windows-wheel-pyd");
    let _ = std::fs::remove_dir_all(&pyd_dir);
    let mut check = Command::new(&py);
    check
        .arg(crate_dir().join("tests/check_wheel.py"))
        .arg(&wheel)
        .arg(&pyd_dir);
    let o = windows::run(&mut check, Duration::from_secs(300), "check_wheel.py");
    assert!(
        o.status.success(),
        "{name} is not a valid wheel ({}):\n{}",
        o.status,
        text(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("check_wheel.py prints JSON");
    println!("{report}");

    // The tags: the stable ABI from CPython 3.11 on, 64-bit Windows only.
    let tags: Vec<&str> = report["wheel"]["Tag"]
        .as_array()
        .expect("WHEEL has Tag lines")
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(!tags.is_empty(), "{report}");
    for tag in &tags {
        let parts: Vec<&str> = tag.split('-').collect();
        assert_eq!(parts.len(), 3, "tag {tag}");
        assert!(parts[0].starts_with("cp3"), "python tag of {tag}");
        assert_eq!(parts[1], "abi3", "abi tag of {tag}");
        assert_eq!(parts[2], "win_amd64", "platform tag of {tag}");
    }
    assert!(tags.contains(&"cp311-abi3-win_amd64"), "{tags:?}");
    assert!(
        name.starts_with("zarrstream-") && name.ends_with(&format!("-{}.whl", tags.join("."))),
        "the file name {name} does not carry the tags {tags:?}"
    );
    assert_eq!(report["wheel"]["Root-Is-Purelib"][0], "false", "{report}");
    assert_eq!(report["wheel"]["Wheel-Version"][0], "1.0", "{report}");
    let version = format!("zarrstream-{}.dist-info", env!("CARGO_PKG_VERSION"));
    assert_eq!(report["dist_info"], version.as_str(), "{report}");

    // The package: its sources and stubs, and the native module.
    let members: BTreeSet<String> = report["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect();
    let sources = package_sources();
    for f in [
        "zarrstream/__init__.py",
        "zarrstream/_native.pyi",
        "zarrstream/py.typed",
    ] {
        assert!(sources.contains(f), "{f} is not in python/: {sources:?}");
    }
    let missing: Vec<&String> = sources.difference(&members).collect();
    assert!(
        missing.is_empty(),
        "the wheel lacks {missing:?}: {members:?}"
    );
    assert!(
        members.contains("zarrstream/_native.pyd"),
        "no zarrstream/_native.pyd: {members:?}"
    );
    let natives: Vec<&String> = members
        .iter()
        .filter(|m| m.ends_with(".pyd") || m.ends_with(".so") || m.ends_with(".dll"))
        .collect();
    assert_eq!(natives, ["zarrstream/_native.pyd"], "native files");

    // The native module: a 64-bit DLL with the module's entry point, needing the stable
    // ABI's python3.dll and Windows.
    let pyd = pyd_dir.join("_native.pyd");
    let objdump = windows::objdump_p(&pyd);
    let head = &objdump[..objdump.len().min(2000)];
    assert!(objdump.contains("file format pei-x86-64"), "{head}");
    assert!(
        objdump.lines().any(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some("Magic") && w.next() == Some("020b")
        }),
        "not PE32+ (optional header magic 020b):\n{head}"
    );
    assert!(
        objdump.lines().any(|l| l.trim() == "DLL"),
        "the DLL characteristic is not set:\n{head}"
    );
    let exports = windows::pe_exports(&objdump);
    assert!(
        exports.iter().any(|e| e == "PyInit__native"),
        "_native.pyd does not export PyInit__native: {exports:?}"
    );
    let imports: BTreeSet<String> = windows::pe_imports(&objdump).into_iter().collect();
    python::shout(&format!("windows_wheel: _native.pyd imports {imports:?}"));
    assert!(
        imports.iter().any(|d| d == "python3.dll"),
        "_native.pyd does not import python3.dll: {imports:?}"
    );
    let foreign: Vec<&String> = imports
        .iter()
        .filter(|d| *d != "python3.dll" && !windows::is_system_dll(d))
        .collect();
    assert!(
        foreign.is_empty(),
        "_native.pyd imports DLLs that neither Windows nor CPython's stable ABI provide: \
         {foreign:?} (all: {imports:?})"
    );
}
