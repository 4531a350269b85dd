//! A shard file under its temporary name, removed unless it was committed or kept.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustix::fs::FallocateFlags;

use crate::error::{Error, Result};
use crate::shard::{ShardLayout, entry_bytes};
use crate::store::CREATING_EXTENSION;

/// Free space a reservation must leave behind, so that publishing `zarr.json` and
/// creating shard directories never fail for lack of space once frames are accepted.
const HEADROOM: u64 = 1 << 20;

/// Refuses a reservation of `needed` bytes next to `path` that would leave less than
/// [`HEADROOM`] free (a full disk is then refused before any frame is accepted for it).
fn ensure_headroom(path: &Path, needed: u64) -> Result<()> {
    let dir = path.parent().unwrap_or(path);
    let st = rustix::fs::statvfs(dir).map_err(|e| Error::io("statvfs", dir, e.into(), 0))?;
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    if free < needed.saturating_add(HEADROOM) {
        return Err(Error::DiskFull {
            op: "reserve",
            path: path.to_path_buf(),
            needed,
        });
    }
    Ok(())
}

pub(crate) struct TempShard {
    pub file: File,
    pub path: PathBuf,
    pub layout: ShardLayout,
    /// Whether `fallocate` reserved the whole file (false where it is unsupported).
    pub reserved: bool,
    committed: bool,
    /// Left in place on drop, for `recover` (set when the writer fails).
    keep: std::sync::atomic::AtomicBool,
}

impl TempShard {
    /// Creates the file, reserves its worst-case size (a full disk fails here, before
    /// anything is mapped) and marks every working-index entry empty.
    pub(crate) fn create(path: &Path, layout: ShardLayout) -> Result<Self> {
        // Created under a `.creating` name and renamed once reserved and initialised, so
        // a crash never leaves a `.partial` whose working index is not yet valid.
        let creating = path.with_extension(CREATING_EXTENSION);
        ensure_headroom(path, layout.file_size)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&creating)
            .map_err(|e| Error::io("create", &creating, e, 0))?;
        let mut temp = TempShard {
            file,
            path: creating,
            layout,
            reserved: true,
            committed: false,
            keep: std::sync::atomic::AtomicBool::new(false),
        };
        match rustix::fs::fallocate(&temp.file, FallocateFlags::empty(), 0, layout.file_size) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::OPNOTSUPP => {
                temp.reserved = false;
                temp.file
                    .set_len(layout.file_size)
                    .map_err(|e| Error::io("truncate", path, e, 0))?;
            }
            Err(e) => return Err(Error::io("fallocate", path, e.into(), layout.file_size)),
        }
        let empty = entry_bytes(u64::MAX, u64::MAX).repeat(layout.n as usize);
        temp.file
            .write_all_at(&empty, layout.index_offset)
            .map_err(|e| Error::io("write", path, e, empty.len() as u64))?;
        std::fs::rename(&temp.path, path).map_err(|e| Error::io("rename", path, e, 0))?;
        temp.path = path.to_path_buf();
        Ok(temp)
    }

    /// Punches `(offset, len)` ranges out of the file (sparse packing).
    pub(crate) fn punch(&self, holes: &[(u64, u64)]) -> Result<()> {
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        for &(off, len) in holes {
            match rustix::fs::fallocate(&self.file, flags, off, len) {
                // A filesystem without hole punching keeps the bytes; still valid.
                Ok(()) | Err(rustix::io::Errno::OPNOTSUPP) => {}
                Err(e) => return Err(Error::io("punch hole", &self.path, e.into(), 0)),
            }
        }
        Ok(())
    }

    /// Keeps the file when dropped: after a failure its chunks are left for `recover`.
    pub(crate) fn keep(&self) {
        self.keep.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| Error::io("truncate", &self.path, e, 0))
    }

    /// Renames the file to `to`; from then on it is kept. Returns the open file (for a
    /// later group flush).
    pub(crate) fn commit(mut self, to: &Path) -> Result<File> {
        let file = self
            .file
            .try_clone()
            .map_err(|e| Error::io("dup", &self.path, e, 0))?;
        std::fs::rename(&self.path, to).map_err(|e| Error::io("rename", to, e, 0))?;
        self.committed = true;
        Ok(file)
    }
}

impl Drop for TempShard {
    fn drop(&mut self) {
        if !self.committed && !self.keep.load(std::sync::atomic::Ordering::Relaxed) {
            // Best effort: an unused or failed temporary shard is not data anyone asked for.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
