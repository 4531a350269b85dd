//! `zarrstream record` for the library's tests and benches that drive it (the CLI crate's
//! own tests use `CARGO_BIN_EXE_zarrstream` instead). A package's tests cannot depend on
//! another package's binary, so the CLI is built here, once per call, with the test
//! binary's own profile and target directory (a no-op when it is current). The CLI
//! package's own tests use [`crate::cli_record!`] instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Builds the `zarrstream` binary and returns its path (`record` is its subcommand), or
/// why it could not be built.
pub fn binary() -> Result<PathBuf, String> {
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
            "zarrstream-cli",
            "--bin",
            "zarrstream",
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
            "cargo build -p zarrstream-cli --bin zarrstream failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let bin = profile_dir.join(format!("zarrstream{}", std::env::consts::EXE_SUFFIX));
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!("{} missing after the build", bin.display()))
    }
}

/// `zarrstream record` (built by [`binary`]), to which the caller adds its options.
pub fn command() -> Result<Command, String> {
    let mut cmd = Command::new(binary()?);
    cmd.arg("record");
    Ok(cmd)
}
