//! [`ErrorKind`]: what kind of failure an error is, and the one classification of every
//! error variant of the crate into it.
//!
//! The bindings map kinds, never variants: the C API picks its `ZS_E_*` code by kind,
//! the Python package its exception class by [`ErrorKind::as_str`]. So a new variant is
//! classified once, here, where the matches are exhaustive and a variant left out does
//! not compile; a new kind is then one line in each binding, and each binding's table
//! test over [`ErrorKind::ALL`] fails until it is there.
//!
//! The kinds are as fine as the finest binding needs: two variants share a kind only
//! when neither binding tells them apart.

use std::fmt;

use super::{Error, FrameIndexError, IoError, RemoteError, is_disk_full};
use crate::config::ConfigError;
use crate::read::ReadError;
use crate::recover::RecoverError;
use crate::store::StoreError;

/// Declares [`ErrorKind`], its names and [`ErrorKind::ALL`] from one list, so the three
/// cannot drift apart.
macro_rules! kinds {
    (
        $(#[$meta:meta])*
        pub enum ErrorKind {
            $( $(#[$doc:meta])* $kind:ident = $name:literal, )*
        }
    ) => {
        $(#[$meta])*
        pub enum ErrorKind {
            $( $(#[$doc])* #[doc = concat!("\n\nName: `", $name, "`.")] $kind, )*
        }

        impl ErrorKind {
            /// Every kind, in declaration order: for the bindings' tests that each one
            /// has its code or class.
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$kind),*];

            /// The kind's name: lower-case `snake_case`, stable across releases (the
            /// Python package keys its exception classes by it).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorKind::$kind => $name,)*
                }
            }
        }
    };
}

kinds! {
    /// The kind of an [`Error`] (and of [`StoreError`], [`RecoverError`], [`ReadError`],
    /// [`ConfigError`], [`RemoteError`]): a flat, stable classification to act on
    /// without matching the variants, as [`std::io::ErrorKind`] is for I/O errors.
    ///
    /// New kinds may be added (it is `#[non_exhaustive]`); a kind's name
    /// ([`as_str`](Self::as_str)) never changes.
    ///
    /// ```
    /// use zarrstream::{Error, ErrorKind};
    /// let e = Error::ArrayFull { frames: 10 };
    /// assert_eq!(e.kind(), ErrorKind::ArrayFull);
    /// assert_eq!(e.kind().as_str(), "array_full");
    /// assert_eq!(e.kind().to_string(), "array_full");
    /// assert!(ErrorKind::ALL.contains(&ErrorKind::Internal));
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum ErrorKind {
        /// An impossible array specification, OME option, writer option, acquisition
        /// order or array key, options that exclude each other, or configuration JSON
        /// that does not parse.
        InvalidConfig = "invalid_config",
        /// An argument of a call that cannot be used: an attribute the caller may not
        /// set, an operation that needs an OME-Zarr image writer.
        InvalidArgument = "invalid_argument",
        /// An impossible plate layout.
        InvalidPlate = "invalid_plate",
        /// A frame of the wrong byte length or element type; the writer goes on.
        InvalidFrame = "invalid_frame",
        /// Per-frame metadata that does not fit the writer's; the frame was not pushed.
        InvalidFrameMeta = "invalid_frame_meta",
        /// A frame index of the wrong rank, out of bounds, or outside the window of an
        /// unbounded axis 0; the frame was not taken.
        FrameIndex = "frame_index",
        /// A frame index written (or skipped) before; the first frame stays.
        DuplicateFrame = "duplicate_frame",
        /// Appended and indexed frames mixed on one writer.
        MixedFrames = "mixed_frames",
        /// Frames written by index into an array that takes appended frames only.
        IndexUnsupported = "index_unsupported",
        /// The acquisition order keeps more open at once than a budget allows.
        WorkingSet = "working_set",
        /// A bounded append axis holds every frame.
        ArrayFull = "array_full",
        /// The writer is closed.
        Closed = "closed",
        /// A recording has no array of this key.
        UnknownArray = "unknown_array",
        /// The store path exists and overwriting was not asked for.
        Exists = "exists",
        /// The path is a Zarr group zarrstream did not create, or no group.
        NotOwned = "not_owned",
        /// Another live writer is recording into the store.
        Locked = "locked",
        /// Resume with a specification that differs from the array on disk.
        ResumeMismatch = "resume_mismatch",
        /// A store left by a writer that did not finish: it needs `recover` first.
        NeedsRecovery = "needs_recovery",
        /// A valid request this version cannot carry out (resuming some arrays).
        Unsupported = "unsupported",
        /// The file system is full, or a quota is exhausted.
        DiskFull = "disk_full",
        /// Any other operating-system I/O failure.
        Io = "io",
        /// The store path to read does not exist. (An OS "not found" met while reading
        /// or writing is [`Io`](Self::Io), with its OS error.)
        NotFound = "not_found",
        /// The path holds no array zarrstream can read: no or foreign `zarr.json`, an
        /// unreadable shard index, a shard key that names no shard.
        NotAStore = "not_a_store",
        /// Another process cut a shard file while the writer filled it.
        ShardTruncated = "shard_truncated",
        /// An object-store URL or store option that cannot be used.
        RemoteUrl = "remote_url",
        /// The object store refused the credentials.
        RemoteCredentials = "remote_credentials",
        /// The object store's bucket (or container) does not exist.
        RemoteNoBucket = "remote_no_bucket",
        /// The object store did not answer.
        RemoteUnreachable = "remote_unreachable",
        /// An upload failed after its retries; the data stay in the staging directory.
        RemoteUpload = "remote_upload",
        /// Another coordinator wrote the shared `zarr.json` in between.
        RemoteConflict = "remote_conflict",
        /// The staging directory holds data in the way.
        RemoteStaging = "remote_staging",
        /// A bug: a codec failed, a thread died, a panic was caught.
        Internal = "internal",
    }
}

impl fmt::Display for ErrorKind {
    /// The kind's name ([`as_str`](Self::as_str)).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// What kind of failure this is: the one classification of the variants, which the
    /// C API's codes and the Python package's exception classes follow.
    ///
    /// ```
    /// use zarrstream::{Error, ErrorKind};
    /// assert_eq!(Error::Closed.kind(), ErrorKind::Closed);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind as K;
        match self {
            Error::Spec(_)
            | Error::Ome(_)
            | Error::InvalidOption { .. }
            | Error::Order(_)
            | Error::ArrayKey { .. }
            | Error::ConflictingOptions(..) => K::InvalidConfig,
            Error::Attribute { .. } | Error::NotAnImage(_) => K::InvalidArgument,
            Error::Plate(_) => K::InvalidPlate,
            // A type mismatch is a size mismatch to a binding that pushes bytes: one kind.
            Error::FrameSize { .. } | Error::DataType { .. } => K::InvalidFrame,
            Error::FrameMeta { .. } => K::InvalidFrameMeta,
            Error::FrameIndex { problem, .. } => problem.kind(),
            Error::WorkingSet { .. } => K::WorkingSet,
            Error::ArrayFull { .. } => K::ArrayFull,
            Error::Closed => K::Closed,
            Error::UnknownArray { .. } => K::UnknownArray,
            Error::Exists { .. } => K::Exists,
            Error::NotOwned { .. } => K::NotOwned,
            Error::Locked { .. } => K::Locked,
            Error::ResumeMismatch { .. } => K::ResumeMismatch,
            Error::NeedsRecovery { .. } => K::NeedsRecovery,
            Error::ResumeUnsupported(_) => K::Unsupported,
            Error::DiskFull { .. } => K::DiskFull,
            Error::Io { .. } => K::Io,
            Error::ShardTruncated { .. } => K::ShardTruncated,
            Error::Remote(r) => r.kind(),
            // A codec fails on input the writer made itself: a bug, not the caller's.
            Error::Codec { .. } | Error::Internal(_) => K::Internal,
        }
    }
}

impl FrameIndexError {
    /// The kind of an [`Error::FrameIndex`] with this problem.
    pub fn kind(&self) -> ErrorKind {
        match self {
            FrameIndexError::Rank { .. }
            | FrameIndexError::OutOfBounds { .. }
            | FrameIndexError::OutsideWindow { .. } => ErrorKind::FrameIndex,
            FrameIndexError::Duplicate => ErrorKind::DuplicateFrame,
            FrameIndexError::Appending | FrameIndexError::Indexed => ErrorKind::MixedFrames,
            FrameIndexError::Unsupported(_) => ErrorKind::IndexUnsupported,
        }
    }
}

impl RemoteError {
    /// What kind of failure this is (see [`Error::kind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            RemoteError::Url { .. } => ErrorKind::RemoteUrl,
            RemoteError::Credentials { .. } => ErrorKind::RemoteCredentials,
            RemoteError::NoBucket { .. } => ErrorKind::RemoteNoBucket,
            RemoteError::Unreachable { .. } => ErrorKind::RemoteUnreachable,
            RemoteError::Upload { .. } => ErrorKind::RemoteUpload,
            RemoteError::Conflict { .. } => ErrorKind::RemoteConflict,
            RemoteError::Staging { .. } => ErrorKind::RemoteStaging,
        }
    }
}

impl IoError {
    /// [`DiskFull`](ErrorKind::DiskFull) for a full disk or quota, as
    /// [`Error::from`] turns it into [`Error::DiskFull`]; [`Io`](ErrorKind::Io)
    /// otherwise.
    pub fn kind(&self) -> ErrorKind {
        if is_disk_full(&self.source) {
            ErrorKind::DiskFull
        } else {
            ErrorKind::Io
        }
    }
}

impl ReadError {
    /// [`NotAStore`](ErrorKind::NotAStore): bytes read back that the reader refuses
    /// make the store one it cannot read, whatever the reason.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ReadError::IndexLength { .. }
            | ReadError::IndexChecksum { .. }
            | ReadError::Truncated { .. }
            | ReadError::InvalidHeader { .. }
            | ReadError::Unsupported { .. }
            | ReadError::TooLarge { .. }
            | ReadError::Corrupt { .. }
            | ReadError::Metadata(_) => ErrorKind::NotAStore,
        }
    }
}

impl StoreError {
    /// What kind of failure this is (see [`Error::kind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::NotFound(_) => ErrorKind::NotFound,
            StoreError::NotAStore { .. } | StoreError::NoSuchShard { .. } => ErrorKind::NotAStore,
            StoreError::Metadata { source, .. } | StoreError::Index { source, .. } => source.kind(),
            StoreError::Io(e) => e.kind(),
        }
    }
}

impl RecoverError {
    /// What kind of failure this is (see [`Error::kind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            RecoverError::Metadata { source, .. } => source.kind(),
            RecoverError::Io(e) => e.kind(),
            RecoverError::Write(e) => e.kind(),
            RecoverError::Store(e) => e.kind(),
        }
    }
}

impl ConfigError {
    /// [`InvalidPlate`](ErrorKind::InvalidPlate) for a plate's layout,
    /// [`InvalidConfig`](ErrorKind::InvalidConfig) for anything else.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ConfigError::Plate(_) => ErrorKind::InvalidPlate,
            ConfigError::NotUtf8(_)
            | ConfigError::Json(_)
            | ConfigError::Value { .. }
            | ConfigError::Spec(_)
            | ConfigError::Ome(_) => ErrorKind::InvalidConfig,
        }
    }
}

#[cfg(test)]
mod tests;
