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

mod partial;
mod report;
mod tally;
#[cfg(test)]
mod tests;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::IoError;
use crate::metadata::{self, Progress, State};
use crate::read::ReadError;
use crate::store::{METADATA_FILE, PARTIAL_DIR, StoreError, StoreLock, StoreReader};

pub use report::{
    IndexSource, RecoveryReport, RejectReason, RejectedChunk, ShardOutcome, ShardRecovery,
    Validation,
};

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
    #[error(transparent)]
    Io(#[from] IoError),
    /// Syncing a directory or publishing `zarr.json` failed.
    #[error(transparent)]
    Write(#[from] crate::Error),
    /// The store reader refused the store (missing, not an array, an unreadable index);
    /// its message names the path or shard.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for RecoverError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Io(e) => RecoverError::Io(e),
            StoreError::Metadata { path, source } => RecoverError::Metadata { path, source },
            other => RecoverError::Store(other),
        }
    }
}

/// Recovers the store at `path` after its writer died: rebuilds every temporary shard
/// from its verified chunks, renames it into place, removes the temporary files and
/// republishes `zarr.json` (state `recovered`, `shape[0]` covering every chunk on disk,
/// `frames_committed` counting the frames all of whose chunks are present).
///
/// Nothing is republished when there was nothing to do (no temporary shard and a
/// `zarr.json` not in state `running`). Running it again is harmless.
///
/// ```no_run
/// let report = zarrstream::recover::recover_store("run.zarr")?;
/// println!("{} frames committed", report.frames_committed);
/// # Ok::<(), zarrstream::recover::RecoverError>(())
/// ```
pub fn recover_store(path: impl AsRef<Path>) -> Result<RecoveryReport, RecoverError> {
    let dir = path.as_ref();
    let store = open(dir)?;
    let mut report = RecoveryReport::start(&store);
    let tmp_dir = dir.join(PARTIAL_DIR);
    // Refuses to run while a writer is still recording into the store.
    let lock = if tmp_dir.is_dir() {
        Some(StoreLock::acquire(&tmp_dir)?)
    } else {
        None
    };
    let recovered = match lock {
        Some(_) => partial::recover_all(&store, &tmp_dir, &mut report)?,
        None => Default::default(),
    };
    let found_partials = !report.shards.is_empty();

    let spec = store.spec();
    let present = tally::present_chunks(&store, &mut report.damaged_shards)?;
    let tally = tally::tally_frames(spec, &present, &recovered);
    report.frames_committed = tally.committed;
    report.frames_recovered = tally.recovered;
    report.shape[0] = spec.shape[0].max(tally.extent0);

    let running = store.metadata().progress.state.as_deref() == Some("running");
    if found_partials || running {
        publish(&store, &report)?;
        report.published = true;
    } else {
        report.shape = report.shape_before.clone();
    }
    if let Some(lock) = lock {
        lock.release();
    }
    remove_partial_dir(dir, &tmp_dir, &report)?;
    Ok(report)
}

/// Reads `zarr.json` (a missing one is an I/O error: recovery needs the array's
/// description, there is nothing to guess).
fn open(dir: &Path) -> Result<StoreReader, RecoverError> {
    let meta_path = dir.join(METADATA_FILE);
    let text = fs::read(&meta_path).map_err(IoError::with("read", &meta_path))?;
    let doc: Value = serde_json::from_slice(&text).map_err(|e| RecoverError::Metadata {
        path: meta_path.clone(),
        source: ReadError::Metadata(e.to_string()),
    })?;
    Ok(StoreReader::from_document(dir, doc)?)
}

/// Republishes `zarr.json` in state `recovered`, with what recovery found.
fn publish(store: &StoreReader, report: &RecoveryReport) -> Result<(), RecoverError> {
    let recorded = &store.metadata().progress;
    let progress = Progress {
        state: State::Recovered,
        frames_committed: report.frames_committed,
        frames_dropped: recorded.frames_dropped.unwrap_or(0),
        error: recorded.error.clone(),
    };
    let mut doc = metadata::array_json(store.spec(), report.shape[0], &progress);
    let mut ours = progress.attributes();
    ours.extra.insert(
        "recovery".into(),
        json!({
            "previous_state": recorded.state,
            "frames_committed_before": recorded.frames_committed,
            "shards_recovered": report.shards_recovered,
            "chunks_kept": report.chunks_kept,
            "chunks_rejected": report.chunks_rejected,
            "validation": report.validation,
        }),
    );
    metadata::set_progress(&mut doc, &ours);
    metadata::publish(store.root(), &doc)?;
    Ok(())
}

/// The writer removes its temporary directory when it finishes; do the same once it
/// is empty (anything left in it was reported).
fn remove_partial_dir(
    dir: &Path,
    tmp_dir: &Path,
    report: &RecoveryReport,
) -> Result<(), RecoverError> {
    if !tmp_dir.is_dir() || !report.skipped_files.is_empty() {
        return Ok(());
    }
    let empty = fs::read_dir(tmp_dir)
        .map_err(IoError::with("list", tmp_dir))?
        .next()
        .is_none();
    if empty {
        fs::remove_dir(tmp_dir).map_err(IoError::with("remove", tmp_dir))?;
        crate::store::sync_dir(dir)?;
    }
    Ok(())
}
