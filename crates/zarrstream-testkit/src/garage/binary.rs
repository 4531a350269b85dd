//! The `garage` binary: `$ZARRSTREAM_GARAGE` as it is, else the cache's build (made with
//! `cargo install` when missing, once per machine), checked with `garage --version`.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

use super::{VERSION, in_ci, shout, tail};

/// Where the Garage binary is expected: `$ZARRSTREAM_GARAGE`, else the cache's build.
pub fn garage_path() -> PathBuf {
    if let Some(p) = std::env::var_os("ZARRSTREAM_GARAGE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    cache_root().join("bin/garage")
}

/// `${ZARRSTREAM_CACHE:-$HOME/.cache/zarrstream}/garage-2.5.0`: the `cargo install` root.
fn cache_root() -> PathBuf {
    let cache = std::env::var_os("ZARRSTREAM_CACHE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
            PathBuf::from(home).join(".cache/zarrstream")
        });
    cache.join(format!("garage-{VERSION}"))
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
    let bin = garage_path();
    if std::env::var_os("ZARRSTREAM_GARAGE").is_some_and(|p| !p.is_empty()) {
        // A binary the user named is used as it is, never built over.
        return check_version(&bin).map(|()| bin);
    }
    if !bin.exists() {
        let root = cache_root();
        let parent = root.parent().ok_or("no cache directory")?;
        fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
        // Concurrent test binaries wait here for the one that builds; the lock goes with the
        // file descriptor when this function returns (or the process dies).
        let lock_path = parent.join(format!("garage-{VERSION}.lock"));
        let lock =
            File::create(&lock_path).map_err(|e| format!("create {}: {e}", lock_path.display()))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
        if !bin.exists() {
            build(&root)?;
        }
    }
    check_version(&bin).map(|()| bin)
}

/// `cargo install garage --locked --version 2.5.0 --root ROOT`, its output in a log beside.
fn build(root: &Path) -> Result<(), String> {
    // Beside the root, not inside it: `cargo install` owns the root's contents.
    let beside = |what: &str| root.with_file_name(format!("garage-{VERSION}.{what}"));
    let (log_path, scratch) = (beside("build.log"), beside("build-target"));
    shout(&format!(
        "\n{bar}\nBUILDING Garage {VERSION} (the S3 server of the object-store tests) into {}\n\
         with `cargo install`: about 9 minutes on 2 cores, once per machine. Log: {}\n\
         (Set ZARRSTREAM_GARAGE=/path/to/garage to use a binary you have.)\n{bar}\n",
        root.display(),
        log_path.display(),
        bar = "=".repeat(78)
    ));
    let log = File::create(&log_path).map_err(|e| format!("create {}: {e}", log_path.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let status = Command::new(&cargo)
        .args([
            "install",
            "garage",
            "--locked",
            "--version",
            VERSION,
            "--root",
        ])
        .arg(root)
        .arg("--target-dir")
        .arg(&scratch)
        // The running `cargo test` holds its own target directory's lock: a nested cargo
        // pointed there would wait for it forever.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .status()
        .map_err(|e| format!("cannot run {} ({e}); install Rust's cargo", cargo.display()));
    let _ = fs::remove_dir_all(&scratch);
    let status = status?;
    if !status.success() {
        return Err(format!(
            "`cargo install garage --version {VERSION}` failed ({status}); the end of {}:\n{}",
            log_path.display(),
            tail(&log_path, 30)
        ));
    }
    shout(&format!(
        "Garage {VERSION} built in {:.0} s.",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
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
