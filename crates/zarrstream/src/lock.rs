//! The lock a writer holds on its store while recording, so that `recover` (or another
//! writer asked to overwrite the store) never takes the temporary shards of a live writer.
//! An `flock` is released by the kernel when the process dies, so a crash never leaves a
//! stale lock behind.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use crate::error::{Error, Result};

/// Name of the lock file inside the temporary directory.
pub const LOCK_FILE: &str = "writer.lock";

/// An exclusive lock on a store's temporary directory; released on drop.
///
/// Public so that tools which rewrite a finished store in place (`zarrstream compact`)
/// can refuse a store a live writer holds, and keep writers out while they work.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
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
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(StoreLock { _file: file, path }),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(Error::Locked { path }),
            Err(e) => Err(Error::io("lock", &path, e.into(), 0)),
        }
    }

    /// Removes the lock file, then releases the lock.
    pub fn release(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_refuses_a_second_holder_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let a = StoreLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file description: a second open conflicts
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
