//! The writer: accepts frames on the caller's thread and drives the workers, the
//! preparer and the finisher.
//!
//! [`Writer`] is the public face; each array (level 0, and each pyramid level below it)
//! is written by an internal [`Level`](level::Level), whose jobs live in files named for
//! them: `start` (threads, pools, channels), `intake` (checks, buffers, staging),
//! `dispatch` (jobs, shard sets, sealing), `shutdown` (joining and publishing). `chain`
//! links the levels of an OME-Zarr image, `levels` is the pyramid thread between two of
//! them, `feed` the pushing thread's handle on it and `reduction` the share of the next
//! level that the encoding workers make. Below them: `shared` (state every thread sees),
//! `job`, `grid`, `pool`, and the threads `worker`, `preparer` and `finisher`.

mod chain;
mod dispatch;
mod engine;
mod feed;
mod finisher;
mod grid;
mod intake;
mod job;
mod level;
mod levels;
mod options;
mod outcome;
mod pool;
mod preparer;
mod priority;
mod recording;
mod reduction;
mod shared;
mod shutdown;
mod start;
mod worker;
mod writeback;

use std::path::Path;
use std::time::Instant;

pub use options::{Backpressure, Durability, WriterOptions};
pub use outcome::PushOutcome;
pub use pool::PoolBuf;
pub use recording::{ArrayConfig, ArrayId, Recording, RecordingStats};

use self::intake::Frame;
use self::level::Level;
use self::start::Workers;
use crate::dtype::Element;
use crate::error::Result;
use crate::ome::Ome;
use crate::sink::SinkKind;
use crate::spec::ArraySpec;
use crate::stats::Stats;
use crate::store::prepare_dir;

/// Records frames into a sharded Zarr v3 array.
///
/// ```no_run
/// use zarrstream::{ArraySpec, Codec, DataType, Writer, WriterOptions};
/// let spec = ArraySpec::builder()
///     .shape([0, 512, 512])
///     .chunk_shape([1, 256, 256])
///     .shard_shape([16, 512, 512])
///     .dtype(DataType::UInt16)
///     .codec(Codec::blosc_lz4(1))
///     .build()?;
/// let mut writer = Writer::create("run.zarr", spec, WriterOptions::default())?;
/// let frame = vec![0u16; 512 * 512];
/// for _ in 0..100 {
///     // Under the default `Backpressure::Block` every frame is accepted.
///     assert!(writer.push(&frame)?.is_accepted());
/// }
/// let stats = writer.finish()?;
/// assert_eq!(stats.frames_written, 100);
/// # Ok::<(), zarrstream::Error>(())
/// ```
///
/// Dropping a writer without calling [`finish`](Writer::finish) finishes it (every
/// frame accepted so far is written and published) and ignores errors; call `finish` to
/// see them.
pub struct Writer {
    level: Level,
}

impl Writer {
    /// Creates the store at `path` (a directory holding the array), publishes its
    /// `zarr.json` and starts the threads.
    pub fn create(path: impl AsRef<Path>, spec: ArraySpec, options: WriterOptions) -> Result<Self> {
        let dir = path.as_ref().to_path_buf();
        options.validate()?;
        prepare_dir(&dir, options.overwrite)?;
        // A store that could not be set up completely is removed, so a retry (e.g. after
        // freeing space) does not meet a half-made store.
        let level =
            Level::start(dir.clone(), spec, options, false, &Workers::Own).inspect_err(|_| {
                let _ = std::fs::remove_dir_all(&dir);
            })?;
        Ok(Writer { level })
    }

    /// Creates an OME-Zarr 0.5 image at `path`: a group whose `zarr.json` holds
    /// `attributes.ome` (from `ome`, see [`Ome::attributes`]) and the full-resolution
    /// level as a sharded array at `path/0` ([`LEVEL0_PATH`](crate::LEVEL0_PATH)), with
    /// `dimension_names` equal to the axis names (set from the axes when `spec` has
    /// none). Frames are pushed exactly as with [`create`](Self::create).
    ///
    /// The level array is an ordinary zarrstream array: its progress attributes, its
    /// `.zarrstream-partial/` directory and the writer's lock live at `path/0`, so
    /// `zarrstream recover|inspect|verify|compact` are pointed at `path/0`.
    /// `overwrite` refuses an image whose level array a live writer still holds.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zarrstream::{ArraySpec, Ome, Writer, WriterOptions};
    /// let spec = ArraySpec::builder()
    ///     .shape([0, 2, 1024, 1024])
    ///     .chunk_shape([1, 1, 512, 512])
    ///     .shard_shape([32, 1, 1024, 1024])
    ///     .build()?;
    /// let ome = Ome::new()
    ///     .pixel_size(0.65, 0.65)
    ///     .frame_interval(Duration::from_millis(20))
    ///     .channels(["GFP", "mCherry"]);
    /// let mut writer = Writer::create_ome("run.ome.zarr", spec, &ome, WriterOptions::default())?;
    /// let frame = vec![0u16; 1024 * 1024];
    /// for _ in 0..100 {
    ///     let _ = writer.push(&frame)?; // channel 0, channel 1, channel 0, ...
    /// }
    /// writer.finish()?;
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn create_ome(
        path: impl AsRef<Path>,
        spec: ArraySpec,
        ome: &Ome,
        options: WriterOptions,
    ) -> Result<Self> {
        let level = chain::create_image(path.as_ref(), spec, ome, options, &Workers::Own, false)?;
        Ok(Writer { level })
    }

    /// The array specification.
    pub fn spec(&self) -> &ArraySpec {
        &self.level.shared.spec
    }

    /// The sink in use.
    pub fn sink(&self) -> SinkKind {
        self.level.shared.sink
    }

    /// Frames whose chunks are all encoded into their shard slots so far. Those survive
    /// a crash of this process (they are in the page cache) and `zarrstream recover`
    /// restores them from the temporary shards.
    pub fn frames_encoded(&self) -> u64 {
        self.level
            .shared
            .frames_encoded
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Frames offered so far (written + dropped).
    pub fn frames_pushed(&self) -> u64 {
        self.level.next_frame
    }

    /// Pushes one frame (one copy into a pooled buffer). Returns
    /// [`PushOutcome::Dropped`] if the frame was dropped by the [`Backpressure::Drop`]
    /// policy.
    pub fn push<T: Element>(&mut self, frame: &[T]) -> Result<PushOutcome> {
        self.push_at(frame, Instant::now())
    }

    /// Like [`push`](Self::push), with the frame's scheduled camera time, from which
    /// frame latency is measured (open loop: a stall is not hidden).
    pub fn push_at<T: Element>(&mut self, frame: &[T], scheduled: Instant) -> Result<PushOutcome> {
        let bytes = bytemuck::cast_slice(frame);
        self.level
            .push_frame(T::DTYPE, Frame::Borrowed(bytes), scheduled)
    }

    /// Pushes one frame of raw little-endian bytes.
    pub fn push_bytes(&mut self, frame: &[u8], scheduled: Instant) -> Result<PushOutcome> {
        let dtype = self.level.shared.spec.dtype;
        self.level
            .push_frame(dtype, Frame::Borrowed(frame), scheduled)
    }

    /// A frame buffer from the writer's pool, for zero-copy pushes: fill it (e.g. from
    /// the camera driver) and hand it to [`push_buffer`](Self::push_buffer). Waits for a
    /// free buffer under [`Backpressure::Block`]; `None` under `Drop` when none is free.
    pub fn buffer(&mut self) -> Result<Option<PoolBuf>> {
        self.level.buffer()
    }

    /// Pushes a buffer obtained from [`buffer`](Self::buffer) without copying it
    /// (chunks deeper than one frame still copy its rows into staging).
    pub fn push_buffer(&mut self, buf: PoolBuf, scheduled: Instant) -> Result<PushOutcome> {
        self.level.push_buffer(buf, scheduled)
    }

    /// Counts a frame the caller could not push (e.g. no free buffer under `Drop`) as
    /// dropped, keeping its place in the array (it reads as the fill value).
    pub fn skip(&mut self) -> Result<()> {
        self.level.skip()
    }

    /// Flushes partial chunks and shards, waits for every thread and publishes the final
    /// metadata. Returns the statistics, or the first error any thread met.
    pub fn finish(self) -> Result<Stats> {
        self.level.finish()
    }

    /// Stops recording at once, for a caller that gives up (a camera fault, a user's
    /// stop): no further frame is accepted, the frames accepted so far are still written
    /// and published (as by [`finish`](Self::finish)), and `zarr.json` records state
    /// `aborted` with `reason`, so readers can tell the run did not end as planned.
    /// Returns the first error the writer met, as `finish` would.
    pub fn abort(self, reason: impl Into<String>) -> Result<()> {
        self.level.abort(reason)
    }
}
