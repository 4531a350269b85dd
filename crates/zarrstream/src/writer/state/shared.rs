//! State shared by the pushing thread, the workers, the preparer and the finisher, and
//! the shards they fill together.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crossbeam_channel::Sender;
use hdrhistogram::Histogram;

use crate::error::{Error, Result};
use crate::metadata::Progress;
use crate::meter::Meter;
use crate::shard::{IndexEntries, Packing, ShardLayout, SlotOrder};
use crate::sink::{SinkKind, SlotSink};
use crate::spec::ArraySpec;
use crate::writer::api::options::Durability;
use crate::writer::pyramid::image::ImageGroup;
use crate::writer::state::grid::Grid;
use crate::writer::state::published::Published;
use crate::writer::state::resume::Start;

pub(crate) struct Shared {
    pub spec: ArraySpec,
    pub grid: Grid,
    pub layout: ShardLayout,
    /// Where each chunk's slot lies, and the order finished shards keep.
    pub order: SlotOrder,
    pub dir: PathBuf,
    pub tmp_dir: PathBuf,
    pub sink: SinkKind,
    pub packing: Packing,
    pub durability: Durability,
    /// Frames whose chunks are all in their slots (in the page cache, so they survive a
    /// crash of this process).
    pub frames_encoded: AtomicU64,
    /// Shards reserved by the preparer and not yet finished (or discarded).
    pub unfinished_shards: Arc<AtomicUsize>,
    /// The attributes and the last extent published: every `zarr.json` goes through it.
    pub published: Published,
    /// From each frame's scheduled time to all its chunks being in their slots: where
    /// the workers' own histograms are merged ([`Shared::merge_frame_latency`]), never
    /// per frame.
    pub frame_latency: Mutex<Histogram<u64>>,
    /// Where this writer starts: frame 0, or after the frames of the array it resumes.
    pub start: Start,
    /// Where the level's buffers count the bytes they hold (shared by the levels of a
    /// writer; an array's own in a recording).
    pub meter: Arc<Meter>,
    /// With an object-store destination: where finished shards are handed to the
    /// uploader.
    pub staging: Option<Arc<crate::remote::Staging>>,
    /// Level 0 of an OME image whose display windows follow the data: the image group,
    /// which samples the frames and is republished with this level's `zarr.json`.
    pub image: OnceLock<Arc<ImageGroup>>,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
}

impl Shared {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        spec: ArraySpec,
        grid: Grid,
        layout: ShardLayout,
        order: SlotOrder,
        dir: PathBuf,
        tmp_dir: PathBuf,
        sink: SinkKind,
        packing: Packing,
        durability: Durability,
        (start, attributes): (Start, serde_json::Map<String, serde_json::Value>),
        meter: Arc<Meter>,
        staging: Option<Arc<crate::remote::Staging>>,
    ) -> Self {
        Shared {
            meter,
            staging,
            published: Published::new(attributes),
            start,
            spec,
            grid,
            layout,
            order,
            dir,
            tmp_dir,
            sink,
            packing,
            durability,
            frames_encoded: AtomicU64::new(0),
            unfinished_shards: Arc::new(AtomicUsize::new(0)),
            frame_latency: Mutex::new(crate::stats::histogram()),
            image: OnceLock::new(),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
        }
    }

    /// Records the first failure of any thread; the pushing thread reports it.
    pub(crate) fn fail(&self, e: Error) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Adds a worker's frame latencies (recorded in its own histogram) to the array's.
    /// Workers merge when they go idle or turn to another array's jobs, and always
    /// before they let go of the array's last job, so the merged histogram is complete
    /// once the finisher has ended (when `finish` reads it).
    pub(crate) fn merge_frame_latency(&self, worker: &Histogram<u64>) {
        // A thread that panicked while merging leaves a histogram still worth keeping.
        let mut h = self
            .frame_latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Both histograms resize themselves, so adding cannot fail on a range.
        let _ = h.add(worker);
    }

    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    pub(crate) fn take_error(&self) -> Option<Error> {
        self.error.lock().ok().and_then(|mut e| e.take())
    }
}

/// A shard being filled. `pending` counts dispatched-but-unwritten chunks plus one token
/// held by the pushing thread until no more chunks can arrive ("sealed"); whoever drops
/// it to zero hands the shard to the finisher, so no lock is needed.
pub(crate) struct OpenShard {
    pub sink: Box<dyn SlotSink>,
    pub entries: IndexEntries,
    pub pending: AtomicUsize,
    pub key: String,
    /// Index of the shard along the append axis.
    pub row: u64,
    _unfinished: Unfinished,
}

/// Counts a shard in [`Shared::unfinished_shards`] until it is finished or discarded.
struct Unfinished(Arc<AtomicUsize>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl OpenShard {
    /// A shard over `sink`, counted in `shared.unfinished_shards` (which the caller
    /// has already incremented) until it is dropped.
    pub(crate) fn new(
        sink: Box<dyn SlotSink>,
        n: usize,
        key: String,
        row: u64,
        shared: &Shared,
    ) -> Self {
        OpenShard {
            sink,
            entries: IndexEntries::new(n),
            pending: AtomicUsize::new(1),
            key,
            row,
            _unfinished: Unfinished(Arc::clone(&shared.unfinished_shards)),
        }
    }

    /// Drops one pending count; the last one sends the shard to the finisher.
    pub(crate) fn release(self: Arc<Self>, finisher: &Sender<FinisherMsg>) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The finisher outlives every sender; if it is gone the writer is shutting
            // down after a failure and the temporary shard is removed on drop.
            let _ = finisher.send(FinisherMsg::Shard(self));
        }
    }
}

/// Messages to the finisher thread.
pub(crate) enum FinisherMsg {
    Shard(Arc<OpenShard>),
    /// Every shard of append-axis row `row` has been sealed; `shards` were opened, and
    /// the row covers the append axis up to `extent0`.
    RowSealed {
        row: u64,
        shards: usize,
        extent0: u64,
        /// The row's frames, written and dropped: what its publication adds to the counts.
        frames: FrameCount,
    },
}

/// Frames written and dropped, counted per append-axis row so that every publication of
/// a row reports exactly the frames it covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FrameCount {
    pub written: u64,
    pub dropped: u64,
}

impl std::ops::AddAssign for FrameCount {
    fn add_assign(&mut self, other: Self) {
        self.written += other.written;
        self.dropped += other.dropped;
    }
}

impl Shared {
    /// Publishes `zarr.json` with the append axis at `extent0` (fixed-size arrays keep
    /// their shape), then the image group's display windows when they changed. The one
    /// way every thread (the finisher mid-run, the caller at start and at the end)
    /// publishes the array's progress.
    pub(crate) fn publish_progress(&self, extent0: u64, progress: &Progress) -> Result<()> {
        let shape0 = if self.spec.shape[0] == 0 {
            extent0
        } else {
            self.spec.shape[0]
        };
        self.published
            .publish(&self.dir, &self.spec, (shape0, extent0), progress)?;
        match self.image.get() {
            Some(image) => image.publish_windows(),
            None => Ok(()),
        }
    }
}
