//! The next pyramid level of a frame, reduced by the workers that encode the frame.
//!
//! When tiles can be reduced separately, the workers that encode a frame of level `k`
//! also reduce it into level `k + 1`, from the rows the encoder has just read; otherwise
//! (odd tile edges, staged chunks, z pairs) the pyramid thread reduces the frame.

use std::sync::Mutex;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::pyramid::{Downsample, Region, reduce};
use crate::writer::state::grid::Grid;
use crate::writer::state::pool::PoolBuf;
use crate::writer::state::shared::Shared;

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
    /// A reduction by `method` into `buf`, a frame buffer of the level below, and the
    /// receiver that [`finished`](Self::finished) fires.
    pub(in crate::writer) fn new(method: Downsample, buf: PoolBuf) -> (Self, Receiver<()>) {
        let (done, rx) = bounded(1);
        let r = Reduction {
            method,
            reduced: Mutex::new(Some(buf)),
            done,
        };
        (r, rx)
    }

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

    /// The reduced frame, once (after [`finished`](Self::finished) fired).
    pub(in crate::writer) fn take(&self) -> Option<PoolBuf> {
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

/// What [`Feed::reduction`](crate::writer::pyramid::feed::Feed::reduction) gives for the next frame.
pub(crate) enum NextReduction {
    /// The workers reduce the frame; hand `done` over with the batch.
    Fused(Reduction, Receiver<()>),
    /// The pyramid thread reduces the frame.
    Thread,
    /// No buffer of the level below is free (only without waiting): drop the frame.
    Full,
}
