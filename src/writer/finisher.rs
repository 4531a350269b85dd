//! The finisher thread: completes shards (compact, index, truncate, sync, rename) and
//! republishes `zarr.json` when the visible extent of the append axis grows.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crossbeam_channel::Receiver;

use super::Durability;
use super::shared::{FinisherMsg, OpenShard, Shared};
use crate::error::{Error, Result};
use crate::metadata::{self, Progress, State};
use crate::shard::plan;

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

pub(crate) fn run(shared: Arc<Shared>, rx: Receiver<FinisherMsg>) -> FinisherReport {
    let mut report = FinisherReport::default();
    let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
    let mut next_row = 0u64;
    for msg in rx {
        match msg {
            FinisherMsg::Shard(s) => {
                let s = unwrap_shard(s);
                let row = s.row;
                // After a failure shards are dropped (their temporary files removed), and
                // rows stop completing, so the published extent never covers them.
                if !shared.failed() {
                    match finish_shard(&shared, s) {
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
        let mut visible = None;
        while let Some(r) = rows.get(&next_row).filter(|r| r.expected == Some(r.done)) {
            visible = Some(r.extent0);
            rows.remove(&next_row);
            next_row += 1;
        }
        if let Some(v) = visible {
            report.visible_extent0 = v;
        }
        if let (Some(extent0), false) = (visible, shared.failed()) {
            let progress = Progress {
                state: State::Running,
                frames_committed: extent0 * shared.spec.frames_per_step(),
                frames_dropped: 0,
                error: None,
            };
            if let Err(e) = publish(&shared, extent0, &progress) {
                shared.fail(e);
            }
        }
    }
    report
}

/// Publishes `zarr.json` with the append axis at `extent0` (fixed-size arrays keep their shape).
pub(crate) fn publish(shared: &Shared, extent0: u64, progress: &Progress) -> Result<()> {
    let shape0 = if shared.spec.shape[0] == 0 {
        extent0
    } else {
        shared.spec.shape[0]
    };
    metadata::publish(
        &shared.dir,
        &metadata::array_json(&shared.spec, shape0, progress),
    )
}

/// Workers drop their reference right after releasing the shard, so this waits only
/// for those few instructions; it makes the finisher the one thread that unmaps.
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

fn finish_shard(shared: &Shared, s: OpenShard) -> Result<u64> {
    let written = s.entries.snapshot();
    if written.iter().all(Option::is_none) {
        // Every frame of this shard was dropped: a missing shard reads as fill, so the
        // temporary file is just removed (when the sink drops).
        return Ok(0);
    }
    let fin = plan(&shared.layout, &written, shared.packing);
    let temp = s.sink.finalize(&fin)?;
    let durable = shared.durability == Durability::Shard;
    if durable {
        temp.file
            .sync_data()
            .map_err(|e| Error::io("fsync", &temp.path, e, 0))?;
    }
    let dst = shared.dir.join(&s.key);
    if let Some(parent) = dst.parent() {
        ensure_dir(parent, durable)?;
        temp.commit(&dst)?;
        if durable {
            metadata::sync_dir(parent)?;
        }
    }
    Ok(fin.len)
}

/// Creates `dir` and its missing parents, making each new entry durable when asked.
fn ensure_dir(dir: &Path, durable: bool) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        ensure_dir(parent, durable)?;
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("create directory", dir, e, 0)),
        }
        if durable {
            metadata::sync_dir(parent)?;
        }
    }
    Ok(())
}
