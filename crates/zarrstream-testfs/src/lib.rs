//! A FUSE file system for power-loss tests.
//!
//! [`PowerFs`] passes every write through to an in-memory file system, but keeps what
//! was not yet made durable in a volatile layer: a file's data becomes durable when the
//! file is `fsync`ed (or `fdatasync`ed), a change of a directory's entries when that
//! directory is `fsync`ed ([`model`] states the rules exactly). A test records onto the
//! mount, cuts the power ([`PowerFs::power_cut`], [`PowerFs::torn_cut`], or
//! [`PowerFs::cut_at`] the `n`-th request that changes anything), after which the file
//! system answers `EIO`, as a device that is gone; [`PowerFs::power_on`] then serves
//! what survived, as after a restart.
//!
//! Mounting needs root and `/dev/fuse`: fuser's own mount code calls mount(2), with no
//! libfuse, pkg-config or fusermount involved.
//!
//! ```no_run
//! use zarrstream_testfs::PowerFs;
//! let fs = PowerFs::new();
//! let mnt = fs.mount(std::path::Path::new("/mnt/power"))?;
//! std::fs::write(mnt.path().join("a"), b"lost")?;
//! fs.power_cut();
//! fs.power_on();
//! assert!(!mnt.path().join("a").exists()); // the directory was never synced
//! # Ok::<(), std::io::Error>(())
//! ```

#![forbid(unsafe_code)]

mod fs;
pub mod model;

pub use fs::{Cut, CutKind, Mounted, PowerFs};
pub use model::Model;
