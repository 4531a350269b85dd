//! The file system's state, without FUSE: a live view (what a program sees) and what a
//! power cut would leave (the durable view).
//!
//! The durability model is strict, as POSIX allows and as ext4 or XFS may show after a
//! crash at the wrong moment:
//!
//! - A file's data and size become durable when that file is `fsync`ed or
//!   `fdatasync`ed ([`Model::fsync`]), not before: no writeback ever happens by itself.
//! - A change of a directory's entries (create, mkdir, rename, unlink, rmdir) becomes
//!   durable when a directory it changed is `fsync`ed ([`Model::fsync_dir`]). A rename
//!   changes two directories and becomes durable as a whole (a journal commits it in
//!   one transaction) when either is synced. Syncing a file never makes its name
//!   durable, and syncing a directory never makes its own name in its parent durable.
//!
//! Namespace changes are kept in a log, in the order they happened, each flagged
//! durable or not; the durable namespace is the last durable base with the flagged
//! operations replayed in log order. Flagging a subset (as a torn cut does) can
//! therefore never produce a state that no order of the same operations could make:
//! a rename is never replayed before the create of the file it moves.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};

use fuser::Errno;

/// An inode number (the root directory is [`ROOT`]).
pub type Ino = u64;

/// The root directory's inode number (FUSE's).
pub const ROOT: Ino = 1;

/// The granularity at which a torn cut keeps or loses unsynced writes: a page, as the
/// page cache writes back.
pub const PAGE: usize = 4096;

/// `fallocate` mode bits the model understands (Linux values).
const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;

/// What kind of inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

#[derive(Debug, Clone)]
enum Node {
    /// A file's bytes as programs see them, and as they were at its last fsync.
    File { live: Vec<u8>, durable: Vec<u8> },
    /// A directory's live entries (its durable ones are in the namespace log).
    Dir { entries: BTreeMap<OsString, Ino> },
}

impl Node {
    fn kind(&self) -> Kind {
        match self {
            Node::File { .. } => Kind::File,
            Node::Dir { .. } => Kind::Dir,
        }
    }
}

/// A namespace change, as the log keeps it.
#[derive(Debug, Clone)]
enum NsOp {
    /// `name` in `parent` now names `ino` (create, mkdir).
    Link {
        parent: Ino,
        name: OsString,
        ino: Ino,
        kind: Kind,
    },
    /// `name` in `parent` no longer names `ino` (unlink, rmdir).
    Unlink {
        parent: Ino,
        name: OsString,
        ino: Ino,
    },
    /// `ino` moved from `from/from_name` to `to/to_name` (replacing what was there).
    Rename {
        from: Ino,
        from_name: OsString,
        to: Ino,
        to_name: OsString,
        ino: Ino,
    },
}

impl NsOp {
    fn touches(&self, dir: Ino) -> bool {
        match self {
            NsOp::Link { parent, .. } | NsOp::Unlink { parent, .. } => *parent == dir,
            NsOp::Rename { from, to, .. } => *from == dir || *to == dir,
        }
    }

    /// Applies the change to a namespace (directory inode → entries).
    fn apply(&self, dirs: &mut HashMap<Ino, BTreeMap<OsString, Ino>>) {
        match self {
            NsOp::Link {
                parent,
                name,
                ino,
                kind,
            } => {
                if *kind == Kind::Dir {
                    dirs.entry(*ino).or_default();
                }
                dirs.entry(*parent).or_default().insert(name.clone(), *ino);
            }
            NsOp::Unlink { parent, name, ino } => remove_if(dirs, *parent, name, *ino),
            NsOp::Rename {
                from,
                from_name,
                to,
                to_name,
                ino,
            } => {
                // The source entry is gone only where it named this inode: if its
                // create was not made durable, there is nothing to remove.
                remove_if(dirs, *from, from_name, *ino);
                dirs.entry(*to).or_default().insert(to_name.clone(), *ino);
            }
        }
    }
}

fn remove_if(dirs: &mut HashMap<Ino, BTreeMap<OsString, Ino>>, dir: Ino, name: &OsStr, ino: Ino) {
    if let Some(entries) = dirs.get_mut(&dir)
        && entries.get(name) == Some(&ino)
    {
        entries.remove(name);
    }
}

/// Seeded draws for torn cuts: ChaCha8 is specified, so a seed replays one anywhere.
#[derive(Debug, Clone)]
struct Draws(ChaCha8Rng);

impl Draws {
    fn new(seed: u64) -> Self {
        Draws(ChaCha8Rng::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// The file system's state: live inodes, the durable namespace and the log of namespace
/// changes since.
#[derive(Debug, Clone)]
pub struct Model {
    nodes: HashMap<Ino, Node>,
    /// The durable namespace up to the first log entry not yet durable.
    base: HashMap<Ino, BTreeMap<OsString, Ino>>,
    /// Namespace changes after `base`, in order, each with whether it is durable.
    log: VecDeque<(NsOp, bool)>,
    next_ino: Ino,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

/// What a stat of an inode tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// The inode.
    pub ino: Ino,
    /// File or directory.
    pub kind: Kind,
    /// Bytes (a directory: its number of entries).
    pub size: u64,
}

impl Model {
    /// An empty file system (an empty root directory, durable).
    pub fn new() -> Model {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node::Dir {
                entries: BTreeMap::new(),
            },
        );
        let mut base = HashMap::new();
        base.insert(ROOT, BTreeMap::new());
        Model {
            nodes,
            base,
            log: VecDeque::new(),
            next_ino: ROOT + 1,
        }
    }

    fn node(&self, ino: Ino) -> Result<&Node, Errno> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn entries(&self, dir: Ino) -> Result<&BTreeMap<OsString, Ino>, Errno> {
        match self.node(dir)? {
            Node::Dir { entries } => Ok(entries),
            Node::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    fn entries_mut(&mut self, dir: Ino) -> Result<&mut BTreeMap<OsString, Ino>, Errno> {
        match self.nodes.get_mut(&dir).ok_or(Errno::ENOENT)? {
            Node::Dir { entries } => Ok(entries),
            Node::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    fn file(&self, ino: Ino) -> Result<&Vec<u8>, Errno> {
        match self.node(ino)? {
            Node::File { live, .. } => Ok(live),
            Node::Dir { .. } => Err(Errno::EISDIR),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> Result<&mut Vec<u8>, Errno> {
        match self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)? {
            Node::File { live, .. } => Ok(live),
            Node::Dir { .. } => Err(Errno::EISDIR),
        }
    }

    /// Whether `ino` is a live inode (it may be unlinked but still open).
    pub fn exists(&self, ino: Ino) -> bool {
        self.nodes.contains_key(&ino)
    }

    /// The inode `name` names in `parent`.
    pub fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Ino, Errno> {
        self.entries(parent)?
            .get(name)
            .copied()
            .ok_or(Errno::ENOENT)
    }

    /// The inode at a `/`-separated path from the root (`""` is the root).
    pub fn resolve(&self, path: &str) -> Result<Ino, Errno> {
        path.split('/')
            .filter(|p| !p.is_empty())
            .try_fold(ROOT, |dir, name| self.lookup(dir, OsStr::new(name)))
    }

    /// Kind and size of `ino`.
    pub fn attr(&self, ino: Ino) -> Result<Attr, Errno> {
        let node = self.node(ino)?;
        let size = match node {
            Node::File { live, .. } => live.len() as u64,
            Node::Dir { entries } => entries.len() as u64,
        };
        Ok(Attr {
            ino,
            kind: node.kind(),
            size,
        })
    }

    /// The entries of directory `dir`, by name.
    pub fn read_dir(&self, dir: Ino) -> Result<Vec<(OsString, Ino, Kind)>, Errno> {
        let entries = self.entries(dir)?;
        Ok(entries
            .iter()
            .map(|(name, ino)| {
                let kind = self.nodes.get(ino).map_or(Kind::File, Node::kind);
                (name.clone(), *ino, kind)
            })
            .collect())
    }

    fn link(&mut self, parent: Ino, name: &OsStr, node: Node) -> Result<Ino, Errno> {
        if self.entries(parent)?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let kind = node.kind();
        self.nodes.insert(ino, node);
        self.entries_mut(parent)?.insert(name.to_os_string(), ino);
        self.log.push_back((
            NsOp::Link {
                parent,
                name: name.to_os_string(),
                ino,
                kind,
            },
            false,
        ));
        Ok(ino)
    }

    /// Creates an empty file `name` in `parent` (`EEXIST` if the name is taken).
    pub fn create(&mut self, parent: Ino, name: &OsStr) -> Result<Ino, Errno> {
        self.link(
            parent,
            name,
            Node::File {
                live: Vec::new(),
                durable: Vec::new(),
            },
        )
    }

    /// Creates an empty directory `name` in `parent`.
    pub fn mkdir(&mut self, parent: Ino, name: &OsStr) -> Result<Ino, Errno> {
        self.link(
            parent,
            name,
            Node::Dir {
                entries: BTreeMap::new(),
            },
        )
    }

    /// Removes the file `name` from `parent`. Its inode stays (open descriptors keep
    /// working, and a durable name may still point at it until the parent is synced).
    pub fn unlink(&mut self, parent: Ino, name: &OsStr) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        if self.node(ino)?.kind() == Kind::Dir {
            return Err(Errno::EISDIR);
        }
        self.remove_entry(parent, name, ino)
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir(&mut self, parent: Ino, name: &OsStr) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        if !self.entries(ino)?.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        self.remove_entry(parent, name, ino)
    }

    fn remove_entry(&mut self, parent: Ino, name: &OsStr, ino: Ino) -> Result<(), Errno> {
        self.entries_mut(parent)?.remove(name);
        self.log.push_back((
            NsOp::Unlink {
                parent,
                name: name.to_os_string(),
                ino,
            },
            false,
        ));
        Ok(())
    }

    /// Renames `from/from_name` to `to/to_name`, replacing a file or an empty directory
    /// there (unless `noreplace`: then `EEXIST`).
    pub fn rename(
        &mut self,
        from: Ino,
        from_name: &OsStr,
        to: Ino,
        to_name: &OsStr,
        noreplace: bool,
    ) -> Result<(), Errno> {
        let ino = self.lookup(from, from_name)?;
        let kind = self.node(ino)?.kind();
        self.entries(to)?;
        if from == to && from_name == to_name {
            return Ok(());
        }
        if kind == Kind::Dir && self.is_ancestor(ino, to) {
            return Err(Errno::EINVAL);
        }
        if let Some(&old) = self.entries(to)?.get(to_name) {
            if noreplace {
                return Err(Errno::EEXIST);
            }
            match (kind, self.node(old)?.kind()) {
                (Kind::File, Kind::Dir) => return Err(Errno::EISDIR),
                (Kind::Dir, Kind::File) => return Err(Errno::ENOTDIR),
                (Kind::Dir, Kind::Dir) if !self.entries(old)?.is_empty() => {
                    return Err(Errno::ENOTEMPTY);
                }
                _ => {}
            }
        }
        self.entries_mut(from)?.remove(from_name);
        self.entries_mut(to)?.insert(to_name.to_os_string(), ino);
        self.log.push_back((
            NsOp::Rename {
                from,
                from_name: from_name.to_os_string(),
                to,
                to_name: to_name.to_os_string(),
                ino,
            },
            false,
        ));
        Ok(())
    }

    /// Whether directory `dir` is `of` or contains it (a rename must not move a
    /// directory into itself).
    fn is_ancestor(&self, dir: Ino, of: Ino) -> bool {
        let mut stack = vec![dir];
        let mut seen = HashSet::new();
        while let Some(d) = stack.pop() {
            if d == of {
                return true;
            }
            if seen.insert(d)
                && let Ok(entries) = self.entries(d)
            {
                stack.extend(entries.values().copied());
            }
        }
        false
    }

    /// Up to `size` bytes of file `ino` from `offset`.
    pub fn read(&self, ino: Ino, offset: u64, size: usize) -> Result<Vec<u8>, Errno> {
        let data = self.file(ino)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let end = start.saturating_add(size).min(data.len());
        Ok(data[start..end].to_vec())
    }

    /// Writes `bytes` at `offset` of file `ino` (a gap before it reads as zeros).
    pub fn write(&mut self, ino: Ino, offset: u64, bytes: &[u8]) -> Result<(), Errno> {
        let start = usize::try_from(offset).map_err(|_| Errno::EFBIG)?;
        let end = start.checked_add(bytes.len()).ok_or(Errno::EFBIG)?;
        let data = self.file_mut(ino)?;
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(bytes);
        Ok(())
    }

    /// Cuts or extends file `ino` to `len` bytes (`ftruncate`).
    pub fn set_len(&mut self, ino: Ino, len: u64) -> Result<(), Errno> {
        let len = usize::try_from(len).map_err(|_| Errno::EFBIG)?;
        self.file_mut(ino)?.resize(len, 0);
        Ok(())
    }

    /// `fallocate`: mode 0 reserves (the file grows to cover the range), `KEEP_SIZE`
    /// reserves without growing, `PUNCH_HOLE | KEEP_SIZE` zeros the range; other modes
    /// are `EOPNOTSUPP`, as on a file system without them.
    pub fn fallocate(&mut self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<(), Errno> {
        let end = offset.checked_add(len).ok_or(Errno::EFBIG)?;
        let data = self.file_mut(ino)?;
        match mode {
            0 => {
                let end = usize::try_from(end).map_err(|_| Errno::EFBIG)?;
                if data.len() < end {
                    data.resize(end, 0);
                }
            }
            FALLOC_FL_KEEP_SIZE => {}
            m if m == FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE => {
                let size = data.len() as u64;
                let (start, end) = (offset.min(size) as usize, end.min(size) as usize);
                data[start..end].fill(0);
            }
            _ => return Err(Errno::EOPNOTSUPP),
        }
        Ok(())
    }

    /// `fsync`/`fdatasync` of file `ino`: its data and size become durable (its name
    /// does not). A directory: as [`fsync_dir`](Self::fsync_dir).
    pub fn fsync(&mut self, ino: Ino) -> Result<(), Errno> {
        match self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)? {
            Node::File { live, durable } => {
                durable.clone_from(live);
                Ok(())
            }
            Node::Dir { .. } => self.fsync_dir(ino),
        }
    }

    /// `fsync` of directory `dir`: every namespace change that touched it so far
    /// becomes durable.
    pub fn fsync_dir(&mut self, dir: Ino) -> Result<(), Errno> {
        self.entries(dir)?;
        for (op, durable) in &mut self.log {
            if op.touches(dir) {
                *durable = true;
            }
        }
        // Fold the durable prefix into the base, so the log holds only what may still
        // be lost.
        while self.log.front().is_some_and(|(_, d)| *d) {
            if let Some((op, _)) = self.log.pop_front() {
                op.apply(&mut self.base);
            }
        }
        Ok(())
    }

    /// Namespace changes not yet durable.
    pub fn volatile_changes(&self) -> usize {
        self.log.iter().filter(|(_, d)| !d).count()
    }

    /// Power loss: only what was made durable stays. The model then is the file system
    /// as it would mount after the machine restarts (everything in it durable).
    pub fn power_cut(&mut self) {
        *self = self.after_cut(|_| false, |_, _, durable| durable.to_vec());
    }

    /// Power loss with the disk having written some of what was not yet made durable,
    /// as a real one may: each namespace change not yet durable survives or not (a coin
    /// per change, replayed in their order), and each file keeps, page by page, the
    /// written or the synced bytes, and its synced or its written length. Deterministic
    /// for a `seed`.
    pub fn torn_cut(&mut self, seed: u64) {
        let mut rng = Draws::new(seed);
        let keep: Vec<bool> = self.log.iter().map(|_| rng.coin()).collect();
        *self = self.after_cut(
            |i| keep[i],
            |rng_seed, live, durable| torn_bytes(&mut Draws::new(seed ^ rng_seed), live, durable),
        );
    }

    /// The state a cut leaves: the namespace change `i` not yet durable survives when
    /// `keep(i)`; a file's bytes are `bytes(ino, live, durable)`.
    fn after_cut(
        &self,
        keep: impl Fn(usize) -> bool,
        bytes: impl Fn(u64, &[u8], &[u8]) -> Vec<u8>,
    ) -> Model {
        let mut dirs = self.base.clone();
        for (i, (op, durable)) in self.log.iter().enumerate() {
            if *durable || keep(i) {
                op.apply(&mut dirs);
            }
        }
        // Keep what the root reaches (an unlinked or orphaned inode is gone, as fsck
        // would find it; a cycle of directories moved into each other is unreachable).
        let mut nodes = HashMap::new();
        let mut base = HashMap::new();
        let mut stack = vec![ROOT];
        while let Some(dir) = stack.pop() {
            if base.contains_key(&dir) {
                continue;
            }
            let mut entries = dirs.get(&dir).cloned().unwrap_or_default();
            entries.retain(|_, ino| self.nodes.contains_key(ino));
            for &ino in entries.values() {
                match self.nodes.get(&ino) {
                    Some(Node::Dir { .. }) => stack.push(ino),
                    Some(Node::File { live, durable }) => {
                        let kept = bytes(ino.wrapping_mul(0x2545_f491_4f6c_dd1d), live, durable);
                        nodes.insert(
                            ino,
                            Node::File {
                                live: kept.clone(),
                                durable: kept,
                            },
                        );
                    }
                    None => {}
                }
            }
            nodes.insert(
                dir,
                Node::Dir {
                    entries: entries.clone(),
                },
            );
            base.insert(dir, entries);
        }
        Model {
            nodes,
            base,
            log: VecDeque::new(),
            next_ino: self.next_ino,
        }
    }

    /// Every path in the live view (files and directories, `/`-separated, sorted;
    /// directories end in `/`).
    pub fn paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![(ROOT, String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            if let Ok(entries) = self.entries(dir) {
                for (name, &ino) in entries {
                    let path = format!("{prefix}{}", name.to_string_lossy());
                    if self.node(ino).is_ok_and(|n| n.kind() == Kind::Dir) {
                        out.push(format!("{path}/"));
                        stack.push((ino, format!("{path}/")));
                    } else {
                        out.push(path);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// The live bytes of the file at `path`.
    pub fn read_path(&self, path: &str) -> Result<Vec<u8>, Errno> {
        let ino = self.resolve(path)?;
        self.file(ino).cloned()
    }

    /// Writes the live view under `dir` (an existing directory) as ordinary files and
    /// directories.
    pub fn materialize(&self, dir: &std::path::Path) -> std::io::Result<()> {
        for path in self.paths() {
            let target = dir.join(path.trim_end_matches('/'));
            if path.ends_with('/') {
                std::fs::create_dir_all(&target)?;
            } else {
                let bytes = self
                    .read_path(&path)
                    .map_err(|e| std::io::Error::from_raw_os_error(e.code()))?;
                std::fs::write(&target, bytes)?;
            }
        }
        Ok(())
    }
}

/// A torn file: its synced or its written length, and per page the written or the
/// synced bytes (beyond the synced length, a page not written back reads as zeros).
fn torn_bytes(rng: &mut Draws, live: &[u8], durable: &[u8]) -> Vec<u8> {
    if live == durable {
        return durable.to_vec();
    }
    let len = if rng.coin() {
        live.len()
    } else {
        durable.len()
    };
    let mut out = vec![0u8; len];
    for start in (0..len).step_by(PAGE) {
        let end = (start + PAGE).min(len);
        let src = if rng.coin() { live } else { durable };
        if src.len() > start {
            let have = src.len().min(end);
            out[start..have].copy_from_slice(&src[start..have]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    /// A file written, synced and named in a synced directory survives a cut.
    #[test]
    fn synced_file_in_synced_directory_survives() {
        let mut m = Model::new();
        let d = m.mkdir(ROOT, os("d")).unwrap();
        let f = m.create(d, os("f")).unwrap();
        m.write(f, 0, b"hello").unwrap();
        m.fsync(f).unwrap();
        m.fsync_dir(d).unwrap();
        m.fsync_dir(ROOT).unwrap();
        m.power_cut();
        assert_eq!(m.read_path("d/f").unwrap(), b"hello");
    }

    /// Each of the three steps is needed: the data's fsync, the file's directory's,
    /// and the directory's own entry in its parent.
    #[test]
    fn each_missing_sync_loses_something() {
        let setup = |sync_file: bool, sync_dir: bool, sync_root: bool| {
            let mut m = Model::new();
            let d = m.mkdir(ROOT, os("d")).unwrap();
            let f = m.create(d, os("f")).unwrap();
            m.write(f, 0, b"hello").unwrap();
            if sync_file {
                m.fsync(f).unwrap();
            }
            if sync_dir {
                m.fsync_dir(d).unwrap();
            }
            if sync_root {
                m.fsync_dir(ROOT).unwrap();
            }
            m.power_cut();
            m
        };
        // Data not synced: the name survives, the bytes do not.
        assert_eq!(setup(false, true, true).read_path("d/f").unwrap(), b"");
        // The file's directory not synced: the directory survives, empty.
        let m = setup(true, false, true);
        assert_eq!(m.paths(), vec!["d/"]);
        // The directory's entry in the root not synced: nothing survives (the synced
        // file in it is an orphan).
        assert!(setup(true, true, false).paths().is_empty());
    }

    /// A rename is durable once either directory it changed is synced, and then as a
    /// whole: the file is never in both places nor in neither.
    #[test]
    fn rename_is_atomic_and_durable_with_either_directory() {
        for sync_target in [true, false] {
            let mut m = Model::new();
            let a = m.mkdir(ROOT, os("a")).unwrap();
            let b = m.mkdir(ROOT, os("b")).unwrap();
            m.fsync_dir(ROOT).unwrap();
            let f = m.create(a, os("tmp")).unwrap();
            m.write(f, 0, b"x").unwrap();
            m.fsync(f).unwrap();
            m.fsync_dir(a).unwrap();
            m.rename(a, os("tmp"), b, os("f"), false).unwrap();
            m.fsync_dir(if sync_target { b } else { a }).unwrap();
            m.power_cut();
            assert_eq!(
                m.paths(),
                vec!["a/", "b/", "b/f"],
                "sync target {sync_target}"
            );
            assert_eq!(m.read_path("b/f").unwrap(), b"x");
        }
    }

    /// A rename whose directories were not synced is lost: the old name stays.
    #[test]
    fn unsynced_rename_is_lost_and_replacement_keeps_old_file() {
        let mut m = Model::new();
        let old = m.create(ROOT, os("doc")).unwrap();
        m.write(old, 0, b"old").unwrap();
        m.fsync(old).unwrap();
        m.fsync_dir(ROOT).unwrap();
        let new = m.create(ROOT, os(".doc.tmp")).unwrap();
        m.write(new, 0, b"new").unwrap();
        m.fsync(new).unwrap();
        m.rename(ROOT, os(".doc.tmp"), ROOT, os("doc"), false)
            .unwrap();
        assert_eq!(m.read_path("doc").unwrap(), b"new");
        let mut cut = m.clone();
        cut.power_cut();
        assert_eq!(cut.paths(), vec!["doc"]);
        assert_eq!(cut.read_path("doc").unwrap(), b"old");
        m.fsync_dir(ROOT).unwrap();
        m.power_cut();
        assert_eq!(m.read_path("doc").unwrap(), b"new");
    }

    /// Replaying durable changes in log order: a rename made durable before the create
    /// of the file it moved still finds the file where the create put it.
    #[test]
    fn later_sync_of_the_source_directory_keeps_order() {
        let mut m = Model::new();
        let p = m.mkdir(ROOT, os("p")).unwrap();
        let c = m.mkdir(ROOT, os("c")).unwrap();
        m.fsync_dir(ROOT).unwrap();
        let f = m.create(p, os("s.partial")).unwrap();
        m.write(f, 0, b"data").unwrap();
        m.fsync(f).unwrap();
        m.rename(p, os("s.partial"), c, os("s"), false).unwrap();
        m.fsync_dir(c).unwrap();
        m.fsync_dir(p).unwrap();
        m.power_cut();
        assert_eq!(m.paths(), vec!["c/", "c/s", "p/"]);
    }

    #[test]
    fn unlink_and_rmdir_need_the_parent_synced() {
        let mut m = Model::new();
        let d = m.mkdir(ROOT, os("d")).unwrap();
        let f = m.create(ROOT, os("f")).unwrap();
        m.fsync(f).unwrap();
        m.fsync_dir(ROOT).unwrap();
        m.unlink(ROOT, os("f")).unwrap();
        m.rmdir(ROOT, os("d")).unwrap();
        let mut lost = m.clone();
        lost.power_cut();
        assert_eq!(lost.paths(), vec!["d/", "f"]);
        m.fsync_dir(ROOT).unwrap();
        m.power_cut();
        assert!(m.paths().is_empty());
        assert_eq!(m.lookup(ROOT, os("d")), Err(Errno::ENOENT));
        let _ = d;
    }

    #[test]
    fn errors_match_posix() {
        let mut m = Model::new();
        let d = m.mkdir(ROOT, os("d")).unwrap();
        let f = m.create(d, os("f")).unwrap();
        assert_eq!(m.create(d, os("f")), Err(Errno::EEXIST));
        assert_eq!(m.rmdir(ROOT, os("d")), Err(Errno::ENOTEMPTY));
        assert_eq!(m.unlink(ROOT, os("d")), Err(Errno::EISDIR));
        assert_eq!(m.lookup(f, os("x")), Err(Errno::ENOTDIR));
        let g = m.create(ROOT, os("g")).unwrap();
        assert_eq!(
            m.rename(ROOT, os("g"), d, os("f"), true),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            m.rename(ROOT, os("d"), d, os("x"), false),
            Err(Errno::EINVAL)
        );
        m.rename(ROOT, os("g"), d, os("f"), false).unwrap();
        assert_eq!(m.lookup(d, os("f")), Ok(g));
        assert_eq!(m.fallocate(g, 0, 1, 0x10), Err(Errno::EOPNOTSUPP));
    }

    #[test]
    fn writes_truncate_fallocate_and_punch() {
        let mut m = Model::new();
        let f = m.create(ROOT, os("f")).unwrap();
        m.fallocate(f, 0, 8192, 0).unwrap();
        assert_eq!(m.attr(f).unwrap().size, 8192);
        m.fallocate(f, 0, 100_000, FALLOC_FL_KEEP_SIZE).unwrap();
        assert_eq!(m.attr(f).unwrap().size, 8192);
        m.write(f, 10, b"abc").unwrap();
        m.write(f, 9000, b"z").unwrap();
        assert_eq!(m.attr(f).unwrap().size, 9001);
        m.fallocate(f, 0, 11, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
            .unwrap();
        assert_eq!(m.read(f, 9, 4).unwrap(), b"\0\0bc");
        m.set_len(f, 12).unwrap();
        assert_eq!(m.read(f, 0, 100).unwrap().len(), 12);
        assert_eq!(m.read(f, 50, 10).unwrap(), b"");
    }

    /// Data written after the last fsync is lost by a clean cut, and a later fsync
    /// makes the new bytes and the new length durable.
    #[test]
    fn data_after_fsync_is_volatile() {
        let mut m = Model::new();
        let f = m.create(ROOT, os("f")).unwrap();
        m.fsync_dir(ROOT).unwrap();
        m.write(f, 0, b"one").unwrap();
        m.fsync(f).unwrap();
        m.write(f, 3, b"two").unwrap();
        let mut cut = m.clone();
        cut.power_cut();
        assert_eq!(cut.read_path("f").unwrap(), b"one");
        m.fsync(f).unwrap();
        m.power_cut();
        assert_eq!(m.read_path("f").unwrap(), b"onetwo");
    }

    /// A torn cut keeps everything durable, and of the rest each page is the written
    /// or the synced one; namespace changes survive in subsets that replay in order.
    #[test]
    fn torn_cut_keeps_durable_state_and_whole_pages() {
        let synced = vec![1u8; 3 * PAGE];
        let written = vec![2u8; 4 * PAGE];
        let mut seen_lengths = HashSet::new();
        let mut seen_names = HashSet::new();
        for seed in 0..64 {
            let mut m = Model::new();
            let keep = m.create(ROOT, os("keep")).unwrap();
            m.write(keep, 0, b"durable").unwrap();
            m.fsync(keep).unwrap();
            let f = m.create(ROOT, os("f")).unwrap();
            m.fsync_dir(ROOT).unwrap();
            m.write(f, 0, &synced).unwrap();
            m.fsync(f).unwrap();
            m.write(f, 0, &written).unwrap();
            let t = m.create(ROOT, os("t")).unwrap();
            m.fsync(t).unwrap();
            m.rename(ROOT, os("t"), ROOT, os("u"), false).unwrap();
            m.torn_cut(seed);
            assert_eq!(m.read_path("keep").unwrap(), b"durable", "seed {seed}");
            let f = m.read_path("f").unwrap();
            seen_lengths.insert(f.len());
            assert!(f.len() == 3 * PAGE || f.len() == 4 * PAGE, "seed {seed}");
            for (k, page) in f.chunks(PAGE).enumerate() {
                let first = page[0];
                assert!(page.iter().all(|b| *b == first), "seed {seed}: a torn page");
                // Past the synced length, a page not written back reads as zeros.
                let synced_byte = if k < 3 { 1 } else { 0 };
                assert!(first == synced_byte || first == 2, "seed {seed}");
            }
            let names = m.paths();
            // The rename is replayed only after the create: "u" never without "t"
            // having been created, and never both names.
            assert!(
                !(names.contains(&"t".to_string()) && names.contains(&"u".to_string())),
                "seed {seed}: {names:?}"
            );
            seen_names.insert(names);
        }
        assert_eq!(seen_lengths.len(), 2, "both lengths occur over 64 seeds");
        assert!(
            seen_names.len() >= 3,
            "several namespace outcomes: {seen_names:?}"
        );
    }

    /// Regression: a file written pages beyond its synced length (or cut shorter than
    /// it) tears without a panic, for any seed.
    #[test]
    fn torn_cut_of_files_longer_or_shorter_than_synced() {
        for seed in 0..64 {
            let mut m = Model::new();
            let grow = m.create(ROOT, os("grow")).unwrap();
            let shrink = m.create(ROOT, os("shrink")).unwrap();
            m.fsync_dir(ROOT).unwrap();
            m.write(grow, 0, &[1u8; 10]).unwrap();
            m.write(shrink, 0, &[1u8; 5 * PAGE]).unwrap();
            m.fsync(grow).unwrap();
            m.fsync(shrink).unwrap();
            m.write(grow, 0, &vec![2u8; 5 * PAGE]).unwrap();
            m.set_len(shrink, 10).unwrap();
            m.torn_cut(seed);
            let g = m.read_path("grow").unwrap();
            assert!(g.len() == 10 || g.len() == 5 * PAGE, "seed {seed}");
            let s = m.read_path("shrink").unwrap();
            assert!(s.len() == 10 || s.len() == 5 * PAGE, "seed {seed}");
            // The first bytes were never changed; past the truncation a page reads as
            // synced or, where the truncation reached the disk, as zeros.
            assert!(s[..10].iter().all(|b| *b == 1), "seed {seed}");
            assert!(s.iter().all(|b| *b <= 1), "seed {seed}");
        }
    }

    #[test]
    fn materialize_writes_the_tree() {
        let mut m = Model::new();
        let d = m.mkdir(ROOT, os("d")).unwrap();
        let f = m.create(d, os("f")).unwrap();
        m.write(f, 0, b"x").unwrap();
        let out = std::env::temp_dir().join(format!("zarrstream-testfs-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        m.materialize(&out).unwrap();
        assert_eq!(std::fs::read(out.join("d/f")).unwrap(), b"x");
        std::fs::remove_dir_all(&out).unwrap();
    }
}
