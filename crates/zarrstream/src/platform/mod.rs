//! The platform layer: everything the writer asks of the operating system beyond what
//! `std` offers portably, one module per platform with the same items, as `std::sys`
//! and crossbeam do. The writer's logic imports these and never `#[cfg]`s on a platform.
//!
//! | item | Linux (`linux.rs`) | Windows (`windows.rs`) |
//! |---|---|---|
//! | [`FileExt`] positional I/O | `pread`/`pwrite` (std's unix `FileExt`) | `seek_read`/`seek_write` in a loop |
//! | [`rename`] replacing a file | `rename` | `std`'s rename, retried for 2 s while a reader holds the target |
//! | [`remove_lock_file`] | remove, then unlock | unlock and close, then remove (an open file's name stays) |
//! | [`sync_dir`] | `fsync` of the directory | `FlushFileBuffers` on the directory's handle (or nothing where refused: NTFS journals renames) |
//! | [`open_direct`] unbuffered writes | `O_DIRECT` | `FILE_FLAG_NO_BUFFERING \| FILE_FLAG_WRITE_THROUGH` |
//! | [`direct_alignment_fits`] | `statx(STATX_DIOALIGN)` | `FileStorageInfo` sector sizes |
//! | [`free_space`] | `statvfs` | `GetDiskFreeSpaceExW` |
//! | [`reserve`] a shard's length and bytes | `fallocate` (else only the length) | `FileAllocationInfo`, then the length; checked allocated |
//! | [`punch_hole`] | `fallocate(PUNCH_HOLE)` | none: shards are not sparse files there, the bytes stay |
//! | [`copy_in_kernel`] | `copy_file_range` | none: ranges are copied through a buffer |
//! | [`allocated_bytes`] | `st_blocks` × 512 | `FileStandardInfo.AllocationSize` |
//! | [`mapping_is_safe`] | not btrfs, ZFS, NFS, CIFS, FUSE, AFS (`statfs`) | a fixed or RAM disk (`GetDriveTypeW`), not a network share |
//! | [`drop_cached`] | `posix_fadvise(DONTNEED)` | nothing: the cache manager writes back and trims itself |
//! | [`lower_thread_priority`] | `SCHED_BATCH` + nice | `THREAD_PRIORITY_BELOW_NORMAL` / `LOWEST` |
//! | [`advise_huge_pages`], [`populate_write`] | `madvise` | nothing (large pages need a privilege and are chosen at allocation) |
//! | [`GuardedMap`], [`map_reserved_file`] | a mapping under the SIGBUS guard | a plain view: a mapped file cannot be cut |
//!
//! Disk-full errors need no platform code: `std` gives `ENOSPC` and `ERROR_DISK_FULL` /
//! `ERROR_HANDLE_DISK_FULL` the same [`std::io::ErrorKind::StorageFull`].

use std::ops::{Deref, DerefMut};

use crate::slots::Backing;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

#[cfg(not(any(target_os = "linux", windows)))]
compile_error!("zarrstream runs on Linux and Windows; its platform layer has no other module");

/// A shard file's shared writable mapping with its platform's guard (Linux: an entry of
/// the SIGBUS guard's table; Windows: none needed), made by [`map_reserved_file`].
pub(crate) struct GuardedMap {
    // Declared first: dropped (unregistered) before `map` is unmapped.
    guard: Guard,
    map: memmap2::MmapMut,
}

impl GuardedMap {
    /// Whether another process cut the file under the mapping and an access met the cut
    /// (what was written through the mapping since did not reach the file).
    pub(crate) fn truncated(&self) -> bool {
        self.guard.truncated()
    }
}

impl Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl DerefMut for GuardedMap {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

// SAFETY: a mapping's address is fixed from mmap to munmap, and the region owns it. The
// impl is here, not in `slots`, so that `slots` needs nothing from the platform layer.
unsafe impl Backing for memmap2::MmapMut {
    fn as_mut_ptr_len(&mut self) -> (*mut u8, usize) {
        (self.as_mut_ptr(), self.len())
    }

    fn prefault(&self, offset: usize, len: usize) {
        populate_write(self, offset, len);
    }
}

// SAFETY: the mapping's address is fixed from map to unmap (Linux's guard replaces its
// pages in place, keeping address and length), and the region owns the mapping.
unsafe impl Backing for GuardedMap {
    fn as_mut_ptr_len(&mut self) -> (*mut u8, usize) {
        self.map.as_mut_ptr_len()
    }

    fn prefault(&self, offset: usize, len: usize) {
        self.map.prefault(offset, len);
    }
}
