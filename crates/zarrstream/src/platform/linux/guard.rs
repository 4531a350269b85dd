//! The SIGBUS guard: shard files mapped so that a cut by another process is an error, not
//! the death of the process.
//!
//! Linux only: on Windows a file with a mapped view cannot be cut (`SetEndOfFile` fails
//! with `ERROR_USER_MAPPED_FILE`), so the same fault cannot happen there.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::platform::GuardedMap;

/// Maps a shard file the writer created itself and reserved at its full size, with its
/// pages under the SIGBUS guard (see [`GuardedMap`]).
///
/// Mapping a file is unsafe because another process could truncate or change it under
/// the mapping. This file is a fresh temporary (`create_new`) inside the writer's own
/// store, reserved with `fallocate` first, so pages are backed and a full disk is an
/// error before this call, never a SIGBUS later. What the writer cannot prevent is
/// another process cutting the file: an access to a page past the new end then raises
/// SIGBUS, which the guard turns into zero pages and a flag the finisher reports as
/// `Error::ShardTruncated`. Fails (never maps unguarded) when the guard cannot be
/// installed or its table is full.
pub(crate) fn map_reserved_file(file: &std::fs::File) -> std::io::Result<GuardedMap> {
    install_sigbus_guard()?;
    // SAFETY: see above; the writer itself never truncates the file while it is mapped
    // (the finisher unmaps before `set_len`), and a truncation by anyone else faults
    // into the guard registered below before any access can be made.
    let map = unsafe { memmap2::MmapMut::map_mut(file) }?;
    let (ptr, len) = (map.as_ptr() as usize, map.len());
    let entry = GUARDS.register(ptr, len, page_size()).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!(
                "the SIGBUS guard's table of {GUARD_CAPACITY} mapped shards is full \
                 (too many shard files open at once)"
            ),
        )
    })?;
    Ok(GuardedMap {
        guard: Guard { entry },
        map,
    })
}

// ---------------------------------------------------------------------------------------
// The SIGBUS guard
// ---------------------------------------------------------------------------------------
//
// A mapped shard file that another process truncates makes every access to a page past
// its new end raise SIGBUS, whose default action kills the process: the recording, the
// camera software and every other array with it. The guard keeps a fixed table of the
// shard mappings (an entry per live `GuardedMap`) and a process-wide SIGBUS handler. A
// SIGBUS the kernel raises for an address inside a registered mapping is answered by
// mapping anonymous zero pages over the whole mapping (`mmap` with `MAP_FIXED`, a plain
// system call and safe in a signal handler) and setting the entry's flag: the faulting
// store then retries on the new page and succeeds, the writer goes on into memory that
// no longer reaches the file, and the finisher, which checks the flag before it
// finishes the shard, reports `Error::ShardTruncated` and keeps the file for `recover`.
// Any other SIGBUS goes to the handler that was installed before ours (Rust's own
// stack-overflow handler, a host's), or kills the process as it would have.
//
// The handler reads the table without locks or allocation: entries are claimed and
// released with atomics, and each entry's fields are read under a sequence number, so a
// handler never acts on a half-written entry (seqlock). Soundness of the remapping rests
// on the order the owner keeps: an entry is registered right after its mapping is made
// and removed right before it is unmapped, and no access to the mapping happens outside
// that window (the `GuardedMap` owns both), so an address inside a registered entry can
// only fault while its mapping is live, and replacing the mapping's pages there changes
// memory only the writer's own shard uses.

/// Shard mappings the guard can hold at once. Each open shard of the mmap and direct
/// sinks takes one entry (a few per array and level, see `preparer::max_unfinished`); a
/// mapping beyond this fails with an I/O error instead of going unguarded.
pub(crate) const GUARD_CAPACITY: usize = 16384;

/// The table of every guarded mapping in the process.
static GUARDS: GuardTable<GUARD_CAPACITY> = GuardTable::new();

/// The state word's low two bits.
const FREE: usize = 0;
const WRITING: usize = 1;
const ACTIVE: usize = 2;

/// The state after `s` with tag `tag`: the generation (the bits above the tag) grows on
/// every change, so a reader that sees the same word before and after its reads knows
/// the fields did not change in between.
fn next_state(s: usize, tag: usize) -> usize {
    ((s >> 2).wrapping_add(1) << 2) | tag
}

struct GuardEntry {
    /// Generation << 2 | `FREE`, `WRITING` or `ACTIVE`.
    state: AtomicUsize,
    /// First byte of the mapping.
    start: AtomicUsize,
    /// Bytes of the mapping, rounded up to whole pages.
    len: AtomicUsize,
    /// Set by the handler when it replaced the mapping's pages.
    truncated: AtomicBool,
}

impl GuardEntry {
    const fn new() -> Self {
        GuardEntry {
            state: AtomicUsize::new(FREE),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            truncated: AtomicBool::new(false),
        }
    }
}

/// A lock-free, fixed-capacity table of address ranges.
struct GuardTable<const N: usize> {
    entries: [GuardEntry; N],
    /// Where the next registration starts looking (keeps claims O(1) on average).
    hint: AtomicUsize,
}

impl<const N: usize> GuardTable<N> {
    const fn new() -> Self {
        GuardTable {
            entries: [const { GuardEntry::new() }; N],
            hint: AtomicUsize::new(0),
        }
    }

    /// Registers `[start, start + len)` (`len` rounded up to `page`); `None` when full.
    fn register(&self, start: usize, len: usize, page: usize) -> Option<usize> {
        let len = len.div_ceil(page).checked_mul(page)?;
        let first = self.hint.load(Ordering::Relaxed);
        for k in (0..N).map(|k| (first + k) % N) {
            let e = &self.entries[k];
            let s = e.state.load(Ordering::Relaxed);
            if s & 3 != FREE {
                continue;
            }
            let writing = next_state(s, WRITING);
            if e.state
                .compare_exchange(s, writing, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // Release: a reader that sees the fields' new values also sees `WRITING`.
            std::sync::atomic::fence(Ordering::Release);
            e.start.store(start, Ordering::Relaxed);
            e.len.store(len, Ordering::Relaxed);
            e.truncated.store(false, Ordering::Relaxed);
            e.state
                .store(next_state(writing, ACTIVE), Ordering::Release);
            self.hint.store((k + 1) % N, Ordering::Relaxed);
            return Some(k);
        }
        None
    }

    /// Whether the handler replaced entry `k`'s pages.
    fn truncated(&self, k: usize) -> bool {
        self.entries[k].truncated.load(Ordering::Acquire)
    }

    /// Removes entry `k` (its owner's mapping is about to be unmapped).
    fn unregister(&self, k: usize) {
        let e = &self.entries[k];
        let s = e.state.load(Ordering::Relaxed);
        e.state.store(next_state(s, FREE), Ordering::Release);
    }

    /// The registered range holding `addr`, as `(entry, start, len)`. Async-signal-safe:
    /// atomic loads only.
    fn find(&self, addr: usize) -> Option<(usize, usize, usize)> {
        for (k, e) in self.entries.iter().enumerate() {
            let s1 = e.state.load(Ordering::Acquire);
            if s1 & 3 != ACTIVE {
                continue;
            }
            let start = e.start.load(Ordering::Relaxed);
            let len = e.len.load(Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Acquire);
            if e.state.load(Ordering::Relaxed) != s1 {
                // Changed while read: not the live mapping that faulted (that one's entry
                // cannot change while its mapping is in use).
                continue;
            }
            if addr >= start && addr - start < len {
                return Some((k, start, len));
            }
        }
        None
    }
}

/// A mapping's entry in the guard table, removed on drop (before the mapping it guards is
/// unmapped: see [`GuardedMap`]'s field order).
pub(crate) struct Guard {
    entry: usize,
}

impl Guard {
    /// Whether another process cut the file under the mapping and an access met the cut
    /// (the guard then replaced the mapping's pages with zeros: what was written through
    /// it since did not reach the file).
    pub(crate) fn truncated(&self) -> bool {
        GUARDS.truncated(self.entry)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        GUARDS.unregister(self.entry);
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096).max(1)
}

/// The SIGBUS disposition found when the guard was installed, which it chains to.
static PREVIOUS: std::sync::OnceLock<libc::sigaction> = std::sync::OnceLock::new();

/// Installs the SIGBUS handler, once per process; later calls return the first result.
fn install_sigbus_guard() -> std::io::Result<()> {
    static INSTALLED: std::sync::OnceLock<Result<(), i32>> = std::sync::OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid out-parameter and a valid "default"
        // value (SIG_DFL, no flags, empty mask).
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the current disposition into a valid out-pointer.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let _ = PREVIOUS.set(old);
        // SAFETY: as above.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_sigbus as *const () as usize;
        // SA_ONSTACK: a thread with an alternate stack (Rust's threads have one) runs the
        // handler there; SA_SIGINFO: the handler needs the fault address.
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `new` is fully initialised, the handler has the SA_SIGINFO signature,
        // and the previous disposition was saved above for chaining.
        if unsafe { libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        Ok(())
    });
    (*result).map_err(std::io::Error::from_raw_os_error)
}

/// The SIGBUS handler: async-signal-safe (atomics, `mmap`, `sigaction`, `raise`).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if !info.is_null() {
        // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo for this signal.
        let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
        // Only faults the kernel raised (si_code > 0), not a SIGBUS sent with kill().
        if code > 0
            && let Some((k, start, len)) = GUARDS.find(addr)
        {
            GUARDS.entries[k].truncated.store(true, Ordering::Release);
            // SAFETY: `[start, start + len)` is the live shard mapping that faulted (see
            // the module's notes: its entry exists only while it is mapped and in use),
            // page-aligned and whole; replacing it with private zero pages keeps its
            // address valid for the owner, who unmaps it later as before.
            let p = unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                // The faulting access runs again, on a zero page.
                return;
            }
        }
    }
    chain(sig, info, ctx);
}

/// Hands a SIGBUS that is not ours to the previous handler, or lets it kill the process.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if let Some(prev) = PREVIOUS.get() {
        let h = prev.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: a handler installed with SA_SIGINFO has this signature, and it
                // is called as the kernel would have called it.
                let f = unsafe {
                    std::mem::transmute::<
                        usize,
                        extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
                    >(h)
                };
                f(sig, info, ctx);
            } else {
                // SAFETY: a handler installed without SA_SIGINFO takes the signal number.
                let f = unsafe { std::mem::transmute::<usize, extern "C" fn(libc::c_int)>(h) };
                f(sig);
            }
            return;
        }
    }
    // The default action (also for an ignored SIGBUS: a fault cannot be ignored, its
    // instruction would fault forever). A fault re-executes on return and now kills the
    // process; a signal sent with kill() is raised again, pending until we return.
    // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: valid pointers; sigaction and raise are async-signal-safe.
    unsafe {
        libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
        if info.is_null() || (*info).si_code <= 0 {
            libc::raise(libc::SIGBUS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn guard_table_has_a_fixed_capacity_and_reuses_entries() {
        let t = GuardTable::<4>::new();
        let ks: Vec<usize> = (0..4)
            .map(|i| t.register(0x10000 * (i + 1), 100, 4096).unwrap())
            .collect();
        assert!(t.register(0x90000, 100, 4096).is_none(), "full");
        t.unregister(ks[2]);
        let again = t.register(0x90000, 100, 4096).unwrap();
        assert_eq!(again, ks[2]);
        assert_eq!(t.find(0x90000), Some((again, 0x90000, 4096)));
    }

    #[test]
    fn guard_table_finds_the_range_holding_an_address() {
        let t = GuardTable::<8>::new();
        let a = t.register(0x10000, 5000, 4096).unwrap();
        let b = t.register(0x40000, 4096, 4096).unwrap();
        // Lengths are rounded up to whole pages: the kernel maps whole pages.
        assert_eq!(t.find(0x10000), Some((a, 0x10000, 8192)));
        assert_eq!(t.find(0x10000 + 8191), Some((a, 0x10000, 8192)));
        assert_eq!(t.find(0x10000 + 8192), None);
        assert_eq!(t.find(0xffff), None);
        assert_eq!(t.find(0x40fff), Some((b, 0x40000, 4096)));
        assert!(!t.truncated(a));
        t.unregister(a);
        assert_eq!(t.find(0x10000), None, "an unregistered range is not ours");
    }

    #[test]
    fn guard_table_lookups_never_see_a_torn_entry() {
        // One live entry is looked up while other threads register and remove ranges
        // in the remaining entries as fast as they can: the lookup must always find the
        // live one and never report a range that was not registered as a whole.
        let t = Arc::new(GuardTable::<16>::new());
        let live = t.register(0x1000_0000, 4096, 4096).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..3)
            .map(|w| {
                let (t, stop) = (Arc::clone(&t), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut i = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        // Disjoint ranges, each with a length of its own: range `m`
                        // is `m` pages at `m << 24`.
                        let m = 1 + (i + w * 7) % 50;
                        if let Some(k) = t.register(m << 24, 4096 * m, 4096) {
                            t.unregister(k);
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let rounds = if cfg!(miri) { 50 } else { 20_000 };
        for _ in 0..rounds {
            assert_eq!(t.find(0x1000_0000 + 100), Some((live, 0x1000_0000, 4096)));
            for m in 1..=50usize {
                if let Some((_, start, l)) = t.find((m << 24) + 4096 * m - 1) {
                    assert_eq!((start, l), (m << 24, 4096 * m), "a torn entry was seen");
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for h in churn {
            h.join().unwrap();
        }
    }

    /// Runs this binary's test `name` alone in a child process with `ZARRSTREAM_SIGBUS_CHILD`
    /// set and returns how it ended: a test that provokes SIGBUS must never take the test
    /// binary (and every test running in parallel in it) down with it.
    fn in_child(name: &str) -> std::process::Output {
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env("ZARRSTREAM_SIGBUS_CHILD", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                // Our own child, by its id.
                let _ = child.kill();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    fn in_the_child() -> bool {
        if std::env::var_os("ZARRSTREAM_SIGBUS_CHILD").is_none() {
            return false;
        }
        // No core file for the child that is meant to die.
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid rlimit value.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
        // And none through a piped `core_pattern` either (systemd-coredump, apport),
        // which ignores RLIMIT_CORE but not a process that is not dumpable.
        // SAFETY: PR_SET_DUMPABLE takes an integer argument; no pointers.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        true
    }

    fn file_of(len: u64) -> (tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("shard"))
            .unwrap();
        file.set_len(len).unwrap();
        (dir, file)
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn guard_catches_a_sigbus_in_a_truncated_shard_mapping() {
        if !in_the_child() {
            let out = in_child(
                "platform::linux::guard::tests::guard_catches_a_sigbus_in_a_truncated_shard_mapping",
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("CHILD OK"),
                "the child ended with {:?}\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let (_dir, file) = file_of(64 * 1024);
        let mut map = map_reserved_file(&file).unwrap();
        map[0] = 1;
        map[40_000] = 2;
        assert!(!map.truncated());
        // Another process would do this; the kernel cannot tell the difference.
        file.set_len(0).unwrap();
        // Past the new end: SIGBUS, caught; the store then lands on a zero page.
        map[40_000] = 7;
        // The store must happen before the flag is read (the handler runs inside it).
        std::hint::black_box(&mut map[..]);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        assert!(map.truncated(), "the guard flagged the mapping");
        assert_eq!((map[40_000], map[0], map[65_535]), (7, 0, 0));
        drop(map);
        // A new mapping starts unflagged and works as before.
        let (_dir2, file2) = file_of(8192);
        let mut map2 = map_reserved_file(&file2).unwrap();
        map2[5000] = 3;
        assert!(!map2.truncated());
        println!("CHILD OK");
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn an_unrelated_sigbus_still_kills_the_process() {
        if !in_the_child() {
            let out = in_child(
                "platform::linux::guard::tests::an_unrelated_sigbus_still_kills_the_process",
            );
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGBUS),
                "the child must die of SIGBUS: {:?}\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("GUARD INSTALLED"));
            return;
        }
        // The guard is installed and guards a shard of its own ...
        let (_dir, file) = file_of(8192);
        let _guarded = map_reserved_file(&file).unwrap();
        println!("GUARD INSTALLED");
        // ... but this mapping is not registered with it.
        let (_dir2, other) = file_of(64 * 1024);
        // SAFETY: the test cuts this file itself, to provoke SIGBUS on purpose.
        let mut map = unsafe { memmap2::MmapMut::map_mut(&other) }.unwrap();
        other.set_len(0).unwrap();
        map[40_000] = 1;
        std::hint::black_box(&mut map[..]);
        println!("STILL ALIVE");
        std::process::exit(3);
    }
}
