//! Shutdown and publishing: flush what is staged, end the levels below, seal every open
//! shard and row, join the threads and publish the final `zarr.json`.

use std::thread::JoinHandle;

use hdrhistogram::Histogram;

use crate::error::{Error, Result};
use crate::metadata::{Progress, State};
use crate::stats::Stats;
use crate::store::{self, PARTIAL_DIR};
use crate::writer::api::options::Durability;
use crate::writer::level::Level;
use crate::writer::state::pool::Pool;
use crate::writer::threads::finisher::FinisherReport;

impl Level {
    /// Flushes partial chunks and shards, waits for every thread and publishes the final
    /// metadata. Returns the statistics, or the first error any thread met.
    pub(in crate::writer) fn finish(mut self) -> Result<Stats> {
        self.check_open()?;
        self.closed = true;
        let (report, latency) = self.shutdown(State::Finished, None);
        if let Some(e) = self.shared.take_error().or(self.level_error.take()) {
            return Err(e);
        }
        let seconds = self
            .counters
            .started
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        Ok(Stats {
            frames_pushed: self.counters.next_frame - self.shared.start.frame,
            frames_written: self.counters.written,
            frames_dropped: self.counters.dropped,
            bytes_in: self.counters.written * self.shared.spec.frame_bytes as u64,
            bytes_stored: report.bytes_stored,
            shards: report.shards,
            seconds,
            push_latency_ns: crate::stats::LatencySummary::from_histogram(
                &self.counters.push_latency,
            ),
            frame_latency_ns: crate::stats::LatencySummary::from_histogram(&latency),
            sink: self.shared.sink,
            pool_bytes: self.intake.frame_pool.bytes(),
            staging_bytes: self.intake.group_pool.as_ref().map_or(0, Pool::bytes),
            // Filled in by the public `finish`, once this level is dropped.
            memory: self.shared.meter.usage(),
        })
    }

    /// Stops at once, publishing what was accepted, with state `aborted` and `reason`.
    pub(in crate::writer) fn abort(mut self, reason: impl Into<String>) -> Result<()> {
        self.check_open()?;
        self.closed = true;
        self.shutdown(State::Aborted, Some(reason.into()));
        self.shared.take_error().map_or(Ok(()), Err)
    }

    /// Stops everything in order and writes the final `zarr.json`.
    pub(in crate::writer) fn shutdown(
        &mut self,
        state: State,
        error: Option<String>,
    ) -> (FinisherReport, Histogram<u64>) {
        self.flush_groups();
        self.end_levels(state, error.as_deref());
        let extent0 = self.seal_all();
        let (report, latency) = self.join_threads();
        store::prune_empty_dirs(&self.shared.dir.join(store::CHUNK_DIR));
        self.publish_final(state, error, extent0, &report);
        (report, latency)
    }

    /// Dispatches the staging groups still open (their missing frames read as fill),
    /// unless the writer has failed.
    fn flush_groups(&mut self) {
        if !self.shared.failed() {
            let mut groups: Vec<_> = self.intake.open_groups.drain().collect();
            groups.sort_by(|a, b| a.0.cmp(&b.0));
            for (gc, group) in groups {
                if let Err(e) = self.dispatch_group(&gc, group) {
                    self.shared.fail(e);
                }
            }
        }
        self.intake.open_groups.clear();
    }

    /// The levels below end with this one (aborted with it), before it publishes. A
    /// level's error never fails this level: what it accepted is still published.
    /// When finishing, `finish` returns the level's error; when aborting, the caller
    /// already has the first error.
    fn end_levels(&mut self, state: State, error: Option<&str>) {
        if let Some(mut p) = self.pyramid.take() {
            let abort = (self.shared.failed() || state == State::Aborted).then(|| {
                error.map_or_else(
                    || "the level above stopped after an error".into(),
                    str::to_string,
                )
            });
            if let Err(e) = p.end(abort)
                && state == State::Finished
            {
                self.level_error = Some(e);
            }
        }
    }

    /// Seals every open shard set and row; returns the append-axis extent of the last,
    /// partial row.
    fn seal_all(&mut self) -> u64 {
        let mut sets: Vec<_> = self.sealer.open_sets.keys().cloned().collect();
        sets.sort();
        for sc in sets {
            self.seal_set(&sc);
        }
        // The last, partial row ends at the last frame's append index.
        let extent0 = if let Some(e) = self.indexed_extent0() {
            e
        } else if self.counters.next_frame == 0 {
            0
        } else {
            self.shared.grid.coords(self.counters.next_frame - 1)[0] + 1
        };
        let rows: std::collections::BTreeSet<u64> = self
            .sealer
            .row_shards
            .keys()
            .chain(self.sealer.row_frames.keys())
            .copied()
            .collect();
        for row in rows {
            self.seal_row(row, extent0);
        }
        extent0
    }

    /// Closes the channels and joins the workers, the preparer and the finisher, in that
    /// order; a panic in any of them fails the writer.
    fn join_threads(&mut self) -> (FinisherReport, Histogram<u64>) {
        self.threads.jobs = None;
        if let Some(engine) = self.threads.own_engine.take()
            && let Err(e) = engine.join()
        {
            self.shared.fail(e);
        }
        self.threads.prepared = None;
        if let Some(Err(p)) = self.threads.preparer.take().map(JoinHandle::join) {
            self.shared
                .fail(Error::panicked("the shard preparer", p.as_ref()));
        }
        // The finisher ends once this and every job's link are gone: all chunks written.
        self.threads.link = None;
        let report = match self.threads.finisher.take().map(JoinHandle::join) {
            Some(Ok(report)) => report,
            Some(Err(p)) => {
                // Its shards may not be in place: never publish them as finished.
                self.shared
                    .fail(Error::panicked("the finisher thread", p.as_ref()));
                FinisherReport::default()
            }
            None => FinisherReport::default(),
        };
        let latency = self
            .shared
            .frame_latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        (report, latency)
    }

    /// Publishes the final `zarr.json` and releases the lock: everything, or after a
    /// failure only what the finisher completed.
    fn publish_final(
        &mut self,
        state: State,
        error: Option<String>,
        extent0: u64,
        report: &FinisherReport,
    ) {
        if self.shared.failed() {
            // Publish only what the finisher completed, and why the acquisition stopped.
            // The counts are those of the rows the finisher published: exactly the frames
            // the published extent covers.
            let steps = report.visible_extent0;
            let progress = Progress {
                state: State::Aborted,
                frames_committed: self.shared.start.written + report.frames.written,
                frames_dropped: self.shared.start.dropped + report.frames.dropped,
                error: Some(format!(
                    "{}; unfinished shards are kept in {PARTIAL_DIR} for `zarrstream recover`",
                    error.as_deref().unwrap_or("a writer thread failed")
                )),
            };
            let _ = self.shared.publish_progress(steps, &progress);
            if let Some(lock) = self.lock.take() {
                lock.release();
            }
        } else {
            let progress = Progress {
                state,
                frames_committed: self.shared.start.written + self.counters.written,
                frames_dropped: self.shared.start.dropped + self.counters.dropped,
                error,
            };
            if let Err(e) = self.shared.publish_progress(extent0, &progress) {
                self.shared.fail(e);
            }
            if let Some(lock) = self.lock.take() {
                lock.release();
            }
            let _ = std::fs::remove_dir(&self.shared.tmp_dir);
            if self.shared.durability != Durability::None
                && let Err(e) = store::sync_dir(&self.shared.dir)
            {
                self.shared.fail(e.into());
            }
        }
    }
}
