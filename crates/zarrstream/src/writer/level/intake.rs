//! Intake and staging on the pushing thread: checks each frame, takes a pooled buffer
//! for it (or drops it), copies rows of deep chunks into their staging group, and counts
//! the frame as written or dropped.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use crate::dtype::DataType;
use crate::error::{Error, FrameIndexError, Result};
use crate::metadata::State;
use crate::writer::api::options::Backpressure;
use crate::writer::api::outcome::PushOutcome;
use crate::writer::level::{Group, Level};
use crate::writer::pyramid::feed::{Feed, Source};
use crate::writer::pyramid::reduction::NextReduction;
use crate::writer::state::grid::Grid;
use crate::writer::state::job::Batch;
use crate::writer::state::pool::PoolBuf;

/// A frame as the caller handed it over.
pub(in crate::writer) enum Frame<'a> {
    Borrowed(&'a [u8]),
    Owned(PoolBuf),
    Skipped,
}

impl Level {
    /// Pushes one frame of `dtype` (bytes copied, or a pooled buffer moved in).
    pub(in crate::writer) fn push_frame(
        &mut self,
        dtype: DataType,
        frame: Frame<'_>,
        scheduled: Instant,
    ) -> Result<PushOutcome> {
        let nbytes = match &frame {
            Frame::Borrowed(b) => b.len(),
            Frame::Owned(b) => b.len(),
            Frame::Skipped => 0,
        };
        self.check_frame(dtype, nbytes)?;
        self.accept(frame, scheduled)
    }

    /// Pushes a buffer from [`buffer`](Self::buffer) without copying it.
    pub(in crate::writer) fn push_buffer(
        &mut self,
        buf: PoolBuf,
        scheduled: Instant,
    ) -> Result<PushOutcome> {
        let dtype = self.shared.spec.dtype;
        self.push_frame(dtype, Frame::Owned(buf), scheduled)
    }

    /// A frame buffer from the pool: waits for one under [`Backpressure::Block`], `None`
    /// under `Drop` when none is free.
    pub(in crate::writer) fn buffer(&mut self) -> Result<Option<PoolBuf>> {
        self.check_open()?;
        Ok(self
            .intake
            .frame_pool
            .get(self.intake.backpressure == Backpressure::Block))
    }

    /// Counts a frame the caller could not push as dropped, keeping its place.
    pub(in crate::writer) fn skip(&mut self) -> Result<()> {
        self.check_open()?;
        self.check_capacity()?;
        let t = Instant::now();
        self.accept(Frame::Skipped, t).map(|_| ())
    }

    fn check_frame(&mut self, dtype: DataType, nbytes: usize) -> Result<()> {
        self.check_open()?;
        let spec = &self.shared.spec;
        if dtype != spec.dtype {
            return Err(Error::DataType {
                frame: self.counters.next_frame,
                expected: spec.dtype,
                got: dtype,
            });
        }
        if nbytes != spec.frame_bytes {
            return Err(Error::FrameSize {
                frame: self.counters.next_frame,
                expected: spec.frame_bytes,
                got: nbytes,
            });
        }
        self.check_capacity()
    }

    /// A bounded append axis holds `shape[0] × frames_per_step` frames.
    fn check_capacity(&self) -> Result<()> {
        let spec = &self.shared.spec;
        let cap = spec.shape[0].saturating_mul(spec.frames_per_step());
        if spec.shape[0] != 0 && self.counters.next_frame >= cap {
            return Err(Error::ArrayFull { frames: cap });
        }
        Ok(())
    }

    /// Writes one frame at leading coordinates `c` (bytes copied, or a pooled buffer
    /// moved in); see [`Writer::write_frame`](crate::writer::Writer::write_frame).
    pub(in crate::writer) fn write_frame_at(
        &mut self,
        c: &[u64],
        dtype: DataType,
        frame: Frame<'_>,
        scheduled: Instant,
    ) -> Result<PushOutcome> {
        self.check_index(c)?;
        let nbytes = match &frame {
            Frame::Borrowed(b) => b.len(),
            Frame::Owned(b) => b.len(),
            Frame::Skipped => 0,
        };
        if matches!(frame, Frame::Skipped) {
            self.check_capacity()?;
        } else {
            self.check_frame(dtype, nbytes)?;
        }
        self.accept_at(frame, scheduled, c.to_vec())
    }

    /// Any failure while accepting a frame closes the writer: finished shards stay
    /// published, the metadata records the abort, and the first error is returned.
    fn accept(&mut self, frame: Frame<'_>, scheduled: Instant) -> Result<PushOutcome> {
        if self.indexed() {
            return Err(Error::FrameIndex {
                index: Vec::new(),
                problem: FrameIndexError::Indexed,
            });
        }
        let c = self.shared.grid.coords(self.counters.next_frame);
        self.accept_at(frame, scheduled, c)
    }

    /// Accepts a frame at leading coordinates `c` (the next in C order when appending).
    fn accept_at(
        &mut self,
        frame: Frame<'_>,
        scheduled: Instant,
        c: Vec<u64>,
    ) -> Result<PushOutcome> {
        // Push latency includes waiting for the next shard set at shard boundaries.
        let t0 = Instant::now();
        self.counters.started.get_or_insert(t0);
        let shared = Arc::clone(&self.shared);
        // A pyramid level that failed (e.g. its disk is full) refuses this frame as a
        // full disk here would: what was accepted before is finished and published.
        if let Some(e) = self.pyramid.as_ref().and_then(Feed::take_failure) {
            self.closed = true;
            self.shutdown(State::Aborted, Some(e.to_string()));
            return Err(e);
        }
        // A skipped frame stages nothing, so it needs no buffer.
        if self.indexed() && !matches!(frame, Frame::Skipped) {
            self.check_staging_room(&c)?;
        }
        // Every frame position opens its shard set, dropped or not, so sets are taken
        // from the preparer in exactly the order it makes them. If the next set cannot
        // be made (e.g. the disk is full), this frame is refused, and everything
        // accepted before it, whose space is already reserved, is finished and published.
        if let Err(e) = self.ensure_set(&Grid::box_of(&c, &shared.grid.shard_lead)) {
            // An indexed frame too far from the prepared order is refused before
            // anything was taken: the writer goes on.
            if matches!(e, Error::WorkingSet { .. }) {
                return Err(e);
            }
            // An earlier failure of another thread explains more than this one.
            let e = shared.take_error().unwrap_or(e);
            self.closed = true;
            self.shutdown(State::Aborted, Some(e.to_string()));
            return Err(e);
        }
        match self.accept_frame(frame, scheduled, t0, &c) {
            Ok(accepted) => Ok(PushOutcome::accepted_if(accepted)),
            Err(e) => {
                self.shared.fail(e);
                self.check_open()?;
                Err(Error::Closed)
            }
        }
    }

    /// Refuses an indexed frame that would open one staging group more than the pool
    /// holds while every buffer is held by an open group: waiting for a buffer would
    /// wait for frames only the caller can bring. Nothing is taken.
    fn check_staging_room(&self, c: &[u64]) -> Result<()> {
        let (g, Some(pool)) = (&self.shared.grid, self.intake.group_pool.as_ref()) else {
            return Ok(());
        };
        let open = self.intake.open_groups.len();
        if open >= pool.count()
            && !self
                .intake
                .open_groups
                .contains_key(&Grid::box_of(c, &g.chunk_lead))
        {
            return Err(Error::WorkingSet {
                what: "staging groups (inner chunks deeper than a frame)",
                needed: open as u64 + 1,
                limit: "the staging pool sized for the order the writer prepares for",
                budget: pool.count() as u64,
                advice: "declare the acquisition order (the acquisition_order option)",
            });
        }
        Ok(())
    }

    /// Takes frame `c` into staging (deep chunks) or a batch of its own, and accounts
    /// for it; returns whether it was accepted.
    fn accept_frame(
        &mut self,
        frame: Frame<'_>,
        scheduled: Instant,
        t0: Instant,
        c: &[u64],
    ) -> Result<bool> {
        self.counters.next_frame += 1;
        let wait = self.intake.backpressure == Backpressure::Block;
        let accepted = if self.shared.grid.deep() {
            self.accept_deep(frame, scheduled, wait, c)?
        } else {
            match self.accept_shallow(frame, scheduled, wait, c)? {
                Some(accepted) => accepted,
                // No buffer free in the level below (drop policy): the frame is dropped,
                // and this level's buffer, if one was taken, went back to its pool.
                None => return self.account(false, c, t0),
            }
        };
        self.account(accepted, c, t0)
    }

    /// A frame of chunks deeper than one frame: its rows are staged.
    fn accept_deep(
        &mut self,
        frame: Frame<'_>,
        scheduled: Instant,
        wait: bool,
        c: &[u64],
    ) -> Result<bool> {
        let frame = match frame {
            // The pyramid thread needs the frame after staging: keep it in a pool buffer.
            Frame::Borrowed(bytes) if self.pyramid.is_some() => {
                match self.intake.frame_pool.get(wait) {
                    Some(mut b) => {
                        b.copy_from_slice(bytes);
                        Frame::Owned(b)
                    }
                    None => Frame::Skipped,
                }
            }
            f => f,
        };
        let staged = self.stage(c, &frame, scheduled, wait)?;
        if let (true, Some(p), Frame::Owned(b)) = (staged, self.pyramid.as_mut(), frame) {
            p.frame(Source::Buf(b), scheduled)?;
        }
        Ok(staged)
    }

    /// A frame of frame-deep chunks: a batch of its own, dispatched at once. `None` when
    /// the level below has no free buffer (the frame is dropped).
    fn accept_shallow(
        &mut self,
        frame: Frame<'_>,
        scheduled: Instant,
        wait: bool,
        c: &[u64],
    ) -> Result<Option<bool>> {
        let buf = match frame {
            Frame::Owned(b) => Some(b),
            Frame::Borrowed(bytes) => self.intake.frame_pool.get(wait).map(|mut b| {
                b.copy_from_slice(bytes);
                b
            }),
            Frame::Skipped => None,
        };
        let next = match (&buf, &self.pyramid) {
            (Some(_), Some(p)) => p.reduction(wait),
            _ => NextReduction::Thread,
        };
        let (reduction, done) = match next {
            NextReduction::Fused(r, done) => (Some(r), Some(done)),
            NextReduction::Thread => (None, None),
            NextReduction::Full => return Ok(None),
        };
        let Some(buf) = buf else {
            return Ok(Some(false));
        };
        let batch = Arc::new(Batch {
            buf,
            staged: false,
            remaining: AtomicUsize::new(self.shared.grid.tiles),
            times: vec![scheduled],
            reduction,
            channel: self.shared.image.get().map_or(0, |i| i.channel_of(c)),
            received: Vec::new(),
        });
        self.dispatch(c, Arc::clone(&batch))?;
        if let Some(p) = self.pyramid.as_mut() {
            let src = match done {
                Some(done) => Source::Reduced { batch, done },
                None => Source::Batch(batch),
            };
            p.frame(src, scheduled)?;
        }
        Ok(Some(true))
    }

    /// Counts a pushed frame as written or dropped and seals what it completed.
    fn account(&mut self, accepted: bool, c: &[u64], t0: Instant) -> Result<bool> {
        let row = c[0] / self.shared.grid.shard_lead[0];
        let frames = self.sealer.row_frames.entry(row).or_default();
        if accepted {
            self.counters.written += 1;
            frames.written += 1;
        } else {
            self.counters.dropped += 1;
            frames.dropped += 1;
            if let Some(p) = self.pyramid.as_mut() {
                p.skip();
            }
        }
        if self.indexed() {
            self.seal_counted(c)?;
        } else {
            self.seal_completed(c)?;
        }
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let _ = self.counters.push_latency.record(ns);
        Ok(accepted)
    }

    /// Copies a frame's rows into the staging buffers of its chunk group.
    fn stage(
        &mut self,
        c: &[u64],
        frame: &Frame<'_>,
        scheduled: Instant,
        wait: bool,
    ) -> Result<bool> {
        let bytes: &[u8] = match frame {
            Frame::Owned(b) => b,
            Frame::Borrowed(b) => b,
            Frame::Skipped => return Ok(false),
        };
        let shared = Arc::clone(&self.shared);
        let g = &shared.grid;
        let gc = Grid::box_of(c, &g.chunk_lead);
        if !self.intake.open_groups.contains_key(&gc) {
            let Some(buf) = self.intake.group_pool.as_ref().and_then(|p| p.get(wait)) else {
                return Ok(false);
            };
            let group = Group {
                buf,
                received: vec![false; g.group_frames],
                times: Vec::new(),
            };
            self.intake.open_groups.insert(gc.clone(), group);
        }
        let Some(group) = self.intake.open_groups.get_mut(&gc) else {
            return Err(Error::Internal("staging group vanished".into()));
        };
        let local = g.local_index(c);
        let plane = g.plane_bytes();
        for t in 0..g.tiles {
            let dst = &mut group.buf[t * g.chunk_bytes + local * plane..][..plane];
            g.tile_source(bytes, t).copy_range(0, plane, dst);
        }
        group.received[local] = true;
        group.times.push(scheduled);
        Ok(true)
    }
}
