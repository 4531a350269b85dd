//! Rebuilding the temporary shards a dead writer left in `.zarrstream-partial/`.

use crate::platform::FileExt;
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::path::Path;

use super::report::{IndexSource, RejectReason, RejectedChunk, ShardOutcome, ShardRecovery};
use super::{RecoverError, RecoveryReport};
use crate::error::IoError;
use crate::read::index::{EMPTY, parse_index, raw_entries};
use crate::shard::{ChunkOrder, Packing, ShardLayout, SlotOrder, encode_index, plan};
use crate::spec::{ArraySpec, IndexLocation};
use crate::store::{
    LOCK_FILE, REBUILD_SUFFIX, StoreReader, UNRECOVERABLE_SUFFIX, check_chunk, create_dirs,
    is_leftover, partial_key, read_chunk, shard_key, stored_len, sync_dir,
};

/// Rebuilds every temporary shard in `tmp_dir` (in name order), recording each in
/// `report`. Returns the coordinates of the shards rebuilt into place.
pub(super) fn recover_all(
    store: &StoreReader,
    tmp_dir: &Path,
    report: &mut RecoveryReport,
) -> Result<BTreeSet<Vec<u64>>, RecoverError> {
    let mut names = Vec::new();
    for entry in fs::read_dir(tmp_dir).map_err(IoError::with("list", tmp_dir))? {
        let entry = entry.map_err(IoError::with("list", tmp_dir))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    // The writer's chunk order is recorded nowhere; each shard's is read off its index
    // (`SlotOrder::infer`).
    let morton = SlotOrder::new(ChunkOrder::Morton, store.spec());
    let mut recovered = BTreeSet::new();
    for name in names {
        if name == LOCK_FILE {
            continue;
        }
        if is_leftover(&name) {
            let path = tmp_dir.join(&name);
            fs::remove_file(&path).map_err(IoError::with("remove", &path))?;
            continue;
        }
        let Some(coords) = partial_key(&name).filter(|c| in_grid(store.spec(), c)) else {
            report.skipped_files.push(name);
            continue;
        };
        let key = shard_key(coords.iter().copied());
        let shard = recover_partial(store, tmp_dir, &name, &key, &morton)?;
        let r = shard.recovery;
        report.chunks_kept += r.chunks_kept;
        report.chunks_rejected += r.chunks_rejected;
        if r.outcome == ShardOutcome::Rebuilt {
            report.shards_recovered += 1;
            recovered.insert(coords);
        }
        report.rejected.extend(shard.rejected);
        report.shards.push(r);
    }
    sync_dir(tmp_dir)?;
    Ok(recovered)
}

/// Whether `coords` name a shard of this array: one coordinate per axis, inside the
/// shard grid on every axis but the append axis (a single frame has none).
fn in_grid(spec: &ArraySpec, coords: &[u64]) -> bool {
    let (shape, shard) = (spec.shape(), spec.shard_shape());
    let first = usize::from(spec.rank() > 2);
    coords.len() == spec.rank()
        && (first..spec.rank()).all(|a| coords[a] < shape[a].div_ceil(shard[a]))
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

impl Entries {
    fn none() -> Self {
        Entries {
            source: IndexSource::None,
            raw: Vec::new(),
            data: (0, 0),
        }
    }

    fn final_index(entries: &[Option<(u64, u64)>], data: (u64, u64)) -> Self {
        Entries {
            source: IndexSource::Final,
            raw: entries
                .iter()
                .map(|e| e.unwrap_or((EMPTY, EMPTY)))
                .collect(),
            data,
        }
    }
}

fn read_entries(file: &File, len: u64, layout: &ShardLayout) -> std::io::Result<Entries> {
    let n = layout.n as usize;
    let size = layout.index_size;
    let read = |at: u64| -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, at)?;
        Ok(buf)
    };
    let start = layout.location == IndexLocation::Start;
    if !start && len > layout.file_size && len <= layout.file_size + size {
        // The finisher put the final index right after the working index (it would
        // have covered its start): whole, it is the shard's; cut short by a kill, the
        // working index before it is untouched.
        if len == layout.file_size + size
            && let Ok(entries) = parse_index(&read(layout.file_size)?, n)
        {
            return Ok(Entries::final_index(&entries, (0, layout.index_offset)));
        }
        return Ok(Entries {
            source: IndexSource::Working,
            raw: raw_entries(&read(layout.index_offset)?).collect(),
            data: (layout.data_start, layout.index_offset),
        });
    }
    if len == layout.file_size {
        let buf = read(layout.index_offset)?;
        // With the index at the start, the finisher writes the final index over the
        // working one (same place, same size) after compacting: its crc32c then holds.
        if let Ok(entries) = parse_index(&buf, n)
            && start
        {
            return Ok(Entries::final_index(&entries, (size, len)));
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
        return Ok(Entries::none());
    }
    // Shorter than reserved: the finisher had cut the file to its final length, so a
    // final index must sit at its place.
    let at = if start { 0 } else { len - size };
    Ok(match parse_index(&read(at)?, n) {
        Ok(entries) => {
            let data = if start { (size, len) } else { (0, len - size) };
            Entries::final_index(&entries, data)
        }
        Err(_) => Entries::none(),
    })
}

/// Reads `nbytes` at `offset` and verifies them as a chunk: by crc32c, or by decoding
/// when the array has none.
fn check_at(file: &File, spec: &ArraySpec, offset: u64, nbytes: u64) -> Result<(), RejectReason> {
    let bytes = read_chunk(file, offset, nbytes)?;
    check_chunk(spec, &bytes, false)?;
    Ok(())
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

/// Rebuilds the temporary shard `name` (of shard `key`) into place, or removes it or
/// sets it aside when nothing in it can be kept.
fn recover_partial(
    store: &StoreReader,
    tmp_dir: &Path,
    name: &str,
    key: &str,
    morton: &SlotOrder,
) -> Result<PartialResult, RecoverError> {
    let layout = store.layout();
    let path = tmp_dir.join(name);
    let file = File::open(&path).map_err(IoError::with("open", &path))?;
    let len = file.metadata().map_err(IoError::with("stat", &path))?.len();
    let entries = read_entries(&file, len, layout).map_err(IoError::with("read", &path))?;
    let order = SlotOrder::infer(layout, morton, &entries.raw);
    let mut recovery = ShardRecovery {
        key: key.to_string(),
        file: name.to_string(),
        index: entries.source,
        outcome: ShardOutcome::Empty,
        chunks_kept: 0,
        chunks_relocated: 0,
        chunks_from_torn_entries: 0,
        chunks_rejected: 0,
        bytes: 0,
    };
    let nothing = |recovery| PartialResult {
        recovery,
        rejected: Vec::new(),
    };
    if len == 0 {
        // Killed between creating the file and reserving it (the preparer works one
        // shard set ahead): nothing was ever written into it.
        drop(file);
        fs::remove_file(&path).map_err(IoError::with("remove", &path))?;
        return Ok(nothing(recovery));
    }
    if entries.source == IndexSource::None {
        let aside = tmp_dir.join(format!("{name}{UNRECOVERABLE_SUFFIX}"));
        crate::platform::rename(&path, &aside).map_err(IoError::with("rename", &aside))?;
        recovery.outcome = ShardOutcome::Unrecoverable;
        return Ok(nothing(recovery));
    }
    let (kept, rejected) = keep_verified(
        &file,
        len,
        &entries,
        store.spec(),
        (layout, &order),
        &mut recovery,
    );
    if recovery.chunks_kept > 0 {
        // A resumed writer's first shards replace finished ones it started from: the
        // finished shard's chunks that the temporary one lacks (a crash while they were
        // being carried over) are kept too, so recovery never loses what was finished.
        let finished = finished_chunks(store, key);
        let sources: Vec<Option<(&File, u64, u64)>> = kept
            .iter()
            .enumerate()
            .map(|(i, k)| match (k, &finished) {
                (Some((at, n)), _) => Some((&file, *at, *n)),
                (None, Some((f, index))) => {
                    index.get(i).copied().flatten().map(|(at, n)| (f, at, n))
                }
                (None, None) => None,
            })
            .collect();
        recovery.chunks_kept +=
            sources.iter().flatten().count() as u64 - kept.iter().flatten().count() as u64;
        let rebuilt = tmp_dir.join(format!("{name}{REBUILD_SUFFIX}"));
        recovery.bytes = write_shard(&rebuilt, layout, &order, &sources)?;
        // The finished shard is closed before the rebuilt one replaces it: Windows does
        // not replace a file that is open.
        drop(sources);
        drop(finished);
        install(&rebuilt, &store.root().join(key))?;
        recovery.outcome = ShardOutcome::Rebuilt;
    }
    drop(file);
    fs::remove_file(&path).map_err(IoError::with("remove", &path))?;
    Ok(PartialResult { recovery, rejected })
}

/// The entries whose chunk verifies, at the offset where it does (`None` elsewhere),
/// and the rejected ones with their reason; counts both in `recovery`. The slots were
/// laid out in `order`.
fn keep_verified(
    file: &File,
    len: u64,
    entries: &Entries,
    spec: &ArraySpec,
    (layout, order): (&ShardLayout, &SlotOrder),
    recovery: &mut ShardRecovery,
) -> (Vec<Option<(u64, u64)>>, Vec<RejectedChunk>) {
    let working = entries.source == IndexSource::Working;
    // An entry torn after its offset was stored (`store_entry` stores the offset
    // first): its length is read off the chunk, and the chunk must then verify.
    let raw: Vec<(u64, u64)> = entries
        .raw
        .iter()
        .map(|&(o, b)| match (o, b) {
            (o, EMPTY) if working && o != EMPTY => {
                torn_entry_len(file, spec, layout, o).map_or((o, b), |n| {
                    recovery.chunks_from_torn_entries += 1;
                    (o, n)
                })
            }
            _ => (o, b),
        })
        .collect();
    let plausible: Vec<Option<(u64, u64)>> = raw
        .iter()
        .map(|&(o, b)| {
            (o != EMPTY && b != EMPTY && b > 0 && b <= layout.slot_size).then_some((o, b))
        })
        .collect();
    // A chunk that fails where its entry points may have been moved by an older
    // writer's in-place compaction: to its compacted position, or it may still be in
    // its slot. That is only possible in a shard whose chunks were written into slots
    // (in an appended shard another chunk of the same length can lie there and pass its
    // crc32c), and never at an offset another entry claims.
    let slot_laid = working
        && plausible
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|e| (i, e)))
            .all(|(i, (o, _))| o == layout.slot_offset(order.position(i) as u64));
    let claimed: BTreeSet<u64> = plausible.iter().flatten().map(|e| e.0).collect();
    let compacted = plan(layout, &plausible, Packing::Compact, order).entries;

    let mut kept: Vec<Option<(u64, u64)>> = vec![None; raw.len()];
    let mut rejected = Vec::new();
    for (i, &entry) in raw.iter().enumerate() {
        // (0, 0): a reserved file whose working index was not yet initialised; no
        // chunk is ever 0 bytes long.
        if entry == (EMPTY, EMPTY) || entry == (0, 0) {
            continue;
        }
        let first =
            bounds(entries, layout, entry).and_then(|()| check_at(file, spec, entry.0, entry.1));
        let found = first.map(|()| entry.0).or_else(|reason| {
            if !slot_laid {
                return Err(reason);
            }
            let alternates = [
                compacted.get(i).copied().flatten().map(|c| c.0),
                Some(layout.slot_offset(order.position(i) as u64)),
            ];
            let relocated = alternates.into_iter().flatten().find(|&at| {
                at != entry.0
                    && !claimed.contains(&at)
                    && plausible[i].is_some()
                    && in_file(at, entry.1, len)
                    && check_at(file, spec, at, entry.1).is_ok()
            });
            recovery.chunks_relocated += u64::from(relocated.is_some());
            relocated.ok_or(reason)
        });
        match found {
            Ok(at) => {
                kept[i] = Some((at, entry.1));
                recovery.chunks_kept += 1;
            }
            Err(reason) => {
                recovery.chunks_rejected += 1;
                rejected.push(RejectedChunk {
                    shard: recovery.key.clone(),
                    chunk: i,
                    reason,
                });
            }
        }
    }
    (kept, rejected)
}

/// The length of the chunk at `offset` whose working-index entry lost its length, read
/// off the chunk's own header (bounded by the slot size); `None` if none can be read.
fn torn_entry_len(file: &File, spec: &ArraySpec, layout: &ShardLayout, offset: u64) -> Option<u64> {
    let mut head = vec![0u8; usize::try_from(layout.slot_size).ok()?];
    let mut got = 0;
    while got < head.len() {
        match file.read_at(&mut head[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(_) => return None,
        }
    }
    head.truncate(got);
    stored_len(spec, &head).filter(|&n| n > 0 && n <= layout.slot_size)
}

/// A shard index: `(offset, nbytes)` per inner chunk, `None` for an absent one.
type Index = Vec<Option<(u64, u64)>>;

/// The finished shard at `key` and its index, if there is one whose index reads and
/// checks (a damaged one has nothing to add).
fn finished_chunks(store: &StoreReader, key: &str) -> Option<(File, Index)> {
    let shard = store.shard(key).ok()?;
    let file = store.open_shard(&shard).ok()?;
    let index = store.read_index(&shard, &file).ok()?;
    let ok = |&(at, n): &(u64, u64)| in_file(at, n, shard.len);
    index.iter().flatten().all(ok).then_some((file, index))
}

fn in_file(at: u64, nbytes: u64, len: u64) -> bool {
    at.checked_add(nbytes).is_some_and(|e| e <= len)
}

/// Renames the rebuilt shard to its key, creating its directories, and syncs every
/// directory whose entries changed.
fn install(rebuilt: &Path, dst: &Path) -> Result<(), RecoverError> {
    let mut changed = BTreeSet::new();
    if let Some(parent) = dst.parent() {
        create_dirs(parent, &mut changed)?;
        changed.insert(parent.to_path_buf());
    }
    crate::platform::rename(rebuilt, dst).map_err(IoError::with("rename", dst))?;
    for d in &changed {
        sync_dir(d)?;
    }
    Ok(())
}

/// Writes the finished shard for the `kept` chunks (each read from its file at its
/// offset) to `to` the way the finisher lays it out (compact packing in `order`, final
/// index and crc32c), and flushes it. Returns its length.
fn write_shard(
    to: &Path,
    layout: &ShardLayout,
    order: &SlotOrder,
    kept: &[Option<(&File, u64, u64)>],
) -> Result<u64, RecoverError> {
    let entries: Vec<Option<(u64, u64)>> =
        kept.iter().map(|k| k.map(|(_, at, n)| (at, n))).collect();
    let fin = plan(layout, &entries, Packing::Compact, order);
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(IoError::with("create", to))?;
    let mut buf = Vec::new();
    for (from, dst) in kept.iter().zip(&fin.entries) {
        if let (Some((src, at, nbytes)), Some((offset, _))) = (from, dst) {
            buf.resize(*nbytes as usize, 0);
            src.read_exact_at(&mut buf, *at)
                .map_err(IoError::with("read", to))?;
            out.write_all_at(&buf, *offset)
                .map_err(IoError::with("write", to))?;
        }
    }
    buf.resize(layout.index_size as usize, 0);
    encode_index(&fin.entries, &mut buf);
    out.write_all_at(&buf, fin.index_at)
        .map_err(IoError::with("write", to))?;
    out.set_len(fin.len)
        .map_err(IoError::with("truncate", to))?;
    out.sync_all().map_err(IoError::with("fsync", to))?;
    Ok(fin.len)
}
