//! Error types. Every failure a caller can cause or meet is a variant here; what kind
//! of failure each one is ([`ErrorKind`]) is decided in one place, `error/kind.rs`.

mod input;
mod io_error;
mod kind;

pub use input::{FrameIndexError, OmeError, OrderError, ParseError, PlateError, SpecError};
pub use io_error::{IoError, RemoteError};
pub use kind::ErrorKind;

use std::io;
use std::path::PathBuf;

use crate::dtype::DataType;
/// Errors of the writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The array specification is invalid.
    #[error("invalid array specification: {0}")]
    Spec(#[from] SpecError),
    /// The OME-Zarr image options are invalid.
    #[error("invalid OME-Zarr options: {0}")]
    Ome(#[from] OmeError),
    /// The layout of an OME-Zarr plate is invalid.
    #[error("invalid plate: {0}")]
    Plate(#[from] PlateError),
    /// A writer option is out of its range.
    #[error("writer option {option} = {value} is out of range (at most {max})")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: usize,
        /// The largest accepted value.
        max: usize,
    },
    /// Resume was asked for an array this version cannot continue.
    #[error("resume is not supported for {0}")]
    ResumeUnsupported(&'static str),
    /// The acquisition order does not fit the array.
    #[error("invalid acquisition order: {0}")]
    Order(#[from] OrderError),
    /// [`Writer::write_frame`](crate::Writer::write_frame) was given an index it cannot
    /// take (see [`FrameIndexError`]), or `push` was called on a writer written by index.
    #[error("frame index {index:?}: {problem}")]
    FrameIndex {
        /// The index given (empty for a `push` on an indexed writer).
        index: Vec<u64>,
        /// What is wrong with it.
        problem: FrameIndexError,
    },
    /// The acquisition order keeps more open at once than a budget allows: shard files
    /// reserved and unfinished, or staging memory.
    #[error(
        "the acquisition order keeps {needed} {what} open at once but {limit} allows {budget}; {advice}"
    )]
    WorkingSet {
        /// What is open (`"shards"`).
        what: &'static str,
        /// How many the order needs.
        needed: u64,
        /// What bounds it (`"max_open_shards"`).
        limit: &'static str,
        /// The bound.
        budget: u64,
        /// What to do about it.
        advice: &'static str,
    },
    /// Two writer options that exclude each other were both set.
    #[error("writer options {0} and {1} cannot be combined")]
    ConflictingOptions(&'static str, &'static str),
    /// A frame of the wrong byte length was pushed.
    #[error("frame {frame}: expected {expected} bytes, got {got}")]
    FrameSize {
        /// Index of the frame (0-based, counting every push).
        frame: u64,
        /// Bytes per frame of this array.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A frame of a different element type than the array's was pushed.
    #[error("frame {frame}: element type {got} does not match the array's data type {expected}")]
    DataType {
        /// Index of the frame.
        frame: u64,
        /// The array's data type.
        expected: DataType,
        /// The pushed element type.
        got: DataType,
    },
    /// The store path exists and overwriting was not requested.
    #[error("{path}: already exists (set overwrite to replace it)")]
    Exists {
        /// The store path.
        path: PathBuf,
    },
    /// Another live process is recording into this store.
    #[error("{path}: the store is locked by a writer that is still recording")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The filesystem is full.
    #[error("{op} {path}: disk full ({needed} bytes needed)")]
    DiskFull {
        /// What was being done (`"reserve"`, `"fallocate"`, `"write"`, …).
        op: &'static str,
        /// The file being written.
        path: PathBuf,
        /// Bytes that were being reserved or written (0 when unknown).
        needed: u64,
    },
    /// Any other I/O failure, with the operation and path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`"create"`, `"fallocate"`, …).
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Another process cut (truncated) a shard file while the writer was filling it.
    /// The writer never truncates its own temporary shards, so the chunks written before
    /// the cut may be gone: the shard is not finished, the writer stops (the shards
    /// published before stay valid), and the file is kept in `.zarrstream-partial/` for
    /// `zarrstream recover`, which keeps whatever chunks still verify. With the mmap and
    /// direct sinks, which write through a mapping of the file, the access that met the
    /// cut raised SIGBUS; the writer's SIGBUS guard caught it, so no process dies.
    #[error(
        "{path}: the shard file was truncated by another process while it was written \
         ({reason}); it is kept for `zarrstream recover`"
    )]
    ShardTruncated {
        /// The temporary shard file.
        path: PathBuf,
        /// How the cut was seen (the file's length against its reservation, a write
        /// through the mapping that met it, lost working-index entries).
        reason: String,
    },
    /// The array's append axis is bounded and every frame has been pushed.
    #[error("the array is full: it holds {frames} frames")]
    ArrayFull {
        /// Frames the array holds.
        frames: u64,
    },
    /// A [`Recording`](crate::Recording) was given an array key it cannot use: not a
    /// relative `/` path of plain names (empty, `.`, `..`, `c`, `zarr.json` or dot-prefixed
    /// components are refused), a key given twice, or a key inside another array's.
    #[error("array key {key:?}: {reason}")]
    ArrayKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A [`Recording`](crate::Recording) has no array with this key (or index).
    #[error("the recording has no array {key:?}")]
    UnknownArray {
        /// The key (or the index, as text) that was asked for.
        key: String,
    },
    /// `push` after `finish`, or after a failure closed the writer.
    #[error("the writer is closed")]
    Closed,
    /// A codec failed; it carries the library's message.
    #[error("codec {codec}: {message}")]
    Codec {
        /// Codec name.
        codec: &'static str,
        /// What failed.
        message: String,
    },
    /// An attribute name the caller may not set.
    #[error("attribute {name:?}: {reason}")]
    Attribute {
        /// The name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Per-frame metadata that does not fit the writer's
    /// [`FrameMetaSpec`](crate::FrameMetaSpec): an unknown field, a value of the wrong
    /// type, JSON for a writer that stores none. The frame was not pushed.
    #[error("frame metadata {field}: {reason}")]
    FrameMeta {
        /// The field (`"json"` for the free JSON object).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The path is a Zarr group that zarrstream did not create (no `zarrstream` marker
    /// in its attributes), or not a Zarr group at all; a [`Recording`](crate::Recording)
    /// adds arrays to someone else's group only with
    /// [`WriterOptions::existing_group`](crate::WriterOptions::existing_group).
    #[error("{path}: {reason}")]
    NotOwned {
        /// The group's directory.
        path: PathBuf,
        /// What was found there.
        reason: &'static str,
    },
    /// Resume was asked with a specification that differs from the array on disk.
    #[error("resume {path}: {field} differs: on disk {on_disk}, requested {requested}")]
    ResumeMismatch {
        /// The array's directory.
        path: PathBuf,
        /// The field that differs (`"codec"`, `"chunk_shape"`, `"dtype"`, …).
        field: &'static str,
        /// Its value on disk.
        on_disk: String,
        /// Its value in the request.
        requested: String,
    },
    /// The store was left by a writer that did not finish (temporary shards, or state
    /// `running` with no live writer): run `zarrstream recover` on it first.
    #[error("{path}: {reason}; run `zarrstream recover` on it first")]
    NeedsRecovery {
        /// The array's directory.
        path: PathBuf,
        /// What was found.
        reason: String,
    },
    /// An object-store destination failed: its URL, credentials, bucket, reachability,
    /// an upload, or a second coordinator (see [`RemoteError`]).
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The operation needs an OME-Zarr image (a writer made by `Writer::create_ome`).
    #[error("{0} needs an OME-Zarr image writer")]
    NotAnImage(&'static str),
    /// A writer thread died or panicked ([`Error::panicked`]); this is a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// [`Error::Internal`] for a panic caught in `context` (a thread, or an entry point
    /// of a binding that runs the writer under `catch_unwind`), with the panic's
    /// message when it has one.
    ///
    /// ```
    /// let payload = std::panic::catch_unwind(|| panic!("index out of range")).unwrap_err();
    /// let e = zarrstream::Error::panicked("a worker thread", payload.as_ref());
    /// assert_eq!(e.to_string(), "internal error: a worker thread panicked: index out of range");
    /// ```
    pub fn panicked(context: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a panic without a message)");
        Error::Internal(format!("{context} panicked: {message}"))
    }

    /// Wraps an I/O error with its operation and path, turning a full disk or quota
    /// (`ENOSPC`, `EDQUOT`, `ERROR_DISK_FULL`, …) into [`Error::DiskFull`] so callers can match on one variant.
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
        source: io::Error,
        needed: u64,
    ) -> Self {
        let path = path.into();
        if is_disk_full(&source) {
            Error::DiskFull { op, path, needed }
        } else {
            Error::Io { op, path, source }
        }
    }
}

/// Whether `e` is a full disk or an exhausted quota: `std` classifies `ENOSPC` and
/// Windows' `ERROR_DISK_FULL`/`ERROR_HANDLE_DISK_FULL` as `StorageFull`, `EDQUOT` and
/// `ERROR_DISK_QUOTA_EXCEEDED` as `QuotaExceeded`.
fn is_disk_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
