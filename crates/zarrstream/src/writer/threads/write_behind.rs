//! Write-behind threads: they write the chunks that workers encoded for a sink whose
//! writes wait for the device (the direct sink), so that an encoding worker never waits
//! for a write.
//!
//! With `O_DIRECT` a write returns when the device has the bytes. A worker that wrote
//! its own chunks waited for every one of them, so each core needed several workers to
//! stay busy (three per thread), and those workers then took turns on the core, each
//! switch costing its caches: on tmpfs, where nothing waits, one worker per thread
//! encoded 0.92–0.98 of the encode ceiling against 0.75–0.90 with three (BENCHMARKS.md
//! §20). Now an engine with a direct sink has one worker per thread, which encodes each
//! chunk into a scratch from a pool and hands it here, and two write-behind threads per
//! thread, which write it, record its entry and do the job's bookkeeping. The pool holds
//! about 8 MiB of raw chunks per thread (`engine_shape`), so the workers encode on
//! through a device's stall (a cache flush holds this host's disk for 25–155 ms) instead
//! of waiting with the writes in flight.
//!
//! Nothing is locked per chunk: the pool and the channel are crossbeam channels, and
//! the write is the sink's, as a worker did it.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::Error;
use crate::meter::Meter;
use crate::sink::Scratch;
use crate::writer::state::job::Job;
use crate::writer::threads::worker::{Latency, complete};

/// A chunk encoded into `scratch` (`n` bytes, as the sink's `stage` left them), waiting
/// to be written as `job`'s.
pub(crate) struct Staged {
    pub(crate) job: Job,
    pub(crate) scratch: Scratch,
    pub(crate) n: usize,
}

/// A worker's ends of the write-behind threads: the pool it takes a scratch from per
/// staged chunk, and the channel it sends the chunk on.
#[derive(Clone)]
pub(crate) struct WriteBehind {
    pool: Receiver<Scratch>,
    returns: Sender<Scratch>,
    staged: Sender<Staged>,
}

impl WriteBehind {
    /// A pool of `scratches` scratches (counted in `meter` once they hold a buffer), the
    /// workers' ends, and the receiving end for the write-behind threads.
    pub(crate) fn new(scratches: usize, meter: &Arc<Meter>) -> (Self, Behind) {
        let (returns, pool) = bounded(scratches.max(1));
        for _ in 0..scratches.max(1) {
            // The channel's capacity holds every scratch.
            let _ = returns.send(Scratch::counted(meter));
        }
        let (staged, rx) = unbounded();
        let behind = Behind {
            staged: rx,
            returns: returns.clone(),
            meter: Arc::clone(meter),
        };
        (
            WriteBehind {
                pool,
                returns,
                staged,
            },
            behind,
        )
    }

    /// A scratch from the pool, waiting while every one holds a chunk not yet written
    /// (the back-pressure of a device that falls behind); `None` once the pool is gone.
    pub(crate) fn take(&self) -> Option<Scratch> {
        self.pool.recv().ok()
    }

    /// Returns an unused scratch to the pool (never waits: the pool has room for all).
    pub(crate) fn put(&self, scratch: Scratch) {
        let _ = self.returns.send(scratch);
    }

    /// Hands a staged chunk to the write-behind threads; gives it back if they are gone.
    pub(crate) fn send(&self, staged: Staged) -> Result<(), Staged> {
        self.staged.send(staged).map_err(|e| e.0)
    }
}

/// The write-behind threads' end: staged chunks in, scratches back to the pool.
#[derive(Clone)]
pub(crate) struct Behind {
    staged: Receiver<Staged>,
    returns: Sender<Scratch>,
    meter: Arc<Meter>,
}

/// A write-behind thread: until every worker is gone, writes each staged chunk through
/// its shard's sink, records where it is, returns the scratch and does the job's
/// bookkeeping (as a worker does after writing a chunk itself).
pub(crate) fn run(behind: Behind, nice: u8) {
    crate::writer::threads::priority::lower_priority(nice);
    let mut latency = Latency::new();
    let mut next: Option<Staged> = None;
    loop {
        let Staged {
            job,
            mut scratch,
            n,
        } = match next.take() {
            Some(s) => s,
            None => match behind.staged.recv() {
                Ok(s) => s,
                Err(_) => break,
            },
        };
        let shared = &*job.link.shared;
        // As in a worker: a panic fails the array, and the bookkeeping still runs.
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if shared.failed() {
                return;
            }
            match job.shard.sink.write_staged(job.slot, &mut scratch, n) {
                Ok((offset, len)) => job.shard.entries.set(job.slot, offset, len),
                Err(e) => shared.fail(e),
            }
        }));
        if let Err(panic) = written {
            shared.fail(Error::panicked("a write-behind thread", panic.as_ref()));
            scratch = Scratch::counted(&behind.meter);
        }
        // Back to the pool before the bookkeeping, so a worker waiting for one goes on.
        let _ = behind.returns.send(scratch);
        complete(job, &mut latency, |array| {
            next = behind.staged.try_recv().ok();
            next.as_ref()
                .is_some_and(|s| Arc::ptr_eq(&s.job.link.shared, array))
        });
    }
    latency.merge();
}
