//! Linux: the system calls behind the platform layer (see [`super`]).

mod guard;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::{AtFlags, FallocateFlags, OFlags, StatxFlags};

pub(crate) use guard::{Guard, map_reserved_file};
/// Positional reads and writes that leave the file cursor alone (`pread`, `pwrite`).
pub(crate) use std::os::unix::fs::FileExt;

/// Renames `from` to `to`, replacing `to` atomically if it exists (`rename`).
pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

/// Removes the lock file at `path`, then releases the lock `file` holds: never the other
/// way round, or another process could lock the file just before it is removed and hold
/// a lock on a file nobody else can find. Best effort.
pub(crate) fn remove_lock_file(file: File, path: &Path) {
    let _ = std::fs::remove_file(path);
    drop(file);
}

/// Flushes the entries of directory `dir` (names created, renamed or removed in it) to
/// the device: `fsync` of the directory.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens `path` for writes that bypass the page cache (`O_DIRECT`).
pub(crate) fn open_direct(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(create)
        .custom_flags(OFlags::DIRECT.bits() as i32)
        .open(path)
}

/// Whether direct writes to `file` may start at, and take their buffers from, multiples
/// of `align`: false only where the kernel reports a larger or incompatible alignment
/// (`statx` with `STATX_DIOALIGN`, Linux 6.1); a kernel that does not say leaves it to the
/// probe write.
pub(crate) fn direct_alignment_fits(file: &File, align: u64) -> bool {
    match rustix::fs::statx(file, "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN) {
        Ok(st) if st.stx_mask & StatxFlags::DIOALIGN.bits() != 0 => {
            let fits = |a: u32| a != 0 && align.is_multiple_of(u64::from(a));
            fits(st.stx_dio_offset_align) && fits(st.stx_dio_mem_align)
        }
        _ => true,
    }
}

/// Bytes an unprivileged process may still allocate on the file system holding `dir`.
pub(crate) fn free_space(dir: &Path) -> io::Result<u64> {
    let st = rustix::fs::statvfs(dir)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Makes `file` `len` bytes long with those bytes allocated (`fallocate`), so that
/// writing them later, through a mapping too, cannot fail for lack of space: `Ok(true)`.
/// `Ok(false)` where the file system cannot reserve: the length is set all the same. A
/// full disk is an error here.
pub(crate) fn reserve(file: &File, len: u64) -> io::Result<bool> {
    match rustix::fs::fallocate(file, FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::OPNOTSUPP) => file.set_len(len).map(|()| false),
        Err(e) => Err(e.into()),
    }
}

/// Frees the blocks of `len` bytes at `offset`, keeping the length; a file system that
/// cannot punch holes keeps the bytes, which is still a valid shard.
pub(crate) fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    match rustix::fs::fallocate(file, flags, offset, len) {
        Ok(()) | Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Copies up to `len` bytes from `*from` in `src` to `*to` in `dst` inside the kernel
/// (`copy_file_range`: no copy through user space, a reflink where extents can be
/// shared), advancing both offsets; returns the bytes copied, fewer than `len` (maybe
/// none) where the kernel cannot copy between these files, for the caller to finish.
pub(crate) fn copy_in_kernel(
    src: &File,
    dst: &File,
    from: &mut u64,
    to: &mut u64,
    len: u64,
) -> io::Result<u64> {
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left).unwrap_or(usize::MAX);
        match rustix::fs::copy_file_range(src, Some(from), dst, Some(to), chunk) {
            Ok(0) => break,
            Ok(n) => left -= n as u64,
            Err(
                rustix::io::Errno::XDEV
                | rustix::io::Errno::NOSYS
                | rustix::io::Errno::INVAL
                | rustix::io::Errno::OPNOTSUPP,
            ) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(len - left)
}

/// Bytes the file system has allocated to `file` (`st_blocks`, 512-byte units whatever
/// the block size; less than the length where the file is sparse).
pub(crate) fn allocated_bytes(file: &File) -> io::Result<u64> {
    Ok(file.metadata()?.blocks() * 512)
}

/// Whether a reservation protects writes through a mapping of a file in `dir`: not on
/// copy-on-write or remote file systems, where a full disk would raise SIGBUS instead of
/// an error.
pub(crate) fn mapping_is_safe(dir: &Path) -> bool {
    const UNSAFE_FS: [u64; 7] = [
        0x9123_683e, // btrfs
        0x2fc1_2fc1, // zfs
        0x6969,      // nfs
        0xff53_4d42, // cifs
        0xfe53_4d42, // smb2
        0x6573_5546, // fuse
        0x5346_414f, // afs
    ];
    match rustix::fs::statfs(dir) {
        Ok(st) => !UNSAFE_FS.contains(&(st.f_type as u64)),
        Err(_) => false,
    }
}

/// Starts writeback of `file`'s dirty pages and drops its clean ones from the page cache
/// (`posix_fadvise(DONTNEED)`); advisory, so errors are ignored.
pub(crate) fn drop_cached(file: &File) {
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
}

/// Makes the calling thread background work: the `SCHED_BATCH` policy, so that waking it
/// never preempts the thread that pushes frames, and `nice` steps nicer. Best effort:
/// neither needs privileges, and a failure only costs latency.
pub(crate) fn lower_thread_priority(nice: u8) {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    // The crate sets a niceness along with the policy; 48 of its 0..=99 scale maps to
    // nice 0, which the `setpriority` below then raises (raising needs no privilege).
    if let Ok(p) = ThreadPriorityValue::try_from(48u8) {
        let batch = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch);
        let _ = set_thread_priority_and_policy(
            thread_native_id(),
            ThreadPriority::Crossplatform(p),
            batch,
        );
    }
    // On Linux `setpriority(PRIO_PROCESS, 0)` applies to the calling thread only.
    let _ = rustix::process::setpriority_process(None, i32::from(nice));
}

/// Asks for transparent huge pages behind an anonymous buffer (where the kernel has them,
/// as with the default `madvise` setting); advice only.
pub(crate) fn advise_huge_pages(map: &memmap2::MmapMut) {
    let _ = map.advise(memmap2::Advice::HugePage);
}

/// Makes `len` bytes at `offset` of a shared mapping resident and writable without
/// touching them (`MADV_POPULATE_WRITE`); kernels before 5.14 lack it, and pages then
/// fault in on first write.
pub(crate) fn populate_write(map: &memmap2::MmapMut, offset: usize, len: usize) {
    let _ = map.advise_range(memmap2::Advice::PopulateWrite, offset, len);
}
