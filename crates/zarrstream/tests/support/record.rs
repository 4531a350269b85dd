//! The `record` example binary for tests that drive it. Integration tests do not build
//! examples, so it is built here, once per call, with the test binary's own profile and
//! target directory (a no-op when it is current). Included with
//! `#[path = "support/record.rs"] mod record_example;`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Builds the `record` example and returns its path, or why it could not be built.
pub(crate) fn binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/<profile>/deps/<test>-<hash> -> target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("no profile directory")?
        .to_path_buf();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "zarrstream",
            "--example",
            "record",
        ])
        .stdin(Stdio::null());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    if let Some(target) = profile_dir.parent() {
        cmd.arg("--target-dir").arg(target);
    }
    let out = cmd.output().map_err(|e| format!("cargo build: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build --example record failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let bin = profile_dir.join("examples/record");
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!("{} missing after the build", bin.display()))
    }
}
