//! Making changes to a store durable and atomic: directory fsyncs, directory creation,
//! and publishing a JSON document so readers see the old or the new one, never a mix.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::IoError;

/// fsyncs a directory so renames and new entries in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), IoError> {
    crate::platform::sync_dir(dir).map_err(IoError::with("fsync", dir))
}

/// [`sync_dir`] for a shard directory that another process may have removed: a data
/// mover that took the shard and pruned its directory leaves no entry of ours to flush.
pub(crate) fn sync_shard_dir(dir: &Path) -> Result<(), IoError> {
    match crate::platform::sync_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IoError::new("fsync", dir, e)),
    }
}

/// Writes `bytes` to `dir/name` atomically: a hidden temporary file `.<name>.tmp`,
/// fsync, rename over `name`, fsync of the directory. On failure the temporary file is
/// removed and `name` is left as it was.
pub fn publish_bytes(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), IoError> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let dst = dir.join(name);
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        IoError::new("write", &tmp, e)
    })?;
    crate::platform::rename(&tmp, &dst).map_err(IoError::with("rename", &dst))?;
    sync_dir(dir)
}

/// How often a step is retried after another process removed a directory it needs.
pub(crate) const VANISHED_TRIES: u32 = 8;

/// Creates `dir` and its missing parents, collecting the directories whose entries
/// changed (to be synced).
pub(crate) fn create_dirs(dir: &Path, changed: &mut BTreeSet<PathBuf>) -> Result<(), IoError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        // A data mover that prunes empty directories may remove the parent between the
        // two steps: make it again, a few times.
        let mut tries = 0;
        loop {
            create_dirs(parent, changed)?;
            match fs::create_dir(dir) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < VANISHED_TRIES => {
                    tries += 1;
                }
                Err(e) => return Err(IoError::new("create directory", dir, e)),
            }
        }
        changed.insert(parent.to_path_buf());
    }
    Ok(())
}

/// Creates `dir` and its missing parents, and fsyncs every directory whose entries
/// changed (the parent of each directory created), so the new directories survive a
/// power loss: syncing a directory makes its entries durable, never its own name in its
/// parent. A relative path's top directory is created in the current directory, which
/// is then the one synced.
pub(crate) fn create_dirs_durably(dir: &Path) -> Result<(), IoError> {
    let mut changed = BTreeSet::new();
    // Named for the directory asked for, whichever ancestor failed: that is the path
    // the caller knows.
    create_dirs(dir, &mut changed).map_err(|e| IoError {
        path: dir.to_path_buf(),
        ..e
    })?;
    for d in &changed {
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d.as_path()
        };
        sync_dir(d)?;
    }
    Ok(())
}

/// Removes the empty directories below `dir` (and `dir` itself if it ends up empty):
/// the preparer makes shard directories ahead of need, and a stream that stops leaves
/// those of shards never written. Errors are ignored: a leftover empty directory is
/// harmless to readers.
pub(crate) fn prune_empty_dirs(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                prune_empty_dirs(&e.path());
            }
        }
    }
    // Fails, as intended, when the directory still holds anything.
    let _ = fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        publish_bytes(dir.path(), "doc.json", b"1").unwrap();
        publish_bytes(dir.path(), "doc.json", b"2").unwrap();
        assert_eq!(fs::read(dir.path().join("doc.json")).unwrap(), b"2");
        assert!(!dir.path().join(".doc.json.tmp").exists());
    }

    #[test]
    fn create_dirs_reports_the_parents_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut changed = BTreeSet::new();
        create_dirs(&dir.path().join("c/0/1"), &mut changed).unwrap();
        assert!(dir.path().join("c/0/1").is_dir());
        assert_eq!(changed.len(), 3);
        prune_empty_dirs(&dir.path().join("c"));
        assert!(!dir.path().join("c").exists());
    }
}
