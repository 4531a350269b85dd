//! What `record` asks of the operating system beyond `std`: the one module of `record`
//! with platform differences.

/// A file growing past `RLIMIT_FSIZE` (`ulimit -f`) makes the kernel send SIGXFSZ, whose
/// default action kills the process mid-recording. Ignored, the write fails with `EFBIG`
/// instead, and the writer returns it as `Error::Io` naming the shard, with every shard
/// finished before it intact. A process-wide disposition is the program's to set, not
/// the library's, so the program does it.
#[cfg(unix)]
pub(crate) fn ignore_sigxfsz() {
    // SAFETY: `signal` with SIG_IGN only changes the disposition of SIGXFSZ; it runs
    // before any thread of ours exists and no handler code is involved.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Nothing: Windows has no file size limit signal (a write past a quota fails).
#[cfg(windows)]
pub(crate) fn ignore_sigxfsz() {}

/// A `/proc/self/status` field in KiB (`VmHWM`, `VmRSS`), if available.
#[cfg(unix)]
pub(crate) fn proc_status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// None: the report's resident-memory figures are Linux's (`/proc`); on Windows the
/// report leaves them out rather than mix in another definition (working set).
#[cfg(windows)]
pub(crate) fn proc_status_kib(_key: &str) -> Option<u64> {
    None
}

/// Resets the peak resident set size (`VmHWM`) to the current one, so the peak reported
/// later is the peak of the acquisition rather than of frame preparation.
#[cfg(unix)]
pub(crate) fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// False: not on Windows (see [`proc_status_kib`]).
#[cfg(windows)]
pub(crate) fn reset_peak_rss() -> bool {
    false
}
