//! Windowed writeback for shards that are not flushed one by one (`Durability::None`, and
//! `Periodic` between commits), so hours of acquisition neither pile up dirty pages nor
//! fill the page cache with finished shards.
//!
//! On Linux, `posix_fadvise(DONTNEED)` first starts asynchronous writeback of the file's
//! dirty pages (like `sync_file_range(SYNC_FILE_RANGE_WRITE)`), then drops the pages that
//! are clean. So one call when a shard is finished starts its writeback without waiting,
//! and a second call a few shards later, when that writeback has had time to complete,
//! drops the shard from the cache. `rustix` offers `fadvise` safely; `sync_file_range`
//! would need `unsafe` FFI outside the slot module.

use std::collections::VecDeque;
use std::fs::File;

/// Finished shards whose writeback was started and whose pages are not yet dropped.
#[derive(Debug)]
pub(crate) struct WritebackWindow {
    files: VecDeque<File>,
    depth: usize,
}

impl WritebackWindow {
    /// A window of `depth` shards in flight (at least one).
    pub(crate) fn new(depth: usize) -> Self {
        WritebackWindow {
            files: VecDeque::new(),
            depth: depth.max(1),
        }
    }

    /// Starts writeback of a finished shard and drops the cache of the shard that left
    /// the window.
    pub(crate) fn push(&mut self, file: File) {
        release(&file);
        self.files.push_back(file);
        while self.files.len() > self.depth {
            if let Some(old) = self.files.pop_front() {
                release(&old);
            }
        }
    }

    /// Drops what can be dropped of every shard still in the window (at the end).
    pub(crate) fn drain(&mut self) {
        for f in self.files.drain(..) {
            release(&f);
        }
    }
}

/// Starts writeback of dirty pages and drops clean ones; advisory, so errors are ignored.
pub(crate) fn release(file: &File) {
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn window_keeps_at_most_depth_files_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = WritebackWindow::new(2);
        for i in 0..5 {
            let mut f = File::create(dir.path().join(format!("s{i}"))).unwrap();
            f.write_all(&[i as u8; 4096]).unwrap();
            w.push(f);
            assert!(w.files.len() <= 2);
        }
        w.drain();
        assert!(w.files.is_empty());
        for i in 0..5 {
            assert_eq!(
                std::fs::read(dir.path().join(format!("s{i}"))).unwrap(),
                vec![i as u8; 4096],
                "releasing the cache never loses data"
            );
        }
    }
}
