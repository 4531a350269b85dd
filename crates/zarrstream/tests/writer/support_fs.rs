//! Filesystems of their own for the tests that need them (full, read-only, failing).
//!
//! Each scenario runs in a child process: this test binary re-executed with only its
//! scenario entry test, inside a private mount namespace (`unshare --mount`, or
//! `unshare --user --map-root-user --mount` when not root). So:
//!
//! - a signal (SIGBUS from a mapping, SIGXFSZ) kills only the child, and the parent sees
//!   how the child ended;
//! - every mount the child makes (tmpfs, loop-mounted ext4) disappears with the child's
//!   namespace, even when the child dies; loop devices are mounted with autoclear, so
//!   they detach when their filesystem goes.
//!
//! A child whose environment cannot provide the filesystem (no `unshare`, no mount
//! privilege, no loop device, no `mkfs.ext4`) exits with [`UNSUPPORTED`]; the parent then
//! fails under `CI=true` and skips with a loud message otherwise.
//!
//! A module of the `writer` test binary, used by `full_disk`, `bad_input`, `hostile` and
//! `power_loss`; the entry a child runs is named with its module (`full_disk::scenario_entry`).

// Linux only: helpers for tmpfs, loop devices and mount namespaces.
#![cfg(target_os = "linux")]
#![allow(dead_code)]

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the scenario a child runs.
pub(crate) const SCENARIO: &str = "ZARRSTREAM_FS_SCENARIO";
/// Environment variable naming the empty directory a child may mount on.
pub(crate) const DIR: &str = "ZARRSTREAM_FS_DIR";
/// Exit code of a child whose environment cannot provide what the scenario needs.
pub(crate) const UNSUPPORTED: i32 = 77;
/// Printed by a child when its scenario starts (after the namespace was entered).
const STARTED: &str = "zarrstream-fs-child: scenario started";

/// Whether this runs under CI (`CI=true`), where an unsupported environment is a failure.
pub(crate) fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// In a child: the scenario to run; `None` in the parent (the entry test then does nothing).
pub(crate) fn scenario() -> Option<String> {
    let s = std::env::var(SCENARIO).ok()?;
    println!("{STARTED}: {s}");
    Some(s)
}

/// In a child: the empty directory reserved for its mounts.
pub(crate) fn dir() -> PathBuf {
    PathBuf::from(std::env::var_os(DIR).expect("the scenario directory is set"))
}

/// In a child: gives up because the environment lacks something (see [`UNSUPPORTED`]).
pub(crate) fn unsupported(why: &str) -> ! {
    println!("UNSUPPORTED: {why}");
    eprintln!("UNSUPPORTED: {why}");
    std::process::exit(UNSUPPORTED)
}

/// How a child ended, with its output.
#[derive(Debug)]
pub(crate) struct ChildRun {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

pub(crate) fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGBUS => "SIGBUS",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        _ => "another signal",
    }
}

/// Runs `scenario` in a child process (the test `entry` of this binary, in a new mount
/// namespace) and returns how it ended, without judging it, with the scenario directory
/// (a directory of the parent's filesystem, outside the child's mounts; removed when the
/// returned `TempDir` is dropped), so that the parent can look at what a child that was
/// killed left there. `Err` when `unshare` cannot be run.
///
/// Panics if the child does not end within `timeout` (it is killed first).
pub(crate) fn spawn_child(
    entry: &str,
    scenario: &str,
    timeout: Duration,
) -> Result<(ChildRun, tempfile::TempDir), String> {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = tempfile::Builder::new()
        .prefix("zarrstream-fs-")
        .tempdir()
        .expect("a directory to mount on");
    let root = euid() == 0;
    let mut cmd = Command::new("unshare");
    if !root {
        cmd.args(["--user", "--map-root-user"]);
    }
    cmd.args(["--mount", "--propagation", "private"])
        .arg(&exe)
        .args([entry, "--exact", "--nocapture", "--test-threads=1"])
        .env(SCENARIO, scenario)
        .env(DIR, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Err(format!("cannot run `unshare`: {e}")),
    };
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait().expect("waiting for the child") {
            Some(s) => break s,
            None if Instant::now() >= deadline => {
                // Our own child, by its id.
                let _ = child.kill();
                let _ = child.wait();
                let (o, e) = (t_out.join().unwrap(), t_err.join().unwrap());
                panic!(
                    "[{scenario}] the child did not finish within {timeout:?} (killed)\n\
                     --- stdout ---\n{o}\n--- stderr ---\n{e}"
                );
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let run = ChildRun {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    };
    Ok((run, dir))
}

/// Whether the child's scenario started (it printed the start line).
pub(crate) fn started(run: &ChildRun) -> bool {
    run.stdout.contains(STARTED)
}

/// Says loudly that the environment cannot run `scenario` (see [`UNSUPPORTED`]); panics
/// under `CI=true`.
pub(crate) fn skip(scenario: &str, why: &str) {
    let _ = not_supported(scenario, why);
}

/// Runs `scenario` in a child process (the test `entry` of this binary, in a new mount
/// namespace) and checks that it exited normally with status 0.
///
/// Panics if the child was killed by a signal, timed out or failed. Returns `None` when
/// the environment cannot run the scenario, after saying so loudly, unless `CI=true`,
/// where that panics too.
pub(crate) fn run_child(entry: &str, scenario: &str, timeout: Duration) -> Option<ChildRun> {
    let (run, dir) = match spawn_child(entry, scenario, timeout) {
        Ok(r) => r,
        Err(why) => return not_supported(scenario, &why),
    };
    drop(dir);
    if let Some(sig) = run.status.signal() {
        panic!(
            "[{scenario}] the child was killed by signal {sig} ({}){}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            signal_name(sig),
            if run.status.core_dumped() {
                ", core dumped"
            } else {
                ""
            },
            run.stdout,
            run.stderr
        );
    }
    let started = run.stdout.contains(STARTED);
    match run.status.code() {
        Some(0) if started => {
            // Show the child's report lines with the parent's output.
            for line in run.stdout.lines().filter(|l| l.starts_with("REPORT")) {
                println!("[{scenario}] {line}");
            }
            Some(run)
        }
        Some(0) => panic!(
            "[{scenario}] the child exited 0 without running the scenario (was the entry test `{entry}` renamed?)\n--- stdout ---\n{}\n--- stderr ---\n{}",
            run.stdout, run.stderr
        ),
        Some(UNSUPPORTED) => {
            let why = run
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("UNSUPPORTED: "))
                .unwrap_or("(no reason given)");
            not_supported(scenario, why)
        }
        Some(code) if !started => not_supported(
            scenario,
            &format!(
                "`unshare` failed (exit {code}) before the scenario started: {}",
                run.stderr.trim()
            ),
        ),
        Some(code) => panic!(
            "[{scenario}] the child failed (exit {code})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            run.stdout, run.stderr
        ),
        None => unreachable!("an exit status has a code or a signal"),
    }
}

fn not_supported(scenario: &str, why: &str) -> Option<ChildRun> {
    let msg = format!(
        "[{scenario}] this environment cannot run the scenario: {why}\n\
         (it needs root or unprivileged user namespaces, tmpfs, loop devices and mkfs.ext4)"
    );
    if ci() {
        panic!("{msg}\nCI=true: not skipping");
    }
    // Straight to the process's stderr, past the test harness's output capture, so the
    // skip shows in a plain `cargo test` run.
    let bar = "!".repeat(78);
    let _ = writeln!(
        std::io::stderr(),
        "\n{bar}\nTEST SKIPPED: {msg}\n(With CI=true this is a failure.)\n{bar}\n"
    );
    None
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("a path without NUL")
}

/// In a child: mounts a tmpfs at `at` with `options` (e.g. `size=24m`).
pub(crate) fn mount_tmpfs(at: &Path, options: &str) {
    std::fs::create_dir_all(at).unwrap();
    let (src, target, fstype, data) = (
        CString::new("tmpfs").unwrap(),
        cstr(at),
        CString::new("tmpfs").unwrap(),
        CString::new(options).unwrap(),
    );
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            data.as_ptr().cast(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        unsupported(&format!(
            "mount -t tmpfs -o {options} {}: {e}",
            at.display()
        ));
    }
}

/// In a child: remounts the filesystem at `at` read-only.
pub(crate) fn remount_read_only(at: &Path) {
    let target = cstr(at);
    // SAFETY: a valid path string; the other pointers may be null for a remount.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_RDONLY,
            std::ptr::null(),
        )
    };
    assert_eq!(
        r,
        0,
        "remount {} read-only: {}",
        at.display(),
        std::io::Error::last_os_error()
    );
}

/// In a child: bind-mounts `from` at `to`, read-only.
pub(crate) fn bind_read_only(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let (src, target) = (cstr(from), cstr(to));
    // SAFETY: valid path strings; fstype and data may be null for bind mounts.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        unsupported(&format!("bind mount {}: {e}", to.display()));
    }
    // SAFETY: as above.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
            std::ptr::null(),
        )
    };
    assert_eq!(
        r,
        0,
        "remount the bind mount {} read-only: {}",
        to.display(),
        std::io::Error::last_os_error()
    );
}

/// In a child: unmounts `at` (lazily if it is busy).
pub(crate) fn unmount(at: &Path) {
    let target = cstr(at);
    // SAFETY: a valid path string.
    let r = unsafe { libc::umount2(target.as_ptr(), 0) };
    if r != 0 {
        // SAFETY: as above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// In a child: creates an ext4 image of `size` bytes at `image` with `mkfs_args`, and
/// loop-mounts it at `at` with `options` (autoclear: the loop device detaches when the
/// filesystem is unmounted or the namespace goes).
pub(crate) fn mount_ext4(image: &Path, size: u64, mkfs_args: &[&str], at: &Path, options: &str) {
    let f = std::fs::File::create(image).unwrap();
    f.set_len(size).unwrap();
    drop(f);
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .args(mkfs_args)
        .arg(image)
        .output();
    match mkfs {
        Ok(o) if o.status.success() => {}
        Ok(o) => unsupported(&format!(
            "mkfs.ext4 failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => unsupported(&format!("cannot run mkfs.ext4: {e}")),
    }
    std::fs::create_dir_all(at).unwrap();
    let opts = if options.is_empty() {
        "loop".to_string()
    } else {
        format!("loop,{options}")
    };
    let mount = Command::new("mount")
        .args(["-t", "ext4", "-o", &opts])
        .arg(image)
        .arg(at)
        .output();
    match mount {
        Ok(o) if o.status.success() => {}
        Ok(o) => unsupported(&format!(
            "mount -o {opts} of an ext4 image failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => unsupported(&format!("cannot run mount: {e}")),
    }
}

/// Space of the filesystem holding a path, from `statvfs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Space {
    /// Fragment size (the unit of the counts).
    pub frsize: u64,
    /// Total bytes.
    pub total: u64,
    /// Free bytes (`f_bfree`, including any root reserve).
    pub free: u64,
}

impl Space {
    pub(crate) fn used(&self) -> u64 {
        self.total - self.free
    }
}

/// `statvfs` of the filesystem holding `p`, after `syncfs` (so delayed allocations and
/// frees are accounted).
pub(crate) fn space(p: &Path) -> Space {
    let path = cstr(p);
    if let Ok(f) = std::fs::File::open(p) {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor.
        unsafe { libc::syncfs(f.as_raw_fd()) };
    }
    // SAFETY: zeroed statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path string and a valid out-pointer.
    let r = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
    assert_eq!(
        r,
        0,
        "statvfs {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    let frsize = st.f_frsize;
    Space {
        frsize,
        total: st.f_blocks * frsize,
        free: st.f_bfree * frsize,
    }
}

/// Bytes allocated to `p` and everything under it (`st_blocks`, directories included).
pub(crate) fn allocated(p: &Path) -> u64 {
    let m = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(_) => return 0,
    };
    let mut total = m.blocks() * 512;
    if m.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            total += allocated(&e.unwrap().path());
        }
    }
    total
}

/// Every path under `p` (relative), sorted, directories with a trailing `/`.
pub(crate) fn listing(p: &Path) -> Vec<String> {
    fn walk(base: &Path, p: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(p) else {
            return;
        };
        for e in rd {
            let e = e.unwrap();
            let path = e.path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                out.push(format!("{rel}/"));
                walk(base, &path, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(p, p, &mut out);
    out.sort();
    out
}

/// Writes zeros to a new file at `path` until the filesystem is full, or `limit` bytes;
/// returns the bytes written.
pub(crate) fn fill(path: &Path, limit: u64) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    while written < limit {
        let n = block.len().min((limit - written) as usize);
        match f.write(&block[..n]) {
            Ok(0) => break,
            Ok(k) => written += k as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
    written
}

/// In a child: loop-mounts an existing ext4 image at `at` (see [`mount_ext4`]).
pub(crate) fn mount_existing_ext4(image: &Path, at: &Path, options: &str) {
    let opts = if options.is_empty() {
        "loop".to_string()
    } else {
        format!("loop,{options}")
    };
    let out = Command::new("mount")
        .args(["-t", "ext4", "-o", &opts])
        .arg(image)
        .arg(at)
        .output()
        .expect("run mount");
    assert!(
        out.status.success(),
        "mount -o {opts} {}: {}",
        image.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
