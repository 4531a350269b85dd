//! The pyramid thread: reduces each level-0 frame 2×2 into levels 1…L and pushes the
//! reduced frames into one internal [`Writer`] per level (each with its own workers,
//! preparer and finisher, so each level's `zarr.json` is published by the same rules as
//! level 0's: never ahead of its data).
//!
//! The pushing thread only hands the pooled level-0 buffer over (an `Arc` clone and a
//! channel send); the buffer returns to its pool when both the encoders and this thread
//! are done with it, so the pool bounds memory and back-pressure reaches the caller
//! through it. Each level writer's own pool bounds its reduced frames.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::grid::Grid;
use super::pool::{Pool, PoolBuf};
use super::shared::{Batch, Shared};
use super::{State, Writer};
use crate::error::{Error, Result};
use crate::pyramid::{Downsample, Region, reduce};

/// A level-0 frame on its way to the pyramid thread.
pub(crate) enum Source {
    /// A frame whose level 1 the encoding workers reduce tile by tile ([`Reduction`]);
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
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Reduced { batch, .. } | Source::Batch(batch) => &batch.buf,
            Source::Buf(b) => b,
        }
    }
}

/// Level 1 of one frame, reduced by the level-0 workers: each reduces the tile it has
/// just encoded, while the tile is still in its cache. Reducing whole frames on a
/// separate thread read every frame from memory a second time and cost as much as the
/// byte shuffle of level 0 (BENCHMARKS.md).
///
/// The tiles of a frame write disjoint rectangles of the level-1 frame, but rectangles
/// are not contiguous, so they are written under a lock (held for one tile's reduction,
/// a small part of its encoding) rather than through `unsafe` aliasing.
pub(crate) struct Reduction {
    method: Downsample,
    level1: Mutex<Option<PoolBuf>>,
    done: Sender<()>,
}

impl Reduction {
    /// Whether the tiles of `grid` can be reduced separately: frame-deep chunks whose
    /// tile edges are even (or one tile spans the axis), so no 2×2 block straddles two
    /// tiles.
    pub(crate) fn fits(grid: &Grid) -> bool {
        let even = |c: usize, n: usize| c.is_multiple_of(2) || c >= n;
        !grid.deep() && even(grid.cy, grid.y) && even(grid.cx, grid.x)
    }

    /// Reduces tile `tile` of `frame` into level 1.
    pub(crate) fn tile(&self, shared: &Shared, frame: &[u8], tile: usize) {
        let g = &shared.grid;
        let (y0, x0) = ((tile / g.tiles_x) * g.cy, (tile % g.tiles_x) * g.cx);
        let (y, x) = (y0..(y0 + g.cy).min(g.y), x0..(x0 + g.cx).min(g.x));
        let region = Region::of_input((g.y, g.x), y, x);
        if let Ok(mut level1) = self.level1.lock()
            && let Some(buf) = level1.as_mut()
        {
            let at = region.offset_in_frame(g.es);
            let dtype = shared.spec.dtype;
            reduce(
                dtype,
                self.method,
                frame,
                (g.y, g.x),
                &region,
                &mut buf[at..],
            );
        }
    }

    /// The frame's last tile is done.
    pub(crate) fn finished(&self) {
        let _ = self.done.try_send(());
    }

    fn take(&self) -> Option<PoolBuf> {
        self.level1.lock().ok()?.take()
    }
}

/// What [`Pyramid::reduction`] gives for the next frame.
pub(crate) enum NextReduction {
    /// The workers reduce level 1; hand `done` over with the batch.
    Fused(Reduction, Receiver<()>),
    /// The pyramid thread reduces the frame.
    Thread,
    /// No level-1 buffer is free (only without waiting): drop the frame.
    Full,
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
    method: Downsample,
    /// Level 1's frame pool, when the level-0 workers reduce level 1.
    level1: Option<Pool>,
}

impl Pyramid {
    /// Starts the thread over the level writers `levels` (level 1 first), with `threads`
    /// reduction workers. `capacity` bounds the messages in flight (each holds a pooled
    /// buffer, so the pool's size keeps sends from waiting).
    pub(crate) fn start(
        levels: Vec<Writer>,
        level0: Arc<Shared>,
        method: Downsample,
        capacity: usize,
        threads: usize,
        nice: u8,
    ) -> Result<Self> {
        let workers = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("zarrstream-reduce-{i}"))
            .start_handler(move |_| super::priority::lower_priority(nice))
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the reduction workers: {e}")))?;
        let level1 = match levels.first() {
            Some(l1) if Reduction::fits(&level0.grid) => Some(l1.frame_pool.clone()),
            _ => None,
        };
        let (tx, rx) = bounded(capacity.max(1));
        let thread = std::thread::Builder::new()
            .name("zarrstream-pyramid".into())
            .spawn(move || {
                super::priority::lower_priority(nice);
                run(levels, level0, method, &workers, rx)
            })
            .map_err(|e| Error::io("spawn thread", "", e, 0))?;
        Ok(Pyramid {
            tx: Some(tx),
            skips: 0,
            thread: Some(thread),
            method,
            level1,
        })
    }

    /// How level 1 of the next frame is made; with fused reduction, takes its buffer
    /// (waiting for one when `wait`).
    pub(crate) fn reduction(&self, wait: bool) -> NextReduction {
        let Some(pool) = &self.level1 else {
            return NextReduction::Thread;
        };
        match pool.get(wait) {
            Some(buf) => {
                let (done, rx) = bounded(1);
                let r = Reduction {
                    method: self.method,
                    level1: Mutex::new(Some(buf)),
                    done,
                };
                NextReduction::Fused(r, rx)
            }
            None => NextReduction::Full,
        }
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
    workers: &rayon::ThreadPool,
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
                    // Level 1 reduced by the workers: wait for its last tile, and let
                    // the level-0 frame go.
                    let (mut prev, src) = match src {
                        Source::Reduced { batch, done } => {
                            let level1 = done
                                .recv()
                                .ok()
                                .and_then(|()| batch.reduction.as_ref()?.take())
                                .ok_or_else(|| Error::Internal("level 1 was not reduced".into()))?;
                            (Some(level1), None)
                        }
                        other => (None, Some(other)),
                    };
                    for k in usize::from(prev.is_some())..levels.len() {
                        let mut buf = levels[k]
                            .buffer()?
                            .ok_or_else(|| Error::Internal("level pool closed".into()))?;
                        let input = match (&prev, &src) {
                            (Some(p), _) => &p[..],
                            (None, Some(s)) => s.bytes(),
                            (None, None) => return Err(Error::Internal("no level input".into())),
                        };
                        reduce_parallel(workers, dtype, method, input, dims[k], &mut buf);
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

/// Output rows per reduction task: 64 rows of a 1024-pixel level are 128 KiB of output
/// from 512 KiB of input, small enough to spread a level over the workers and to stay in
/// their caches, large enough that scheduling costs nothing.
const BAND_ROWS: usize = 64;

/// [`reduce`]s the `hw` frame `src` into `dst` in bands of output rows on `workers`.
fn reduce_parallel(
    workers: &rayon::ThreadPool,
    dtype: crate::dtype::DataType,
    method: Downsample,
    src: &[u8],
    hw: (usize, usize),
    dst: &mut [u8],
) {
    use rayon::prelude::*;
    let band = BAND_ROWS * hw.1.div_ceil(2) * dtype.size();
    workers.install(|| {
        dst.par_chunks_mut(band.max(1))
            .enumerate()
            .for_each(|(b, rows)| {
                let region = Region::band(hw, b * BAND_ROWS, BAND_ROWS);
                reduce(dtype, method, src, hw, &region, rows);
            });
    });
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
