//! Dispatch and sealing on the pushing thread: one job per tile of a batch, shard sets
//! taken from the preparer in order, and shards, staging groups and append-axis rows
//! sealed once no more frames can reach them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::TryRecvError;

use crate::error::{Error, Result};
use crate::writer::level::{Group, Level};
use crate::writer::state::grid::Grid;
use crate::writer::state::job::{Batch, Job};
use crate::writer::state::shared::{FinisherMsg, OpenShard};
use crate::writer::threads::preparer::max_unfinished;

impl Level {
    /// Sends one job per tile of `batch`, whose frames sit at chunk-group coordinates
    /// derived from `c` (a frame's leading coordinates, or a group's first frame).
    pub(in crate::writer) fn dispatch(&mut self, c: &[u64], batch: Arc<Batch>) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let g = &shared.grid;
        let sc = Grid::box_of(c, &g.shard_lead);
        self.ensure_set(&sc)?;
        let set = self
            .sealer
            .open_sets
            .get(&sc)
            .ok_or_else(|| Error::Internal("shard set vanished".into()))?;
        // Count every job before the first is sent: a worker must never bring a shard
        // to zero while the caller still holds its seal token. Relaxed suffices, as the
        // channel orders each send before the worker's decrement.
        for (shard, &n) in set.iter().zip(&g.tiles_per_shard) {
            shard.pending.fetch_add(n, Ordering::Relaxed);
        }
        let gc = Grid::box_of(c, &g.chunk_lead);
        let (Some(jobs), Some(link)) = (self.threads.jobs.as_ref(), self.threads.link.as_ref())
        else {
            return Err(Error::Closed);
        };
        for tile in 0..g.tiles {
            let shard = Arc::clone(&set[g.shard_of_tile(tile)]);
            let job = Job {
                batch: Arc::clone(&batch),
                tile,
                shard,
                slot: g.slot(&gc, tile),
                link: Arc::clone(link),
            };
            jobs.send(job)
                .map_err(|_| Error::Internal("worker threads are gone".into()))?;
        }
        Ok(())
    }

    /// Opens the shard set at shard coordinates `sc`, taking it from the preparer.
    ///
    /// Appended frames need sets in exactly the preparer's order. Indexed frames may
    /// need one further on: the sets before it are taken too and kept open for the
    /// frames that will come to them, as long as the preparer may make more (it stops at
    /// the open-shard bound of the order it prepares for); past that, the frame is
    /// refused with [`Error::WorkingSet`] rather than waiting for frames that cannot come
    /// while the caller waits.
    pub(in crate::writer) fn ensure_set(&mut self, sc: &[u64]) -> Result<&Vec<Arc<OpenShard>>> {
        while !self.sealer.open_sets.contains_key(sc) {
            let rx = self.threads.prepared.as_ref().ok_or(Error::Closed)?;
            let received = match rx.try_recv() {
                Ok(r) => Ok(r),
                Err(TryRecvError::Empty) => {
                    let g = &self.shared.grid;
                    let held = self.sealer.open_sets.len().saturating_mul(g.shard_tiles);
                    let bound = max_unfinished(g);
                    if self.indexed() && held >= bound {
                        return Err(Error::WorkingSet {
                            what: "shards",
                            needed: (held + g.shard_tiles) as u64,
                            limit: "the order the writer prepares shards in",
                            budget: bound as u64,
                            advice: "declare the acquisition order (the acquisition_order option)",
                        });
                    }
                    rx.recv().map_err(|_| ())
                }
                Err(TryRecvError::Disconnected) => Err(()),
            };
            let set = received.map_err(|()| Error::Internal("shard preparer stopped".into()))??;
            if !self.indexed() && set.coords.as_slice() != sc {
                let msg = format!("prepared shard set {:?}, needed {sc:?}", set.coords);
                return Err(Error::Internal(msg));
            }
            *self.sealer.row_shards.entry(set.coords[0]).or_default() += set.shards.len();
            self.sealer.open_sets.insert(set.coords, set.shards);
        }
        self.sealer
            .open_sets
            .get(sc)
            .ok_or_else(|| Error::Internal("shard set vanished".into()))
    }

    /// After frame `c` (accepted or not): dispatch the chunk group it completes, seal
    /// the shard set it completes, and report a completed append-axis row.
    pub(in crate::writer) fn seal_completed(&mut self, c: &[u64]) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let g = &shared.grid;
        if g.deep() && g.last_in_box(c, &g.chunk_lead) {
            let gc = Grid::box_of(c, &g.chunk_lead);
            if let Some(group) = self.intake.open_groups.remove(&gc) {
                self.dispatch_group(&gc, group)?;
            }
        }
        if g.last_in_box(c, &g.shard_lead) {
            self.seal_set(&Grid::box_of(c, &g.shard_lead));
        }
        if g.last_in_box(c, &g.row_box) {
            let row = c[0] / g.shard_lead[0];
            self.seal_row(row, c[0] + 1);
        }
        Ok(())
    }

    /// Dispatches staging group `gc` as one batch, its missing frames filled.
    pub(in crate::writer) fn dispatch_group(&mut self, gc: &[u64], mut group: Group) -> Result<()> {
        let g = &self.shared.grid;
        let plane = g.plane_bytes();
        // Frames that never arrived (outside the array, dropped, or after the stream
        // ended) read as the fill value; the pooled buffer may hold older data.
        for (local, _) in group.received.iter().enumerate().filter(|(_, r)| !**r) {
            for t in 0..g.tiles {
                g.fill
                    .fill(&mut group.buf[t * g.chunk_bytes + local * plane..][..plane]);
            }
        }
        let first: Vec<u64> = gc.iter().zip(&g.chunk_lead).map(|(a, b)| a * b).collect();
        let batch = Arc::new(Batch {
            buf: group.buf,
            staged: true,
            remaining: AtomicUsize::new(g.tiles),
            times: group.times,
            reduction: None,
            channel: self.shared.image.get().map_or(0, |i| i.channel_of(&first)),
            received: group.received,
        });
        self.dispatch(&first, batch)
    }

    /// Releases the pushing thread's token on every shard of set `sc`: no more chunks
    /// can arrive for them.
    pub(in crate::writer) fn seal_set(&mut self, sc: &[u64]) {
        if let (Some(set), Some(fin)) =
            (self.sealer.open_sets.remove(sc), self.threads.link.as_ref())
        {
            for shard in set {
                shard.release(&fin.finisher);
            }
        }
    }

    /// Tells the finisher how many shards row `row` opened, so it can publish the
    /// append axis up to `extent0` once they are all finished.
    pub(in crate::writer) fn seal_row(&mut self, row: u64, extent0: u64) {
        let shards = self.sealer.row_shards.remove(&row).unwrap_or(0);
        let frames = self.sealer.row_frames.remove(&row).unwrap_or_default();
        if let Some(link) = &self.threads.link {
            let _ = link.finisher.send(FinisherMsg::RowSealed {
                row,
                shards,
                extent0,
                frames,
            });
        }
    }
}
