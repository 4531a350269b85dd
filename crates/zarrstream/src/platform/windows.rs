//! Windows: the Win32 calls behind the platform layer (see [`super`]).
//!
//! Files are opened with `std`'s default sharing (read, write and delete), so a reader
//! (napari, zarr-python) can open a shard or `zarr.json` while the writer holds it, and
//! the writer's renames and replacements go through while a reader holds the old file.

use std::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;

use windows_sys::Win32::Storage::FileSystem::{
    FILE_ALLOCATION_INFO, FILE_FLAG_NO_BUFFERING, FILE_FLAG_WRITE_THROUGH, FILE_STANDARD_INFO,
    FILE_STORAGE_INFO, FileAllocationInfo, FileStandardInfo, FileStorageInfo, GetDiskFreeSpaceExW,
    GetDriveTypeW, GetFileInformationByHandleEx, GetVolumePathNameW, SetFileInformationByHandle,
};

use windows_sys::Win32::System::WindowsProgramming::{DRIVE_FIXED, DRIVE_RAMDISK};

use crate::platform::GuardedMap;

/// Positional reads and writes (`seek_read`/`seek_write`, which may transfer less than
/// asked and move the file cursor, which no caller here uses).
pub(crate) trait FileExt {
    /// Reads into `buf` from `offset`; the bytes read (0 at the end of the file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Reads exactly `buf.len()` bytes from `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
}

impl FileExt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buf, offset)
    }

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match std::os::windows::fs::FileExt::seek_write(self, buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Releases the lock `file` holds and closes it, then removes the lock file at `path`:
/// Windows removes an open file only when its last handle closes, and until then the name
/// stays and its directory cannot be removed. A process that locks the file between the
/// two steps keeps its lock; its removal then waits for that process's handle. Best
/// effort.
pub(crate) fn remove_lock_file(file: File, path: &Path) {
    drop(file);
    let _ = std::fs::remove_file(path);
}

/// How long [`rename`] keeps trying while another handle holds the file it replaces.
const RENAME_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Renames `from` to `to`, replacing `to` if it exists. `std` asks for POSIX semantics
/// (NTFS on Windows 10 1809 and later), which replace a file that a reader holds open
/// with `FILE_SHARE_DELETE`; elsewhere, and under Wine, a file open in any process cannot
/// be replaced (`ERROR_ACCESS_DENIED`, `ERROR_SHARING_VIOLATION`). Readers of `zarr.json`
/// hold it for one read, and virus scanners and indexers open new files as briefly, so
/// the rename is tried again, with growing pauses, for up to [`RENAME_PATIENCE`].
pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_SHARING_VIOLATION};
    let deadline = std::time::Instant::now() + RENAME_PATIENCE;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match std::fs::rename(from, to) {
            Err(e)
                if e.raw_os_error().is_some_and(|c| {
                    c == ERROR_ACCESS_DENIED as i32 || c == ERROR_SHARING_VIOLATION as i32
                }) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Flushes the entries of directory `dir` to the device: `FlushFileBuffers` on a handle
/// of the directory itself (opened with `FILE_FLAG_BACKUP_SEMANTICS`, the only way to
/// open one), which NTFS honours by flushing its metadata. A file system that refuses to
/// flush a directory (`ERROR_ACCESS_DENIED`, `ERROR_INVALID_FUNCTION`) counts as done:
/// there the rename is as durable as the system makes it (NTFS journals it). A
/// directory that is gone is still `NotFound`.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_INVALID_FUNCTION};
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_BACKUP_SEMANTICS;
    let refused = |e: &io::Error| {
        e.raw_os_error()
            .is_some_and(|c| c == ERROR_ACCESS_DENIED as i32 || c == ERROR_INVALID_FUNCTION as i32)
    };
    let handle = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(dir);
    match handle.and_then(|d| d.sync_all()) {
        Err(e) if refused(&e) => Ok(()),
        other => other,
    }
}

/// Opens `path` for unbuffered writes (`FILE_FLAG_NO_BUFFERING`: offsets, lengths and
/// buffers aligned to the volume's sectors; `FILE_FLAG_WRITE_THROUGH`: each write is on
/// the device when it returns, as acquire-zarr's Windows path opens its shards).
pub(crate) fn open_direct(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(create)
        .custom_flags(FILE_FLAG_NO_BUFFERING | FILE_FLAG_WRITE_THROUGH)
        .open(path)
}

/// Whether unbuffered writes to `file` may start at, and take their buffers from,
/// multiples of `align`: the volume's logical and physical sector sizes must divide it
/// (`FileStorageInfo`); a volume that does not say leaves it to the probe write.
pub(crate) fn direct_alignment_fits(file: &File, align: u64) -> bool {
    let mut info = FILE_STORAGE_INFO::default();
    // SAFETY: `info` is a writable FILE_STORAGE_INFO of the size passed, and the handle
    // is open for the duration of the call.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            file.as_raw_handle(),
            FileStorageInfo,
            (&raw mut info).cast::<c_void>(),
            size_of::<FILE_STORAGE_INFO>() as u32,
        )
    };
    if ok == 0 {
        return true;
    }
    [
        info.LogicalBytesPerSector,
        info.PhysicalBytesPerSectorForPerformance,
    ]
    .iter()
    .all(|&s| s == 0 || align.is_multiple_of(u64::from(s)))
}

/// `path` as a NUL-terminated UTF-16 string for the wide Win32 calls.
fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain(Some(0)).collect()
}

/// Bytes the calling user may still allocate on the volume holding `dir` (quotas
/// included: `GetDiskFreeSpaceExW`'s free bytes available to the caller).
pub(crate) fn free_space(dir: &Path) -> io::Result<u64> {
    let dir = wide(dir);
    let mut free = 0u64;
    // SAFETY: a NUL-terminated path and a writable u64; the other outputs may be null.
    let ok = unsafe {
        GetDiskFreeSpaceExW(
            dir.as_ptr(),
            &mut free,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(free)
}

/// Allocates the first `len` bytes of `file` (`FileAllocationInfo`, then the end of file;
/// a non-sparse file keeps its clusters, so writes through a mapping cannot fail for
/// lack of space): `Ok(true)` when the file system shows them allocated afterwards,
/// `Ok(false)` where it does not reserve (the length is set either way); a full disk is
/// an error here (`ERROR_DISK_FULL`).
pub(crate) fn reserve(file: &File, len: u64) -> io::Result<bool> {
    let size = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let info = FILE_ALLOCATION_INFO {
        AllocationSize: size,
    };
    // SAFETY: `info` is a FILE_ALLOCATION_INFO of the size passed, the handle is open and
    // was opened for writing.
    let ok = unsafe {
        SetFileInformationByHandle(
            file.as_raw_handle(),
            FileAllocationInfo,
            (&raw const info).cast::<c_void>(),
            size_of::<FILE_ALLOCATION_INFO>() as u32,
        )
    };
    if ok == 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::StorageFull || e.kind() == io::ErrorKind::QuotaExceeded {
            return Err(e);
        }
    }
    file.set_len(len)?;
    Ok(allocated_bytes(file).is_ok_and(|a| a >= len))
}

/// Nothing: shards are not sparse files on Windows (a sparse file would make writes
/// through a mapping fail on a full disk), so there are no holes to punch; the bytes stay,
/// which is a valid shard.
pub(crate) fn punch_hole(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

/// Nothing: Windows copies whole files (`CopyFile2`) or, on ReFS only, duplicates
/// extents; a range between two open files goes through a buffer, which the caller does.
pub(crate) fn copy_in_kernel(
    _src: &File,
    _dst: &File,
    _from: &mut u64,
    _to: &mut u64,
    _len: u64,
) -> io::Result<u64> {
    Ok(0)
}

/// Bytes the file system has allocated to `file` (`FileStandardInfo.AllocationSize`).
pub(crate) fn allocated_bytes(file: &File) -> io::Result<u64> {
    let mut info = FILE_STANDARD_INFO {
        AllocationSize: 0,
        EndOfFile: 0,
        NumberOfLinks: 0,
        DeletePending: false,
        Directory: false,
    };
    // SAFETY: `info` is a writable FILE_STANDARD_INFO of the size passed; the handle is
    // open for the duration of the call.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            file.as_raw_handle(),
            FileStandardInfo,
            (&raw mut info).cast::<c_void>(),
            size_of::<FILE_STANDARD_INFO>() as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(info.AllocationSize).unwrap_or(0))
}

/// Whether writes through a mapping of a file in `dir` are protected by its reservation:
/// on a local fixed disk or RAM disk, not on a network share, where a failed write
/// through a view raises `EXCEPTION_IN_PAGE_ERROR`.
pub(crate) fn mapping_is_safe(dir: &Path) -> bool {
    let dir = wide(dir);
    let mut root = [0u16; 1024];
    // SAFETY: a NUL-terminated input and an output buffer of the length passed.
    let ok = unsafe { GetVolumePathNameW(dir.as_ptr(), root.as_mut_ptr(), root.len() as u32) };
    if ok == 0 {
        return false;
    }
    // SAFETY: `root` holds the NUL-terminated volume path written above.
    let kind = unsafe { GetDriveTypeW(root.as_ptr()) };
    kind == DRIVE_FIXED || kind == DRIVE_RAMDISK
}

/// Nothing: Windows has no call to drop one file's clean pages from the cache; its cache
/// manager writes dirty pages back on its own and trims the cache under memory pressure
/// (and the direct sink's data never enters it).
pub(crate) fn drop_cached(_file: &File) {}

/// Makes the calling thread background work: `THREAD_PRIORITY_BELOW_NORMAL` for a nice
/// value below 10, `THREAD_PRIORITY_LOWEST` from 10 (not `THREAD_MODE_BACKGROUND_BEGIN`,
/// which would lower the thread's I/O priority too, and the writer's I/O is what keeps up
/// with the camera). Best effort.
pub(crate) fn lower_thread_priority(nice: u8) {
    use thread_priority::{ThreadPriority, WinAPIThreadPriority, set_current_thread_priority};
    let level = if nice >= 10 {
        WinAPIThreadPriority::Lowest
    } else {
        WinAPIThreadPriority::BelowNormal
    };
    let _ = set_current_thread_priority(ThreadPriority::Os(level.into()));
}

/// Nothing: large pages on Windows need the "Lock pages in memory" privilege and are
/// requested when memory is allocated (`MEM_LARGE_PAGES`), not advised afterwards.
pub(crate) fn advise_huge_pages(_map: &memmap2::MmapMut) {}

/// Nothing: pages of a view fault in on their first write (`PrefetchVirtualMemory` reads
/// a file's pages, which a fresh shard does not need).
pub(crate) fn populate_write(_map: &memmap2::MmapMut, _offset: usize, _len: usize) {}

/// What guards a shard file's view: nothing. Unlike Linux, Windows refuses to cut a file
/// while a view of it is mapped (`SetEndOfFile` fails with `ERROR_USER_MAPPED_FILE`), so
/// no other process can truncate the shard under the writer and no guard is needed: the
/// finisher's checks of the file's length and working index still run.
pub(crate) struct Guard;

impl Guard {
    /// Whether an access met a cut: never on Windows (see the type).
    pub(crate) fn truncated(&self) -> bool {
        false
    }
}

/// Maps a shard file the writer created itself and reserved at its full size.
///
/// Mapping a file is unsafe because another process could change it under the view. This
/// file is a fresh temporary inside the writer's own store, reserved first (a full disk
/// is an error before this call), and Windows refuses to cut it while the view exists.
pub(crate) fn map_reserved_file(file: &File) -> io::Result<GuardedMap> {
    // SAFETY: see above; the writer unmaps before it sets the file's final length.
    let map = unsafe { memmap2::MmapMut::map_mut(file) }?;
    Ok(GuardedMap { guard: Guard, map })
}
