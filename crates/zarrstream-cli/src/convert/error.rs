//! Why a conversion failed.

use std::path::{Path, PathBuf};
use zarrstream::IoError;

/// Why `zarrstream convert` refused or failed. Every message is one line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConvertError {
    /// The legacy path does not exist.
    #[error("{0}: no such file or directory")]
    NotFound(PathBuf),
    /// The path holds no legacy sharded array this tool recognises.
    #[error("{path}: not a legacy sharded Zarr store ({why})")]
    NotLegacy {
        /// The path given.
        path: PathBuf,
        /// What is missing or different.
        why: String,
    },
    /// A metadata document that does not parse or is inconsistent.
    #[error("{path}: invalid metadata: {why}")]
    Metadata {
        /// The metadata document.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Metadata that is valid but names something without a standard equivalent here
    /// (a compressor, filters, a data type, another storage transformer).
    #[error("{path}: unsupported {what}")]
    Unsupported {
        /// The metadata document.
        path: PathBuf,
        /// What is not supported.
        what: String,
    },
    /// A shard whose index is cut off or points outside the shard.
    #[error("{path}: corrupted shard: {why}")]
    CorruptShard {
        /// The legacy shard file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The output exists and `--overwrite` was not given.
    #[error("{0}: already exists (pass --overwrite to replace it)")]
    OutExists(PathBuf),
    /// The output would replace the legacy store itself.
    #[error("{0}: the output must not be the legacy store itself")]
    OutIsInput(PathBuf),
    /// An I/O error with what was being done to which path.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// An invalid-metadata error for `path`.
pub(super) fn bad_meta(path: &Path, why: impl Into<String>) -> ConvertError {
    ConvertError::Metadata {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// An unsupported-feature error for `path`.
pub(super) fn unsupported(path: &Path, what: impl Into<String>) -> ConvertError {
    ConvertError::Unsupported {
        path: path.to_path_buf(),
        what: what.into(),
    }
}
