//! The pyramid thread: a chain of writers, one per level, each fed by a pyramid thread
//! of the level above.
//!
//! The pyramid thread takes the frames of its level in order, waits for each one's
//! reduction (when the encoding workers make it, see `reduction`) or reduces the frame
//! itself, large ones in bands on a shared pool of reduction threads, and pushes it into
//! the writer of the level below (own workers, preparer and finisher, so each level's
//! `zarr.json` is published by the same rules as level 0's: never ahead of its data).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::Receiver;
use rayon::prelude::*;

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::pyramid::{Downsample, Region, reduce, reduce_pair};
use crate::writer::level::Level;
use crate::writer::pyramid::feed::{Feed, Msg, Source};
use crate::writer::pyramid::reduction::Reduction;
use crate::writer::state::pool::PoolBuf;
use crate::writer::state::shared::Shared;

/// What the pyramid thread needs to reduce.
struct Ctx<'a> {
    workers: &'a rayon::ThreadPool,
    dtype: DataType,
    method: Downsample,
}

/// The level below's side of the pyramid thread: it turns the frames of the level above
/// into its own and pushes them into its writer.
struct Stage {
    writer: Level,
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
    writer: &mut Level,
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

/// Starts the pyramid thread that feeds `below`, the next level, from the frames of the
/// level whose state is `above`; `workers` reduce large planes in bands. `capacity`
/// bounds the messages in flight (each holds a pooled buffer, so the pool's size keeps
/// sends from waiting).
pub(in crate::writer) fn spawn(
    below: Level,
    above: Arc<Shared>,
    method: Downsample,
    z: Option<usize>,
    capacity: usize,
    workers: Arc<rayon::ThreadPool>,
    nice: u8,
) -> Result<Feed> {
    let below_pool = Reduction::fits(&above.grid, z).then(|| below.intake.frame_pool.clone());
    Feed::spawn(method, below_pool, capacity, nice, move |rx, failure| {
        run(below, &above, method, z, &workers, &rx, failure)
    })
}

/// Records the level's first error, for the level above to refuse its next frame with.
fn record(failure: &Mutex<Option<Error>>, e: Error) {
    if let Ok(mut f) = failure.lock() {
        f.get_or_insert(e);
    }
}

/// The pyramid thread: feeds the level below until the stream ends, then finishes it
/// (or aborts it, with the reason the level above gave or its own error).
fn run(
    below: Level,
    above: &Shared,
    method: Downsample,
    z: Option<usize>,
    workers: &rayon::ThreadPool,
    rx: &Receiver<Msg>,
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
                if let Err(e) = stage.take(skips, src, scheduled, &ctx) {
                    failed = Some(e.to_string());
                    record(failure, e);
                }
            }
            Msg::End { skips, abort: a } => {
                abort = a;
                if failed.is_none()
                    && let Err(e) = stage.end(skips, last, &ctx)
                {
                    abort.get_or_insert_with(|| e.to_string());
                    record(failure, e);
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

impl Stage {
    /// Takes one frame of the level above, after the `skips` dropped before it.
    fn take(&mut self, skips: u64, src: Source, scheduled: Instant, ctx: &Ctx<'_>) -> Result<()> {
        for _ in 0..skips {
            self.feed(None, scheduled, ctx)?;
        }
        match src {
            // Reduced by the workers above: wait for the last tile, and let the frame
            // above go.
            Source::Reduced { batch, done } => {
                let reduced = done
                    .recv()
                    .ok()
                    .and_then(|()| batch.reduction.as_ref()?.take())
                    .ok_or_else(|| Error::Internal("a level was not reduced".into()))?;
                drop(batch);
                self.seen += 1;
                self.push(Some(reduced), scheduled)
            }
            other => self.feed(Some(other), scheduled, ctx),
        }
    }

    /// The end of the stream: `skips` trailing drops, then an unpaired z plane.
    fn end(&mut self, skips: u64, last: Instant, ctx: &Ctx<'_>) -> Result<()> {
        for _ in 0..skips {
            self.feed(None, last, ctx)?;
        }
        self.flush(last, ctx)
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
