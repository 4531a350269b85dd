//! `zarrstream compact STORE [--json]`: rewrites shards written with sparse packing
//! (chunks left in their slots, gaps punched out) as dense shards, in place and
//! crash-safe.
//!
//! For every shard with gap bytes: its chunks are checked (crc32c, or a full decode
//! without it) and copied back to back in C order into a temporary file beside it
//! (`.<name>.compact-tmp`), followed (or preceded, for `index_location: start`) by a new
//! index with its crc32c; the copy is fsynced, read back and verified (index, placement,
//! every chunk's check, bytes equal to the original's), renamed over the original, and
//! the directory is fsynced. A crash leaves either the old or the new shard, plus at
//! most a temporary file that the next run removes. Shards without gaps are left alone.
//!
//! The store's writer lock (`.zarrstream-partial/writer.lock`) is held throughout: a
//! store a live writer is still recording into is refused, and no writer can overwrite
//! the store meanwhile.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zarrstream::IoError;

use rayon::prelude::*;
use serde::Serialize;

use zarrstream::store::{
    self as contract, PARTIAL_DIR, Shard, StoreError, StoreLock, StoreReader, read_chunk,
};

use crate::store;

/// Options of `zarrstream compact`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The array directory (holding zarr.json).
    pub store: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Why a shard was not compacted or a store not opened for compaction.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompactError {
    /// Opening or walking the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A live writer holds the store, or its lock could not be taken.
    #[error("{0}")]
    Locked(zarrstream::Error),
    /// An entry of the original index is not acceptable.
    #[error("chunk {chunk}: {fault}")]
    Entry {
        /// Inner chunk coordinates.
        chunk: String,
        /// What is wrong.
        fault: contract::EntryFault,
    },
    /// A chunk of the original (or of the copy) failed its check.
    #[error("{which} chunk {chunk}: {fault}")]
    Chunk {
        /// `original` or `copy`.
        which: &'static str,
        /// Inner chunk coordinates.
        chunk: String,
        /// What is wrong.
        fault: contract::ChunkFault,
    },
    /// The copy read back differently from what was written.
    #[error("copy does not match the original: {0}")]
    Mismatch(String),
    /// An I/O error with what was being done to which path.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// What happened to one shard.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub(crate) enum Outcome {
    /// Rewritten densely.
    Compacted {
        /// File length before.
        bytes_before: u64,
        /// File length after.
        bytes_after: u64,
        /// Allocated bytes before.
        allocated_before: u64,
    },
    /// No gaps: left alone.
    AlreadyDense,
    /// Not compacted (the original is left as it was).
    Failed {
        /// Why.
        error: String,
    },
}

/// One shard's line of the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ShardReport {
    /// The shard key.
    pub key: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What `compact` did.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    /// The store path.
    pub store: PathBuf,
    /// Shard files seen.
    pub shards: usize,
    /// Shards rewritten.
    pub compacted: usize,
    /// Shards without gaps, left alone.
    pub already_dense: usize,
    /// Shards that could not be compacted.
    pub failed: usize,
    /// Sum of the file lengths before.
    pub bytes_before: u64,
    /// Sum of the file lengths after.
    pub bytes_after: u64,
    /// Every shard's outcome.
    pub shard_list: Vec<ShardReport>,
}

/// Runs `compact`.
pub(crate) fn run(args: Args) -> crate::Outcome {
    let report = compact_store(&args.store, args.json)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    let first_failure = report.shard_list.iter().find_map(|s| match &s.outcome {
        Outcome::Failed { error } => Some(format!("{}: {error}", s.key)),
        _ => None,
    });
    match first_failure {
        None => Ok(ExitCode::SUCCESS),
        Some(first) => Err(format!(
            "{} shard(s) not compacted (left as they were); first: {first}",
            report.failed
        )
        .into()),
    }
}

/// Compacts every sparse shard of the store at `root`, holding its writer lock.
pub(crate) fn compact_store(root: &Path, json: bool) -> Result<Report, CompactError> {
    let store = StoreReader::open(root)?;
    let tmp_dir = root.join(PARTIAL_DIR);
    let created = !tmp_dir.is_dir();
    if created {
        std::fs::create_dir(&tmp_dir).map_err(IoError::with("create directory", &tmp_dir))?;
    }
    let lock = StoreLock::acquire(&tmp_dir).map_err(CompactError::Locked);
    let result = lock.and_then(|lock| {
        let r = compact_shards(&store, json);
        lock.release();
        r
    });
    if created {
        let _ = std::fs::remove_dir(&tmp_dir);
    }
    result
}

fn compact_shards(store: &StoreReader, json: bool) -> Result<Report, CompactError> {
    let shards = store.shards()?;
    let bar = store::progress(shards.len() as u64, "compact", json);
    let shard_list: Vec<ShardReport> = shards
        .par_iter()
        .map(|s| {
            let outcome = compact_shard(store, s).unwrap_or_else(|e| Outcome::Failed {
                error: e.to_string(),
            });
            bar.inc(1);
            ShardReport {
                key: s.key.clone(),
                outcome,
            }
        })
        .collect();
    bar.finish_and_clear();
    let count = |f: fn(&Outcome) -> bool| shard_list.iter().filter(|s| f(&s.outcome)).count();
    let bytes_after: u64 = shards
        .iter()
        .zip(&shard_list)
        .map(|(s, r)| match r.outcome {
            Outcome::Compacted { bytes_after, .. } => bytes_after,
            _ => s.len,
        })
        .sum();
    Ok(Report {
        store: store.root().to_path_buf(),
        shards: shards.len(),
        compacted: count(|o| matches!(o, Outcome::Compacted { .. })),
        already_dense: count(|o| matches!(o, Outcome::AlreadyDense)),
        failed: count(|o| matches!(o, Outcome::Failed { .. })),
        bytes_before: shards.iter().map(|s| s.len).sum(),
        bytes_after,
        shard_list,
    })
}

/// The temporary file a shard is rewritten into, beside it (not a shard key).
fn temp_path(shard: &Shard) -> PathBuf {
    let name = shard
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    shard.path.with_file_name(format!(".{name}.compact-tmp"))
}

/// Compacts one shard if it has gaps.
fn compact_shard(store: &StoreReader, shard: &Shard) -> Result<Outcome, CompactError> {
    let tmp = temp_path(shard);
    // Left by a run that crashed before its rename; we hold the lock, so it is stale.
    if tmp.exists() {
        std::fs::remove_file(&tmp).map_err(IoError::with("remove", &tmp))?;
    }
    let file = store.open_shard(shard)?;
    let entries = store.read_index(shard, &file)?;
    if store.gap_bytes(shard, &entries) == 0 {
        return Ok(Outcome::AlreadyDense);
    }
    if let Some((i, fault)) = store.entry_faults(shard, &entries).into_iter().next() {
        return Err(CompactError::Entry {
            chunk: store::coords_text(&store.inner_coords(i as u64)),
            fault,
        });
    }
    let allocated_before = contract::allocated_bytes(&shard.path)?;
    let dense = dense_entries(store, &entries);
    let written = write_copy(store, &file, &entries, &dense, &tmp)
        .and_then(|len| verify_copy(store, shard, &file, &entries, &tmp, len).map(|()| len));
    let bytes_after = match written {
        Ok(len) => len,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, &shard.path).map_err(IoError::with("rename", &tmp))?;
    sync_parent(&shard.path)?;
    Ok(Outcome::Compacted {
        bytes_before: shard.len,
        bytes_after,
        allocated_before,
    })
}

/// The dense placement: present chunks back to back in C order from the data start.
fn dense_entries(store: &StoreReader, entries: &[Option<(u64, u64)>]) -> Vec<Option<(u64, u64)>> {
    let mut pos = store.data_start();
    entries
        .iter()
        .map(|e| {
            e.map(|(_, n)| {
                let at = pos;
                pos += n;
                (at, n)
            })
        })
        .collect()
}

/// The index bytes for `entries`: `(offset, nbytes)` u64 LE (both `u64::MAX` when
/// empty), then their crc32c.
fn encode_index(entries: &[Option<(u64, u64)>]) -> Vec<u8> {
    let empty = (
        zarrstream::read::index::EMPTY,
        zarrstream::read::index::EMPTY,
    );
    let mut v: Vec<u8> = entries
        .iter()
        .flat_map(|e| {
            let (o, n) = e.unwrap_or(empty);
            o.to_le_bytes().into_iter().chain(n.to_le_bytes())
        })
        .collect();
    let crc = crc32c::crc32c(&v);
    v.extend(crc.to_le_bytes());
    v
}

/// Writes the dense copy to `tmp` (checking each original chunk on the way) and fsyncs
/// it; returns its length.
fn write_copy(
    store: &StoreReader,
    original: &File,
    entries: &[Option<(u64, u64)>],
    dense: &[Option<(u64, u64)>],
    tmp: &Path,
) -> Result<u64, CompactError> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(IoError::with("create", tmp))?;
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    let index = encode_index(dense);
    let start = store.data_start() > 0;
    if start {
        out.write_all(&index).map_err(IoError::with("write", tmp))?;
    }
    let mut len = store.data_start();
    for (i, &(offset, nbytes)) in entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
    {
        let bytes = checked_chunk("original", store, original, i, offset, nbytes)?;
        out.write_all(&bytes).map_err(IoError::with("write", tmp))?;
        len += nbytes;
    }
    if !start {
        out.write_all(&index).map_err(IoError::with("write", tmp))?;
        len += index.len() as u64;
    }
    out.flush().map_err(IoError::with("write", tmp))?;
    drop(out);
    file.sync_all().map_err(IoError::with("fsync", tmp))?;
    Ok(len)
}

/// Reads and checks one chunk of the original shard or of the copy (`which`).
fn checked_chunk(
    which: &'static str,
    store: &StoreReader,
    file: &File,
    i: usize,
    offset: u64,
    nbytes: u64,
) -> Result<Vec<u8>, CompactError> {
    let chunk_err = |fault| CompactError::Chunk {
        which,
        chunk: store::coords_text(&store.inner_coords(i as u64)),
        fault,
    };
    let bytes = read_chunk(file, offset, nbytes).map_err(chunk_err)?;
    store.check_chunk(&bytes, false).map_err(chunk_err)?;
    Ok(bytes)
}

/// Reads the copy back: its index must parse, be dense and name the same chunks with
/// the same sizes, and every chunk must pass its check and equal the original's bytes.
fn verify_copy(
    store: &StoreReader,
    shard: &Shard,
    original: &File,
    entries: &[Option<(u64, u64)>],
    tmp: &Path,
    len: u64,
) -> Result<(), CompactError> {
    let file = File::open(tmp).map_err(IoError::with("open", tmp))?;
    let actual = file.metadata().map_err(IoError::with("stat", tmp))?.len();
    if actual != len {
        return Err(CompactError::Mismatch(format!(
            "copy is {actual} bytes, expected {len}"
        )));
    }
    let copy = Shard {
        key: shard.key.clone(),
        coords: shard.coords.clone(),
        path: tmp.to_path_buf(),
        len,
    };
    let new = store.read_index(&copy, &file)?;
    if store.gap_bytes(&copy, &new) != 0 || !store.entry_faults(&copy, &new).is_empty() {
        return Err(CompactError::Mismatch("copy is not dense".into()));
    }
    for (i, (old, new)) in entries.iter().zip(&new).enumerate() {
        let same = match (old, new) {
            (None, None) => continue,
            (Some((o, n)), Some((p, m))) if n == m => {
                let a = read_chunk(original, *o, *n);
                let b = checked_chunk("copy", store, &file, i, *p, *m)?;
                a.is_ok_and(|a| a == b)
            }
            _ => false,
        };
        if !same {
            return Err(CompactError::Mismatch(format!(
                "chunk {} differs",
                store::coords_text(&store.inner_coords(i as u64))
            )));
        }
    }
    Ok(())
}

/// Fsyncs the directory holding `path`, so a rename in it is durable.
fn sync_parent(path: &Path) -> Result<(), CompactError> {
    Ok(contract::sync_dir(path.parent().unwrap_or(Path::new(".")))?)
}

fn print_text(r: &Report) {
    println!(
        "{}: {} shards: {} compacted, {} already dense, {} failed; {} -> {} bytes",
        r.store.display(),
        r.shards,
        r.compacted,
        r.already_dense,
        r.failed,
        r.bytes_before,
        r.bytes_after
    );
    for s in &r.shard_list {
        match &s.outcome {
            Outcome::Compacted {
                bytes_before,
                bytes_after,
                allocated_before,
            } => println!(
                "  {}: compacted, {bytes_before} bytes ({allocated_before} allocated) -> {bytes_after}",
                s.key
            ),
            Outcome::AlreadyDense => println!("  {}: already dense", s.key),
            Outcome::Failed { error } => println!("  {}: NOT compacted: {error}", s.key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrstream::read::index::parse_index;

    #[test]
    fn encoded_index_parses_back() {
        let entries = vec![Some((0, 10)), None, Some((10, 7)), None];
        let bytes = encode_index(&entries);
        assert_eq!(bytes.len(), 4 * 16 + 4);
        assert_eq!(parse_index(&bytes, 4).unwrap(), entries);
    }

    #[test]
    fn temp_files_are_hidden_beside_the_shard_and_not_keys() {
        let shard = Shard {
            key: "c/1/0/2".into(),
            coords: vec![1, 0, 2],
            path: PathBuf::from("/s/c/1/0/2"),
            len: 0,
        };
        assert_eq!(temp_path(&shard), PathBuf::from("/s/c/1/0/.2.compact-tmp"));
    }
}
