//! Why `record` failed, and the messages of its failures.

use std::error::Error as StdError;
use std::fmt;
use std::path::Path;

use super::args::UsageError;

/// Why `record` failed: bad options (exit 2) or a failure while running (exit 1).
pub(super) enum Failure {
    Usage(String),
    Run(Box<dyn StdError>),
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.0)
    }
}

impl From<zarrstream::Error> for Failure {
    fn from(e: zarrstream::Error) -> Self {
        match e {
            zarrstream::Error::Exists { path } => Failure::Usage(exists_message(&path)),
            zarrstream::Error::Spec(s) => Failure::Usage(format!("invalid array: {s}")),
            // What --resume found differs from the options, or cannot be continued.
            e @ (zarrstream::Error::ResumeMismatch { .. }
            | zarrstream::Error::ResumeUnsupported(_)
            | zarrstream::Error::ConflictingOptions(..)
            | zarrstream::Error::NotOwned { .. }
            | zarrstream::Error::Plate(_)) => Failure::Usage(e.to_string()),
            e => Failure::Run(Box::new(e)),
        }
    }
}

impl From<zarrstream::PlateError> for Failure {
    fn from(e: zarrstream::PlateError) -> Self {
        Failure::from(zarrstream::Error::from(e))
    }
}

impl From<zarrstream::SpecError> for Failure {
    fn from(e: zarrstream::SpecError) -> Self {
        Failure::Usage(format!("invalid array: {e}"))
    }
}

/// An I/O error with what was being done to which path.
#[derive(Debug)]
pub(super) struct IoContext {
    what: String,
    source: std::io::Error,
}

impl fmt::Display for IoContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl StdError for IoContext {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.source)
    }
}

pub(super) fn io_failure(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Failure {
    let what = what.into();
    move |source| Failure::Run(Box::new(IoContext { what, source }))
}

pub(super) fn exists_message(path: &Path) -> String {
    format!(
        "{} already exists; pass --overwrite to replace it",
        path.display()
    )
}
