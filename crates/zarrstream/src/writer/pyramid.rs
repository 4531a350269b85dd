//! Building pyramid levels while frames are pushed: a chain of writers, one per level,
//! each fed by a pyramid thread of the level above.
//!
//! When tiles can be reduced separately, the workers that encode a frame of level `k`
//! also reduce it into level `k + 1` ([`Reduction`]), from the rows the encoder has just
//! read; otherwise (odd tile edges, staged chunks, z pairs) the pyramid thread reduces
//! the frame, large ones in bands on a shared pool of reduction threads. The pyramid
//! thread takes the frames in order, waits for each one's reduction, and pushes it into
//! the writer of level `k + 1` (own workers, preparer and finisher, so each level's
//! `zarr.json` is published by the same rules as level 0's: never ahead of its data).
//!
//! The pushing thread only takes a buffer of the level below and hands its pooled buffer
//! over (an `Arc` clone and a channel send); buffers return to their pools when the
//! encoders and the pyramid thread are done with them, so the pools bound memory and
//! back-pressure reaches the caller through them.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::Writer;
use super::grid::Grid;
use super::pool::{Pool, PoolBuf};
use super::shared::{Batch, Shared};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::pyramid::{Downsample, Region, reduce, reduce_pair};
use rayon::prelude::*;

/// A frame of the level above on its way to the pyramid thread.
pub(crate) enum Source {
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
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Reduced { batch, .. } | Source::Batch(batch) => &batch.buf,
            Source::Buf(b) => b,
        }
    }
}

/// The next level of one frame, reduced by the workers that encode the frame, each from
/// the rows of its tile that the encoder has just read ([`TileReduction`]). Reducing
/// whole frames on a separate thread read every frame from memory a second time and cost
/// as much as the byte shuffle of level 0 (BENCHMARKS.md §8).
///
/// The tiles of a frame write disjoint rectangles of the reduced frame, but rectangles
/// are not contiguous, so they are written under a lock (held for one tile's reduction,
/// a small part of its encoding) rather than through `unsafe` aliasing.
pub(crate) struct Reduction {
    method: Downsample,
    reduced: Mutex<Option<PoolBuf>>,
    done: Sender<()>,
}

impl Reduction {
    /// Whether the tiles of `grid` can be reduced separately: frame-deep chunks whose
    /// tile edges are even (or one tile spans the axis), so no 2×2 block straddles two
    /// tiles, and no z reduction (axis `z`), which pairs frames.
    pub(crate) fn fits(grid: &Grid, z: Option<usize>) -> bool {
        let even = |c: usize, n: usize| c.is_multiple_of(2) || c >= n;
        z.is_none() && !grid.deep() && even(grid.cy, grid.y) && even(grid.cx, grid.x)
    }

    /// The reduction of tile `tile` of `frame`, fed as its encoder reads it.
    pub(crate) fn tile<'a>(
        &'a self,
        shared: &'a Shared,
        frame: &'a [u8],
        tile: usize,
    ) -> TileReduction<'a> {
        TileReduction {
            reduction: self,
            shared,
            frame,
            tile,
            done: 0,
        }
    }

    /// The frame's last tile is done.
    pub(crate) fn finished(&self) {
        let _ = self.done.try_send(());
    }

    fn take(&self) -> Option<PoolBuf> {
        self.reduced.lock().ok()?.take()
    }
}

/// One tile's part of a [`Reduction`], reduced in row pairs as the encoder reads them
/// (blosc-lz4 reports each 64 KiB block right after shuffling it, so its rows are still
/// in cache; reducing whole tiles before or after encoding read them from memory again
/// and cost twice as much, see BENCHMARKS.md).
pub(crate) struct TileReduction<'a> {
    reduction: &'a Reduction,
    shared: &'a Shared,
    frame: &'a [u8],
    tile: usize,
    /// Tile rows reduced so far (even, until the end).
    done: usize,
}

impl TileReduction<'_> {
    /// The encoder has read the tile's bytes `..end` (C order): reduce the row pairs
    /// wholly inside.
    pub(crate) fn read_to(&mut self, end: usize) {
        let g = &self.shared.grid;
        let rows = end / (g.cx * g.es).max(1);
        self.rows_to(rows - rows % 2);
    }

    /// Reduces what the encoder did not report (every row, for codecs that report
    /// nothing).
    pub(crate) fn finish(&mut self) {
        self.rows_to(self.shared.grid.cy);
    }

    fn rows_to(&mut self, end: usize) {
        if end <= self.done {
            return;
        }
        let g = &self.shared.grid;
        let (y0, x0) = (
            (self.tile / g.tiles_x) * g.cy,
            (self.tile % g.tiles_x) * g.cx,
        );
        // Tile rows and columns past the array's edge are padding, not pixels.
        let y = (y0 + self.done).min(g.y)..(y0 + end).min(g.y);
        self.done = end;
        if y.is_empty() {
            return;
        }
        let x = x0..(x0 + g.cx).min(g.x);
        let region = Region::of_input((g.y, g.x), y, x);
        if let Ok(mut reduced) = self.reduction.reduced.lock()
            && let Some(buf) = reduced.as_mut()
        {
            let at = region.offset_in_frame(g.es);
            let (dtype, method) = (self.shared.spec.dtype, self.reduction.method);
            reduce(
                dtype,
                method,
                self.frame,
                (g.y, g.x),
                &region,
                &mut buf[at..],
            );
        }
    }
}

/// What [`Pyramid::reduction`] gives for the next frame.
pub(crate) enum NextReduction {
    /// The workers reduce the frame; hand `done` over with the batch.
    Fused(Reduction, Receiver<()>),
    /// The pyramid thread reduces the frame.
    Thread,
    /// No buffer of the level below is free (only without waiting): drop the frame.
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
    /// The frame pool of the level below, when this level's workers reduce into it.
    below_pool: Option<Pool>,
    /// The error that stopped the level below, for the level above to refuse its next
    /// frame with (as it refuses one when its own disk is full), so that what it has
    /// accepted is still finished and published.
    failure: Arc<Mutex<Option<Error>>>,
}

impl Pyramid {
    /// Starts the thread that feeds `below`, the next level, from the frames of the
    /// writer whose state is `above`; `workers` reduce large planes in bands. `capacity`
    /// bounds the messages in flight (each holds a pooled buffer, so the pool's size
    /// keeps sends from waiting).
    pub(crate) fn start(
        below: Writer,
        above: Arc<Shared>,
        method: Downsample,
        z: Option<usize>,
        capacity: usize,
        workers: Arc<rayon::ThreadPool>,
        nice: u8,
    ) -> Result<Self> {
        let below_pool = Reduction::fits(&above.grid, z).then(|| below.frame_pool.clone());
        let (tx, rx) = bounded(capacity.max(1));
        let failure = Arc::new(Mutex::new(None));
        let failed = Arc::clone(&failure);
        let thread = std::thread::Builder::new()
            .name("zarrstream-pyramid".into())
            .spawn(move || {
                super::priority::lower_priority(nice);
                run(below, above, method, z, &workers, rx, &failed)
            })
            .map_err(|e| Error::io("spawn thread", "", e, 0))?;
        Ok(Pyramid {
            tx: Some(tx),
            skips: 0,
            thread: Some(thread),
            method,
            below_pool,
            failure,
        })
    }

    /// The error that stopped the level below, once.
    pub(crate) fn take_failure(&self) -> Option<Error> {
        self.failure.lock().ok()?.take()
    }

    /// How the next frame is reduced; when the workers do it, takes its buffer
    /// (waiting for one when `wait`).
    pub(crate) fn reduction(&self, wait: bool) -> NextReduction {
        let Some(pool) = &self.below_pool else {
            return NextReduction::Thread;
        };
        match pool.get(wait) {
            Some(buf) => {
                let (done, rx) = bounded(1);
                let r = Reduction {
                    method: self.method,
                    reduced: Mutex::new(Some(buf)),
                    done,
                };
                NextReduction::Fused(r, rx)
            }
            None => NextReduction::Full,
        }
    }

    /// A frame was dropped (its place reads as fill in every level below).
    pub(crate) fn skip(&mut self) {
        self.skips += 1;
    }

    /// Hands a frame to the pyramid thread.
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
        let ended = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(p)) => Err(Error::panicked("the pyramid thread", p.as_ref())),
            None => Ok(()),
        };
        self.take_failure().map_or(ended, Err)
    }
}

/// What the pyramid thread needs to reduce.
struct Ctx<'a> {
    workers: &'a rayon::ThreadPool,
    dtype: DataType,
    method: Downsample,
}

/// The level below's side of the pyramid thread: it turns the frames of the level above
/// into its own and pushes them into its writer.
struct Stage {
    writer: Writer,
    /// Height and width of the frames above.
    input_hw: (usize, usize),
    /// Planes per z stack above when levels halve z.
    input_z: Option<u64>,
    /// Frames above seen so far (dropped ones too).
    seen: u64,
    /// An even z plane waiting for its partner: `Some(None)` if it was dropped.
    held: Option<Option<Source>>,
}

impl Stage {
    /// Takes one frame of the level above (`None`: dropped there) and pushes what it
    /// makes: nothing yet (the first plane of a z pair waits for the second), or one
    /// frame of this level (an empty place, if every input was dropped).
    fn feed(&mut self, frame: Option<Source>, scheduled: Instant, ctx: &Ctx<'_>) -> Result<()> {
        let at = self.seen;
        self.seen += 1;
        let (w, hw) = (&mut self.writer, self.input_hw);
        let made = match self.input_z.map(|z| (at % z, z)) {
            Some((i, z)) if i.is_multiple_of(2) && i + 1 < z => {
                self.held = Some(frame);
                return Ok(());
            }
            Some((i, _)) if !i.is_multiple_of(2) => match (self.held.take().flatten(), frame) {
                (Some(a), Some(b)) => Some(make(w, hw, a.bytes(), Some(b.bytes()), ctx)?),
                (Some(a), None) | (None, Some(a)) => Some(make(w, hw, a.bytes(), None, ctx)?),
                (None, None) => None,
            },
            _ => match frame {
                Some(f) => Some(make(w, hw, f.bytes(), None, ctx)?),
                None => None,
            },
        };
        self.push(made, scheduled)
    }

    /// Pushes a frame of this level (`None`: its place stays empty).
    fn push(&mut self, made: Option<PoolBuf>, scheduled: Instant) -> Result<()> {
        match made {
            Some(buf) => self.writer.push_buffer(buf, scheduled).map(|_| ()),
            None => self.writer.skip(),
        }
    }

    /// At the end of the stream: an unpaired z plane is reduced alone.
    fn flush(&mut self, scheduled: Instant, ctx: &Ctx<'_>) -> Result<()> {
        let made = match self.held.take() {
            None => return Ok(()),
            Some(None) => None,
            Some(Some(f)) => Some(make(&mut self.writer, self.input_hw, f.bytes(), None, ctx)?),
        };
        self.push(made, scheduled)
    }
}

/// A frame of `writer`'s level reduced from one frame of the level above (of height
/// and width `hw`) or from a z pair; large ones in bands on the reduction workers.
fn make(
    writer: &mut Writer,
    hw: (usize, usize),
    a: &[u8],
    b: Option<&[u8]>,
    ctx: &Ctx<'_>,
) -> Result<PoolBuf> {
    let mut buf = writer
        .buffer()?
        .ok_or_else(|| Error::Internal("level pool closed".into()))?;
    let (dtype, method) = (ctx.dtype, ctx.method);
    let band = BAND_ROWS * hw.1.div_ceil(2) * dtype.size();
    let reduce_band = |(i, rows): (usize, &mut [u8])| {
        let region = Region::band(hw, i * BAND_ROWS, BAND_ROWS);
        match b {
            None => reduce(dtype, method, a, hw, &region, rows),
            Some(b) => reduce_pair(dtype, method, (a, b), hw, &region, rows),
        }
    };
    if a.len() < PARALLEL_BYTES && b.is_none() {
        buf.chunks_mut(band.max(1))
            .enumerate()
            .for_each(reduce_band);
    } else {
        ctx.workers.install(|| {
            buf.par_chunks_mut(band.max(1))
                .enumerate()
                .for_each(reduce_band)
        });
    }
    Ok(buf)
}

fn run(
    below: Writer,
    above: Arc<Shared>,
    method: Downsample,
    z: Option<usize>,
    workers: &rayon::ThreadPool,
    rx: Receiver<Msg>,
    failure: &Mutex<Option<Error>>,
) -> Result<()> {
    let (spec, r) = (&above.spec, above.spec.rank());
    let mut stage = Stage {
        writer: below,
        input_hw: (spec.shape[r - 2] as usize, spec.shape[r - 1] as usize),
        input_z: z.map(|a| spec.shape[a]),
        seen: 0,
        held: None,
    };
    let ctx = Ctx {
        workers,
        dtype: spec.dtype,
        method,
    };
    // Why this level stopped early (its error went to `failure`).
    let mut failed: Option<String> = None;
    let mut abort = Some("the level above stopped".to_string());
    let mut last = Instant::now();
    for msg in rx.iter() {
        match msg {
            Msg::Frame {
                skips,
                src,
                scheduled,
            } => {
                if failed.is_some() || above.failed() {
                    continue;
                }
                last = scheduled;
                let fed = (0..skips)
                    .try_for_each(|_| stage.feed(None, scheduled, &ctx))
                    .and_then(|()| match src {
                        // Reduced by the workers above: wait for the last tile, and let
                        // the frame above go.
                        Source::Reduced { batch, done } => {
                            let reduced = done
                                .recv()
                                .ok()
                                .and_then(|()| batch.reduction.as_ref()?.take())
                                .ok_or_else(|| Error::Internal("a level was not reduced".into()))?;
                            drop(batch);
                            stage.seen += 1;
                            stage.push(Some(reduced), scheduled)
                        }
                        other => stage.feed(Some(other), scheduled, &ctx),
                    });
                if let Err(e) = fed {
                    failed = Some(e.to_string());
                    if let Ok(mut f) = failure.lock() {
                        f.get_or_insert(e);
                    }
                }
            }
            Msg::End { skips, abort: a } => {
                abort = a;
                if failed.is_none() {
                    let ended = (0..skips)
                        .try_for_each(|_| stage.feed(None, last, &ctx))
                        .and_then(|()| stage.flush(last, &ctx));
                    if let Err(e) = ended {
                        abort.get_or_insert_with(|| e.to_string());
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(e);
                        }
                    }
                }
                break;
            }
        }
    }
    // The level finishes what it accepted (its committed shards are published).
    match abort.or(failed) {
        None => stage.writer.finish().map(|_| ()),
        Some(reason) => stage.writer.abort(reason),
    }
}

/// Input planes smaller than this are reduced on the pyramid thread itself: waking the
/// pool for levels 2 and 3 of 2048² `uint16` frames (inputs of 2 and 0.5 MiB) nearly
/// doubled the context switches of a 4-level recording (about 23,500 against 13,500
/// for 512 frames, `perf stat`) for no gain in throughput.
const PARALLEL_BYTES: usize = 4 << 20;

/// Output rows per reduction task: 64 rows of a 1024-pixel level are 128 KiB of output
/// from 512 KiB of input, small enough to spread a level over the workers and to stay in
/// their caches, large enough that scheduling costs nothing.
const BAND_ROWS: usize = 64;
