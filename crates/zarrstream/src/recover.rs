//! Crash recovery of a store whose writer died (`zarrstream recover STORE`).
//!
//! A killed writer leaves finished shards under `c/…` and the shards it was filling as
//! temporary files `.zarrstream-partial/<key with / as .>.partial`, at their worst-case
//! size: chunk `i` in its fixed slot (mmap sink) or appended after the chunks finished
//! before it (pwrite sink), then a 16-byte working-index entry written only after the
//! chunk's bytes (`ShardLayout`). [`recover_store`] rebuilds each temporary
//! shard from the entries whose chunk verifies (by its crc32c, or, for arrays without
//! the per-chunk crc32c, by decoding it), exactly as the writer's finisher would have
//! (compact packing, final index with its crc32c), renames it into place, and
//! republishes `zarr.json` with the append axis covering every chunk now on disk.
//!
//! It also handles a temporary shard the finisher had started to finish (chunks moved
//! towards the start, final index written, file cut to its final length) but not yet
//! renamed: entries are then read from the final index, and a chunk whose slot was
//! overwritten by the compaction is looked for at its compacted position.
//!
//! It refuses a store whose writer is still alive: the writer holds an `flock` on
//! `.zarrstream-partial/writer.lock`, which the kernel releases when the process dies.

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::codec::Codec;
use crate::lock::{LOCK_FILE, StoreLock};
use crate::metadata::{self, Progress, State};
use crate::read::index::{EMPTY, parse_index, raw_entries};
use crate::read::metadata::parse_array_json;
use crate::read::{ReadError, blosc, zstd};
use crate::shard::{Packing, ShardLayout, encode_index, plan};
use crate::sink::CREATING_EXTENSION;
use crate::spec::{ArraySpec, IndexLocation};

pub use crate::writer::PARTIAL_DIR;
const PARTIAL_SUFFIX: &str = ".partial";
/// Suffix of a shard being rebuilt (removed and redone if a recovery was interrupted).
const REBUILD_SUFFIX: &str = ".recovering";
/// Suffix given to a temporary shard that holds nothing readable (kept for inspection).
const UNRECOVERABLE_SUFFIX: &str = ".unrecoverable";

/// Why recovery could not run or complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoverError {
    /// `zarr.json` is missing, unreadable or not an array zarrstream writes.
    #[error("{path}: not a zarrstream array: {source}")]
    Metadata {
        /// The `zarr.json` path.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: ReadError,
    },
    /// An I/O operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Syncing a directory or publishing `zarr.json` failed.
    #[error(transparent)]
    Write(#[from] crate::Error),
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> RecoverError {
    let path = path.to_path_buf();
    move |source| RecoverError::Io { op, path, source }
}

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
    /// Entries rejected.
    pub chunks_rejected: u64,
    /// Size of the rebuilt shard file.
    pub bytes: u64,
}

/// What [`recover_store`] found and did.
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

/// Recovers the store at `path` after its writer died: rebuilds every temporary shard
/// from its verified chunks, renames it into place, removes the temporary files and
/// republishes `zarr.json` (state `recovered`, `shape[0]` covering every chunk on disk,
/// `frames_committed` counting the frames all of whose chunks are present).
///
/// Nothing is republished when there was nothing to do (no temporary shard and a
/// `zarr.json` not in state `running`). Running it again is harmless.
pub fn recover_store(path: impl AsRef<Path>) -> Result<RecoveryReport, RecoverError> {
    let dir = path.as_ref();
    let meta_path = dir.join("zarr.json");
    let meta_err = |source| RecoverError::Metadata {
        path: meta_path.clone(),
        source,
    };
    let text = fs::read(&meta_path).map_err(io_err("read", &meta_path))?;
    let doc: Value =
        serde_json::from_slice(&text).map_err(|e| meta_err(ReadError::Metadata(e.to_string())))?;
    let meta = parse_array_json(&doc).map_err(meta_err)?;
    let spec = meta.spec;
    let layout = ShardLayout::new(&spec)
        .map_err(|_| meta_err(ReadError::Metadata("the shard layout overflows u64".into())))?;
    let validation = if spec.crc32c {
        Validation::Crc32c
    } else {
        Validation::Decoding
    };
    let mut report = RecoveryReport {
        store: dir.to_path_buf(),
        previous_state: meta.progress.state.clone(),
        published: false,
        validation,
        shards: Vec::new(),
        shards_recovered: 0,
        chunks_kept: 0,
        chunks_rejected: 0,
        rejected: Vec::new(),
        frames_recovered: 0,
        frames_committed: 0,
        frames_committed_before: meta.progress.frames_committed,
        shape: spec.shape.clone(),
        shape_before: spec.shape.clone(),
        damaged_shards: Vec::new(),
        skipped_files: Vec::new(),
    };

    let tmp_dir = dir.join(PARTIAL_DIR);
    let mut found_partials = false;
    let mut recovered_keys = BTreeSet::new();
    // Refuses to run while a writer is still recording into the store.
    let lock = if tmp_dir.is_dir() {
        Some(StoreLock::acquire(&tmp_dir)?)
    } else {
        None
    };
    if tmp_dir.is_dir() {
        let mut names = Vec::new();
        for entry in fs::read_dir(&tmp_dir).map_err(io_err("list", &tmp_dir))? {
            let entry = entry.map_err(io_err("list", &tmp_dir))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        for name in names {
            let path = tmp_dir.join(&name);
            if name == LOCK_FILE {
                continue;
            }
            if name.ends_with(REBUILD_SUFFIX) || name.ends_with(&format!(".{CREATING_EXTENSION}")) {
                // A rebuild interrupted before its rename (redone from the .partial), or a
                // shard file killed while being created (it holds no chunks yet).
                fs::remove_file(&path).map_err(io_err("remove", &path))?;
                continue;
            }
            let key = name
                .strip_suffix(PARTIAL_SUFFIX)
                .and_then(|stem| shard_key(&spec, stem));
            let Some(key) = key else {
                report.skipped_files.push(name);
                continue;
            };
            found_partials = true;
            let shard = recover_partial(dir, &tmp_dir, &name, &key, &spec, &layout)?;
            let r = shard.recovery;
            report.chunks_kept += r.chunks_kept;
            report.chunks_rejected += r.chunks_rejected;
            if r.outcome == ShardOutcome::Rebuilt {
                report.shards_recovered += 1;
                recovered_keys.insert(key.clone());
            }
            report.rejected.extend(shard.rejected);
            report.shards.push(r);
        }
        metadata::sync_dir(&tmp_dir)?;
    }

    let running = meta.progress.state.as_deref() == Some("running");
    let present = scan_shards(dir, &spec, &layout, &mut report.damaged_shards)?;
    let tally = tally_frames(&spec, &present, &recovered_keys);
    report.frames_committed = tally.committed;
    report.frames_recovered = tally.recovered;
    let shape0 = spec.shape[0].max(tally.extent0);
    report.shape[0] = shape0;

    if found_partials || running {
        let progress = Progress {
            state: State::Recovered,
            frames_committed: tally.committed,
            frames_dropped: meta.progress.frames_dropped.unwrap_or(0),
            error: meta.progress.error.clone(),
        };
        let mut doc = metadata::array_json(&spec, shape0, &progress);
        doc["attributes"]["zarrstream"]["recovery"] = json!({
            "previous_state": meta.progress.state,
            "frames_committed_before": meta.progress.frames_committed,
            "shards_recovered": report.shards_recovered,
            "chunks_kept": report.chunks_kept,
            "chunks_rejected": report.chunks_rejected,
            "validation": validation,
        });
        metadata::publish(dir, &doc)?;
        report.published = true;
    } else {
        report.shape = report.shape_before.clone();
    }
    if let Some(lock) = lock {
        lock.release();
    }
    // The writer removes its temporary directory when it finishes; do the same once it
    // is empty (anything left in it was reported).
    if tmp_dir.is_dir() && report.skipped_files.is_empty() {
        let empty = fs::read_dir(&tmp_dir)
            .map_err(io_err("list", &tmp_dir))?
            .next()
            .is_none();
        if empty {
            fs::remove_dir(&tmp_dir).map_err(io_err("remove", &tmp_dir))?;
            metadata::sync_dir(dir)?;
        }
    }
    Ok(report)
}

/// `c.0.1.2` → `c/0/1/2` if it names a shard of this array (one coordinate per axis,
/// inside the shard grid on every axis but the append axis).
fn shard_key(spec: &ArraySpec, stem: &str) -> Option<String> {
    let mut parts = stem.split('.');
    if parts.next() != Some("c") {
        return None;
    }
    let coords: Vec<u64> = parts.map(|p| p.parse().ok()).collect::<Option<_>>()?;
    if coords.len() != spec.rank() {
        return None;
    }
    let inside = (1..spec.rank()).all(|a| coords[a] < spec.shape[a].div_ceil(spec.shard[a]));
    inside.then(|| key_of(&coords))
}

fn key_of(coords: &[u64]) -> String {
    let mut k = String::from("c");
    for c in coords {
        k.push('/');
        k.push_str(&c.to_string());
    }
    k
}

struct PartialResult {
    recovery: ShardRecovery,
    rejected: Vec<RejectedChunk>,
}

/// The index entries of a temporary shard and the region their chunks may lie in.
struct Entries {
    source: IndexSource,
    raw: Vec<(u64, u64)>,
    /// Byte range holding chunk data (for a final index).
    data: (u64, u64),
}

fn read_entries(file: &File, len: u64, layout: &ShardLayout) -> io::Result<Entries> {
    let n = layout.n as usize;
    let size = layout.index_size;
    let read = |at: u64| -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, at)?;
        Ok(buf)
    };
    let none = Entries {
        source: IndexSource::None,
        raw: Vec::new(),
        data: (0, 0),
    };
    let start = layout.location == IndexLocation::Start;
    if len == layout.file_size {
        let buf = read(layout.index_offset)?;
        // With the index at the start, the finisher writes the final index over the
        // working one (same place, same size) after compacting: its crc32c then holds.
        if let Ok(entries) = parse_index(&buf, n)
            && start
        {
            return Ok(Entries {
                source: IndexSource::Final,
                raw: entries
                    .iter()
                    .map(|e| e.unwrap_or((EMPTY, EMPTY)))
                    .collect(),
                data: (size, len),
            });
        }
        return Ok(Entries {
            source: IndexSource::Working,
            raw: raw_entries(&buf).collect(),
            data: (
                layout.data_start,
                layout.index_offset.max(layout.data_start),
            ),
        });
    }
    if len < size || len > layout.file_size {
        return Ok(none);
    }
    // Shorter than reserved: the finisher had cut the file to its final length, so a
    // final index must sit at its place.
    let at = if start { 0 } else { len - size };
    match parse_index(&read(at)?, n) {
        Ok(entries) => Ok(Entries {
            source: IndexSource::Final,
            raw: entries
                .iter()
                .map(|e| e.unwrap_or((EMPTY, EMPTY)))
                .collect(),
            data: if start { (size, len) } else { (0, len - size) },
        }),
        Err(_) => Ok(none),
    }
}

/// Checks that `bytes` are a valid encoded inner chunk of `spec`.
fn verify(spec: &ArraySpec, bytes: &[u8]) -> Result<(), RejectReason> {
    let nbytes = bytes.len() as u64;
    if spec.crc32c {
        let Some(split) = bytes.len().checked_sub(4).filter(|&s| s > 0) else {
            return Err(RejectReason::TooShort { nbytes });
        };
        let (body, crc) = bytes.split_at(split);
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32c::crc32c(body);
        return if stored == computed {
            Ok(())
        } else {
            Err(RejectReason::Checksum { stored, computed })
        };
    }
    let expected = spec.chunk_bytes;
    let decoded = match spec.codec {
        Codec::None => bytes.len(),
        Codec::Zstd { .. } => zstd::decompress(bytes, expected)
            .map(|d| d.len())
            .map_err(decode)?,
        Codec::Blosc { .. } => blosc::decompress(bytes, expected)
            .map(|d| d.len())
            .map_err(decode)?,
    };
    if decoded == expected {
        Ok(())
    } else {
        Err(RejectReason::WrongSize {
            expected: expected as u64,
            got: decoded as u64,
        })
    }
}

fn decode(e: ReadError) -> RejectReason {
    RejectReason::Decode {
        message: e.to_string(),
    }
}

/// Reads `nbytes` at `offset` and verifies them as a chunk.
fn check_at(file: &File, spec: &ArraySpec, offset: u64, nbytes: u64) -> Result<(), RejectReason> {
    let len = usize::try_from(nbytes).map_err(|_| RejectReason::TooShort { nbytes })?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| RejectReason::Read {
            message: e.to_string(),
        })?;
    verify(spec, &buf)
}

/// Whether an entry `(offset, nbytes)` passes the bounds checks, or why not.
fn bounds(
    entries: &Entries,
    layout: &ShardLayout,
    (offset, nbytes): (u64, u64),
) -> Result<(), RejectReason> {
    if (offset == EMPTY) != (nbytes == EMPTY) {
        return Err(RejectReason::TornEntry { offset, nbytes });
    }
    if nbytes == 0 {
        return Err(RejectReason::TooShort { nbytes });
    }
    let end = offset.checked_add(nbytes);
    let (lo, hi, region) = match entries.source {
        IndexSource::Working => {
            // The mmap sink writes chunk `i` in its slot, the pwrite sink appends chunks
            // back to back from the start of the data region: either way inside the
            // slots region, and the chunk itself is verified next.
            let lo = if layout.location == IndexLocation::Start {
                layout.index_size
            } else {
                0
            };
            (lo, layout.slot_offset(layout.n), "the slots region")
        }
        _ => (
            entries.data.0,
            entries.data.1,
            "the data region of the file",
        ),
    };
    // No chunk is ever larger than a slot.
    if offset < lo || end.is_none_or(|e| e > hi) || nbytes > layout.slot_size {
        return Err(RejectReason::OutOfBounds {
            offset,
            nbytes,
            region,
        });
    }
    Ok(())
}

fn recover_partial(
    dir: &Path,
    tmp_dir: &Path,
    name: &str,
    key: &str,
    spec: &ArraySpec,
    layout: &ShardLayout,
) -> Result<PartialResult, RecoverError> {
    let path = tmp_dir.join(name);
    let file = File::open(&path).map_err(io_err("open", &path))?;
    let len = file.metadata().map_err(io_err("stat", &path))?.len();
    let entries = read_entries(&file, len, layout).map_err(io_err("read", &path))?;
    let mut recovery = ShardRecovery {
        key: key.to_string(),
        file: name.to_string(),
        index: entries.source,
        outcome: ShardOutcome::Empty,
        chunks_kept: 0,
        chunks_relocated: 0,
        chunks_rejected: 0,
        bytes: 0,
    };
    if len == 0 {
        // Killed between creating the file and reserving it (the preparer works one
        // shard set ahead): nothing was ever written into it.
        drop(file);
        fs::remove_file(&path).map_err(io_err("remove", &path))?;
        return Ok(PartialResult {
            recovery,
            rejected: Vec::new(),
        });
    }
    if entries.source == IndexSource::None {
        let aside = tmp_dir.join(format!("{name}{UNRECOVERABLE_SUFFIX}"));
        fs::rename(&path, &aside).map_err(io_err("rename", &aside))?;
        recovery.outcome = ShardOutcome::Unrecoverable;
        return Ok(PartialResult {
            recovery,
            rejected: Vec::new(),
        });
    }

    // Compacted positions (what the finisher's plan gives every plausible entry), for
    // chunks that compaction moved away from where their entry points.
    let plausible: Vec<Option<(u64, u64)>> = entries
        .raw
        .iter()
        .map(|&(o, b)| {
            (o != EMPTY && b != EMPTY && b > 0 && b <= layout.slot_size).then_some((o, b))
        })
        .collect();
    let compacted = plan(layout, &plausible, Packing::Compact).entries;

    let mut kept: Vec<Option<(u64, u64)>> = vec![None; entries.raw.len()];
    let mut rejected = Vec::new();
    for (i, &entry) in entries.raw.iter().enumerate() {
        // (0, 0): a reserved file whose working index was not yet initialised; no
        // chunk is ever 0 bytes long.
        if entry == (EMPTY, EMPTY) || entry == (0, 0) {
            continue;
        }
        let first =
            bounds(&entries, layout, entry).and_then(|()| check_at(&file, spec, entry.0, entry.1));
        let found = match first {
            Ok(()) => Ok(entry.0),
            Err(reason) => {
                let nbytes = entry.1;
                let slot = layout.slot_offset(i as u64);
                let alternates = [compacted.get(i).copied().flatten().map(|c| c.0), Some(slot)];
                let relocated = alternates.into_iter().flatten().find(|&at| {
                    at != entry.0
                        && plausible[i].is_some()
                        && in_file(at, nbytes, len)
                        && check_at(&file, spec, at, nbytes).is_ok()
                });
                match relocated {
                    Some(at) => {
                        recovery.chunks_relocated += 1;
                        Ok(at)
                    }
                    None => Err(reason),
                }
            }
        };
        match found {
            Ok(at) => {
                kept[i] = Some((at, entry.1));
                recovery.chunks_kept += 1;
            }
            Err(reason) => {
                recovery.chunks_rejected += 1;
                rejected.push(RejectedChunk {
                    shard: key.to_string(),
                    chunk: i,
                    reason,
                });
            }
        }
    }

    if recovery.chunks_kept == 0 {
        drop(file);
        fs::remove_file(&path).map_err(io_err("remove", &path))?;
        return Ok(PartialResult { recovery, rejected });
    }
    let rebuilt = tmp_dir.join(format!("{name}{REBUILD_SUFFIX}"));
    recovery.bytes = write_shard(&file, &rebuilt, layout, &kept)?;
    let dst = dir.join(key);
    let mut changed = BTreeSet::new();
    if let Some(parent) = dst.parent() {
        metadata::create_dirs(parent, &mut changed)?;
        changed.insert(parent.to_path_buf());
    }
    fs::rename(&rebuilt, &dst).map_err(io_err("rename", &dst))?;
    for d in &changed {
        metadata::sync_dir(d)?;
    }
    drop(file);
    fs::remove_file(&path).map_err(io_err("remove", &path))?;
    recovery.outcome = ShardOutcome::Rebuilt;
    Ok(PartialResult { recovery, rejected })
}

fn in_file(at: u64, nbytes: u64, len: u64) -> bool {
    at.checked_add(nbytes).is_some_and(|e| e <= len)
}

/// Writes the finished shard for the `kept` chunks (source offsets in `src`) to `to`
/// the way the finisher lays it out (compact packing, final index and crc32c), and
/// flushes it. Returns its length.
fn write_shard(
    src: &File,
    to: &Path,
    layout: &ShardLayout,
    kept: &[Option<(u64, u64)>],
) -> Result<u64, RecoverError> {
    let fin = plan(layout, kept, Packing::Compact);
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(io_err("create", to))?;
    let mut buf = Vec::new();
    for (from, dst) in kept.iter().zip(&fin.entries) {
        if let (Some((at, nbytes)), Some((offset, _))) = (from, dst) {
            buf.resize(*nbytes as usize, 0);
            src.read_exact_at(&mut buf, *at)
                .map_err(io_err("read", to))?;
            out.write_all_at(&buf, *offset)
                .map_err(io_err("write", to))?;
        }
    }
    buf.resize(layout.index_size as usize, 0);
    encode_index(&fin.entries, &mut buf);
    out.write_all_at(&buf, fin.index_at)
        .map_err(io_err("write", to))?;
    out.set_len(fin.len).map_err(io_err("truncate", to))?;
    out.sync_all().map_err(io_err("fsync", to))?;
    Ok(fin.len)
}

/// Present inner chunks per shard (by shard coordinates) of every shard under `c/`.
fn scan_shards(
    dir: &Path,
    spec: &ArraySpec,
    layout: &ShardLayout,
    damaged: &mut Vec<String>,
) -> Result<HashMap<Vec<u64>, Vec<bool>>, RecoverError> {
    let mut present = HashMap::new();
    let root = dir.join("c");
    if !root.is_dir() {
        return Ok(present);
    }
    let rank = spec.rank();
    let mut stack = vec![(root, Vec::<u64>::new())];
    while let Some((d, coords)) = stack.pop() {
        for entry in fs::read_dir(&d).map_err(io_err("list", &d))? {
            let entry = entry.map_err(io_err("list", &d))?;
            let Some(v) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u64>().ok())
            else {
                continue;
            };
            let mut c = coords.clone();
            c.push(v);
            let p = entry.path();
            let ty = entry.file_type().map_err(io_err("stat", &p))?;
            if ty.is_dir() && c.len() < rank {
                stack.push((p, c));
            } else if ty.is_file() && c.len() == rank {
                match read_final_index(&p, layout) {
                    Ok(Some(bits)) => {
                        present.insert(c, bits);
                    }
                    Ok(None) => damaged.push(key_of(&c)),
                    Err(e) => return Err(io_err("read", &p)(e)),
                }
            }
        }
    }
    Ok(present)
}

/// Which chunks of a finished shard file are present; `None` if its index is invalid.
fn read_final_index(path: &Path, layout: &ShardLayout) -> io::Result<Option<Vec<bool>>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let size = layout.index_size;
    if len < size {
        return Ok(None);
    }
    let (at, lo, hi) = match layout.location {
        IndexLocation::Start => (0, size, len),
        IndexLocation::End => (len - size, 0, len - size),
    };
    let mut buf = vec![0u8; size as usize];
    file.read_exact_at(&mut buf, at)?;
    Ok(parse_index(&buf, layout.n as usize).ok().map(|entries| {
        entries
            .iter()
            .map(|e| {
                e.is_some_and(|(o, b)| o >= lo && o.checked_add(b).is_some_and(|end| end <= hi))
            })
            .collect()
    }))
}

struct Tally {
    /// Append-axis extent covering every present chunk.
    extent0: u64,
    committed: u64,
    recovered: u64,
}

/// Counts the frames all of whose chunks are present, and those among them that need a
/// recovered shard; and the append-axis extent covering every present chunk.
fn tally_frames(
    spec: &ArraySpec,
    present: &HashMap<Vec<u64>, Vec<bool>>,
    recovered: &BTreeSet<String>,
) -> Tally {
    let rank = spec.rank();
    let cps: Vec<u64> = spec
        .shard
        .iter()
        .zip(&spec.chunk)
        .map(|(s, c)| s / c)
        .collect();
    let mut extent0 = 0u64;
    for (sc, bits) in present {
        let last = bits.iter().rposition(|&b| b).map(|i| {
            // Axis-0 index of chunk i in C order within the shard.
            let inner: u64 = cps[1..].iter().product();
            (i as u64 / inner.max(1)) % cps[0]
        });
        // A shard index too large to address is left out (it cannot be a real shard).
        let end = last.and_then(|l| {
            sc[0]
                .checked_mul(cps[0])?
                .checked_add(l + 1)?
                .checked_mul(spec.chunk[0])
        });
        if let Some(end) = end {
            extent0 = extent0.max(end);
        }
    }
    let shape0 = spec.shape[0].max(extent0);
    // Only append-axis rows that hold a shard can hold complete frames: the tally costs
    // what is on disk, not the (possibly huge) extent.
    let shard0 = spec.shard[0];
    let mut rows: Vec<u64> = present.keys().map(|sc| sc[0]).collect();
    rows.sort_unstable();
    rows.dedup();
    let steps = rows.into_iter().flat_map(|r| {
        let start = r.saturating_mul(shard0).min(shape0);
        start..start.saturating_add(shard0).min(shape0)
    });
    let lead = &spec.shape[1..rank - 2];
    let per_step: u64 = lead.iter().product();
    let tiles_y = spec.shape[rank - 2].div_ceil(spec.chunk[rank - 2]);
    let tiles_x = spec.shape[rank - 1].div_ceil(spec.chunk[rank - 1]);
    let recovered_coords: Vec<Vec<u64>> = recovered
        .iter()
        .filter_map(|k| {
            k.split('/')
                .skip(1)
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u64>>>()
        })
        .collect();
    let (mut committed, mut from_recovery) = (0u64, 0u64);
    let mut c = vec![0u64; rank - 2];
    let mut key = Vec::with_capacity(rank);
    for t in steps {
        for k in 0..per_step {
            // Leading coordinates of frame (t, k) in C order.
            c[0] = t;
            let mut rest = k;
            for a in (1..rank - 2).rev() {
                c[a] = rest % spec.shape[a];
                rest /= spec.shape[a];
            }
            let mut complete = true;
            let mut needs_recovered = false;
            'tiles: for ty in 0..tiles_y {
                for tx in 0..tiles_x {
                    key.clear();
                    let mut local = 0u64;
                    let chunk_coords = c
                        .iter()
                        .zip(&spec.chunk)
                        .map(|(ci, ch)| ci / ch)
                        .chain([ty, tx]);
                    for (g, per) in chunk_coords.zip(&cps) {
                        key.push(g / per);
                        local = local * per + g % per;
                    }
                    let here = present
                        .get(&key)
                        .and_then(|bits| bits.get(local as usize).copied())
                        .unwrap_or(false);
                    if !here {
                        complete = false;
                        break 'tiles;
                    }
                    needs_recovered |= recovered_coords.contains(&key);
                }
            }
            if complete {
                committed += 1;
                from_recovery += u64::from(needs_recovered);
            }
        }
    }
    Tally {
        extent0,
        committed,
        recovered: from_recovery,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::ChunkEncoder;
    use crate::dtype::DataType;
    use crate::metadata::array_json;
    use crate::shard::entry_bytes;

    const N_FRAMES: u64 = 4;

    /// 3-D u16 array: frames 16 x 16, chunks 1 x 8 x 8 (4 per frame), shards of 4 frames
    /// (16 chunks).
    fn spec(codec: Codec, crc32c: bool, location: IndexLocation) -> ArraySpec {
        ArraySpec::builder()
            .shape([0, 16, 16])
            .chunk_shape([1, 8, 8])
            .shard_shape([N_FRAMES, 16, 16])
            .dtype(DataType::UInt16)
            .codec(codec)
            .crc32c(crc32c)
            .index_location(location)
            .build()
            .unwrap()
    }

    /// Content of inner chunk `i` of shard row `row` (never all fill).
    fn chunk_data(row: u64, i: usize) -> Vec<u8> {
        (0..64u16)
            .flat_map(|j| {
                (j.wrapping_mul(7) ^ (i as u16 * 31 + row as u16 * 517) | 1).to_le_bytes()
            })
            .collect()
    }

    fn encoded(spec: &ArraySpec, row: u64, i: usize) -> Vec<u8> {
        let mut enc = ChunkEncoder::new(spec.codec, 2, spec.checksum()).unwrap();
        let data = chunk_data(row, i);
        let mut out = vec![0u8; enc.slot_bound(data.len())];
        let n = enc.encode_slice(&data, &mut out).unwrap();
        out.truncate(n);
        out
    }

    struct Store {
        _dir: tempfile::TempDir,
        path: PathBuf,
        spec: ArraySpec,
        layout: ShardLayout,
    }

    /// A store whose writer died: zarr.json in state running at extent 0, and the
    /// temporary shard of row 0 with chunks `written` in their slots and their entries.
    fn crashed(spec: ArraySpec, written: &[usize]) -> Store {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zarr");
        fs::create_dir_all(path.join(PARTIAL_DIR)).unwrap();
        let progress = Progress {
            state: State::Running,
            frames_committed: 0,
            frames_dropped: 0,
            error: None,
        };
        metadata::publish(&path, &array_json(&spec, 0, &progress)).unwrap();
        let layout = ShardLayout::new(&spec).unwrap();
        let f = File::create(path.join(PARTIAL_DIR).join("c.0.0.0.partial")).unwrap();
        f.set_len(layout.file_size).unwrap();
        let empty = entry_bytes(EMPTY, EMPTY).repeat(layout.n as usize);
        f.write_all_at(&empty, layout.index_offset).unwrap();
        for &i in written {
            let bytes = encoded(&spec, 0, i);
            let at = layout.slot_offset(i as u64);
            f.write_all_at(&bytes, at).unwrap();
            set_entry(&path, &layout, i, at, bytes.len() as u64);
        }
        Store {
            _dir: dir,
            path,
            spec,
            layout,
        }
    }

    fn partial(path: &Path) -> PathBuf {
        path.join(PARTIAL_DIR).join("c.0.0.0.partial")
    }

    fn set_entry(path: &Path, layout: &ShardLayout, i: usize, offset: u64, nbytes: u64) {
        let f = OpenOptions::new().write(true).open(partial(path)).unwrap();
        f.write_all_at(
            &entry_bytes(offset, nbytes),
            layout.index_offset + 16 * i as u64,
        )
        .unwrap();
    }

    /// Decoded chunks of the finished shard `c/0/0/0` (None = empty).
    fn read_back(s: &Store) -> Vec<Option<Vec<u8>>> {
        let data = fs::read(s.path.join("c/0/0/0")).unwrap();
        let size = s.layout.index_size as usize;
        let index = match s.spec.index_location {
            IndexLocation::End => &data[data.len() - size..],
            IndexLocation::Start => &data[..size],
        };
        let entries = parse_index(index, s.layout.n as usize).unwrap();
        entries
            .iter()
            .map(|e| {
                e.map(|(o, b)| {
                    let mut c = &data[o as usize..(o + b) as usize];
                    if s.spec.crc32c {
                        let (body, crc) = c.split_at(c.len() - 4);
                        assert_eq!(crc32c::crc32c(body).to_le_bytes(), crc);
                        c = body;
                    }
                    match s.spec.codec {
                        Codec::None => c.to_vec(),
                        Codec::Zstd { .. } => zstd::decompress(c, 512).unwrap(),
                        Codec::Blosc { .. } => blosc::decompress(c, 512).unwrap(),
                    }
                })
            })
            .collect()
    }

    fn zarr_json(path: &Path) -> Value {
        serde_json::from_slice(&fs::read(path.join("zarr.json")).unwrap()).unwrap()
    }

    #[test]
    fn rebuilds_verified_chunks_and_rejects_damaged_entries() {
        for location in [IndexLocation::End, IndexLocation::Start] {
            // Frames 0 and 1 complete (chunks 0..8), frame 2 partly (8, 9, 10, 11).
            let s = crashed(
                spec(Codec::blosc_lz4(1), true, location),
                &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
            );
            let l = s.layout;
            let f = OpenOptions::new()
                .write(true)
                .open(partial(&s.path))
                .unwrap();
            // Chunk 9: a flipped byte.
            f.write_all_at(&[0x5a], l.slot_offset(9) + 20).unwrap();
            // Chunk 10: the entry points past the end of the slots region.
            set_entry(&s.path, &l, 10, l.slot_offset(l.n) - 8, 40);
            // Chunk 11: torn entry, offset set and nbytes garbage.
            set_entry(&s.path, &l, 11, l.slot_offset(11), 0xdead_beef_dead_beef);
            // Chunk 12: torn the other way round (offset still empty).
            set_entry(&s.path, &l, 12, EMPTY, 77);

            let r = recover_store(&s.path).unwrap();
            assert_eq!(r.validation, Validation::Crc32c);
            assert_eq!(r.shards_recovered, 1);
            assert_eq!(r.chunks_kept, 9);
            assert_eq!(r.chunks_rejected, 4);
            let reasons: Vec<(usize, &RejectReason)> =
                r.rejected.iter().map(|c| (c.chunk, &c.reason)).collect();
            assert!(
                matches!(reasons[0], (9, RejectReason::Checksum { .. })),
                "{reasons:?}"
            );
            assert!(
                matches!(
                    reasons[1],
                    (
                        10,
                        RejectReason::OutOfBounds {
                            region: "the slots region",
                            ..
                        }
                    )
                ),
                "{reasons:?}"
            );
            assert!(
                matches!(reasons[2], (11, RejectReason::OutOfBounds { .. })),
                "{reasons:?}"
            );
            assert!(
                matches!(reasons[3], (12, RejectReason::TornEntry { .. })),
                "{reasons:?}"
            );
            assert_eq!(r.frames_committed, 2);
            assert_eq!(r.frames_recovered, 2);
            assert_eq!(r.shape, vec![3, 16, 16], "chunk 8 of frame 2 exists");
            assert!(r.published);

            let got = read_back(&s);
            for (i, c) in got.iter().enumerate() {
                if i < 9 {
                    assert_eq!(c.as_deref(), Some(&chunk_data(0, i)[..]), "chunk {i}");
                } else {
                    assert!(c.is_none(), "chunk {i}");
                }
            }
            let doc = zarr_json(&s.path);
            assert_eq!(doc["shape"], json!([3, 16, 16]));
            assert_eq!(doc["attributes"]["zarrstream"]["state"], "recovered");
            assert_eq!(doc["attributes"]["zarrstream"]["frames_committed"], 2);
            assert_eq!(
                doc["attributes"]["zarrstream"]["recovery"]["previous_state"],
                "running"
            );
            assert!(!s.path.join(PARTIAL_DIR).exists());

            // Idempotent: nothing left to do.
            let again = recover_store(&s.path).unwrap();
            assert!(!again.published);
            assert!(again.shards.is_empty());
            assert_eq!(again.frames_committed, 2);
            assert_eq!(zarr_json(&s.path), doc);
        }
    }

    #[test]
    fn without_crc32c_chunks_are_validated_by_decoding() {
        for codec in [Codec::blosc_lz4(1), Codec::zstd(1), Codec::none()] {
            let s = crashed(spec(codec, false, IndexLocation::End), &[0, 1, 2, 3, 4, 5]);
            let l = s.layout;
            let f = OpenOptions::new()
                .write(true)
                .open(partial(&s.path))
                .unwrap();
            // Chunk 4 cut short: the entry claims fewer bytes than were written.
            let n4 = encoded(&s.spec, 0, 4).len() as u64;
            set_entry(&s.path, &l, 4, l.slot_offset(4), n4 - 3);
            // Chunk 5: header damaged (for codec none: wrong length).
            match codec {
                Codec::None => set_entry(&s.path, &l, 5, l.slot_offset(5), 100),
                _ => f.write_all_at(&[0x77], l.slot_offset(5)).unwrap(),
            }
            let r = recover_store(&s.path).unwrap();
            assert_eq!(r.validation, Validation::Decoding, "{codec:?}");
            assert_eq!(r.validation.describe(), "validated by decoding");
            assert_eq!(r.chunks_kept, 4, "{codec:?}: {:?}", r.rejected);
            assert_eq!(r.chunks_rejected, 2, "{codec:?}: {:?}", r.rejected);
            assert_eq!(r.frames_committed, 1);
            assert_eq!(r.shape[0], 1, "chunks 4 and 5 of frame 1 are gone");
            let got = read_back(&s);
            for (i, c) in got.iter().enumerate().take(4) {
                assert_eq!(c.as_deref(), Some(&chunk_data(0, i)[..]));
            }
            assert!(got[4..].iter().all(Option::is_none));
        }
    }

    /// A shard the finisher had compacted and cut (or was compacting) when it died.
    #[test]
    fn recovers_a_shard_the_finisher_was_finishing() {
        for location in [IndexLocation::End, IndexLocation::Start] {
            for stage in ["moved", "indexed", "cut"] {
                let all: Vec<usize> = (0..16).collect();
                let s = crashed(spec(Codec::zstd(1), true, location), &all);
                let l = s.layout;
                let path = partial(&s.path);
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .unwrap();
                let written: Vec<Option<(u64, u64)>> = (0..16)
                    .map(|i| Some((l.slot_offset(i as u64), encoded(&s.spec, 0, i).len() as u64)))
                    .collect();
                let fin = plan(&l, &written, Packing::Compact);
                for m in &fin.moves {
                    let mut buf = vec![0u8; m.len as usize];
                    f.read_exact_at(&mut buf, m.from).unwrap();
                    f.write_all_at(&buf, m.to).unwrap();
                }
                if stage != "moved" {
                    let mut idx = vec![0u8; l.index_size as usize];
                    encode_index(&fin.entries, &mut idx);
                    f.write_all_at(&idx, fin.index_at).unwrap();
                }
                if stage == "cut" {
                    f.set_len(fin.len).unwrap();
                }
                drop(f);
                let r = recover_store(&s.path).unwrap();
                assert_eq!(r.chunks_kept, 16, "{location:?} {stage}: {:?}", r.rejected);
                assert_eq!(r.frames_committed, N_FRAMES);
                let got = read_back(&s);
                for (i, c) in got.iter().enumerate() {
                    assert_eq!(
                        c.as_deref(),
                        Some(&chunk_data(0, i)[..]),
                        "{stage} chunk {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn counts_finished_shards_and_leaves_strangers_alone() {
        let s = crashed(
            spec(Codec::blosc_lz4(1), true, IndexLocation::End),
            &[0, 1, 2],
        );
        // A finished shard of row 1 with frames 4 and 5 complete, published at extent 0.
        let l = s.layout;
        let mut kept = vec![None; 16];
        let mut data = Vec::new();
        for (i, k) in kept.iter_mut().enumerate().take(8) {
            let b = encoded(&s.spec, 1, i);
            *k = Some((data.len() as u64, b.len() as u64));
            data.extend(b);
        }
        let mut idx = vec![0u8; l.index_size as usize];
        encode_index(&kept, &mut idx);
        data.extend(idx);
        fs::create_dir_all(s.path.join("c/1/0")).unwrap();
        fs::write(s.path.join("c/1/0/0"), &data).unwrap();
        // A damaged finished shard and an unrelated file.
        fs::create_dir_all(s.path.join("c/2/0")).unwrap();
        fs::write(s.path.join("c/2/0/0"), b"garbage").unwrap();
        fs::write(s.path.join(PARTIAL_DIR).join("notes.txt"), b"hi").unwrap();
        let r = recover_store(&s.path).unwrap();
        assert_eq!(r.frames_committed, 2, "frames 4 and 5");
        assert_eq!(r.frames_recovered, 0, "frame 0 lacks chunk 3");
        assert_eq!(r.shape[0], 6);
        assert_eq!(r.damaged_shards, vec!["c/2/0/0".to_string()]);
        assert_eq!(r.skipped_files, vec!["notes.txt".to_string()]);
        assert!(s.path.join(PARTIAL_DIR).join("notes.txt").exists());
        assert!(!partial(&s.path).exists());
    }

    #[test]
    fn unreadable_partial_is_set_aside_and_empty_one_removed() {
        let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &[]);
        let r = recover_store(&s.path).unwrap();
        assert_eq!(r.shards[0].outcome, ShardOutcome::Empty);
        assert!(!s.path.join("c").exists());
        assert_eq!(r.shape[0], 0);
        assert!(r.published);

        // Killed while the preparer was creating the file: empty, or reserved with the
        // working index not yet initialised (zeros).
        for len in [
            0,
            ShardLayout::new(&spec(Codec::blosc_lz4(1), true, IndexLocation::End))
                .unwrap()
                .file_size,
        ] {
            let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &[]);
            let f = OpenOptions::new()
                .write(true)
                .open(partial(&s.path))
                .unwrap();
            f.set_len(0).unwrap();
            f.set_len(len).unwrap();
            let r = recover_store(&s.path).unwrap();
            assert_eq!(r.shards[0].outcome, ShardOutcome::Empty, "length {len}");
            assert_eq!(r.chunks_rejected, 0, "length {len}: {:?}", r.rejected);
            assert!(!s.path.join(PARTIAL_DIR).exists(), "length {len}");
        }

        let s = crashed(spec(Codec::blosc_lz4(1), true, IndexLocation::End), &[0]);
        OpenOptions::new()
            .write(true)
            .open(partial(&s.path))
            .unwrap()
            .set_len(100)
            .unwrap();
        let r = recover_store(&s.path).unwrap();
        assert_eq!(r.shards[0].outcome, ShardOutcome::Unrecoverable);
        assert_eq!(r.shards[0].index, IndexSource::None);
        assert!(
            s.path
                .join(PARTIAL_DIR)
                .join(format!("c.0.0.0.partial{UNRECOVERABLE_SUFFIX}"))
                .exists()
        );
    }

    #[test]
    fn rejects_stores_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            recover_store(dir.path()),
            Err(RecoverError::Io { .. })
        ));
        fs::write(dir.path().join("zarr.json"), b"{\"zarr_format\": 2}").unwrap();
        assert!(matches!(
            recover_store(dir.path()),
            Err(RecoverError::Metadata { .. })
        ));
    }
}
