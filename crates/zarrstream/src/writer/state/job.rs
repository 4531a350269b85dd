//! The work items of the encoding workers: one inner chunk of a batch of frames.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::tile::ChunkSource;
use crate::writer::pyramid::reduction::Reduction;
use crate::writer::state::grid::Grid;
use crate::writer::state::pool::PoolBuf;
use crate::writer::state::shared::FinisherMsg;
use crate::writer::state::shared::{OpenShard, Shared};

/// What a job's worker needs of its array: the state it shares and where finished
/// shards go. A level holds one `Arc<Link>` and each of its jobs a clone, so the
/// finisher's channel disconnects once the level has let go of it and every job is done.
pub(crate) struct Link {
    pub shared: Arc<Shared>,
    pub finisher: Sender<FinisherMsg>,
}

/// The frames behind a set of chunk jobs: one frame (shallow chunks) or one staged
/// group of frames (deep chunks). Its buffer returns to its pool when the last job drops it.
pub(crate) struct Batch {
    pub buf: PoolBuf,
    pub staged: bool,
    pub remaining: AtomicUsize,
    /// Scheduled (camera) time of each frame in the batch, for frame latency.
    pub times: Vec<Instant>,
    /// Level 1 of the frame, for an OME pyramid whose level 1 the workers reduce.
    pub reduction: Option<Reduction>,
    /// The channel of the batch's (first) frame, for an image's display windows (0
    /// without a channel axis).
    pub channel: usize,
    /// Which frames of a staging group arrived (the others are fill); empty for one frame.
    pub received: Vec<bool>,
}

impl Batch {
    pub(crate) fn source<'a>(&'a self, grid: &Grid, tile: usize) -> ChunkSource<'a> {
        if self.staged {
            let cb = grid.chunk_bytes;
            ChunkSource::contiguous(&self.buf[tile * cb..(tile + 1) * cb], grid.fill)
        } else {
            grid.tile_source(&self.buf, tile)
        }
    }
}

/// One inner chunk to encode.
pub(crate) struct Job {
    pub batch: Arc<Batch>,
    pub tile: usize,
    pub shard: Arc<OpenShard>,
    pub slot: usize,
    /// The array (level) the chunk belongs to.
    pub link: Arc<Link>,
}
