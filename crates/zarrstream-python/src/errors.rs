//! Rust errors as the Python package's exceptions.
//!
//! The exception classes live in Python (`zarrstream/errors.py`), where each can derive
//! from both the package's base class and the fitting built-in (`ValueError`,
//! `FileExistsError`, `OSError` with `errno.ENOSPC`, …); this module names the kind of
//! failure and lets `zarrstream.errors._from_native` build the exception.

use std::any::Any;
use std::path::Path;

use pyo3::prelude::*;
use zarrstream::config::ConfigError;
use zarrstream::recover::RecoverError;
use zarrstream::store::StoreError;
use zarrstream::{Error, FrameIndexError, IoError, RemoteError};

/// What went wrong, in the words `zarrstream.errors._from_native` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Impossible shapes, options or metadata: `ValueError`.
    Invalid,
    /// An invalid plate layout: `ValueError` (a subclass of `Invalid`'s).
    Plate,
    /// A frame of the wrong size or type: `ValueError`.
    Frame,
    /// The store path exists: `FileExistsError`.
    Exists,
    /// Another writer holds the store.
    Locked,
    /// The file system is full: `OSError` with `errno.ENOSPC`.
    DiskFull,
    /// Any other operating-system error: an `OSError` chosen by its errno.
    Io,
    /// A bounded append axis has every frame: `IndexError`.
    ArrayFull,
    /// A frame index the array cannot take (the wrong number of coordinates, out of
    /// bounds, outside the window of an unbounded axis 0): `IndexError`.
    FrameIndex,
    /// A frame index already written, or appended and indexed frames mixed on one
    /// writer: `ValueError`.
    FrameConflict,
    /// Indexed writes into an array that takes appended frames only (pyramid levels,
    /// frame metadata): `NotImplementedError`.
    IndexUnsupported,
    /// The acquisition order keeps more shards open than `max_open_shards` allows:
    /// `ValueError`.
    WorkingSet,
    /// The writer was closed: `ValueError`.
    Closed,
    /// Not a store zarrstream can read: `ValueError`.
    NotAStore,
    /// A recording has no array of that key: `KeyError`.
    UnknownArray,
    /// A Zarr group zarrstream did not create (or no group): `FileExistsError`.
    NotOwned,
    /// Resume with a specification that differs from the array on disk: `ValueError`.
    ResumeMismatch,
    /// A store left unfinished by a dead writer (run `recover` first): `OSError`.
    NeedsRecovery,
    /// Another process truncated a shard file while it was written: `OSError`.
    ShardTruncated,
    /// Something this version cannot do (resume of an OME image, …):
    /// `NotImplementedError`.
    Unsupported,
    /// An object-store URL or store option that cannot be used: `ValueError`.
    RemoteUrl,
    /// The object store refused the credentials: `PermissionError`.
    RemoteCredentials,
    /// The bucket does not exist: `FileNotFoundError`.
    RemoteNoBucket,
    /// The object store did not answer: `ConnectionError`.
    RemoteUnreachable,
    /// An upload failed after its retries (the data stay in the staging directory, the
    /// failure's path): `ConnectionError`.
    RemoteUpload,
    /// Another coordinator published the shared `zarr.json` in between:
    /// `FileExistsError`.
    RemoteConflict,
    /// The staging directory (the failure's path) holds data in the way:
    /// `FileExistsError`.
    RemoteStaging,
    /// A bug (a panic, a dead thread): `RuntimeError`.
    Internal,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Invalid => "invalid",
            Kind::Plate => "plate",
            Kind::Frame => "frame",
            Kind::Exists => "exists",
            Kind::Locked => "locked",
            Kind::DiskFull => "disk_full",
            Kind::Io => "io",
            Kind::ArrayFull => "array_full",
            Kind::FrameIndex => "frame_index",
            Kind::FrameConflict => "frame_conflict",
            Kind::IndexUnsupported => "index_unsupported",
            Kind::WorkingSet => "working_set",
            Kind::Closed => "closed",
            Kind::NotAStore => "not_a_store",
            Kind::UnknownArray => "unknown_array",
            Kind::NotOwned => "not_owned",
            Kind::ResumeMismatch => "resume_mismatch",
            Kind::NeedsRecovery => "needs_recovery",
            Kind::ShardTruncated => "shard_truncated",
            Kind::Unsupported => "unsupported",
            Kind::RemoteUrl => "remote_url",
            Kind::RemoteCredentials => "remote_credentials",
            Kind::RemoteNoBucket => "remote_no_bucket",
            Kind::RemoteUnreachable => "remote_unreachable",
            Kind::RemoteUpload => "remote_upload",
            Kind::RemoteConflict => "remote_conflict",
            Kind::RemoteStaging => "remote_staging",
            Kind::Internal => "internal",
        }
    }
}

/// A failure on its way to Python.
#[derive(Debug)]
pub(crate) struct Failure {
    kind: Kind,
    message: String,
    errno: Option<i32>,
    path: Option<String>,
    /// The field a resume found different (`"codec"`, …).
    field: Option<&'static str>,
    /// Attributes of the exception beyond the message, as a JSON object (a frame
    /// index error's `index`, a working-set error's `needed`, `limit` and `budget`),
    /// boxed: every binding call returns a `Result` with a `Failure` in it.
    extra: Option<Box<serde_json::Value>>,
}

impl Failure {
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
            errno: None,
            path: None,
            field: None,
            extra: None,
        }
    }

    fn at(mut self, path: &Path) -> Self {
        self.path = Some(path.to_string_lossy().into_owned());
        self
    }

    fn field(mut self, field: &'static str) -> Self {
        self.field = Some(field);
        self
    }

    fn extra(mut self, extra: serde_json::Value) -> Self {
        self.extra = Some(Box::new(extra));
        self
    }

    fn errno(mut self, errno: Option<i32>) -> Self {
        self.errno = errno;
        self
    }

    /// A panic caught in `context`: a bug, reported as an exception rather than letting
    /// PyO3 turn it into `PanicException` (a `BaseException` most code does not catch).
    pub(crate) fn panicked(context: &str, payload: &(dyn Any + Send)) -> Self {
        Failure::from(Error::panicked(context, payload))
    }

    /// The Python exception.
    pub(crate) fn into_pyerr(self, py: Python<'_>) -> PyErr {
        let made = py
            .import("zarrstream.errors")
            .and_then(|m| m.getattr("_from_native"))
            .and_then(|f| {
                f.call1((
                    self.kind.as_str(),
                    self.message,
                    self.errno,
                    self.path,
                    self.field,
                    self.extra.map(|v| v.to_string()),
                ))
            });
        match made {
            Ok(exception) => PyErr::from_value(exception),
            // The package itself is broken; that error says more than ours would.
            Err(e) => e,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::Spec(_)
            | Error::Ome(_)
            | Error::InvalidOption { .. }
            | Error::Attribute { .. }
            | Error::NotAnImage(_)
            | Error::ArrayKey { .. }
            | Error::ConflictingOptions(..) => Failure::new(Kind::Invalid, message),
            // Metadata that does not fit refuses its frame, like a frame of the wrong size.
            Error::FrameSize { .. } | Error::DataType { .. } | Error::FrameMeta { .. } => {
                Failure::new(Kind::Frame, message)
            }
            Error::Exists { path } => Failure::new(Kind::Exists, message).at(&path),
            Error::Locked { path } => Failure::new(Kind::Locked, message).at(&path),
            Error::DiskFull { path, .. } => Failure::new(Kind::DiskFull, message).at(&path),
            Error::Io { path, source, .. } => Failure::new(Kind::Io, message)
                .at(&path)
                .errno(errno_of(&source)),
            Error::ArrayFull { .. } => Failure::new(Kind::ArrayFull, message),
            // An impossible acquisition order is an impossible option.
            Error::Order(_) => Failure::new(Kind::Invalid, message),
            Error::FrameIndex { index, problem } => {
                let kind = match problem {
                    FrameIndexError::Duplicate
                    | FrameIndexError::Appending
                    | FrameIndexError::Indexed => Kind::FrameConflict,
                    FrameIndexError::Unsupported(_) => Kind::IndexUnsupported,
                    // Rank, OutOfBounds, OutsideWindow, and any later variant: the index
                    // itself is refused, the frame not taken, the writer goes on.
                    _ => Kind::FrameIndex,
                };
                Failure::new(kind, message).extra(serde_json::json!({ "index": index }))
            }
            Error::WorkingSet {
                what,
                needed,
                limit,
                budget,
                ..
            } => Failure::new(Kind::WorkingSet, message).extra(serde_json::json!({
                "what": what, "needed": needed, "limit": limit, "budget": budget,
            })),
            Error::Closed => Failure::new(Kind::Closed, message),
            Error::UnknownArray { .. } => Failure::new(Kind::UnknownArray, message),
            Error::NotOwned { path, .. } => Failure::new(Kind::NotOwned, message).at(&path),
            Error::ResumeMismatch { path, field, .. } => {
                Failure::new(Kind::ResumeMismatch, message)
                    .at(&path)
                    .field(field)
            }
            Error::NeedsRecovery { path, .. } => {
                Failure::new(Kind::NeedsRecovery, message).at(&path)
            }
            Error::ShardTruncated { path, .. } => {
                Failure::new(Kind::ShardTruncated, message).at(&path)
            }
            Error::ResumeUnsupported(_) => Failure::new(Kind::Unsupported, message),
            Error::Plate(_) => Failure::new(Kind::Plate, message),
            Error::Remote(r) => Failure::from_remote(r, message),
            Error::Codec { .. } | Error::Internal(_) => Failure::new(Kind::Internal, message),
            // `Error` is non-exhaustive: a variant added later is a bug report until it
            // is mapped here.
            _ => Failure::new(Kind::Internal, message),
        }
    }
}

impl Failure {
    /// An object-store failure; for an upload and a staging directory in the way, the
    /// staging directory is the failure's path.
    fn from_remote(r: RemoteError, message: String) -> Self {
        match r {
            RemoteError::Url { .. } => Failure::new(Kind::RemoteUrl, message),
            RemoteError::Credentials { .. } => Failure::new(Kind::RemoteCredentials, message),
            RemoteError::NoBucket { .. } => Failure::new(Kind::RemoteNoBucket, message),
            RemoteError::Unreachable { .. } => Failure::new(Kind::RemoteUnreachable, message),
            RemoteError::Upload { staging, .. } => {
                Failure::new(Kind::RemoteUpload, message).at(&staging)
            }
            RemoteError::Conflict { .. } => Failure::new(Kind::RemoteConflict, message),
            RemoteError::Staging { path, .. } => {
                Failure::new(Kind::RemoteStaging, message).at(&path)
            }
            // `RemoteError` is non-exhaustive: a bug report until mapped here.
            _ => Failure::new(Kind::Internal, message),
        }
    }
}

/// The error's errno, or for an error made from a kind alone (the library's "not
/// found" for a missing store, say) the errno of that kind, so Python picks the
/// matching `OSError` subclass. On Windows the raw code is a Win32 error, not an errno,
/// so there the kind decides.
fn errno_of(e: &std::io::Error) -> Option<i32> {
    use std::io::ErrorKind;
    let errno = if cfg!(unix) { e.raw_os_error() } else { None };
    errno.or(match e.kind() {
        ErrorKind::NotFound => Some(2),          // ENOENT
        ErrorKind::PermissionDenied => Some(13), // EACCES
        ErrorKind::AlreadyExists => Some(17),    // EEXIST
        _ => None,
    })
}

impl From<IoError> for Failure {
    fn from(e: IoError) -> Self {
        // The library's own mapping: ENOSPC/EDQUOT become `DiskFull`.
        Failure::from(Error::from(e))
    }
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        let kind = match e {
            ConfigError::Plate(_) => Kind::Plate,
            _ => Kind::Invalid,
        };
        Failure::new(kind, e.to_string())
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Io(e) => Failure::from(e),
            StoreError::NotFound(path) => {
                // ENOENT, so Python raises FileNotFoundError.
                Failure::new(Kind::Io, format!("{}: no such store", path.display()))
                    .at(&path)
                    .errno(Some(2))
            }
            other => Failure::new(Kind::NotAStore, other.to_string()),
        }
    }
}

impl From<RecoverError> for Failure {
    fn from(e: RecoverError) -> Self {
        match e {
            RecoverError::Io(e) => Failure::from(e),
            RecoverError::Write(e) => Failure::from(e),
            RecoverError::Store(e) => Failure::from(e),
            other => Failure::new(Kind::NotAStore, other.to_string()),
        }
    }
}

/// Runs `f`, turning a panic into a [`Failure`] of kind `Internal`.
pub(crate) fn guarded<T>(
    context: &str,
    f: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(Failure::panicked(context, payload.as_ref())))
}
