//! The one error type of the binding core.

use zarrstream::ErrorKind;
use zarrstream::config::ConfigError;

/// Why a call on a [`Session`](crate::Session) (or a JSON helper) failed. Its
/// [`kind`](Self::kind) is the library's classification, which each binding maps to its
/// own codes or exception classes.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The library refused or failed.
    #[error(transparent)]
    Library(#[from] zarrstream::Error),
    /// The configuration JSON could not be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An argument the binding passed on cannot be used (the message says which).
    #[error("{0}")]
    Argument(String),
    /// The session was finished or aborted (`what` is "writer" or "recording").
    #[error("the {0} is closed")]
    Closed(&'static str),
    /// An earlier call on the session panicked, so its state cannot be trusted and
    /// every call but abort and free is refused (the poison policy).
    #[error("the {0} is closed: an earlier call on it failed with an internal error")]
    Poisoned(&'static str),
}

impl BindError {
    /// What kind of failure this is: the library's kind, [`InvalidArgument`] for an
    /// argument, [`Closed`] for a closed or poisoned session.
    ///
    /// [`InvalidArgument`]: ErrorKind::InvalidArgument
    /// [`Closed`]: ErrorKind::Closed
    pub fn kind(&self) -> ErrorKind {
        match self {
            BindError::Library(e) => e.kind(),
            BindError::Config(e) => e.kind(),
            BindError::Argument(_) => ErrorKind::InvalidArgument,
            BindError::Closed(_) | BindError::Poisoned(_) => ErrorKind::Closed,
        }
    }
}
