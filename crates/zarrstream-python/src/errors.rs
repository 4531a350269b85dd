//! Rust errors as the Python package's exceptions.
//!
//! The exception classes live in Python (`zarrstream/errors.py`), where each can derive
//! from both the package's base class and the fitting built-in (`ValueError`,
//! `FileExistsError`, `OSError` with `errno.ENOSPC`, …). This module decides no class:
//! it hands over the error's kind by name ([`ErrorKind::as_str`], the library's one
//! classification) with the exception's attributes (errno, path, …), and
//! `zarrstream.errors._from_native` looks the kind up in its one table.

use std::any::Any;
use std::path::Path;

use pyo3::prelude::*;
use zarrstream::config::ConfigError;
use zarrstream::recover::RecoverError;
use zarrstream::store::StoreError;
use zarrstream::{Error, ErrorKind, IoError, RemoteError};
use zarrstream_bind::BindError;

/// A failure on its way to Python.
#[derive(Debug)]
pub(crate) struct Failure {
    kind: ErrorKind,
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
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
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
        let failure = Failure::new(e.kind(), e.to_string());
        // The exception's attributes beyond its message; its class follows the kind.
        match e {
            Error::Exists { path }
            | Error::Locked { path }
            | Error::DiskFull { path, .. }
            | Error::NotOwned { path, .. }
            | Error::NeedsRecovery { path, .. }
            | Error::ShardTruncated { path, .. }
            // For an upload and a staging directory in the way, the staging directory.
            | Error::Remote(
                RemoteError::Upload { staging: path, .. } | RemoteError::Staging { path, .. },
            ) => failure.at(&path),
            Error::Io { path, source, .. } => failure.at(&path).errno(errno_of(&source)),
            Error::ResumeMismatch { path, field, .. } => failure.at(&path).field(field),
            Error::FrameIndex { index, .. } => {
                failure.extra(serde_json::json!({ "index": index }))
            }
            Error::WorkingSet {
                what,
                needed,
                limit,
                budget,
                ..
            } => failure.extra(serde_json::json!({
                "what": what, "needed": needed, "limit": limit, "budget": budget,
            })),
            _ => failure,
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

impl From<BindError> for Failure {
    fn from(e: BindError) -> Self {
        match e {
            // With the library's attributes (path, errno, …).
            BindError::Library(e) => Failure::from(e),
            BindError::Config(e) => Failure::from(e),
            other => Failure::new(other.kind(), other.to_string()),
        }
    }
}

impl From<IoError> for Failure {
    fn from(e: IoError) -> Self {
        // The library's own mapping: ENOSPC/EDQUOT become `DiskFull`.
        Failure::from(Error::from(e))
    }
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Failure::new(e.kind(), e.to_string())
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        match e {
            // With its errno and path.
            StoreError::Io(e) => Failure::from(e),
            StoreError::NotFound(path) => Failure::new(
                ErrorKind::NotFound,
                format!("{}: no such store", path.display()),
            )
            .at(&path),
            other => Failure::new(other.kind(), other.to_string()),
        }
    }
}

impl From<RecoverError> for Failure {
    fn from(e: RecoverError) -> Self {
        match e {
            // The wrapped errors, with their errno and path.
            RecoverError::Io(e) => Failure::from(e),
            RecoverError::Write(e) => Failure::from(e),
            RecoverError::Store(e) => Failure::from(e),
            other => Failure::new(other.kind(), other.to_string()),
        }
    }
}

/// The name of every kind of failure, for the Python tests that each one has its
/// exception class.
#[pyfunction]
pub(crate) fn error_kinds() -> Vec<&'static str> {
    ErrorKind::ALL.iter().map(|k| k.as_str()).collect()
}

/// Runs `f`, turning a panic into a [`Failure`] of kind [`ErrorKind::Internal`].
pub(crate) fn guarded<T>(
    context: &str,
    f: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(Failure::panicked(context, payload.as_ref())))
}
