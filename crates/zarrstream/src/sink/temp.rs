//! A shard file under its temporary name, removed unless it was committed or kept.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::platform::{self, FileExt};
use crate::shard::{FinalLayout, ShardLayout, encode_index, entry_bytes, packed};
use crate::spec::IndexLocation;
use crate::store::{self, COMPACTING_EXTENSION, CREATING_EXTENSION, VANISHED_TRIES};

/// Free space a reservation must leave behind, so that publishing `zarr.json` and
/// creating shard directories never fail for lack of space once frames are accepted.
const HEADROOM: u64 = 1 << 20;

/// Refuses a reservation of `needed` bytes next to `path` that would leave less than
/// [`HEADROOM`] free (a full disk is then refused before any frame is accepted for it).
fn ensure_headroom(path: &Path, needed: u64) -> Result<()> {
    let dir = path.parent().unwrap_or(path);
    let free = platform::free_space(dir).map_err(|e| Error::io("statvfs", dir, e, 0))?;
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
    /// The finished shard's length (once [`finish`](Self::finish) returned).
    pub len: u64,
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
            len: 0,
            committed: false,
            keep: std::sync::atomic::AtomicBool::new(false),
        };
        // The length is set either way; `reserved` says whether its blocks are too.
        temp.reserved = platform::reserve(&temp.file, layout.file_size)
            .map_err(|e| Error::io("fallocate", path, e, layout.file_size))?;
        let empty = entry_bytes(u64::MAX, u64::MAX).repeat(layout.n as usize);
        temp.file
            .write_all_at(&empty, layout.index_offset)
            .map_err(|e| Error::io("write", path, e, empty.len() as u64))?;
        platform::rename(&temp.path, path).map_err(|e| Error::io("rename", path, e, 0))?;
        temp.path = path.to_path_buf();
        Ok(temp)
    }

    /// Finishes the shard as `fin` lays it out: final index, holes, final length.
    ///
    /// Where chunks move (compaction of chunks written into slots), moving them inside
    /// this file would overwrite data its working index still points at, so a kill
    /// in the middle would lose a chunk. Instead the finished shard is written into a
    /// fresh file beside it and renamed over it: until that rename this file is
    /// untouched (and `recover` removes the fresh one), afterwards the temporary shard is
    /// the finished one. If the disk has no room for the copy, the chunks stay where
    /// they are (the shard keeps its slot gaps).
    ///
    /// On any error the file is kept for `recover`.
    pub(crate) fn finish(mut self, fin: &FinalLayout) -> Result<Self> {
        match self.finish_shard(fin) {
            Ok(()) => Ok(self),
            Err(e) => {
                self.keep();
                Err(e)
            }
        }
    }

    fn finish_shard(&mut self, fin: &FinalLayout) -> Result<()> {
        if fin.moves.is_empty() {
            return self.finish_in_place(fin);
        }
        match self.compact_fresh(fin) {
            Ok(()) => {
                self.len = fin.len;
                Ok(())
            }
            Err(Error::DiskFull { .. }) => {
                self.finish_in_place(&packed(&self.layout, &fin.written()))
            }
            Err(e) => Err(e),
        }
    }

    /// Writes the final index over unused bytes (after the last chunk, or over the
    /// working index at the start), punches the holes and cuts the file: a kill before
    /// the cut leaves the working index whole. An end index that would cover the start
    /// of the working index (chunks filling their slots to less than an index's length
    /// from the end) goes right after the working index instead: the shard then keeps
    /// the old working index as a gap of `16 n + 4` bytes, and a kill at any point
    /// leaves one whole index.
    fn finish_in_place(&mut self, fin: &FinalLayout) -> Result<()> {
        debug_assert!(fin.moves.is_empty());
        let l = self.layout;
        let covers_working = l.location == IndexLocation::End
            && fin.index_at < l.index_offset
            && fin.index_at + l.index_size > l.index_offset;
        let (at, len) = if covers_working {
            let at = l.index_offset + l.index_size;
            (at, at + l.index_size)
        } else {
            (fin.index_at, fin.len)
        };
        let mut index = vec![0u8; l.index_size as usize];
        encode_index(&fin.entries, &mut index);
        self.file
            .write_all_at(&index, at)
            .map_err(|e| Error::io("write", &self.path, e, index.len() as u64))?;
        self.punch(&fin.holes)?;
        self.set_len(len)?;
        self.len = len;
        Ok(())
    }

    /// Copies every chunk to its final place in a fresh `.compacting` file, adds the
    /// index, and renames that file over this one.
    fn compact_fresh(&mut self, fin: &FinalLayout) -> Result<()> {
        let path = self.path.with_extension(COMPACTING_EXTENSION);
        let result = self.write_compacted(&path, fin).and_then(|out| {
            // Our own handle of the temporary shard is closed first: Windows does not
            // replace a file that is open. Until the rename the temporary shard is
            // intact under its name, for `recover`.
            drop(std::mem::replace(&mut self.file, out));
            platform::rename(&path, &self.path).map_err(|source| Error::Io {
                op: "rename",
                path: self.path.clone(),
                source,
            })
        });
        if result.is_err() {
            // Best effort: `recover` removes a leftover `.compacting` too.
            let _ = std::fs::remove_file(&path);
        }
        result
    }

    fn write_compacted(&self, path: &Path, fin: &FinalLayout) -> Result<File> {
        let out = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e, fin.len))?;
        // Allocate first: a full disk fails here, before anything is copied.
        platform::reserve(&out, fin.len).map_err(|e| Error::io("fallocate", path, e, fin.len))?;
        for c in fin.copies() {
            copy_range(&self.file, &out, c.from, c.to, c.len)
                .map_err(|e| Error::io("copy", path, e, c.len))?;
            // The crash tests kill the writer here, between two copies.
            fail::fail_point!("compaction-after-copy");
        }
        let mut index = vec![0u8; self.layout.index_size as usize];
        encode_index(&fin.entries, &mut index);
        out.write_all_at(&index, fin.index_at)
            .map_err(|e| Error::io("write", path, e, index.len() as u64))?;
        out.set_len(fin.len)
            .map_err(|e| Error::io("truncate", path, e, 0))?;
        Ok(out)
    }

    /// Punches `(offset, len)` ranges out of the file (sparse packing).
    pub(crate) fn punch(&self, holes: &[(u64, u64)]) -> Result<()> {
        for &(off, len) in holes {
            platform::punch_hole(&self.file, off, len)
                .map_err(|e| Error::io("punch hole", &self.path, e, 0))?;
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

    /// Renames the file to `to`; from then on it is kept. Returns the open file. A
    /// directory on the way to `to` that another process removed meanwhile (a data
    /// mover pruning empty directories) is made again and added to `dirs`, the
    /// directories whose entries changed.
    pub(crate) fn commit(mut self, to: &Path, dirs: &mut BTreeSet<PathBuf>) -> Result<File> {
        let file = self
            .file
            .try_clone()
            .map_err(|e| Error::io("dup", &self.path, e, 0))?;
        let mut tries = 0;
        loop {
            match platform::rename(&self.path, to) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < VANISHED_TRIES => {
                    tries += 1;
                    if let Some(parent) = to.parent() {
                        store::create_dirs(parent, dirs)?;
                        dirs.insert(parent.to_path_buf());
                    }
                }
                Err(e) => return Err(Error::io("rename", to, e, 0)),
            }
        }
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

/// Copies `len` bytes at `from` in `src` to `to` in `dst`, in the kernel where it can
/// (no copy through user space, and a reflink on file systems that share extents), else
/// through a buffer.
fn copy_range(src: &File, dst: &File, from: u64, to: u64, len: u64) -> std::io::Result<()> {
    let (mut off_in, mut off_out) = (from, to);
    let left = len - platform::copy_in_kernel(src, dst, &mut off_in, &mut off_out, len)?;
    if left > 0 {
        let mut buf = vec![0u8; left as usize];
        src.read_exact_at(&mut buf, off_in)?;
        dst.write_all_at(&buf, off_out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::index::parse_index;

    #[test]
    fn an_end_index_never_covers_the_working_index_before_the_cut() {
        // 256 chunks of 64-byte slots: the index (4100 bytes) is longer than the 10
        // bytes the last chunk leaves free in its slot.
        let layout = ShardLayout {
            n: 256,
            slot_size: 64,
            data_start: 0,
            index_offset: 256 * 64,
            index_size: 16 * 256 + 4,
            file_size: 256 * 64 + 16 * 256 + 4,
            location: IndexLocation::End,
        };
        let dir = tempfile::tempdir().unwrap();
        let temp = TempShard::create(&dir.path().join("c.0.partial"), layout).unwrap();
        let written: Vec<Option<(u64, u64)>> = (0..256u64)
            .map(|i| Some((i * 64, if i == 255 { 54 } else { 64 })))
            .collect();
        for (i, e) in written.iter().enumerate() {
            let (at, n) = e.unwrap();
            temp.file
                .write_all_at(&vec![i as u8; n as usize], at)
                .unwrap();
            temp.file
                .write_all_at(&entry_bytes(at, n), layout.index_offset + 16 * i as u64)
                .unwrap();
        }
        let working_before = std::fs::read(&temp.path).unwrap()
            [layout.index_offset as usize..layout.file_size as usize]
            .to_vec();
        let fin = packed(&layout, &written);
        assert!(
            fin.index_at < layout.index_offset,
            "the case this test is about"
        );
        let temp = temp.finish(&fin).unwrap();
        let bytes = std::fs::read(&temp.path).unwrap();
        assert_eq!(temp.len, layout.file_size + layout.index_size);
        assert_eq!(bytes.len() as u64, temp.len);
        // The working index is untouched, and the final index ends the file.
        assert_eq!(
            &bytes[layout.index_offset as usize..layout.file_size as usize],
            &working_before[..]
        );
        let entries = parse_index(&bytes[layout.file_size as usize..], 256).unwrap();
        assert_eq!(entries, written);
    }
}
