//! Scratch directories under `target/tmp` (ext4 on the development machines and in CI, so
//! the mmap sink is used and sparse packing really leaves holes), rather than the system's
//! temporary directory (often tmpfs). Called through [`crate::scratch!`], which supplies
//! the calling binary's `target/tmp`.

use std::path::Path;

/// A fresh directory named `<prefix><random>` in `tmp`, removed when the returned
/// `TempDir` is dropped. Panics when it cannot be made: a test without its directory
/// cannot run.
pub fn scratch_in(tmp: &Path, prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(tmp)
        .unwrap_or_else(|e| {
            panic!(
                "create a scratch directory {prefix}* in {}: {e}",
                tmp.display()
            )
        })
}
