//! Return codes, the errors behind them, the panic barrier, and the thread-local message
//! that `zs_last_error` returns.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use zarrstream::ErrorKind;
use zarrstream::config::ConfigError;
use zarrstream_bind::{BindError, inject_panic};

/// Return codes: `ZS_OK` and `ZS_DROPPED` are successes, every `ZS_E_*` is negative
/// (test for failure with `rc < 0`). The functions return them as `int`.
#[repr(C)]
#[allow(non_camel_case_types)] // the names C sees, verbatim
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZsCode {
    /// Success.
    ZS_OK = 0,
    /// Returned by `zs_writer_push` when back-pressure `"drop"` dropped the frame
    /// because every frame buffer was in use: not an error, the frame is counted in
    /// `frames_dropped` and its place in the array reads as the fill value.
    ZS_DROPPED = 1,
    /// `config_json` is not valid JSON, has an unknown key or a value of the wrong
    /// type, or describes an impossible array or an option out of range; for a
    /// recording also an array key that is not a relative path, given twice or inside
    /// another's, and options that exclude each other (`resume` with `overwrite`).
    ZS_E_INVALID_CONFIG = -1,
    /// `zs_writer_push` got a frame of the wrong byte length (the message names the
    /// expected size); the writer stays usable.
    ZS_E_FRAME_SIZE = -2,
    /// The filesystem is full. Every frame accepted before the refused one is written
    /// and published; the writer is closed.
    ZS_E_DISK_FULL = -3,
    /// Any other I/O failure (the message names the operation and path); the writer is
    /// closed.
    ZS_E_IO = -4,
    /// The writer is closed after an earlier failure; only `zs_writer_finish` or
    /// `zs_writer_abort` (to free it) remain.
    ZS_E_CLOSED = -5,
    /// A bug: an internal thread died, a codec failed, or a panic was caught at the API
    /// boundary. The writer is closed.
    ZS_E_INTERNAL = -6,
    /// A required pointer argument is NULL, or `store_path` is empty.
    ZS_E_INVALID_ARGUMENT = -7,
    /// `store_path` exists and `"overwrite"` is not `true`; or a recording's root is a
    /// Zarr group zarrstream did not create (or not a group) and `"existing_group"` is
    /// not `true`.
    ZS_E_EXISTS = -8,
    /// `"overwrite"` was asked for a store that another live writer is recording into.
    ZS_E_LOCKED = -9,
    /// The array's append axis is bounded (`shape[0] > 0`) and every frame was pushed.
    ZS_E_ARRAY_FULL = -10,
    /// A `zs_recording` has no array with this key or index (the message names it).
    ZS_E_NO_ARRAY = -11,
    /// `"resume": true` was asked with a specification that differs from the array on
    /// disk (the message names the field and both values); nothing was written.
    ZS_E_SPEC_MISMATCH = -12,
    /// `"resume": true` found a store left by a writer that did not finish: run
    /// `zarrstream recover` on it first; nothing was written.
    ZS_E_NEEDS_RECOVERY = -13,
    /// The request is valid but this version cannot do it (e.g. resuming an OME-Zarr
    /// image with a pyramid).
    ZS_E_UNSUPPORTED = -14,
    /// A recording's `plate` has an invalid layout (the message names the problem): a
    /// well outside its rows or columns, a well given twice, a field count of 0, a row
    /// or column name that is empty, not alphanumeric or given twice, no rows, columns
    /// or wells, an acquisition id given twice or ending before it starts. Nothing was
    /// written.
    ZS_E_INVALID_PLATE = -15,
    /// An object-store destination (`s3://…`) refused the credentials: an unknown key,
    /// a wrong secret, or a key without rights on the bucket. Nothing was written.
    ZS_E_REMOTE_CREDENTIALS = -16,
    /// An object-store destination's bucket (or container) does not exist. Nothing was
    /// written.
    ZS_E_REMOTE_NO_BUCKET = -17,
    /// An object-store destination did not answer (connection refused, timed out, name
    /// not resolved) within `upload_timeout`. Nothing was written.
    ZS_E_REMOTE_UNREACHABLE = -18,
    /// An upload to the object store failed after its retries (the store went away
    /// during the recording). Every finished shard not yet uploaded stays in the staging
    /// directory the message names: `zarrstream upload STAGING` sends it later. The
    /// writer is closed.
    ZS_E_REMOTE_UPLOAD = -19,
    /// Any other object-store failure: the staging directory holds another
    /// destination's data or data not yet uploaded (`zarrstream upload` it first), or a
    /// second coordinator published the shared `zarr.json` in between.
    ZS_E_REMOTE = -20,
    /// Another process truncated a shard file while the writer was filling it. The
    /// shards published before stay valid; the cut shard is kept in
    /// `.zarrstream-partial/` for `zarrstream recover`; the writer is closed. (With the
    /// mmap and direct sinks the cut raises SIGBUS, which the library catches for its
    /// own mappings; see "Signals" at the top of this header.)
    ZS_E_SHARD_TRUNCATED = -21,
    /// `zs_writer_write_frame`: the index has the wrong rank, a coordinate past its axis,
    /// or one outside the window of an unbounded axis 0. Nothing was written.
    ZS_E_INDEX = -22,
    /// `zs_writer_write_frame`: a frame at this index was written (or skipped) before.
    /// Nothing was written; the first frame stays.
    ZS_E_DUPLICATE_FRAME = -23,
    /// The acquisition order keeps more shards open at once than allowed: at creation,
    /// more than "max_open_shards"; while writing, an order that was not declared
    /// ("acquisition_order") strays too far from storage order. The message names the
    /// budget it would need.
    ZS_E_WORKING_SET = -24,
}

impl ZsCode {
    /// `ZS_OK` for an accepted frame, `ZS_DROPPED` for one back-pressure dropped.
    pub(crate) fn from_outcome(outcome: zarrstream::PushOutcome) -> Self {
        if outcome.is_accepted() {
            ZsCode::ZS_OK
        } else {
            ZsCode::ZS_DROPPED
        }
    }
}

use ZsCode::*;

/// Why a call of the C API failed; [`code`](Self::code) is its return code.
#[derive(Debug, thiserror::Error)]
pub enum CapiError {
    /// A pointer argument that must not be NULL was NULL.
    #[error("{0} is NULL")]
    Null(&'static str),
    /// An argument's value cannot be used.
    #[error("{0}")]
    Argument(&'static str),
    /// A string argument (named) is not UTF-8.
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    /// `config_json` could not be turned into an array specification and options.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The library refused or failed.
    #[error(transparent)]
    Writer(#[from] zarrstream::Error),
    /// A call on a session failed: the library's error, a closed session, or one
    /// poisoned by an earlier panic (the binding core's poison policy).
    #[error(transparent)]
    Bind(#[from] BindError),
}

impl From<ErrorKind> for ZsCode {
    /// The code of a kind of failure: the C API's whole classification, since every
    /// library error is classified by [`zarrstream::Error::kind`].
    fn from(kind: ErrorKind) -> Self {
        use ErrorKind as K;
        match kind {
            // A URL or store option that cannot work is a request to fix, as a bad key
            // of config_json is.
            K::InvalidConfig | K::RemoteUrl => ZS_E_INVALID_CONFIG,
            K::InvalidArgument | K::InvalidFrameMeta | K::MixedFrames => ZS_E_INVALID_ARGUMENT,
            K::InvalidPlate => ZS_E_INVALID_PLATE,
            // The C API pushes bytes, so a data type mismatch is a size mismatch.
            K::InvalidFrame => ZS_E_FRAME_SIZE,
            K::FrameIndex => ZS_E_INDEX,
            K::DuplicateFrame => ZS_E_DUPLICATE_FRAME,
            K::IndexUnsupported | K::Unsupported => ZS_E_UNSUPPORTED,
            K::WorkingSet => ZS_E_WORKING_SET,
            K::ArrayFull => ZS_E_ARRAY_FULL,
            K::Closed => ZS_E_CLOSED,
            K::UnknownArray => ZS_E_NO_ARRAY,
            // A group zarrstream did not make is refused as an existing store is.
            K::Exists | K::NotOwned => ZS_E_EXISTS,
            K::Locked => ZS_E_LOCKED,
            K::ResumeMismatch => ZS_E_SPEC_MISMATCH,
            K::NeedsRecovery => ZS_E_NEEDS_RECOVERY,
            K::DiskFull => ZS_E_DISK_FULL,
            // The C API reads no stores; were it to, a missing or unreadable one is a
            // failure of what is on disk, as any other I/O failure.
            K::Io | K::NotFound | K::NotAStore => ZS_E_IO,
            K::ShardTruncated => ZS_E_SHARD_TRUNCATED,
            K::RemoteCredentials => ZS_E_REMOTE_CREDENTIALS,
            K::RemoteNoBucket => ZS_E_REMOTE_NO_BUCKET,
            K::RemoteUnreachable => ZS_E_REMOTE_UNREACHABLE,
            K::RemoteUpload => ZS_E_REMOTE_UPLOAD,
            K::RemoteConflict | K::RemoteStaging => ZS_E_REMOTE,
            K::Internal => ZS_E_INTERNAL,
            // `ErrorKind` is non-exhaustive: a kind added later is a bug report until it
            // has a code (the test `every_kind_has_its_code` fails until then).
            _ => ZS_E_INTERNAL,
        }
    }
}

impl CapiError {
    /// What kind of failure this is: the library's kind, and for the C API's own
    /// argument checks [`InvalidArgument`](ErrorKind::InvalidArgument); for a session's
    /// error its own kind ([`Closed`](ErrorKind::Closed) for a poisoned one).
    pub fn kind(&self) -> ErrorKind {
        match self {
            CapiError::Null(_) | CapiError::Argument(_) | CapiError::NotUtf8(_) => {
                ErrorKind::InvalidArgument
            }
            CapiError::Config(e) => e.kind(),
            CapiError::Writer(e) => e.kind(),
            CapiError::Bind(e) => e.kind(),
        }
    }

    /// The `ZS_E_*` code of this error.
    pub fn code(&self) -> ZsCode {
        ZsCode::from(self.kind())
    }
}

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Records `e` as this thread's last error and returns its code.
pub(crate) fn fail(e: &CapiError) -> c_int {
    // C strings end at the first NUL; keep whatever follows one visible.
    let msg = e.to_string().replace('\0', "\\0");
    let msg = CString::new(msg).unwrap_or_default();
    // During thread teardown the slot may be gone; the code still tells what happened.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = Some(msg));
    e.code() as c_int
}

/// This thread's last error message, or `""` if no call on this thread has failed. The
/// pointer stays valid until the next failing call on this thread.
pub(crate) fn last_error() -> *const c_char {
    const NONE: &CStr = c"";
    LAST_ERROR
        .try_with(|slot| match slot.borrow().as_ref() {
            Some(msg) => msg.as_ptr(),
            None => NONE.as_ptr(),
        })
        .unwrap_or(NONE.as_ptr())
}

/// Runs the body of `function`, turning its error or panic into a return code (and the
/// thread's last error), so no panic unwinds into C.
pub(crate) fn guard(
    function: &'static str,
    body: impl FnOnce() -> Result<ZsCode, CapiError>,
) -> c_int {
    // The body's state after a panic is not observed again except through handles it
    // marks as poisoned itself (the binding core's `Session`), so asserting unwind
    // safety is sound.
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        inject_panic(function);
        match body() {
            Ok(code) => code as c_int,
            Err(e) => fail(&e),
        }
    }));
    outcome.unwrap_or_else(|payload| {
        // Reporting the panic (and dropping its payload) runs under a barrier too.
        catch_unwind(AssertUnwindSafe(move || {
            fail(&CapiError::Writer(zarrstream::Error::panicked(
                function,
                payload.as_ref(),
            )))
        }))
        .unwrap_or(ZS_E_INTERNAL as c_int)
    })
}

/// The environment variable that makes the library panic at named places, in debug
/// builds only (the binding core reads it): entry point names such as
/// `zs_writer_create`, and `writer` or `recording` for a panic inside a call on a handle,
/// which poisons it.
pub use zarrstream_bind::INJECT_PANIC_ENV;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use zarrstream::{
        BloscCompressor, BloscShuffle, DataType, Error, FrameIndexError, OmeError, RemoteError,
        SpecError,
    };

    /// What `zs_last_error` would show on this thread (read from the slot itself, so
    /// the tests need no `unsafe`; the C tests read it through the pointer).
    fn last() -> String {
        LAST_ERROR.with_borrow(|m| {
            m.as_ref()
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
    }

    #[test]
    fn every_writer_error_has_its_code() {
        let io = || std::io::Error::other("EIO");
        let first: Vec<(Error, ZsCode)> = vec![
            (
                Error::Spec(SpecError::Missing("shape")),
                ZS_E_INVALID_CONFIG,
            ),
            (
                Error::Spec(SpecError::ShuffleDoesNotFit {
                    compressor: BloscCompressor::Zstd,
                    shuffle: BloscShuffle::Shuffle,
                    dtype: DataType::UInt8,
                }),
                ZS_E_INVALID_CONFIG,
            ),
            (Error::Ome(OmeError::Rank(6)), ZS_E_INVALID_CONFIG),
            (
                Error::InvalidOption {
                    option: "threads",
                    value: 5000,
                    max: 1024,
                },
                ZS_E_INVALID_CONFIG,
            ),
            (
                Error::FrameSize {
                    frame: 0,
                    expected: 8,
                    got: 4,
                },
                ZS_E_FRAME_SIZE,
            ),
            (
                Error::DataType {
                    frame: 0,
                    expected: zarrstream::DataType::UInt16,
                    got: zarrstream::DataType::UInt8,
                },
                ZS_E_FRAME_SIZE,
            ),
            (Error::Exists { path: "a".into() }, ZS_E_EXISTS),
            (Error::Locked { path: "a".into() }, ZS_E_LOCKED),
            (
                Error::DiskFull {
                    op: "reserve",
                    path: PathBuf::from("a"),
                    needed: 1,
                },
                ZS_E_DISK_FULL,
            ),
            (
                Error::Io {
                    op: "create",
                    path: PathBuf::from("a"),
                    source: io(),
                },
                ZS_E_IO,
            ),
            (Error::ArrayFull { frames: 3 }, ZS_E_ARRAY_FULL),
            (Error::Closed, ZS_E_CLOSED),
            (Error::UnknownArray { key: "cam9".into() }, ZS_E_NO_ARRAY),
            (
                Error::ArrayKey {
                    key: "cam0".into(),
                    reason: "given twice",
                },
                ZS_E_INVALID_CONFIG,
            ),
            (
                Error::NotOwned {
                    path: PathBuf::from("a"),
                    reason: "not a Zarr v3 group",
                },
                ZS_E_EXISTS,
            ),
            (
                Error::ResumeMismatch {
                    path: PathBuf::from("a"),
                    field: "codec",
                    on_disk: "lz4".into(),
                    requested: "zstd".into(),
                },
                ZS_E_SPEC_MISMATCH,
            ),
            (
                Error::NeedsRecovery {
                    path: PathBuf::from("a"),
                    reason: "temporary shards".into(),
                },
                ZS_E_NEEDS_RECOVERY,
            ),
            (
                Error::ShardTruncated {
                    path: PathBuf::from("a/.zarrstream-partial/c.0.0.0.partial"),
                    reason: "it is 0 bytes long, 4096 were reserved".into(),
                },
                ZS_E_SHARD_TRUNCATED,
            ),
            (
                Error::ResumeUnsupported("an OME-Zarr image with a pyramid"),
                ZS_E_UNSUPPORTED,
            ),
            (
                Error::Order(zarrstream::OrderError::Repeated(1)),
                ZS_E_INVALID_CONFIG,
            ),
            (
                Error::WorkingSet {
                    what: "shards",
                    needed: 9,
                    limit: "max_open_shards",
                    budget: 8,
                    advice: "raise it",
                },
                ZS_E_WORKING_SET,
            ),
        ];
        let index = |problem| Error::FrameIndex {
            index: vec![1, 2],
            problem,
        };
        let indexed = first.into_iter().chain([
            (index(FrameIndexError::Rank { got: 2, lead: 3 }), ZS_E_INDEX),
            (
                index(FrameIndexError::OutOfBounds {
                    axis: 1,
                    value: 2,
                    size: 2,
                }),
                ZS_E_INDEX,
            ),
            (
                index(FrameIndexError::OutsideWindow {
                    value: 9,
                    low: 0,
                    high: 4,
                }),
                ZS_E_INDEX,
            ),
            (index(FrameIndexError::Duplicate), ZS_E_DUPLICATE_FRAME),
            (index(FrameIndexError::Appending), ZS_E_INVALID_ARGUMENT),
            (index(FrameIndexError::Indexed), ZS_E_INVALID_ARGUMENT),
            (
                index(FrameIndexError::Unsupported("pyramid levels")),
                ZS_E_UNSUPPORTED,
            ),
        ]);
        let first: Vec<(Error, ZsCode)> = indexed.collect();
        let rest: Vec<(Error, ZsCode)> = vec![
            (
                Error::ConflictingOptions("resume", "overwrite"),
                ZS_E_INVALID_CONFIG,
            ),
            (
                Error::Plate(zarrstream::PlateError::NoFields),
                ZS_E_INVALID_PLATE,
            ),
            (
                Error::Codec {
                    codec: "zstd",
                    message: "x".into(),
                },
                ZS_E_INTERNAL,
            ),
            (Error::Internal("x".into()), ZS_E_INTERNAL),
        ];
        let url = || "s3://bucket/run.zarr".to_string();
        let remote = [
            (
                RemoteError::Url {
                    url: url(),
                    reason: "unknown scheme".into(),
                },
                ZS_E_INVALID_CONFIG,
            ),
            (
                RemoteError::Credentials {
                    url: url(),
                    message: "403".into(),
                },
                ZS_E_REMOTE_CREDENTIALS,
            ),
            (
                RemoteError::NoBucket {
                    url: url(),
                    message: "404".into(),
                },
                ZS_E_REMOTE_NO_BUCKET,
            ),
            (
                RemoteError::Unreachable {
                    url: url(),
                    message: "connection refused".into(),
                },
                ZS_E_REMOTE_UNREACHABLE,
            ),
            (
                RemoteError::Upload {
                    url: url(),
                    key: "c/0/0/0".into(),
                    message: "timed out".into(),
                    staging: PathBuf::from("/scratch/staging"),
                },
                ZS_E_REMOTE_UPLOAD,
            ),
            (
                RemoteError::Conflict {
                    url: url(),
                    key: "zarr.json".into(),
                    message: "412".into(),
                },
                ZS_E_REMOTE,
            ),
            (
                RemoteError::Staging {
                    path: PathBuf::from("/scratch/staging"),
                    reason: "holds data not yet uploaded".into(),
                },
                ZS_E_REMOTE,
            ),
        ];
        let cases = first
            .into_iter()
            .chain(rest)
            .chain(remote.into_iter().map(|(r, code)| (Error::Remote(r), code)));
        for (e, code) in cases {
            let text = e.to_string();
            assert_eq!(CapiError::from(e).code(), code, "{text}");
        }
        assert_eq!(CapiError::Null("w").code(), ZS_E_INVALID_ARGUMENT);
        assert_eq!(CapiError::Argument("x").code(), ZS_E_INVALID_ARGUMENT);
        assert_eq!(CapiError::NotUtf8("key").code(), ZS_E_INVALID_ARGUMENT);
        assert_eq!(
            CapiError::from(BindError::Poisoned("writer")).code(),
            ZS_E_CLOSED
        );
    }

    #[test]
    fn every_kind_has_its_code() {
        use ErrorKind as K;
        // Written out, not derived: the codes are the C API's contract.
        let expected = [
            (K::InvalidConfig, ZS_E_INVALID_CONFIG),
            (K::InvalidArgument, ZS_E_INVALID_ARGUMENT),
            (K::InvalidPlate, ZS_E_INVALID_PLATE),
            (K::InvalidFrame, ZS_E_FRAME_SIZE),
            (K::InvalidFrameMeta, ZS_E_INVALID_ARGUMENT),
            (K::FrameIndex, ZS_E_INDEX),
            (K::DuplicateFrame, ZS_E_DUPLICATE_FRAME),
            (K::MixedFrames, ZS_E_INVALID_ARGUMENT),
            (K::IndexUnsupported, ZS_E_UNSUPPORTED),
            (K::WorkingSet, ZS_E_WORKING_SET),
            (K::ArrayFull, ZS_E_ARRAY_FULL),
            (K::Closed, ZS_E_CLOSED),
            (K::UnknownArray, ZS_E_NO_ARRAY),
            (K::Exists, ZS_E_EXISTS),
            (K::NotOwned, ZS_E_EXISTS),
            (K::Locked, ZS_E_LOCKED),
            (K::ResumeMismatch, ZS_E_SPEC_MISMATCH),
            (K::NeedsRecovery, ZS_E_NEEDS_RECOVERY),
            (K::Unsupported, ZS_E_UNSUPPORTED),
            (K::DiskFull, ZS_E_DISK_FULL),
            (K::Io, ZS_E_IO),
            (K::NotFound, ZS_E_IO),
            (K::NotAStore, ZS_E_IO),
            (K::ShardTruncated, ZS_E_SHARD_TRUNCATED),
            (K::RemoteUrl, ZS_E_INVALID_CONFIG),
            (K::RemoteCredentials, ZS_E_REMOTE_CREDENTIALS),
            (K::RemoteNoBucket, ZS_E_REMOTE_NO_BUCKET),
            (K::RemoteUnreachable, ZS_E_REMOTE_UNREACHABLE),
            (K::RemoteUpload, ZS_E_REMOTE_UPLOAD),
            (K::RemoteConflict, ZS_E_REMOTE),
            (K::RemoteStaging, ZS_E_REMOTE),
            (K::Internal, ZS_E_INTERNAL),
        ];
        for (kind, code) in expected {
            assert_eq!(ZsCode::from(kind), code, "{kind}");
        }
        // A kind the library adds fails here until it is given a code above.
        let listed: Vec<ErrorKind> = expected.iter().map(|&(k, _)| k).collect();
        let missing: Vec<&ErrorKind> = ErrorKind::ALL
            .iter()
            .filter(|k| !listed.contains(k))
            .collect();
        assert!(missing.is_empty(), "kinds without a code: {missing:?}");
    }

    #[test]
    fn the_last_error_is_per_thread_and_kept_by_successes() {
        std::thread::spawn(|| {
            assert_eq!(last(), "", "no failure yet on a new thread");
            let code = guard("f", || Err(CapiError::Null("w")));
            assert_eq!(code, ZS_E_INVALID_ARGUMENT as c_int);
            assert_eq!(last(), "w is NULL");
            assert_eq!(guard("f", || Ok(ZS_OK)), 0);
            assert_eq!(last(), "w is NULL", "a success leaves the message");
            std::thread::spawn(|| assert_eq!(last(), "", "another thread's slot"))
                .join()
                .unwrap();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_panic_becomes_internal_with_its_message() {
        std::thread::spawn(|| {
            assert_eq!(guard("zs_f", || panic!("boom {}", 7)), -6);
            assert_eq!(last(), "internal error: zs_f panicked: boom 7");
            assert_eq!(guard("zs_f", || panic!("static")), -6);
            assert_eq!(last(), "internal error: zs_f panicked: static");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn an_upload_failure_names_the_staging_directory() {
        std::thread::spawn(|| {
            let e = CapiError::from(Error::Remote(RemoteError::Upload {
                url: "s3://b/run.zarr".into(),
                key: "c/0/0/0".into(),
                message: "connection refused".into(),
                staging: PathBuf::from("/scratch/staging/s3/b/run.zarr"),
            }));
            assert_eq!(fail(&e), ZS_E_REMOTE_UPLOAD as c_int);
            assert!(
                last().contains("run `zarrstream upload /scratch/staging/s3/b/run.zarr`"),
                "{}",
                last()
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_nul_in_a_message_is_escaped() {
        std::thread::spawn(|| {
            let e = CapiError::from(Error::Internal("a\0b".into()));
            assert_eq!(fail(&e), ZS_E_INTERNAL as c_int);
            assert_eq!(last(), "internal error: a\\0b");
        })
        .join()
        .unwrap();
    }
}
