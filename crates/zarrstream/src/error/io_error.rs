//! I/O failures with their operation and path ([`IoError`]), and the object store's
//! errors ([`RemoteError`]).

use std::io;
use std::path::PathBuf;

use super::Error;

/// An I/O failure with what was being done and to which path: the one shape every
/// error enum of this crate (and of its tools) wraps, so that all of them read
/// `"<op> <path>: <OS error>"`.
///
/// ```
/// use std::io;
/// use zarrstream::IoError;
/// let e = IoError::new("read", "run.zarr/zarr.json", io::Error::from(io::ErrorKind::NotFound));
/// assert!(e.to_string().starts_with("read run.zarr/zarr.json: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct IoError {
    /// What was being done (`"read"`, `"rename"`, `"fsync"`, …).
    pub op: &'static str,
    /// The path involved.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl IoError {
    /// An I/O error of `op` on `path`.
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        IoError {
            op,
            path: path.into(),
            source,
        }
    }

    /// A closure for `map_err` that wraps an [`io::Error`] of `op` on `path`.
    ///
    /// ```
    /// use zarrstream::IoError;
    /// let path = std::path::Path::new("/nonexistent/zarr.json");
    /// let e = std::fs::read(path).map_err(IoError::with("read", path)).unwrap_err();
    /// assert_eq!(e.op, "read");
    /// ```
    pub fn with<'a>(
        op: &'static str,
        path: &'a std::path::Path,
    ) -> impl FnOnce(io::Error) -> Self + 'a {
        move |source| IoError::new(op, path, source)
    }
}

/// The writer's view of an I/O failure: a full filesystem becomes
/// [`Error::DiskFull`] (with 0 bytes needed, as the size is not known here).
impl From<IoError> for Error {
    fn from(e: IoError) -> Self {
        Error::io(e.op, e.path, e.source, 0)
    }
}

/// What went wrong with an object-store destination (`s3://…`, `gs://…`, `az://…`,
/// `file://…`). Every variant names the destination URL (never its credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The URL or its options cannot be used (unknown scheme, no bucket, a bad option).
    #[error("{url}: {reason}")]
    Url {
        /// The destination as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store refused the credentials (unknown key, wrong secret, no permission on
    /// the bucket).
    #[error("{url}: the store refused the credentials ({message})")]
    Credentials {
        /// The destination.
        url: String,
        /// The store's answer.
        message: String,
    },
    /// The bucket (or container) does not exist.
    #[error("{url}: the bucket does not exist ({message})")]
    NoBucket {
        /// The destination.
        url: String,
        /// The store's answer.
        message: String,
    },
    /// The store did not answer (connection refused, timed out, name not resolved)
    /// within the retries.
    #[error("{url}: the store cannot be reached ({message})")]
    Unreachable {
        /// The destination.
        url: String,
        /// The last failure.
        message: String,
    },
    /// An upload failed after its retries. Every finished shard not yet uploaded is
    /// kept in the staging directory; `zarrstream upload STAGING` sends them later and
    /// republishes the metadata.
    #[error(
        "{url}: uploading {key} failed ({message}); the data not yet uploaded stays in {staging}: run `zarrstream upload {staging}` when the store is back",
        staging = staging.display()
    )]
    Upload {
        /// The destination.
        url: String,
        /// The object that failed.
        key: String,
        /// The last failure.
        message: String,
        /// The staging directory that keeps what was not uploaded.
        staging: PathBuf,
    },
    /// Another coordinator published the shared `zarr.json` in between (seen only on
    /// stores that enforce conditional writes).
    #[error("{url}: {key} was written by someone else in between ({message})")]
    Conflict {
        /// The destination.
        url: String,
        /// The object.
        key: String,
        /// The store's answer.
        message: String,
    },
    /// The staging directory cannot be used for this destination (it holds data of
    /// another destination, or data not yet uploaded).
    #[error("{path}: {reason}", path = path.display())]
    Staging {
        /// The staging directory.
        path: PathBuf,
        /// What was found there.
        reason: String,
    },
}
