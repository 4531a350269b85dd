//! The pushing thread's side of the pyramid: it hands each frame of its level (or the
//! news that it was dropped) to the pyramid thread that makes the level below.
//!
//! The pushing thread only takes a buffer of the level below and hands its pooled buffer
//! over (an `Arc` clone and a channel send); buffers return to their pools when the
//! encoders and the pyramid thread are done with them, so the pools bound memory and
//! back-pressure reaches the caller through them.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::error::{Error, Result};
use crate::pyramid::Downsample;
use crate::writer::pyramid::reduction::{NextReduction, Reduction};
use crate::writer::state::job::Batch;
use crate::writer::state::pool::{Pool, PoolBuf};
use crate::writer::threads::priority;

/// A frame of the level above on its way to the pyramid thread.
pub(in crate::writer) enum Source {
    /// A frame the encoding workers reduce tile by tile ([`Reduction`]);
    /// `done` fires when the last tile is in.
    Reduced {
        batch: Arc<Batch>,
        done: Receiver<()>,
    },
    /// The batch of a frame-deep chunk whose tiles cannot be reduced separately (an odd
    /// tile edge): the pyramid thread reduces the frame.
    Batch(Arc<Batch>),
    /// A frame buffer (deep chunks: the frame was also copied into staging).
    Buf(PoolBuf),
}

impl Source {
    /// The frame's bytes.
    pub(in crate::writer) fn bytes(&self) -> &[u8] {
        match self {
            Source::Reduced { batch, .. } | Source::Batch(batch) => &batch.buf,
            Source::Buf(b) => b,
        }
    }
}

/// What the pushing thread tells the pyramid thread.
pub(in crate::writer) enum Msg {
    /// `skips` frames were dropped before this one.
    Frame {
        skips: u64,
        src: Source,
        scheduled: Instant,
    },
    /// No more frames: `skips` trailing drops; finish the levels, or abort them with a
    /// reason.
    End { skips: u64, abort: Option<String> },
}

/// The pushing thread's handle on the pyramid thread that feeds the level below.
pub(in crate::writer) struct Feed {
    tx: Option<Sender<Msg>>,
    skips: u64,
    thread: Option<JoinHandle<Result<()>>>,
    method: Downsample,
    /// The frame pool of the level below, when this level's workers reduce into it.
    below_pool: Option<Pool>,
    /// The error that stopped the level below, for the level above to refuse its next
    /// frame with (as it refuses one when its own disk is full), so that what it has
    /// accepted is still finished and published.
    failure: Arc<Mutex<Option<Error>>>,
}

impl Feed {
    /// Starts the pyramid thread, which runs `body` on the messages this handle sends
    /// (`capacity` bounds those in flight: each holds a pooled buffer, so the pool's size
    /// keeps sends from waiting) and records the level below's error in the failure it
    /// is given. `below_pool` is the frame pool of the level below when this level's
    /// workers reduce into it.
    pub(in crate::writer) fn spawn<F>(
        method: Downsample,
        below_pool: Option<Pool>,
        capacity: usize,
        nice: u8,
        body: F,
    ) -> Result<Self>
    where
        F: FnOnce(Receiver<Msg>, &Mutex<Option<Error>>) -> Result<()> + Send + 'static,
    {
        let (tx, rx) = bounded(capacity.max(1));
        let failure = Arc::new(Mutex::new(None));
        let failed = Arc::clone(&failure);
        let thread = std::thread::Builder::new()
            .name("zarrstream-pyramid".into())
            .spawn(move || {
                priority::lower_priority(nice);
                body(rx, &failed)
            })
            .map_err(|e| Error::io("spawn thread", "", e, 0))?;
        Ok(Feed {
            tx: Some(tx),
            skips: 0,
            thread: Some(thread),
            method,
            below_pool,
            failure,
        })
    }

    /// The error that stopped the level below, once.
    pub(in crate::writer) fn take_failure(&self) -> Option<Error> {
        self.failure.lock().ok()?.take()
    }

    /// How the next frame is reduced; when the workers do it, takes its buffer
    /// (waiting for one when `wait`).
    pub(in crate::writer) fn reduction(&self, wait: bool) -> NextReduction {
        let Some(pool) = &self.below_pool else {
            return NextReduction::Thread;
        };
        match pool.get(wait) {
            Some(buf) => {
                let (r, done) = Reduction::new(self.method, buf);
                NextReduction::Fused(r, done)
            }
            None => NextReduction::Full,
        }
    }

    /// A frame was dropped (its place reads as fill in every level below).
    pub(in crate::writer) fn skip(&mut self) {
        self.skips += 1;
    }

    /// Hands a frame to the pyramid thread.
    pub(in crate::writer) fn frame(&mut self, src: Source, scheduled: Instant) -> Result<()> {
        let tx = self.tx.as_ref().ok_or(Error::Closed)?;
        let skips = std::mem::take(&mut self.skips);
        tx.send(Msg::Frame {
            skips,
            src,
            scheduled,
        })
        .map_err(|_| Error::Internal("pyramid thread stopped".into()))
    }

    /// Ends the stream, waits for every level to be finished (or aborted with `abort`)
    /// and returns the first error of a level.
    pub(in crate::writer) fn end(&mut self, abort: Option<String>) -> Result<()> {
        if let Some(tx) = self.tx.take() {
            let skips = std::mem::take(&mut self.skips);
            let _ = tx.send(Msg::End { skips, abort });
        }
        let ended = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(p)) => Err(Error::panicked("the pyramid thread", p.as_ref())),
            None => Ok(()),
        };
        self.take_failure().map_or(ended, Err)
    }
}
