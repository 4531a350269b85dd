//! The finisher thread: completes shards (compact, index, truncate, sync, rename) and
//! republishes `zarr.json` when the visible extent of the append axis grows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, TryRecvError};

use super::options::Durability;
use super::shared::{FinisherMsg, OpenShard, Shared};
use super::writeback::{self, WritebackWindow};
use crate::error::{Error, Result};
use crate::metadata::{Progress, State};
use crate::shard::{packed, plan};
use crate::store;

#[derive(Debug, Default)]
pub(crate) struct FinisherReport {
    pub bytes_stored: u64,
    pub shards: u64,
    /// Append-axis extent covered by complete rows of finished shards.
    pub visible_extent0: u64,
}

#[derive(Default)]
struct Row {
    expected: Option<usize>,
    done: usize,
    extent0: u64,
}

/// Shards in flight to the disk before they are published as durable.
struct Pending {
    /// Flushes not yet made durable (`Periodic`) ...
    files: Vec<(std::fs::File, PathBuf)>,
    dirs: BTreeSet<PathBuf>,
    /// ... and the extent waiting to be published after them.
    extent0: Option<u64>,
    /// Shards whose writeback was started but that are never fsynced (`None`).
    window: WritebackWindow,
}

/// How long the finisher sleeps when it finds no message.
const POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// Finished shards with writeback in flight under `Durability::None`: enough for the
/// disk to keep streaming while the finisher moves on, few enough to bound the cache.
pub(super) const WRITEBACK_WINDOW: usize = 4;

pub(crate) fn run(shared: Arc<Shared>, rx: Receiver<FinisherMsg>) -> FinisherReport {
    let mut report = FinisherReport {
        visible_extent0: shared.start.extent0,
        ..FinisherReport::default()
    };
    let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
    let mut next_row = shared.start.first_row(&shared.grid);
    let mut pending = Pending {
        files: Vec::new(),
        dirs: BTreeSet::new(),
        extent0: None,
        window: WritebackWindow::new(WRITEBACK_WINDOW),
    };
    let interval = match shared.durability {
        Durability::Periodic { interval } => Some(interval),
        Durability::Shard | Durability::None => None,
    };
    let mut last_commit = Instant::now();
    loop {
        // Polled, never a blocking receive: a receiver blocked in the channel makes every
        // send take the channel's waker lock, and this (background, `SCHED_BATCH`) thread
        // being preempted while it holds that lock on wake-up stalled the pushing thread
        // for a scheduler slice (2.3-2.7 ms at each shard boundary). A sleeping poll costs
        // at most `POLL` of delay in finishing a shard.
        let msg = match rx.try_recv() {
            Ok(m) => Some(m),
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                let due = interval.is_some_and(|i| last_commit.elapsed() >= i);
                if !due {
                    std::thread::sleep(POLL);
                    continue;
                }
                None
            }
        };
        if let Some(msg) = msg {
            take(&shared, msg, &mut rows, &mut pending, &mut report);
        }
        while let Some(r) = rows.get(&next_row).filter(|r| r.expected == Some(r.done)) {
            pending.extent0 = Some(r.extent0);
            rows.remove(&next_row);
            next_row += 1;
        }
        if interval.is_none_or(|i| last_commit.elapsed() >= i) {
            commit(&shared, &mut pending, &mut report);
            last_commit = Instant::now();
        }
    }
    commit(&shared, &mut pending, &mut report);
    pending.window.drain();
    report
}

/// Finishes a shard, or records how many shards a sealed row has.
fn take(
    shared: &Shared,
    msg: FinisherMsg,
    rows: &mut BTreeMap<u64, Row>,
    pending: &mut Pending,
    report: &mut FinisherReport,
) {
    match msg {
        FinisherMsg::Shard(s) => {
            let s = unwrap_shard(s);
            let row = s.row;
            // After a failure shards are not finished: their temporary files stay for
            // `recover`, and rows stop completing, so the published extent never
            // covers them.
            if shared.failed() {
                s.sink.keep_for_recovery();
            } else {
                match finish_shard(shared, s, pending) {
                    Ok(len) => {
                        report.bytes_stored += len;
                        report.shards += u64::from(len > 0);
                        rows.entry(row).or_default().done += 1;
                    }
                    Err(e) => shared.fail(e),
                }
            }
        }
        FinisherMsg::RowSealed {
            row,
            shards,
            extent0,
        } => {
            let r = rows.entry(row).or_default();
            r.expected = Some(shards);
            r.extent0 = extent0;
        }
    }
}

/// Flushes pending shards and directories, then publishes the extent they complete.
fn commit(shared: &Shared, pending: &mut Pending, report: &mut FinisherReport) {
    if shared.failed() {
        return;
    }
    let flushed = pending
        .files
        .drain(..)
        .try_for_each(|(f, path)| {
            f.sync_data().map_err(|e| Error::io("fsync", &path, e, 0))?;
            // Clean after the flush: dropping the pages costs no I/O.
            writeback::release(&f);
            Ok(())
        })
        .and_then(|()| {
            pending
                .dirs
                .iter()
                .try_for_each(|d| Ok(store::sync_dir(d)?))
        });
    pending.dirs.clear();
    if let Err(e) = flushed {
        // A failed flush is never retried (the kernel may have dropped the dirty pages):
        // the shards stay unpublished and the writer reports the error.
        shared.fail(e);
        return;
    }
    if let Some(extent0) = pending.extent0.take() {
        report.visible_extent0 = extent0;
        let progress = Progress {
            state: State::Running,
            frames_committed: extent0 * shared.spec.frames_per_step(),
            frames_dropped: shared.start.dropped,
            error: None,
        };
        if let Err(e) = publish(shared, extent0, &progress) {
            shared.fail(e);
        }
    }
}

/// Publishes `zarr.json` with the append axis at `extent0` (fixed-size arrays keep their shape).
pub(crate) fn publish(shared: &Shared, extent0: u64, progress: &Progress) -> Result<()> {
    let shape0 = if shared.spec.shape[0] == 0 {
        extent0
    } else {
        shared.spec.shape[0]
    };
    shared
        .published
        .publish(&shared.dir, &shared.spec, (shape0, extent0), progress)
}

/// Workers drop their reference right after releasing the shard, and the preparer holds
/// one for at most one prefault step, so this waits briefly; it makes the finisher the
/// one thread that unmaps.
fn unwrap_shard(mut s: Arc<OpenShard>) -> OpenShard {
    loop {
        match Arc::try_unwrap(s) {
            Ok(v) => return v,
            Err(again) => {
                s = again;
                std::thread::yield_now();
            }
        }
    }
}

fn finish_shard(shared: &Shared, s: OpenShard, pending: &mut Pending) -> Result<u64> {
    let written = s.entries.snapshot();
    if written.iter().all(Option::is_none) {
        // Every frame of this shard was dropped: a missing shard reads as fill, so the
        // temporary file is just removed (when the sink drops).
        return Ok(0);
    }
    let fin = if s.sink.packs_chunks() {
        packed(&shared.layout, &written)
    } else {
        plan(&shared.layout, &written, shared.packing, &shared.order)
    };
    let temp = s.sink.finalize(&fin)?;
    if shared.durability == Durability::Shard {
        temp.file
            .sync_data()
            .map_err(|e| Error::io("fsync", &temp.path, e, 0))?;
        writeback::release(&temp.file);
    }
    let dst = shared.dir.join(&s.key);
    let Some(parent) = dst.parent() else {
        return Err(Error::Internal(format!(
            "shard key {} has no directory",
            s.key
        )));
    };
    let mut new_entries = BTreeSet::new();
    store::create_dirs(parent, &mut new_entries)?;
    let file = temp.commit(&dst)?;
    if let Some(staging) = &shared.staging {
        // Before any document that covers it is published, so the uploader's pass
        // takes it before the document.
        staging.finished(dst.clone(), fin.len);
    }
    new_entries.insert(parent.to_path_buf());
    match shared.durability {
        Durability::Shard => new_entries.iter().try_for_each(|d| store::sync_dir(d))?,
        Durability::Periodic { .. } => {
            // Start the writeback now, so the commit's fsync finds little left to write.
            writeback::release(&file);
            pending.files.push((file, dst));
            pending.dirs.extend(new_entries);
        }
        Durability::None => pending.window.push(file),
    }
    Ok(fin.len)
}
