//! Windowed writeback for shards that are not flushed one by one (`Durability::None`, and
//! `Periodic` between commits), so hours of acquisition neither pile up dirty pages nor
//! fill the page cache with finished shards.
//!
//! On Linux, `posix_fadvise(DONTNEED)` first starts asynchronous writeback of the file's
//! dirty pages (like `sync_file_range(SYNC_FILE_RANGE_WRITE)`), then drops the pages that
//! are clean. So one call when a shard is finished starts its writeback without waiting,
//! and a second call a few shards later, when that writeback has had time to complete,
//! drops the shard from the cache. the platform layer offers it (`platform::drop_cached`); `sync_file_range`
//! would need `unsafe` FFI outside the slot module.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Finished shards whose writeback was started and whose pages are not yet dropped.
///
/// It holds their paths, not open files: a data mover may delete a finished shard at
/// any time, and an open descriptor would keep its blocks allocated until the window
/// moved on.
#[derive(Debug)]
pub(crate) struct WritebackWindow {
    paths: VecDeque<PathBuf>,
    depth: usize,
}

impl WritebackWindow {
    /// A window of `depth` shards in flight (at least one).
    pub(crate) fn new(depth: usize) -> Self {
        WritebackWindow {
            paths: VecDeque::new(),
            depth: depth.max(1),
        }
    }

    /// Starts writeback of a finished shard (`file`, now at `path`) and drops the cache
    /// of the shard that left the window.
    pub(crate) fn push(&mut self, file: &File, path: PathBuf) {
        release(file);
        self.paths.push_back(path);
        while self.paths.len() > self.depth {
            if let Some(old) = self.paths.pop_front() {
                release_path(&old);
            }
        }
    }

    /// Drops what can be dropped of every shard still in the window (at the end).
    pub(crate) fn drain(&mut self) {
        for p in self.paths.drain(..) {
            release_path(&p);
        }
    }
}

/// [`release`] for a shard by its path; one that was moved or deleted meanwhile has no
/// pages of ours left to drop.
fn release_path(path: &Path) {
    if let Ok(f) = File::open(path) {
        release(&f);
    }
}

/// Starts writeback of dirty pages and drops clean ones; advisory, so errors are ignored.
pub(crate) fn release(file: &File) {
    crate::platform::drop_cached(file);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn window_keeps_at_most_depth_shards_and_holds_no_file_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = WritebackWindow::new(2);
        for i in 0..5 {
            let path = dir.path().join(format!("s{i}"));
            let mut f = File::create(&path).unwrap();
            f.write_all(&[i as u8; 4096]).unwrap();
            w.push(&f, path);
            assert!(w.paths.len() <= 2);
        }
        // A data mover deletes a shard still in the window: nothing of ours holds it.
        std::fs::remove_file(dir.path().join("s4")).unwrap();
        let fd_dir = std::fs::read_dir("/proc/self/fd").unwrap();
        let deleted = fd_dir
            .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
            .filter(|p| p.starts_with(dir.path()))
            .count();
        assert_eq!(deleted, 0, "no descriptor is held on a shard in the window");
        w.drain();
        assert!(w.paths.is_empty());
        for i in 0..4 {
            assert_eq!(
                std::fs::read(dir.path().join(format!("s{i}"))).unwrap(),
                vec![i as u8; 4096],
                "releasing the cache never loses data"
            );
        }
    }
}
