//! The lock a writer holds on its store while recording, so that `recover` (or another
//! writer asked to overwrite the store) never takes the temporary shards of a live writer.
//! The lock is `std`'s file lock (`flock` on Linux, `LockFileEx` on Windows), which the
//! system releases when the process dies, so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use super::contract::{CHUNK_DIR, LOCK_FILE, PARTIAL_DIR};
use crate::error::{Error, Result};

/// An exclusive lock on a store's temporary directory; released on drop.
///
/// Public so that tools which rewrite a finished store in place (`zarrstream compact`)
/// can refuse a store a live writer holds, and keep writers out while they work.
#[derive(Debug)]
pub struct StoreLock {
    file: File,
    path: PathBuf,
}

impl StoreLock {
    /// Takes the lock in `dir`, failing at once with [`Error::Locked`] if a live
    /// process holds it.
    pub fn acquire(dir: &Path) -> Result<Self> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("create", &path, e, 0))?;
        match file.try_lock() {
            Ok(()) => Ok(StoreLock { file, path }),
            Err(TryLockError::WouldBlock) => Err(Error::Locked { path }),
            Err(TryLockError::Error(e)) => Err(Error::io("lock", &path, e, 0)),
        }
    }

    /// Removes the lock file and releases the lock, in the order the platform needs
    /// (`platform::remove_lock_file`).
    pub fn release(self) {
        crate::platform::remove_lock_file(self.file, &self.path);
    }
}

/// How deep below a store [`refuse_live`] looks for live arrays: a recording's keys
/// and an image's levels sit a few directories down, never this far.
const LIVE_DEPTH: usize = 8;

/// Fails with [`Error::Locked`] if a live writer holds the lock of the array at `dir`
/// or of any array below it (an OME-Zarr image's levels, a recording's arrays).
pub(crate) fn refuse_live(dir: &Path) -> Result<()> {
    refuse_live_below(dir, LIVE_DEPTH)
}

fn refuse_live_below(dir: &Path, depth: usize) -> Result<()> {
    let tmp = dir.join(PARTIAL_DIR);
    if tmp.is_dir() {
        StoreLock::acquire(&tmp)?.release();
    }
    if depth == 0 {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e, 0))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        // Chunks and temporary files hold no arrays; symbolic links are not followed.
        if name == CHUNK_DIR || name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            refuse_live_below(&entry.path(), depth - 1)?;
        }
    }
    Ok(())
}

/// Creates the store directory, refusing an existing path unless `overwrite`.
pub(crate) fn prepare_dir(dir: &Path, overwrite: bool) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(_) if !overwrite => {
            return Err(Error::Exists {
                path: dir.to_path_buf(),
            });
        }
        Ok(m) if m.is_dir() => {
            // Never delete a store another live process is still recording into: an
            // array's lock is in the store, an image's or a recording's below it.
            refuse_live(dir)?;
            std::fs::remove_dir_all(dir).map_err(|e| Error::io("remove", dir, e, 0))?;
        }
        Ok(_) => std::fs::remove_file(dir).map_err(|e| Error::io("remove", dir, e, 0))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("stat", dir, e, 0)),
    }
    // Durably: the new store directory's own name in its parent (and those of any
    // parents created for it) is otherwise never synced, and a power cut, even after
    // `finish`, lost the whole store although each of its files was synced (found by
    // `tests/writer/power_loss.rs`). Syncing the parent also makes the removal of an
    // overwritten store durable.
    super::create_dirs_durably(dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_refuses_a_second_holder_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let a = StoreLock::acquire(dir.path()).unwrap();
        // File locks belong to the open file (description): a second open conflicts
        // even within one process.
        assert!(matches!(
            StoreLock::acquire(dir.path()),
            Err(Error::Locked { .. })
        ));
        a.release();
        assert!(!dir.path().join(LOCK_FILE).exists());
        assert!(StoreLock::acquire(dir.path()).is_ok());
    }
}
