//! Building pyramid levels 1…L while frames are pushed.
//!
//! Level 1 of a frame is reduced by level 0's encoding workers ([`Reduction`]), each from
//! the tile it is encoding, when tiles can be reduced separately; otherwise (odd tile
//! edges, staged chunks, z pairs) by the pyramid thread. The pyramid thread takes the
//! frames in order, waits for each frame's level 1, reduces the deeper levels in row bands
//! on a small pool of reduction threads, and pushes each level's frames into one internal
//! [`Writer`] per level (own workers, preparer and finisher, so each level's `zarr.json`
//! is published by the same rules as level 0's: never ahead of its data).
//!
//! The pushing thread only takes a level-1 buffer and hands the pooled level-0 buffer
//! over (an `Arc` clone and a channel send); buffers return to their pools when the
//! encoders and this thread are done with them, so the pools bound memory and
//! back-pressure reaches the caller through them.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::grid::Grid;
use super::pool::{Pool, PoolBuf};
use super::shared::{Batch, Shared};
use super::{State, Writer};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::pyramid::{Downsample, Region, reduce, reduce_pair};
use rayon::prelude::*;

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
        self.level1.lock().ok()?.take()
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
        if let Ok(mut level1) = self.reduction.level1.lock()
            && let Some(buf) = level1.as_mut()
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
        let level1 = Reduction::fits(&above.grid, z).then(|| below.frame_pool.clone());
        let (tx, rx) = bounded(capacity.max(1));
        let thread = std::thread::Builder::new()
            .name("zarrstream-pyramid".into())
            .spawn(move || {
                super::priority::lower_priority(nice);
                run(vec![below], above, method, z, &workers, rx)
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

/// What every stage needs to reduce.
struct Ctx<'a> {
    workers: &'a rayon::ThreadPool,
    dtype: DataType,
    method: Downsample,
}

/// Level k's part of the pyramid thread: it turns the planes of level k-1 into its own
/// and pushes them into its writer.
struct Stage {
    writer: Writer,
    /// Height and width of level k-1's planes.
    input_hw: (usize, usize),
    /// Planes per z stack of level k-1 when levels halve z.
    input_z: Option<u64>,
    /// Planes of level k-1 seen so far (dropped ones too).
    seen: u64,
    /// An even z plane waiting for its partner.
    held: Held,
    /// Reused copy of a held plane of level k-1 ≥ 1 (its own buffer is pushed).
    store: Vec<u8>,
}

enum Held {
    Nothing,
    Dropped,
    Frame(Source),
    Copied,
}

/// A plane of level k-1 offered to stage k.
enum Plane<'a> {
    Frame(Source),
    Bytes(&'a [u8]),
}

impl Plane<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Plane::Frame(s) => s.bytes(),
            Plane::Bytes(b) => b,
        }
    }
}

/// A plane of `writer`'s level reduced from one plane of the level above (of height and
/// width `hw`) or from a z pair, in bands on the reduction workers.
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

/// Feeds `stages[0]` one plane of the level above (`None`: dropped there) and passes
/// what it makes on to the stages below.
fn feed(
    stages: &mut [Stage],
    plane: Option<Plane<'_>>,
    scheduled: Instant,
    ctx: &Ctx<'_>,
) -> Result<()> {
    let Some((stage, _)) = stages.split_first_mut() else {
        return Ok(());
    };
    let at = stage.seen;
    stage.seen += 1;
    let made = match stage.input_z {
        // The first plane of a z pair waits for the second (a copy, unless it is a
        // level-0 frame, whose pooled buffer can wait).
        Some(z) if at % z % 2 == 0 && at % z + 1 < z => {
            stage.held = match plane {
                None => Held::Dropped,
                Some(Plane::Frame(f)) => Held::Frame(f),
                Some(Plane::Bytes(b)) => {
                    stage.store.clear();
                    stage.store.extend_from_slice(b);
                    Held::Copied
                }
            };
            return Ok(());
        }
        Some(z) if at % z % 2 == 1 => {
            let held = std::mem::replace(&mut stage.held, Held::Nothing);
            let first: Option<&[u8]> = match &held {
                Held::Frame(f) => Some(f.bytes()),
                Held::Copied => Some(&stage.store),
                Held::Nothing | Held::Dropped => None,
            };
            let (w, hw) = (&mut stage.writer, stage.input_hw);
            match (first, plane) {
                (Some(a), Some(b)) => Some(make(w, hw, a, Some(b.bytes()), ctx)?),
                (Some(a), None) => Some(make(w, hw, a, None, ctx)?),
                (None, Some(b)) => Some(make(w, hw, b.bytes(), None, ctx)?),
                (None, None) => None,
            }
        }
        _ => match plane {
            Some(p) => Some(make(
                &mut stage.writer,
                stage.input_hw,
                p.bytes(),
                None,
                ctx,
            )?),
            None => None,
        },
    };
    emit(stages, made, scheduled, ctx)
}

/// Pushes a plane `stages[0]` made (`None`: its place is empty) and feeds it below.
fn emit(
    stages: &mut [Stage],
    made: Option<PoolBuf>,
    scheduled: Instant,
    ctx: &Ctx<'_>,
) -> Result<()> {
    let Some((stage, below)) = stages.split_first_mut() else {
        return Ok(());
    };
    match made {
        Some(buf) => {
            feed(below, Some(Plane::Bytes(&buf)), scheduled, ctx)?;
            stage.writer.push_buffer(buf, scheduled).map(|_| ())
        }
        None => {
            stage.writer.skip()?;
            feed(below, None, scheduled, ctx)
        }
    }
}

/// At the end of the stream: each level's unpaired z plane is reduced alone.
fn flush(stages: &mut [Stage], scheduled: Instant, ctx: &Ctx<'_>) -> Result<()> {
    for k in 0..stages.len() {
        let stage = &mut stages[k];
        let (w, hw) = (&mut stage.writer, stage.input_hw);
        let made = match std::mem::replace(&mut stage.held, Held::Nothing) {
            Held::Nothing => continue,
            Held::Dropped => None,
            Held::Frame(f) => Some(make(w, hw, f.bytes(), None, ctx)?),
            Held::Copied => Some(make(w, hw, &stage.store, None, ctx)?),
        };
        emit(&mut stages[k..], made, scheduled, ctx)?;
    }
    Ok(())
}

fn run(
    levels: Vec<Writer>,
    level0: Arc<Shared>,
    method: Downsample,
    z: Option<usize>,
    workers: &rayon::ThreadPool,
    rx: Receiver<Msg>,
) -> Result<()> {
    let r = level0.spec.rank();
    let mut input = level0.spec.clone();
    let mut stages = Vec::with_capacity(levels.len());
    for writer in levels {
        let hw = (input.shape[r - 2] as usize, input.shape[r - 1] as usize);
        stages.push(Stage {
            input_hw: hw,
            input_z: z.map(|a| input.shape[a]),
            seen: 0,
            held: Held::Nothing,
            store: Vec::new(),
            writer,
        });
        input = stages[stages.len() - 1].writer.spec().clone();
    }
    let ctx = Ctx {
        workers,
        dtype: level0.spec.dtype,
        method,
    };
    let mut error: Option<Error> = None;
    let mut abort = Some("level 0 stopped".to_string());
    let mut last = Instant::now();
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
                last = scheduled;
                let fed = (0..skips)
                    .try_for_each(|_| feed(&mut stages, None, scheduled, &ctx))
                    .and_then(|()| match src {
                        // Level 1 reduced by the workers: wait for its last tile, and
                        // let the level-0 frame go.
                        Source::Reduced { batch, done } => {
                            let level1 = done
                                .recv()
                                .ok()
                                .and_then(|()| batch.reduction.as_ref()?.take())
                                .ok_or_else(|| Error::Internal("level 1 was not reduced".into()))?;
                            drop(batch);
                            if let Some(s) = stages.first_mut() {
                                s.seen += 1;
                            }
                            emit(&mut stages, Some(level1), scheduled, &ctx)
                        }
                        other => feed(&mut stages, Some(Plane::Frame(other)), scheduled, &ctx),
                    });
                if let Err(e) = fed {
                    level0.fail(Error::Internal(format!("pyramid level failed: {e}")));
                    error = Some(e);
                }
            }
            Msg::End { skips, abort: a } => {
                if error.is_none() {
                    let ended = (0..skips)
                        .try_for_each(|_| feed(&mut stages, None, last, &ctx))
                        .and_then(|()| flush(&mut stages, last, &ctx));
                    if let Err(e) = ended {
                        error = Some(e);
                    }
                }
                abort = a;
                break;
            }
        }
    }
    // Every level finishes what it accepted (its committed shards are published).
    let abort = abort.or_else(|| error.as_ref().map(|e| e.to_string()));
    for stage in stages {
        let r = match &abort {
            None => stage.writer.finish().map(|_| ()),
            Some(reason) => stage.writer.abort(reason.clone()),
        };
        if let Err(e) = r {
            error.get_or_insert(e);
        }
    }
    error.map_or(Ok(()), Err)
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
