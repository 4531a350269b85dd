//! The pyramid thread: reduces each level-0 frame 2×2 into levels 1…L and pushes the
//! reduced frames into one internal [`Writer`] per level (each with its own workers,
//! preparer and finisher, so each level's `zarr.json` is published by the same rules as
//! level 0's: never ahead of its data).
//!
//! The pushing thread only hands the pooled level-0 buffer over (an `Arc` clone and a
//! channel send); the buffer returns to its pool when both the encoders and this thread
//! are done with it, so the pool bounds memory and back-pressure reaches the caller
//! through it. Each level writer's own pool bounds its reduced frames.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::pool::PoolBuf;
use super::shared::{Batch, Shared};
use super::{State, Writer};
use crate::error::{Error, Result};
use crate::pyramid::{Downsample, reduce};

/// A level-0 frame kept alive for the reduction.
pub(crate) enum Source {
    /// The batch of a frame-deep chunk (its buffer is the frame).
    Batch(Arc<Batch>),
    /// A frame buffer (deep chunks: the frame was also copied into staging).
    Buf(PoolBuf),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Batch(b) => &b.buf,
            Source::Buf(b) => b,
        }
    }
}

enum Msg {
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

/// The pushing thread's handle on the pyramid thread.
pub(crate) struct Pyramid {
    tx: Option<Sender<Msg>>,
    skips: u64,
    thread: Option<JoinHandle<Result<()>>>,
}

impl Pyramid {
    /// Starts the thread over the level writers `levels` (level 1 first); `dims` is
    /// level 0's frame height and width. `capacity` bounds the messages in flight (each
    /// holds a pooled buffer, so the pool's size keeps sends from waiting).
    pub(crate) fn start(
        levels: Vec<Writer>,
        level0: Arc<Shared>,
        method: Downsample,
        capacity: usize,
        nice: u8,
    ) -> Result<Self> {
        let (tx, rx) = bounded(capacity.max(1));
        let thread = std::thread::Builder::new()
            .name("zarrstream-pyramid".into())
            .spawn(move || {
                super::priority::lower_priority(nice);
                run(levels, level0, method, rx)
            })
            .map_err(|e| Error::io("spawn thread", "", e, 0))?;
        Ok(Pyramid {
            tx: Some(tx),
            skips: 0,
            thread: Some(thread),
        })
    }

    /// A level-0 frame was dropped (its place reads as fill in every level).
    pub(crate) fn skip(&mut self) {
        self.skips += 1;
    }

    /// Hands a level-0 frame to the pyramid thread.
    pub(crate) fn frame(&mut self, src: Source, scheduled: Instant) -> Result<()> {
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
    pub(crate) fn end(&mut self, abort: Option<String>) -> Result<()> {
        if let Some(tx) = self.tx.take() {
            let skips = std::mem::take(&mut self.skips);
            let _ = tx.send(Msg::End { skips, abort });
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Internal("the pyramid thread panicked".into())),
            None => Ok(()),
        }
    }
}

fn run(
    mut levels: Vec<Writer>,
    level0: Arc<Shared>,
    method: Downsample,
    rx: Receiver<Msg>,
) -> Result<()> {
    let r = level0.spec.rank();
    let mut dims = vec![(
        level0.spec.shape[r - 2] as usize,
        level0.spec.shape[r - 1] as usize,
    )];
    dims.extend(levels.iter().map(|w| {
        (
            w.spec().shape[r - 2] as usize,
            w.spec().shape[r - 1] as usize,
        )
    }));
    let dtype = level0.spec.dtype;
    let mut error: Option<Error> = None;
    let mut abort = Some("level 0 stopped".to_string());
    for msg in rx.iter() {
        match msg {
            Msg::Frame {
                skips,
                src,
                scheduled,
            } => {
                if error.is_some() || level0.failed() {
                    continue;
                }
                let fed = skip_all(&mut levels, skips).and_then(|()| {
                    let mut prev: Option<PoolBuf> = None;
                    for k in 0..levels.len() {
                        let mut buf = levels[k]
                            .buffer()?
                            .ok_or_else(|| Error::Internal("level pool closed".into()))?;
                        let input: &[u8] = prev.as_deref().unwrap_or_else(|| src.bytes());
                        reduce(dtype, method, input, dims[k].0, dims[k].1, &mut buf);
                        if let Some(p) = prev.take() {
                            levels[k - 1].push_buffer(p, scheduled)?;
                        }
                        prev = Some(buf);
                    }
                    drop(src);
                    if let (Some(p), Some(w)) = (prev, levels.last_mut()) {
                        w.push_buffer(p, scheduled)?;
                    }
                    Ok(())
                });
                if let Err(e) = fed {
                    level0.fail(Error::Internal(format!("pyramid level failed: {e}")));
                    error = Some(e);
                }
            }
            Msg::End { skips, abort: a } => {
                if error.is_none()
                    && let Err(e) = skip_all(&mut levels, skips)
                {
                    error = Some(e);
                }
                abort = a;
                break;
            }
        }
    }
    // Every level finishes what it accepted (its committed shards are published).
    let abort = abort.or_else(|| error.as_ref().map(|e| e.to_string()));
    for w in levels {
        let r = match &abort {
            None => w.finish().map(|_| ()),
            Some(reason) => w.abort(reason.clone()),
        };
        if let Err(e) = r {
            error.get_or_insert(e);
        }
    }
    error.map_or(Ok(()), Err)
}

fn skip_all(levels: &mut [Writer], skips: u64) -> Result<()> {
    for w in levels {
        for _ in 0..skips {
            w.skip()?;
        }
    }
    Ok(())
}

impl Writer {
    /// Finishes an internal level writer as aborted (every frame it accepted is still
    /// written and published, with state `aborted` and `reason`).
    fn abort(mut self, reason: String) -> Result<()> {
        self.check_open()?;
        self.closed = true;
        self.shutdown(State::Aborted, Some(reason));
        self.shared.take_error().map_or(Ok(()), Err)
    }
}
