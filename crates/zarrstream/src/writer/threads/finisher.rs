//! The finisher thread: completes shards (compact, index, truncate, sync, rename) and
//! republishes `zarr.json` when the visible extent of the append axis grows.
//!
//! A shard is renamed into place only once the data it holds is as durable as the
//! chosen [`Durability`] promises: under `Shard` after its own flush, under `Periodic`
//! at the group commit (flush every pending shard, rename them, flush their
//! directories, then publish), under `None` at once. Until then it stays under its
//! temporary name, where `recover` finds it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, TryRecvError};

use crate::error::{Error, Result};
use crate::metadata::{Progress, State};
use crate::shard::{packed, plan};
use crate::sink::TempShard;
use crate::store;
use crate::writer::api::options::Durability;
use crate::writer::state::shared::{FinisherMsg, FrameCount, OpenShard, Shared};
use crate::writer::threads::writeback::{self, WritebackWindow};

#[derive(Debug, Default)]
pub(crate) struct FinisherReport {
    pub bytes_stored: u64,
    pub shards: u64,
    /// Append-axis extent covered by complete rows of finished shards.
    pub visible_extent0: u64,
    /// Frames written and dropped in the rows up to `visible_extent0`.
    pub frames: FrameCount,
}

#[derive(Default)]
struct Row {
    expected: Option<usize>,
    done: usize,
    extent0: u64,
    frames: FrameCount,
}

/// A finished shard waiting under its temporary name for the group commit.
struct Waiting {
    temp: TempShard,
    dst: PathBuf,
    len: u64,
}

/// Shards on their way to the disk before they are published as durable.
struct Pending {
    /// Finished shards not yet flushed nor renamed (`Periodic`) ...
    shards: VecDeque<Waiting>,
    /// ... directories whose new entries are not yet flushed ...
    dirs: BTreeSet<PathBuf>,
    /// ... and the extent, with its rows' frames, to publish after them.
    extent0: Option<u64>,
    frames: FrameCount,
    /// Shards whose writeback was started but that are never fsynced (`None`).
    window: WritebackWindow,
}

impl Pending {
    /// Leaves every waiting shard for `recover` (after a failure nothing is renamed).
    fn keep_all(&mut self) {
        for w in self.shards.drain(..) {
            w.temp.keep();
        }
    }
}

/// How long the finisher sleeps when it finds no message.
const POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// Finished shards with writeback in flight under `Durability::None`: enough for the
/// disk to keep streaming while the finisher moves on, few enough to bound the cache.
pub(in crate::writer) const WRITEBACK_WINDOW: usize = 4;

pub(crate) fn run(shared: Arc<Shared>, rx: Receiver<FinisherMsg>) -> FinisherReport {
    let mut report = FinisherReport {
        visible_extent0: shared.start.extent0,
        ..FinisherReport::default()
    };
    let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
    let mut next_row = shared.start.first_row(&shared.grid);
    let mut pending = Pending {
        shards: VecDeque::new(),
        dirs: BTreeSet::new(),
        extent0: None,
        frames: FrameCount::default(),
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
            pending.frames += r.frames;
            rows.remove(&next_row);
            next_row += 1;
        }
        if interval.is_none_or(|i| last_commit.elapsed() >= i) {
            commit(&shared, &mut pending, &mut report);
            last_commit = Instant::now();
        }
    }
    commit(&shared, &mut pending, &mut report);
    pending.keep_all();
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
            frames,
        } => {
            let r = rows.entry(row).or_default();
            r.expected = Some(shards);
            r.extent0 = extent0;
            r.frames = frames;
        }
    }
}

/// The group commit: flushes the waiting shards, renames them into place, flushes the
/// directories that changed, then publishes the extent they complete. Nothing is
/// published, and nothing more renamed, after a failure.
fn commit(shared: &Shared, pending: &mut Pending, report: &mut FinisherReport) {
    if shared.failed() {
        pending.keep_all();
        return;
    }
    if let Err(e) = install_waiting(shared, pending) {
        // A failed flush is never retried (the kernel may have dropped the dirty pages):
        // the shards stay unpublished, under their temporary names for `recover`, and
        // the writer reports the error.
        pending.keep_all();
        shared.fail(e);
        return;
    }
    if let Some(extent0) = pending.extent0.take() {
        report.visible_extent0 = extent0;
        report.frames += std::mem::take(&mut pending.frames);
        let progress = Progress {
            state: State::Running,
            frames_committed: shared.start.written + report.frames.written,
            frames_dropped: shared.start.dropped + report.frames.dropped,
            error: None,
        };
        if let Err(e) = shared.publish_progress(extent0, &progress) {
            shared.fail(e);
        }
    }
}

/// Flushes every waiting shard, renames each into place and flushes the directories
/// whose entries changed, in that order.
fn install_waiting(shared: &Shared, pending: &mut Pending) -> Result<()> {
    for w in &pending.shards {
        w.temp
            .file
            .sync_data()
            .map_err(|e| Error::io("fsync", &w.temp.path, e, 0))?;
        // Clean after the flush: dropping the pages costs no I/O.
        writeback::release(&w.temp.file);
    }
    while let Some(w) = pending.shards.front() {
        let parent = shard_dir(&w.dst)?;
        store::create_dirs(&parent, &mut pending.dirs)?;
        pending.dirs.insert(parent);
        let Some(w) = pending.shards.pop_front() else {
            break;
        };
        // Kept if the rename fails: the temporary file holds the shard.
        w.temp.keep();
        w.temp.commit(&w.dst, &mut pending.dirs)?;
        if let Some(staging) = &shared.staging {
            staging.finished(w.dst, w.len);
        }
    }
    let dirs = std::mem::take(&mut pending.dirs);
    dirs.iter().try_for_each(|d| Ok(store::sync_shard_dir(d)?))
}

fn shard_dir(dst: &std::path::Path) -> Result<PathBuf> {
    dst.parent()
        .map(std::path::Path::to_path_buf)
        .ok_or_else(|| Error::Internal(format!("shard {} has no directory", dst.display())))
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
    let dst = shared.dir.join(&s.key);
    let len = temp.len;
    match shared.durability {
        Durability::Periodic { .. } => {
            // Start the writeback now, so the commit's flush finds little left to write;
            // the shard stays under its temporary name until then.
            writeback::release(&temp.file);
            pending.shards.push_back(Waiting { temp, dst, len });
            return Ok(len);
        }
        Durability::Shard => {
            temp.file
                .sync_data()
                .map_err(|e| Error::io("fsync", &temp.path, e, 0))?;
            writeback::release(&temp.file);
        }
        Durability::None => {}
    }
    // A shard whose flush failed was dropped above: its pages may be gone, so it is not
    // trusted. From here on an error (its directory, the rename) leaves the finished
    // shard for `recover`; the rename makes it the store's.
    temp.keep();
    let parent = shard_dir(&dst)?;
    let mut new_entries = BTreeSet::new();
    store::create_dirs(&parent, &mut new_entries)?;
    new_entries.insert(parent);
    let file = temp.commit(&dst, &mut new_entries)?;
    if let Some(staging) = &shared.staging {
        // Before any document that covers it is published, so the uploader's pass
        // takes it before the document.
        staging.finished(dst.clone(), len);
    }
    match shared.durability {
        Durability::None => pending.window.push(&file, dst),
        _ => {
            // Closed before the directory flush, which can take long: a data mover may
            // take the shard meanwhile, and its space must come back.
            drop(file);
            new_entries
                .iter()
                .try_for_each(|d| store::sync_shard_dir(d))?;
        }
    }
    Ok(len)
}
