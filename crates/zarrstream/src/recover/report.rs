//! What [`recover_store`](super::recover_store) reports: one entry per temporary shard,
//! every rejected chunk with its reason, and the frames counted before and after.

use std::path::PathBuf;

use serde::Serialize;

use crate::store::{ChunkFault, StoreReader};

/// How kept chunks were verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    /// By each chunk's trailing crc32c.
    Crc32c,
    /// The array has no per-chunk crc32c: each chunk was fully decoded (or, for codec
    /// `none`, checked to have exactly the chunk's size).
    Decoding,
}

impl Validation {
    /// `crc32c` or `validated by decoding`.
    pub fn describe(self) -> &'static str {
        match self {
            Validation::Crc32c => "crc32c",
            Validation::Decoding => "validated by decoding",
        }
    }
}

/// Why a working-index entry's chunk was not kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum RejectReason {
    /// Exactly one field of the entry is the empty marker: the entry was being written.
    #[error("torn index entry (offset {offset:#x}, nbytes {nbytes:#x})")]
    TornEntry {
        /// The entry's offset field.
        offset: u64,
        /// The entry's nbytes field.
        nbytes: u64,
    },
    /// The entry's bytes do not lie inside the slots region (or, with a final index,
    /// inside the file's data region).
    #[error("entry {offset}+{nbytes} lies outside {region}")]
    OutOfBounds {
        /// The entry's offset.
        offset: u64,
        /// The entry's length.
        nbytes: u64,
        /// `the slots region` or `the data region of the file`.
        region: &'static str,
    },
    /// The chunk is too short to hold its crc32c (or is empty).
    #[error("chunk of {nbytes} bytes is too short")]
    TooShort {
        /// The entry's length.
        nbytes: u64,
    },
    /// The chunk's crc32c does not match its bytes.
    #[error("crc32c mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        /// The crc32c stored after the chunk.
        stored: u32,
        /// The crc32c of the chunk's bytes.
        computed: u32,
    },
    /// Without a crc32c, the chunk failed to decode.
    #[error("does not decode: {message}")]
    Decode {
        /// The decoder's error.
        message: String,
    },
    /// The chunk decodes to (or, for codec `none`, is) the wrong number of bytes.
    #[error("decodes to {got} bytes, expected {expected}")]
    WrongSize {
        /// The inner chunk's size.
        expected: u64,
        /// What it decoded to.
        got: u64,
    },
    /// Reading the chunk failed.
    #[error("read failed: {message}")]
    Read {
        /// The I/O error.
        message: String,
    },
}

/// A chunk that was not kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedChunk {
    /// The shard key (`c/0/0/0`).
    pub shard: String,
    /// The inner chunk's index in C order within the shard.
    pub chunk: usize,
    /// Why.
    #[serde(flatten)]
    pub reason: RejectReason,
}

/// Which index of a temporary shard was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexSource {
    /// The working index (entries written as chunks landed; no crc32c).
    Working,
    /// A final index with a valid crc32c: the finisher had started to finish the shard.
    Final,
    /// No usable index.
    None,
}

/// What happened to one temporary shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardOutcome {
    /// Rebuilt and renamed into place.
    Rebuilt,
    /// No chunk verified: the temporary file was removed and the shard reads as fill.
    Empty,
    /// No index could be read: the file was renamed to `*.unrecoverable` and left.
    Unrecoverable,
}

/// The recovery of one temporary shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShardRecovery {
    /// The shard key (`c/0/0/0`).
    pub key: String,
    /// The temporary file's name in `.zarrstream-partial/`.
    pub file: String,
    /// Which index was read.
    pub index: IndexSource,
    /// What was done.
    pub outcome: ShardOutcome,
    /// Entries whose chunk verified and was kept.
    pub chunks_kept: u64,
    /// Kept chunks found at their compacted position rather than where the index said
    /// (the finisher was compacting the shard).
    pub chunks_relocated: u64,
    /// Kept chunks whose working-index entry was torn (the writer was killed after
    /// storing the offset, before the length): the length was read off the chunk and
    /// verified.
    pub chunks_from_torn_entries: u64,
    /// Entries rejected.
    pub chunks_rejected: u64,
    /// Size of the rebuilt shard file.
    pub bytes: u64,
}

/// What [`recover_store`](super::recover_store) found and did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecoveryReport {
    /// The store.
    pub store: PathBuf,
    /// `attributes.zarrstream.state` before recovery.
    pub previous_state: Option<String>,
    /// Whether `zarr.json` was republished (not when there was nothing to recover).
    pub published: bool,
    /// How chunks were verified.
    pub validation: Validation,
    /// One entry per temporary shard found.
    pub shards: Vec<ShardRecovery>,
    /// Temporary shards rebuilt into place.
    pub shards_recovered: u64,
    /// Chunks kept over all temporary shards.
    pub chunks_kept: u64,
    /// Chunks rejected over all temporary shards.
    pub chunks_rejected: u64,
    /// Every rejected chunk with its reason.
    pub rejected: Vec<RejectedChunk>,
    /// Frames all of whose chunks are on disk only thanks to this recovery.
    pub frames_recovered: u64,
    /// Frames all of whose chunks are on disk (finished and recovered shards); written
    /// as `frames_committed`.
    pub frames_committed: u64,
    /// `frames_committed` before recovery.
    pub frames_committed_before: Option<u64>,
    /// The array shape published (`shape[0]` covers every chunk on disk).
    pub shape: Vec<u64>,
    /// `shape` before recovery.
    pub shape_before: Vec<u64>,
    /// Finished shards under `c/` whose index is unreadable (left as they are; their
    /// chunks do not count).
    pub damaged_shards: Vec<String>,
    /// Files in `.zarrstream-partial/` that are not temporary shards of this array
    /// (left as they are).
    pub skipped_files: Vec<String>,
}

impl From<ChunkFault> for RejectReason {
    fn from(fault: ChunkFault) -> Self {
        match fault {
            ChunkFault::Checksum { stored, computed } => {
                RejectReason::Checksum { stored, computed }
            }
            ChunkFault::TooShort { nbytes } => RejectReason::TooShort { nbytes },
            ChunkFault::Decode(e) => RejectReason::Decode {
                message: e.to_string(),
            },
            ChunkFault::WrongSize { expected, got } => RejectReason::WrongSize { expected, got },
            ChunkFault::Read(message) => RejectReason::Read { message },
        }
    }
}

impl RecoveryReport {
    /// The report before anything is done: what `zarr.json` says.
    pub(super) fn start(store: &StoreReader) -> Self {
        let spec = store.spec();
        let recorded = &store.metadata().progress;
        RecoveryReport {
            store: store.root().to_path_buf(),
            previous_state: recorded.state.clone(),
            published: false,
            validation: if spec.crc32c {
                Validation::Crc32c
            } else {
                Validation::Decoding
            },
            shards: Vec::new(),
            shards_recovered: 0,
            chunks_kept: 0,
            chunks_rejected: 0,
            rejected: Vec::new(),
            frames_recovered: 0,
            frames_committed: 0,
            frames_committed_before: recorded.frames_committed,
            shape: spec.shape.clone(),
            shape_before: spec.shape.clone(),
            damaged_shards: Vec::new(),
            skipped_files: Vec::new(),
        }
    }
}
