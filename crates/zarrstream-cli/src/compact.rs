//! `zarrstream compact STORE [--order c|morton] [--json]`: rewrites shards written with
//! sparse packing (chunks left in their slots, gaps punched out) as dense shards, and
//! with `--order` puts every shard's chunks in that order, in place and crash-safe.
//!
//! For every shard with gap bytes, or (with `--order`) whose chunks lie in another
//! order: its chunks are checked (crc32c, or a full decode without it) and copied back
//! to back — in the order they already lie in, or in `--order` — into a temporary file
//! beside it (`.<name>.compact-tmp`), followed (or preceded, for `index_location:
//! start`) by a new index with its crc32c (the index stays in C order of the chunk
//! coordinates, as the sharding codec defines it); the copy is fsynced, read back and
//! verified (index, placement and order, every chunk's check, bytes equal to the
//! original's), renamed over the original, and the directory is fsynced. A crash leaves
//! either the old or the new shard, plus at most a temporary file that the next run
//! removes. Shards already dense (and in order) are left alone. `zarr.json` is never
//! changed: readers follow the index, so the order is recorded nowhere.
//!
//! The store's writer lock (`.zarrstream-partial/writer.lock`) is held throughout: a
//! store a live writer is still recording into is refused, and no writer can overwrite
//! the store meanwhile.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zarrstream::{ChunkOrder, IoError};

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
    /// Put every shard's chunks in this order: c (C order of the chunk coordinates) or
    /// morton (Z-order, as zarr-python writes shards); without it, chunks keep the order
    /// they are in.
    #[arg(long, value_name = "c|morton")]
    pub order: Option<ChunkOrder>,
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
    /// The copy's chunks are not in the order asked for.
    #[error("copy is not in {0} order")]
    Order(ChunkOrder),
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
    /// Rewritten densely (in the order asked for).
    Compacted {
        /// File length before.
        bytes_before: u64,
        /// File length after.
        bytes_after: u64,
        /// Allocated bytes before.
        allocated_before: u64,
    },
    /// No gaps (and in the order asked for): left alone.
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
    /// The order asked for (`c`, `morton`), or `kept`.
    pub order: &'static str,
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
    let report = compact_store(&args.store, args.order, args.json)?;
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

/// Compacts every sparse shard of the store at `root` (and puts every shard's chunks in
/// `order`), holding its writer lock.
pub(crate) fn compact_store(
    root: &Path,
    order: Option<ChunkOrder>,
    json: bool,
) -> Result<Report, CompactError> {
    let store = StoreReader::open(root)?;
    let tmp_dir = root.join(PARTIAL_DIR);
    let created = !tmp_dir.is_dir();
    if created {
        std::fs::create_dir(&tmp_dir).map_err(IoError::with("create directory", &tmp_dir))?;
    }
    let lock = StoreLock::acquire(&tmp_dir).map_err(CompactError::Locked);
    let result = lock.and_then(|lock| {
        let r = compact_shards(&store, order, json);
        lock.release();
        r
    });
    if created {
        let _ = std::fs::remove_dir(&tmp_dir);
    }
    result
}

fn compact_shards(
    store: &StoreReader,
    order: Option<ChunkOrder>,
    json: bool,
) -> Result<Report, CompactError> {
    let shards = store.shards()?;
    let sequence = order.map(|o| o.sequence(store.spec()));
    let bar = store::progress(shards.len() as u64, "compact", json);
    let shard_list: Vec<ShardReport> = shards
        .par_iter()
        .map(|s| {
            let wanted = sequence.as_deref().zip(order);
            let outcome = compact_shard(store, s, wanted).unwrap_or_else(|e| Outcome::Failed {
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
        order: order.map_or("kept", ChunkOrder::as_str),
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

/// The C-order indexes of the present chunks of `entries` in the order of their offsets.
fn stored_order(entries: &[Option<(u64, u64)>]) -> Vec<u64> {
    let mut present: Vec<(u64, u64)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.map(|(o, _)| (o, i as u64)))
        .collect();
    present.sort_unstable();
    present.into_iter().map(|(_, i)| i).collect()
}

/// Whether the present chunks of `entries` lie in the order of `sequence` (every chunk
/// of the shard, C-order indexes).
fn in_order(entries: &[Option<(u64, u64)>], sequence: &[u64]) -> bool {
    let present = sequence.iter().filter(|&&i| entries[i as usize].is_some());
    stored_order(entries).iter().eq(present)
}

/// Compacts one shard if it has gaps, or if its chunks are not in the order `wanted`
/// (a shard's chunks as C-order indexes, in that order).
fn compact_shard(
    store: &StoreReader,
    shard: &Shard,
    wanted: Option<(&[u64], ChunkOrder)>,
) -> Result<Outcome, CompactError> {
    let tmp = temp_path(shard);
    // Left by a run that crashed before its rename; we hold the lock, so it is stale.
    if tmp.exists() {
        std::fs::remove_file(&tmp).map_err(IoError::with("remove", &tmp))?;
    }
    let file = store.open_shard(shard)?;
    let entries = store.read_index(shard, &file)?;
    let ordered = wanted.is_none_or(|(sequence, _)| in_order(&entries, sequence));
    if store.gap_bytes(shard, &entries) == 0 && ordered {
        return Ok(Outcome::AlreadyDense);
    }
    if let Some((i, fault)) = store.entry_faults(shard, &entries).into_iter().next() {
        return Err(CompactError::Entry {
            chunk: store::coords_text(&store.inner_coords(i as u64)),
            fault,
        });
    }
    let allocated_before = contract::allocated_bytes(&shard.path)?;
    // The order chunks go in: the one asked for, or the one they lie in.
    let sequence = match wanted {
        Some((sequence, _)) => sequence
            .iter()
            .copied()
            .filter(|&i| entries[i as usize].is_some())
            .collect(),
        None => stored_order(&entries),
    };
    let dense = dense_entries(store, &entries, &sequence);
    let written = write_copy(store, &file, &entries, &dense, &sequence, &tmp).and_then(|len| {
        let copy = Rewritten {
            path: &tmp,
            len,
            sequence: &sequence,
            order: wanted.map(|(_, o)| o),
        };
        verify_copy(store, shard, &file, &entries, &copy).map(|()| len)
    });
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

/// The dense placement: the present chunks back to back from the data start, in the
/// order of `sequence` (their C-order indexes).
fn dense_entries(
    store: &StoreReader,
    entries: &[Option<(u64, u64)>],
    sequence: &[u64],
) -> Vec<Option<(u64, u64)>> {
    let mut dense = vec![None; entries.len()];
    let mut pos = store.data_start();
    for &i in sequence {
        if let Some((_, n)) = entries[i as usize] {
            dense[i as usize] = Some((pos, n));
            pos += n;
        }
    }
    dense
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

/// Writes the dense copy to `tmp`, chunks in the order of `sequence` (checking each
/// original chunk on the way), and fsyncs it; returns its length.
fn write_copy(
    store: &StoreReader,
    original: &File,
    entries: &[Option<(u64, u64)>],
    dense: &[Option<(u64, u64)>],
    sequence: &[u64],
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
    for (i, &(offset, nbytes)) in sequence.iter().filter_map(|&i| {
        let i = i as usize;
        entries[i].as_ref().map(|e| (i, e))
    }) {
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

/// The copy of a shard: its file, length, and the order its chunks were written in.
struct Rewritten<'a> {
    path: &'a Path,
    len: u64,
    /// The present chunks' C-order indexes, in file order.
    sequence: &'a [u64],
    /// The order asked for, if any (named in the error).
    order: Option<ChunkOrder>,
}

/// Reads the copy back: its index must parse, be dense, hold the chunks in the order
/// they were written in, and name the same chunks with the same sizes, and every chunk
/// must pass its check and equal the original's bytes.
fn verify_copy(
    store: &StoreReader,
    shard: &Shard,
    original: &File,
    entries: &[Option<(u64, u64)>],
    copy: &Rewritten<'_>,
) -> Result<(), CompactError> {
    let (tmp, len) = (copy.path, copy.len);
    let file = File::open(tmp).map_err(IoError::with("open", tmp))?;
    let actual = file.metadata().map_err(IoError::with("stat", tmp))?.len();
    if actual != len {
        return Err(CompactError::Mismatch(format!(
            "copy is {actual} bytes, expected {len}"
        )));
    }
    let as_shard = Shard {
        key: shard.key.clone(),
        coords: shard.coords.clone(),
        path: tmp.to_path_buf(),
        len,
    };
    let new = store.read_index(&as_shard, &file)?;
    if store.gap_bytes(&as_shard, &new) != 0 || !store.entry_faults(&as_shard, &new).is_empty() {
        return Err(CompactError::Mismatch("copy is not dense".into()));
    }
    if stored_order(&new) != copy.sequence {
        return Err(match copy.order {
            Some(order) => CompactError::Order(order),
            None => CompactError::Mismatch("copy changed the chunks' order".into()),
        });
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
        "{}: {} shards ({} order): {} compacted, {} already dense, {} failed; {} -> {} bytes",
        r.store.display(),
        r.shards,
        r.order,
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
    fn order_of_the_chunks_by_offset() {
        // Chunks 2, 0, 3 stored (1 empty), lying in the order 3, 0, 2.
        let entries = vec![Some((50, 5)), None, Some((90, 7)), Some((10, 40))];
        assert_eq!(stored_order(&entries), [3, 0, 2]);
        assert!(in_order(&entries, &[3, 1, 0, 2]));
        assert!(!in_order(&entries, &[0, 1, 2, 3]));
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
