//! One value of every variant of every error type, with the kind it must have. The
//! expected kinds are written here, not taken from `kind()`; each type's `variant`
//! function is an exhaustive match, so a new variant does not compile until it has a
//! case below.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;

use super::ErrorKind::{self, *};
use crate::config::ConfigError;
use crate::read::ReadError;
use crate::recover::RecoverError;
use crate::store::StoreError;
use crate::{
    DataType, Error, FrameIndexError, IoError, OmeError, OrderError, PlateError, RemoteError,
    SpecError,
};

/// Asserts each case's kind, and that the cases cover variants `0..count`.
fn check<E: std::fmt::Debug>(
    cases: Vec<(E, ErrorKind)>,
    kind: impl Fn(&E) -> ErrorKind,
    variant: impl Fn(&E) -> usize,
    count: usize,
) {
    let mut covered = BTreeSet::new();
    for (e, expected) in &cases {
        assert_eq!(kind(e), *expected, "{e:?}");
        covered.insert(variant(e));
    }
    let missing: Vec<usize> = (0..count).filter(|i| !covered.contains(i)).collect();
    assert!(missing.is_empty(), "variants without a case: {missing:?}");
}

fn path() -> PathBuf {
    PathBuf::from("run.zarr")
}

fn io_error(kind: io::ErrorKind) -> IoError {
    IoError::new("write", path(), io::Error::from(kind))
}

fn index(problem: FrameIndexError) -> Error {
    Error::FrameIndex {
        index: vec![1, 2],
        problem,
    }
}

fn url() -> String {
    "s3://bucket/run.zarr".into()
}

fn read_error() -> ReadError {
    ReadError::Metadata("no node_type".into())
}

#[test]
fn every_error_variant_has_its_kind() {
    let variant = |e: &Error| match e {
        Error::Spec(_) => 0,
        Error::Ome(_) => 1,
        Error::Plate(_) => 2,
        Error::InvalidOption { .. } => 3,
        Error::ResumeUnsupported(_) => 4,
        Error::Order(_) => 5,
        Error::FrameIndex { .. } => 6,
        Error::WorkingSet { .. } => 7,
        Error::ConflictingOptions(..) => 8,
        Error::FrameSize { .. } => 9,
        Error::DataType { .. } => 10,
        Error::Exists { .. } => 11,
        Error::Locked { .. } => 12,
        Error::DiskFull { .. } => 13,
        Error::Io { .. } => 14,
        Error::ShardTruncated { .. } => 15,
        Error::ArrayFull { .. } => 16,
        Error::ArrayKey { .. } => 17,
        Error::UnknownArray { .. } => 18,
        Error::Closed => 19,
        Error::Codec { .. } => 20,
        Error::Attribute { .. } => 21,
        Error::FrameMeta { .. } => 22,
        Error::NotOwned { .. } => 23,
        Error::ResumeMismatch { .. } => 24,
        Error::NeedsRecovery { .. } => 25,
        Error::Remote(_) => 26,
        Error::NotAnImage(_) => 27,
        Error::Internal(_) => 28,
    };
    let cases = vec![
        (Error::Spec(SpecError::Missing("shape")), InvalidConfig),
        (Error::Ome(OmeError::Rank(6)), InvalidConfig),
        (Error::Plate(PlateError::NoFields), InvalidPlate),
        (
            Error::InvalidOption {
                option: "threads",
                value: 5000,
                max: 1024,
            },
            InvalidConfig,
        ),
        (Error::ResumeUnsupported("a pyramid"), Unsupported),
        (Error::Order(OrderError::Repeated(1)), InvalidConfig),
        (index(FrameIndexError::Duplicate), DuplicateFrame),
        (
            Error::WorkingSet {
                what: "shards",
                needed: 9,
                limit: "max_open_shards",
                budget: 8,
                advice: "raise it",
            },
            WorkingSet,
        ),
        (
            Error::ConflictingOptions("resume", "overwrite"),
            InvalidConfig,
        ),
        (
            Error::FrameSize {
                frame: 0,
                expected: 8,
                got: 4,
            },
            InvalidFrame,
        ),
        (
            Error::DataType {
                frame: 0,
                expected: DataType::UInt16,
                got: DataType::UInt8,
            },
            InvalidFrame,
        ),
        (Error::Exists { path: path() }, Exists),
        (Error::Locked { path: path() }, Locked),
        (
            Error::DiskFull {
                op: "reserve",
                path: path(),
                needed: 1,
            },
            DiskFull,
        ),
        (
            Error::Io {
                op: "create",
                path: path(),
                source: io::Error::other("EIO"),
            },
            Io,
        ),
        (
            Error::ShardTruncated {
                path: path(),
                reason: "0 bytes long".into(),
            },
            ShardTruncated,
        ),
        (Error::ArrayFull { frames: 3 }, ArrayFull),
        (
            Error::ArrayKey {
                key: "cam0".into(),
                reason: "given twice",
            },
            InvalidConfig,
        ),
        (Error::UnknownArray { key: "cam9".into() }, UnknownArray),
        (Error::Closed, Closed),
        (
            Error::Codec {
                codec: "zstd",
                message: "x".into(),
            },
            Internal,
        ),
        (
            Error::Attribute {
                name: "ome".into(),
                reason: "reserved",
            },
            InvalidArgument,
        ),
        (
            Error::FrameMeta {
                field: "json".into(),
                reason: "not an object".into(),
            },
            InvalidFrameMeta,
        ),
        (
            Error::NotOwned {
                path: path(),
                reason: "not a Zarr v3 group",
            },
            NotOwned,
        ),
        (
            Error::ResumeMismatch {
                path: path(),
                field: "codec",
                on_disk: "lz4".into(),
                requested: "zstd".into(),
            },
            ResumeMismatch,
        ),
        (
            Error::NeedsRecovery {
                path: path(),
                reason: "temporary shards".into(),
            },
            NeedsRecovery,
        ),
        (
            Error::Remote(RemoteError::Upload {
                url: url(),
                key: "c/0/0/0".into(),
                message: "timed out".into(),
                staging: PathBuf::from("/scratch/staging"),
            }),
            RemoteUpload,
        ),
        (Error::NotAnImage("set_window"), InvalidArgument),
        (Error::Internal("x".into()), Internal),
    ];
    check(cases, Error::kind, variant, 29);
}

#[test]
fn every_frame_index_problem_has_its_kind() {
    let variant = |e: &FrameIndexError| match e {
        FrameIndexError::Rank { .. } => 0,
        FrameIndexError::OutOfBounds { .. } => 1,
        FrameIndexError::OutsideWindow { .. } => 2,
        FrameIndexError::Duplicate => 3,
        FrameIndexError::Appending => 4,
        FrameIndexError::Indexed => 5,
        FrameIndexError::Unsupported(_) => 6,
    };
    let cases = vec![
        (FrameIndexError::Rank { got: 2, lead: 3 }, FrameIndex),
        (
            FrameIndexError::OutOfBounds {
                axis: 1,
                value: 2,
                size: 2,
            },
            FrameIndex,
        ),
        (
            FrameIndexError::OutsideWindow {
                value: 9,
                low: 0,
                high: 4,
            },
            FrameIndex,
        ),
        (FrameIndexError::Duplicate, DuplicateFrame),
        (FrameIndexError::Appending, MixedFrames),
        (FrameIndexError::Indexed, MixedFrames),
        (
            FrameIndexError::Unsupported("pyramid levels"),
            IndexUnsupported,
        ),
    ];
    // Through `Error`, as the bindings see them.
    check(cases, |p| index(p.clone()).kind(), variant, 7);
}

#[test]
fn every_remote_error_has_its_kind() {
    let variant = |e: &RemoteError| match e {
        RemoteError::Url { .. } => 0,
        RemoteError::Credentials { .. } => 1,
        RemoteError::NoBucket { .. } => 2,
        RemoteError::Unreachable { .. } => 3,
        RemoteError::Upload { .. } => 4,
        RemoteError::Conflict { .. } => 5,
        RemoteError::Staging { .. } => 6,
    };
    let message = || "what happened".to_string();
    let cases = vec![
        (
            RemoteError::Url {
                url: url(),
                reason: "unknown scheme".into(),
            },
            RemoteUrl,
        ),
        (
            RemoteError::Credentials {
                url: url(),
                message: message(),
            },
            RemoteCredentials,
        ),
        (
            RemoteError::NoBucket {
                url: url(),
                message: message(),
            },
            RemoteNoBucket,
        ),
        (
            RemoteError::Unreachable {
                url: url(),
                message: message(),
            },
            RemoteUnreachable,
        ),
        (
            RemoteError::Upload {
                url: url(),
                key: "c/0/0/0".into(),
                message: message(),
                staging: PathBuf::from("/scratch/staging"),
            },
            RemoteUpload,
        ),
        (
            RemoteError::Conflict {
                url: url(),
                key: "zarr.json".into(),
                message: message(),
            },
            RemoteConflict,
        ),
        (
            RemoteError::Staging {
                path: PathBuf::from("/scratch/staging"),
                reason: "holds data not yet uploaded".into(),
            },
            RemoteStaging,
        ),
    ];
    check(cases, |r| Error::Remote(r.clone()).kind(), variant, 7);
}

#[test]
fn every_read_error_is_not_a_store() {
    let variant = |e: &ReadError| match e {
        ReadError::IndexLength { .. } => 0,
        ReadError::IndexChecksum { .. } => 1,
        ReadError::Truncated { .. } => 2,
        ReadError::InvalidHeader { .. } => 3,
        ReadError::Unsupported { .. } => 4,
        ReadError::TooLarge { .. } => 5,
        ReadError::Corrupt { .. } => 6,
        ReadError::Metadata(_) => 7,
    };
    let cases = vec![
        (
            ReadError::IndexLength {
                expected: 20,
                got: 3,
            },
            NotAStore,
        ),
        (
            ReadError::IndexChecksum {
                stored: 1,
                computed: 2,
            },
            NotAStore,
        ),
        (
            ReadError::Truncated {
                codec: "zstd",
                what: "header",
            },
            NotAStore,
        ),
        (
            ReadError::InvalidHeader {
                codec: "blosc",
                what: "typesize",
            },
            NotAStore,
        ),
        (
            ReadError::Unsupported {
                codec: "blosc",
                what: "bitshuffle",
            },
            NotAStore,
        ),
        (
            ReadError::TooLarge {
                codec: "zstd",
                nbytes: 9,
                limit: 8,
            },
            NotAStore,
        ),
        (
            ReadError::Corrupt {
                codec: "zstd",
                what: "bad block".into(),
            },
            NotAStore,
        ),
        (read_error(), NotAStore),
    ];
    check(cases, ReadError::kind, variant, 8);
}

#[test]
fn every_store_error_has_its_kind() {
    let variant = |e: &StoreError| match e {
        StoreError::NotFound(_) => 0,
        StoreError::NotAStore { .. } => 1,
        StoreError::Metadata { .. } => 2,
        StoreError::Index { .. } => 3,
        StoreError::NoSuchShard { .. } => 4,
        StoreError::Io(_) => 5,
    };
    let cases = vec![
        (StoreError::NotFound(path()), NotFound),
        (
            StoreError::NotAStore {
                path: path(),
                why: "no zarr.json".into(),
            },
            NotAStore,
        ),
        (
            StoreError::Metadata {
                path: path(),
                source: read_error(),
            },
            NotAStore,
        ),
        (
            StoreError::Index {
                key: "c/0/0/0".into(),
                source: ReadError::IndexChecksum {
                    stored: 1,
                    computed: 2,
                },
            },
            NotAStore,
        ),
        (
            StoreError::NoSuchShard {
                store: path(),
                key: "c/9".into(),
            },
            NotAStore,
        ),
        (
            StoreError::Io(io_error(io::ErrorKind::PermissionDenied)),
            Io,
        ),
        // A full disk is the writer's `DiskFull`, wherever it is met.
        (
            StoreError::Io(io_error(io::ErrorKind::StorageFull)),
            DiskFull,
        ),
        (
            StoreError::Io(io_error(io::ErrorKind::QuotaExceeded)),
            DiskFull,
        ),
    ];
    check(cases, StoreError::kind, variant, 6);
}

#[test]
fn every_recover_error_has_its_kind() {
    let variant = |e: &RecoverError| match e {
        RecoverError::Metadata { .. } => 0,
        RecoverError::Io(_) => 1,
        RecoverError::Write(_) => 2,
        RecoverError::Store(_) => 3,
    };
    let cases = vec![
        (
            RecoverError::Metadata {
                path: path(),
                source: read_error(),
            },
            NotAStore,
        ),
        (RecoverError::Io(io_error(io::ErrorKind::NotFound)), Io),
        (
            RecoverError::Io(io_error(io::ErrorKind::StorageFull)),
            DiskFull,
        ),
        (RecoverError::Write(Error::Locked { path: path() }), Locked),
        (RecoverError::Store(StoreError::NotFound(path())), NotFound),
    ];
    check(cases, RecoverError::kind, variant, 4);
}

#[test]
fn every_config_error_has_its_kind() {
    let variant = |e: &ConfigError| match e {
        ConfigError::NotUtf8(_) => 0,
        ConfigError::Json(_) => 1,
        ConfigError::Value { .. } => 2,
        ConfigError::Spec(_) => 3,
        ConfigError::Ome(_) => 4,
        ConfigError::Plate(_) => 5,
    };
    let not_utf8 = String::from_utf8(vec![0xff])
        .expect_err("0xff is not UTF-8")
        .utf8_error();
    let not_json = serde_json::from_str::<serde_json::Value>("{").expect_err("not JSON");
    let cases = vec![
        (ConfigError::NotUtf8(not_utf8), InvalidConfig),
        (ConfigError::Json(not_json), InvalidConfig),
        (
            ConfigError::Value {
                key: "sink",
                message: "floppy".into(),
            },
            InvalidConfig,
        ),
        (
            ConfigError::Spec(SpecError::Missing("shape")),
            InvalidConfig,
        ),
        (ConfigError::Ome(OmeError::Rank(6)), InvalidConfig),
        (ConfigError::Plate(PlateError::NoFields), InvalidPlate),
    ];
    check(cases, ConfigError::kind, variant, 6);
}

#[test]
fn a_disk_full_io_error_is_the_writers_disk_full() {
    // `IoError::kind` and `Error::from(IoError)` decide alike.
    for kind in [
        io::ErrorKind::StorageFull,
        io::ErrorKind::QuotaExceeded,
        io::ErrorKind::NotFound,
    ] {
        let e = io_error(kind);
        let expected = e.kind();
        assert_eq!(Error::from(e).kind(), expected, "{kind:?}");
    }
}

#[test]
fn kind_names_are_stable_snake_case_and_distinct() {
    // Written out: these names are a contract with the bindings (Python keys its
    // exception classes by them), not to be renamed.
    let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "invalid_config",
            "invalid_argument",
            "invalid_plate",
            "invalid_frame",
            "invalid_frame_meta",
            "frame_index",
            "duplicate_frame",
            "mixed_frames",
            "index_unsupported",
            "working_set",
            "array_full",
            "closed",
            "unknown_array",
            "exists",
            "not_owned",
            "locked",
            "resume_mismatch",
            "needs_recovery",
            "unsupported",
            "disk_full",
            "io",
            "not_found",
            "not_a_store",
            "shard_truncated",
            "remote_url",
            "remote_credentials",
            "remote_no_bucket",
            "remote_unreachable",
            "remote_upload",
            "remote_conflict",
            "remote_staging",
            "internal",
        ]
    );
    for kind in ErrorKind::ALL {
        assert_eq!(kind.to_string(), kind.as_str());
    }
}
