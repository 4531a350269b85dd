//! The FUSE side: serves a [`Model`] at a mount point, counts the requests that change
//! it, and cuts the power on command or at a chosen request.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation,
    INodeNo, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    WriteFlags,
};

use crate::model::{Attr, Ino, Kind, Model};

/// How the power goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutKind {
    /// Everything not yet durable is lost ([`Model::power_cut`]).
    Clean,
    /// Some of what was not yet durable survives, chosen by the seed
    /// ([`Model::torn_cut`]).
    Torn(u64),
}

/// A power cut that happened.
#[derive(Debug, Clone)]
pub struct Cut {
    /// Requests that changed the file system before the cut.
    pub ops: u64,
    /// How the power went.
    pub kind: CutKind,
    /// The file system as programs saw it at the moment of the cut (what they had been
    /// told was written, durable or not).
    pub live: Model,
}

#[derive(Debug)]
struct State {
    model: Model,
    /// `false` between a cut and [`PowerFs::power_on`]: every request fails with `EIO`,
    /// as on a device that is gone.
    powered: bool,
    /// Bumped at each cut: a handle opened before it is dead (`EIO`), as after a reboot.
    epoch: u64,
    next_handle: u64,
    /// Requests that changed the model (or would have), counted while powered.
    ops: u64,
    /// Cut the power instead of serving request number `n` (counted as `ops` is).
    armed: Option<(u64, CutKind)>,
    cut: Option<Cut>,
}

impl State {
    fn cut(&mut self, kind: CutKind) -> Cut {
        let live = self.model.clone();
        let cut = guarded(|| {
            match kind {
                CutKind::Clean => self.model.power_cut(),
                CutKind::Torn(seed) => self.model.torn_cut(seed),
            }
            Ok(())
        });
        if cut.is_err() {
            // A bug of the model: nothing survives rather than a state no disk could
            // have left.
            self.model = Model::new();
        }
        self.powered = false;
        self.epoch += 1;
        self.armed = None;
        let cut = Cut {
            ops: self.ops,
            kind,
            live,
        };
        self.cut = Some(cut.clone());
        cut
    }

    /// Checks the power before a request that changes the file system, and cuts it if
    /// this is the request it was armed for.
    fn change(&mut self) -> Result<(), Errno> {
        if !self.powered {
            return Err(Errno::EIO);
        }
        self.ops += 1;
        if let Some((n, kind)) = self.armed
            && self.ops >= n
        {
            self.cut(kind);
            return Err(Errno::EIO);
        }
        Ok(())
    }

    /// A change through an open handle: the handle must be from the current power-on.
    fn change_through<R>(
        &mut self,
        fh: FileHandle,
        f: impl FnOnce(&mut Model) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        self.check(fh)?;
        self.change()?;
        guarded(|| f(&mut self.model))
    }

    fn read(&self) -> Result<&Model, Errno> {
        if self.powered {
            Ok(&self.model)
        } else {
            Err(Errno::EIO)
        }
    }

    fn handle(&mut self) -> FileHandle {
        self.next_handle += 1;
        FileHandle((self.epoch << 40) | self.next_handle)
    }

    /// A handle from before the last cut refers to a file system that is gone.
    fn check(&self, fh: FileHandle) -> Result<(), Errno> {
        if self.powered && fh.0 >> 40 == self.epoch {
            Ok(())
        } else {
            Err(Errno::EIO)
        }
    }
}

/// A file system with a volatile layer, to be mounted with [`PowerFs::mount`]; clones
/// share one state, so a test keeps one to cut the power of the mounted one.
#[derive(Debug, Clone)]
pub struct PowerFs {
    state: Arc<Mutex<State>>,
}

impl Default for PowerFs {
    fn default() -> Self {
        PowerFs::new()
    }
}

/// Attribute and entry lifetimes: zero, so the kernel asks again each time and sees the
/// state after a cut at once (file data is never cached either: every open is
/// `FOPEN_DIRECT_IO`).
const TTL: Duration = Duration::ZERO;

impl PowerFs {
    /// An empty, powered file system.
    pub fn new() -> PowerFs {
        PowerFs {
            state: Arc::new(Mutex::new(State {
                model: Model::new(),
                powered: true,
                epoch: 0,
                next_handle: 0,
                ops: 0,
                armed: None,
                cut: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a state that is still consistent (every
        // change is made in one step), so a poisoned lock is used as it is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Mounts the file system at `at` (an existing directory), served by a background
    /// thread. Needs root (fuser then calls mount(2) itself; no libfuse or fusermount).
    pub fn mount(&self, at: &Path) -> io::Result<Mounted> {
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("zarrstream-testfs".into()),
            MountOption::DefaultPermissions,
        ];
        let session = fuser::spawn_mount(self.clone(), at, &config)?;
        Ok(Mounted {
            session: Some(session),
            at: at.to_path_buf(),
        })
    }

    /// Cuts the power now: only what was made durable stays, and the file system answers
    /// `EIO` until [`power_on`](Self::power_on).
    pub fn power_cut(&self) -> Cut {
        self.lock().cut(CutKind::Clean)
    }

    /// Cuts the power now, keeping a part of what was not yet durable (see
    /// [`Model::torn_cut`]).
    pub fn torn_cut(&self, seed: u64) -> Cut {
        self.lock().cut(CutKind::Torn(seed))
    }

    /// Arms a cut of `kind` in place of the `n`-th request that changes the file system
    /// (counting from the first one ever served; see [`ops`](Self::ops)).
    pub fn cut_at(&self, n: u64, kind: CutKind) {
        self.lock().armed = Some((n, kind));
    }

    /// The last cut, if the power went.
    pub fn last_cut(&self) -> Option<Cut> {
        self.lock().cut.clone()
    }

    /// Whether the power is on.
    pub fn powered(&self) -> bool {
        self.lock().powered
    }

    /// Requests that changed (or tried to change) the file system so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Restores the power: the file system serves what the cut left, and handles opened
    /// before it stay dead.
    pub fn power_on(&self) {
        let mut s = self.lock();
        s.powered = true;
        s.armed = None;
    }

    /// Runs `f` on the current state (what is mounted now, or what the cut left).
    pub fn with_model<R>(&self, f: impl FnOnce(&Model) -> R) -> R {
        f(&self.lock().model)
    }
}

/// A mounted [`PowerFs`]; unmounts when dropped (lazily, if something still has a file
/// open there).
#[derive(Debug)]
pub struct Mounted {
    session: Option<BackgroundSession>,
    at: PathBuf,
}

impl Mounted {
    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.at
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // fuser unmounts when its session drops, but gives up on a busy mount point;
        // detaching it then leaves no mount behind (the kernel ends it when the last
        // file there is closed).
        drop(self.session.take());
        let _ = rustix::mount::unmount(&self.at, rustix::mount::UnmountFlags::DETACH);
    }
}

/// Runs a change of the model, answering `EIO` if it panics (a bug of the model): the
/// server thread must live on, since a program waiting for an answer from a FUSE server
/// that is gone can hang for good.
fn guarded<R>(f: impl FnOnce() -> Result<R, Errno>) -> Result<R, Errno> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(Err(Errno::EIO))
}

fn file_attr(a: Attr) -> FileAttr {
    let (kind, perm, nlink) = match a.kind {
        Kind::File => (FileType::RegularFile, 0o644, 1),
        Kind::Dir => (FileType::Directory, 0o755, 2),
    };
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind,
        perm,
        nlink,
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn ino(i: INodeNo) -> Ino {
    i.0
}

impl PowerFs {
    /// Runs a request that changes the model: the power check (and an armed cut) first.
    fn change<R>(&self, f: impl FnOnce(&mut Model) -> Result<R, Errno>) -> Result<R, Errno> {
        let mut s = self.lock();
        s.change()?;
        guarded(|| f(&mut s.model))
    }

    fn entry(&self, f: impl FnOnce(&mut Model) -> Result<Ino, Errno>, reply: ReplyEntry) {
        let r = self.change(|m| {
            let i = f(m)?;
            m.attr(i)
        });
        match r {
            Ok(a) => reply.entry(&TTL, &file_attr(a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn empty(&self, f: impl FnOnce(&mut Model) -> Result<(), Errno>, reply: ReplyEmpty) {
        match self.change(f) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

const O_EXCL: i32 = 0o200;
const O_TRUNC: i32 = 0o1000;

impl fuser::Filesystem for PowerFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = self.lock();
        match s.read().and_then(|m| m.attr(m.lookup(ino(parent), name)?)) {
            Ok(a) => reply.entry(&TTL, &file_attr(a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, i: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = self.lock();
        match s.read().and_then(|m| m.attr(ino(i))) {
            Ok(a) => reply.attr(&TTL, &file_attr(a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        i: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Only the size is kept; modes and times are not part of the model.
        let r = match size {
            Some(len) => self.change(|m| {
                m.set_len(ino(i), len)?;
                m.attr(ino(i))
            }),
            None => self.lock().read().and_then(|m| m.attr(ino(i))),
        };
        match r {
            Ok(a) => reply.attr(&TTL, &file_attr(a)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        self.entry(|m| m.mkdir(ino(parent), name), reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(|m| m.unlink(ino(parent), name), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(|m| m.rmdir(ino(parent), name), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            // RENAME_EXCHANGE and RENAME_WHITEOUT are not modelled.
            reply.error(Errno::EINVAL);
            return;
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        self.empty(
            |m| m.rename(ino(parent), name, ino(newparent), newname, noreplace),
            reply,
        );
    }

    fn open(&self, _req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.lock();
        match s.read().and_then(|m| m.attr(ino(i))) {
            Ok(_) => {
                let fh = s.handle();
                reply.opened(fh, FopenFlags::FOPEN_DIRECT_IO);
            }
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.lock();
        let r = s.change().and_then(|()| {
            let m = &mut s.model;
            guarded(|| match m.lookup(ino(parent), name) {
                Ok(_) if flags & O_EXCL != 0 => Err(Errno::EEXIST),
                Ok(existing) => {
                    if flags & O_TRUNC != 0 {
                        m.set_len(existing, 0)?;
                    }
                    m.attr(existing)
                }
                Err(_) => {
                    let i = m.create(ino(parent), name)?;
                    m.attr(i)
                }
            })
        });
        match r {
            Ok(a) => {
                let fh = s.handle();
                reply.created(
                    &TTL,
                    &file_attr(a),
                    Generation(0),
                    fh,
                    FopenFlags::FOPEN_DIRECT_IO,
                );
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let s = self.lock();
        match s
            .check(fh)
            .and_then(|()| s.model.read(ino(i), offset, size as usize))
        {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.lock();
        let r = s.change_through(fh, |m| m.write(ino(i), offset, data));
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() makes nothing durable.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        let r = s.change_through(fh, |m| m.fsync(ino(i)));
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.lock();
        match s.read().and_then(|m| m.read_dir(ino(i))) {
            Ok(_) => {
                let fh = s.handle();
                reply.opened(fh, FopenFlags::empty());
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let s = self.lock();
        let entries = match s.check(fh).and_then(|()| s.model.read_dir(ino(i))) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        let dots = [
            (".".into(), ino(i), Kind::Dir),
            ("..".into(), ino(i), Kind::Dir),
        ];
        let all = dots.into_iter().chain(entries);
        for (k, (name, child, kind)) in all.enumerate().skip(offset as usize) {
            let t = match kind {
                Kind::File => FileType::RegularFile,
                Kind::Dir => FileType::Directory,
            };
            // The offset given is the one of the next entry.
            if reply.add(INodeNo(child), k as u64 + 1, t, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        let r = s.change_through(fh, |m| m.fsync_dir(ino(i)));
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // Plenty of room: the writer reserves shards only where statvfs shows space.
        let blocks = 1 << 30;
        reply.statfs(blocks, blocks, blocks, 1 << 20, 1 << 20, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        i: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        let r = s.change_through(fh, |m| m.fallocate(ino(i), offset, length, mode));
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
