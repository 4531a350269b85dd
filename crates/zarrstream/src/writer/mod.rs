//! The writer: accepts frames on the caller's thread and drives the workers, the
//! preparer and the finisher.
//!
//! [`Writer`] is the public face. The rest is in five folders, by job:
//! - `api/`: what users see besides `Writer`: `recording` ([`Recording`]), `options`,
//!   `outcome`, `memory` (the estimate), `order` (the acquisition order);
//! - `level/`: the internal writer of one array, [`Level`](level::Level) (level 0, and
//!   each pyramid level below it), and its stages: `start` (threads, pools, channels),
//!   `intake` (checks, buffers, staging), `placement` (frames by index), `dispatch`
//!   (jobs, shard sets, sealing), `shutdown` (joining and publishing);
//! - `threads/`: the encoding `engine` and its `worker`s, the `preparer`, the
//!   `finisher`, `writeback` and `priority`;
//! - `pyramid/`: `chain` links the levels of an OME-Zarr image, `thread` is the pyramid
//!   thread between two of them, `feed` the pushing thread's handle on it, `reduction`
//!   the share of the next level that the encoding workers make, `image` the image
//!   group's document;
//! - `state/`: what the threads of one array share: `shared`, `published`, `grid`,
//!   `job`, `pool`, `resume`, `destination`.

mod api;
mod level;
mod pyramid;
mod state;
mod threads;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub use api::array::{ArrayConfig, ArrayId};
pub use api::memory::{MemoryEstimate, estimate_memory, estimate_memory_ome};
pub use api::options::{Backpressure, Durability, WriterOptions};
pub use api::order::AcquisitionOrder;
pub use api::outcome::PushOutcome;
pub use api::recording::{ArrayWriter, Recording, RecordingStats};
pub use level::placement::WINDOW_ROWS;
pub use state::pool::PoolBuf;

use self::level::Level;
use self::level::intake::Frame;
use self::level::start::Workers;
use self::pyramid::image::ImageGroup;
use self::state::destination::Destination;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::frame_meta::{self, FrameMeta, FrameMetaSpec, MetaRows, Row};
use crate::meter::{MemoryUsage, Meter};
use crate::ome::Ome;
use crate::remote::Mirror;
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
    /// The image group of [`create_ome`](Self::create_ome); `None` for a plain array.
    image: Option<Arc<ImageGroup>>,
    /// Per-frame metadata rows, sent for every frame when the options ask for them.
    meta: Option<MetaRows>,
    /// Where the buffers of every level (and of the encoding workers of a writer that
    /// has its own) count the bytes they hold.
    meter: Arc<Meter>,
    /// With an object-store destination, the uploader of the staging directory
    /// (dropped after `level`, so a dropped writer finishes before it uploads the rest).
    mirror: Option<Mirror>,
}

impl Writer {
    /// Sets up per-frame metadata under the level-0 array when `spec` asks for it.
    fn with_frame_meta(
        level: Level,
        spec: Option<&FrameMetaSpec>,
    ) -> Result<(Level, Option<MetaRows>)> {
        let Some(spec) = spec else {
            return Ok((level, None));
        };
        // A resumed array's metadata was checked against `spec` before it was opened.
        let resumed = level.shared.start.store.is_some();
        let start = resumed.then_some(level.shared.start.frame);
        let (rows, store) = frame_meta::open(&level.shared.dir, spec, start)?;
        level.shared.published.attach_frame_meta(store);
        Ok((level, Some(rows)))
    }

    /// The writer of a started level (and its image group, if any), with per-frame
    /// metadata when `meta` asks for it.
    fn from_level(
        level: Level,
        image: Option<Arc<ImageGroup>>,
        meta: Option<&FrameMetaSpec>,
    ) -> Result<Self> {
        let meter = Arc::clone(&level.shared.meter);
        let (level, meta) = Self::with_frame_meta(level, meta)?;
        Ok(Writer {
            level,
            image,
            meta,
            meter,
            mirror: None,
        })
    }

    /// Sends the row of a frame the writer took (accepted or dropped).
    fn sent<T>(&self, pushed: Result<T>, row: impl FnOnce(&MetaRows) -> Row) -> Result<T> {
        if let (Ok(_), Some(rows)) = (&pushed, &self.meta) {
            rows.send(row(rows));
        }
        pushed
    }
    /// Creates the store at `path` (a directory holding the array), publishes its
    /// `zarr.json` and starts the threads.
    pub fn create(
        path: impl AsRef<Path>,
        mut spec: ArraySpec,
        mut options: WriterOptions,
    ) -> Result<Self> {
        options.validate()?;
        let destination = Destination::open(path.as_ref(), &mut options, Some(&mut spec))?;
        let dir = destination.dir.clone();
        let resume = options.resume;
        if !resume {
            prepare_dir(&dir, options.overwrite)?;
        }
        let meta = options.frame_meta.clone();
        let meter = Meter::new();
        let workers = Workers::Own {
            meter: Arc::clone(&meter),
        };
        // A store that could not be set up completely is removed, so a retry (e.g. after
        // freeing space) does not meet a half-made store; a resumed one is never removed.
        let (level, meta) = Level::start(dir.clone(), spec, options, false, &workers)
            .and_then(|level| Self::with_frame_meta(level, meta.as_ref()))
            .inspect_err(|_| {
                if !resume {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            })?;
        destination.started()?;
        Ok(Writer {
            level,
            image: None,
            meta,
            meter,
            mirror: destination.mirror,
        })
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
        mut options: WriterOptions,
    ) -> Result<Self> {
        options.validate()?;
        let destination = Destination::open(path.as_ref(), &mut options, None)?;
        let root = destination.dir.clone();
        let meta = options.frame_meta.clone();
        let meter = Meter::new();
        let workers = Workers::Own {
            meter: Arc::clone(&meter),
        };
        let (level, image) =
            pyramid::chain::create_image(&root, spec, ome, options, &workers, false)?;
        let (level, meta) = Self::with_frame_meta(level, meta.as_ref())?;
        destination.started()?;
        Ok(Writer {
            level,
            image: Some(image),
            meta,
            meter,
            mirror: destination.mirror,
        })
    }

    /// With an object-store destination, whether the staging budget takes another
    /// frame: waits under [`Backpressure::Block`], `false` under `Drop` (the frame is
    /// dropped and counted); the uploader's failure is an error.
    fn admitted(&self) -> Result<bool> {
        // The gate, not the mirror: a recording's arrays share their recording's.
        match &self.level.shared.staging {
            None => Ok(true),
            Some(gate) => gate.admit(self.level.intake.backpressure == Backpressure::Block),
        }
    }

    /// Drops a frame the staging budget did not admit (its place reads as fill).
    fn refused(&mut self) -> Result<PushOutcome> {
        self.skip()?;
        Ok(PushOutcome::Dropped)
    }

    /// Drops an indexed frame the staging budget did not admit (its place reads as fill).
    fn refused_at(&mut self, index: &[u64]) -> Result<PushOutcome> {
        self.skip_frame(index)?;
        Ok(PushOutcome::Dropped)
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
    /// restores them from the temporary shards. A count, not a prefix: workers complete
    /// frames out of order, so frame 13 may still be in flight when this reads 14.
    pub fn frames_encoded(&self) -> u64 {
        self.level
            .shared
            .frames_encoded
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Frames offered so far (written + dropped).
    pub fn frames_pushed(&self) -> u64 {
        self.level.counters.next_frame
    }

    /// The bytes the writer's own buffers hold now, and at most so far: frame pool,
    /// staging, the encoding workers' scratch and encoders, mapped shard pages, and the
    /// same of every pyramid level. Counted where the buffers are allocated and freed
    /// (no reading of `/proc`); [`estimate_memory`](crate::estimate_memory) bounds it
    /// before the writer exists. [`Stats::memory`] has the figures at the end.
    ///
    /// ```no_run
    /// # let writer: zarrstream::Writer = unimplemented!();
    /// let m = writer.memory_in_use();
    /// println!("{:.1} MiB now, {:.1} MiB at most", m.current as f64 / 1048576.0, m.peak as f64 / 1048576.0);
    /// ```
    pub fn memory_in_use(&self) -> MemoryUsage {
        self.meter.usage()
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
        if !self.admitted()? {
            return self.refused();
        }
        let bytes = bytemuck::cast_slice(frame);
        let pushed = self
            .level
            .push_frame(T::DTYPE, Frame::Borrowed(bytes), scheduled);
        self.sent(pushed, MetaRows::empty)
    }

    /// Pushes one frame of raw little-endian bytes.
    pub fn push_bytes(&mut self, frame: &[u8], scheduled: Instant) -> Result<PushOutcome> {
        if !self.admitted()? {
            return self.refused();
        }
        let dtype = self.level.shared.spec.dtype;
        let pushed = self
            .level
            .push_frame(dtype, Frame::Borrowed(frame), scheduled);
        self.sent(pushed, MetaRows::empty)
    }

    /// Pushes one frame of raw little-endian bytes with its metadata (the options'
    /// [`frame_meta`](WriterOptions::frame_meta)): the values are checked first, so a
    /// frame whose metadata does not fit is refused with [`Error::FrameMeta`] and not
    /// pushed; otherwise both are stored (a dropped frame keeps its metadata, aligned).
    /// Without `frame_meta` in the options, any value is an error.
    ///
    /// ```no_run
    /// use std::time::Instant;
    /// use zarrstream::{FrameMeta, FrameMetaSpec, MetaType, Writer, WriterOptions};
    /// # fn run(spec: zarrstream::ArraySpec, frame: &[u8]) -> zarrstream::Result<()> {
    /// let options = WriterOptions::default().frame_meta(
    ///     FrameMetaSpec::new().field("timestamp", MetaType::Float64).json(true),
    /// );
    /// let mut writer = Writer::create("run.zarr", spec, options)?;
    /// let meta = FrameMeta::new()
    ///     .value("timestamp", 0.020)
    ///     .with_json(serde_json::json!({"laser": "488"}));
    /// writer.push_with(frame, Instant::now(), &meta)?;
    /// writer.finish()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn push_with(
        &mut self,
        frame: &[u8],
        scheduled: Instant,
        meta: &FrameMeta,
    ) -> Result<PushOutcome> {
        let row = match &self.meta {
            Some(rows) => rows.row(meta)?,
            None => {
                return Err(Error::FrameMeta {
                    field: "(any)".into(),
                    reason: "this writer was created without frame_meta in its options".into(),
                });
            }
        };
        if !self.admitted()? {
            let skipped = self.level.skip().map(|()| PushOutcome::Dropped);
            return self.sent(skipped, |_| row);
        }
        let dtype = self.level.shared.spec.dtype;
        let pushed = self
            .level
            .push_frame(dtype, Frame::Borrowed(frame), scheduled);
        self.sent(pushed, |_| row)
    }

    /// Writes one frame at `index`, its coordinates on the leading axes (every axis but
    /// `y, x`), in any order: a chunk is encoded as soon as all its frames are in, a
    /// shard finished (index, rename, `zarr.json`) as soon as all its chunks are, and
    /// [`finish`](Self::finish) finishes the rest, with empty entries (read as the fill
    /// value) for frames that never came.
    ///
    /// A writer takes either appended frames ([`push`](Self::push)) or frames written
    /// by index, not both. Where frames come in an order other than storage order,
    /// declare it up front ([`WriterOptions::acquisition_order`]): shard files are then
    /// prepared in the order the acquisition reaches them, and the shards and staging
    /// groups it keeps open at once are sized (and budgeted) for it. An undeclared order
    /// may stray from storage order only as far as appending keeps shards open
    /// ([`Error::WorkingSet`] beyond that).
    ///
    /// An unbounded axis 0 (`shape[0] == 0`) takes indices within a window of
    /// [`WINDOW_ROWS`](crate::WINDOW_ROWS) rows of shard sets along it: the lowest row
    /// not yet complete and the next one.
    ///
    /// Refused with [`Error::FrameIndex`], the frame not taken and nothing written
    /// touched: an index of the wrong rank, a coordinate out of bounds or outside the
    /// window, an index written before, a writer appended to, and images with pyramid
    /// levels or writers with frame metadata (both take appended frames only).
    ///
    /// ```no_run
    /// use zarrstream::{AcquisitionOrder, ArraySpec, Writer, WriterOptions};
    /// // t, c, y, x acquired channel-first: every time point of channel 0, then channel 1.
    /// let spec = ArraySpec::builder()
    ///     .shape([100, 2, 512, 512])
    ///     .chunk_shape([1, 1, 256, 256])
    ///     .shard_shape([10, 1, 512, 512])
    ///     .build()?;
    /// let options = WriterOptions::default().acquisition_order(AcquisitionOrder::new([1, 0]));
    /// let mut writer = Writer::create("run.zarr", spec, options)?;
    /// let frame = vec![0u16; 512 * 512];
    /// for c in 0..2 {
    ///     for t in 0..100 {
    ///         writer.write_frame(&[t, c], &frame)?;
    ///     }
    /// }
    /// writer.finish()?;
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn write_frame<T: Element>(&mut self, index: &[u64], frame: &[T]) -> Result<PushOutcome> {
        let bytes = bytemuck::cast_slice(frame);
        self.write_frame_with(index, T::DTYPE, Frame::Borrowed(bytes), Instant::now())
    }

    /// Marks the frame at `index` as one that will not come (its place reads as the fill
    /// value), so that the chunks and shards waiting for it can be finished now rather
    /// than at [`finish`](Self::finish); counted as dropped. The index is checked as
    /// [`write_frame`](Self::write_frame) checks it.
    pub fn skip_frame(&mut self, index: &[u64]) -> Result<()> {
        self.check_no_meta(index)?;
        let dtype = self.level.shared.spec.dtype;
        let at = self.grid_index(index)?;
        self.level
            .write_frame_at(&at, dtype, Frame::Skipped, Instant::now())
            .map(|_| ())
            .map_err(|e| visible_index(e, index))
    }

    /// Like [`write_frame`](Self::write_frame), with raw little-endian bytes and the
    /// frame's scheduled camera time (from which frame latency is measured).
    pub fn write_frame_bytes(
        &mut self,
        index: &[u64],
        frame: &[u8],
        scheduled: Instant,
    ) -> Result<PushOutcome> {
        let dtype = self.level.shared.spec.dtype;
        self.write_frame_with(index, dtype, Frame::Borrowed(frame), scheduled)
    }

    /// Like [`write_frame`](Self::write_frame), with a buffer from
    /// [`buffer`](Self::buffer), moved in without a copy.
    pub fn write_frame_buffer(
        &mut self,
        index: &[u64],
        buf: PoolBuf,
        scheduled: Instant,
    ) -> Result<PushOutcome> {
        let dtype = self.level.shared.spec.dtype;
        self.write_frame_with(index, dtype, Frame::Owned(buf), scheduled)
    }

    /// Frame metadata rows follow the appended frames: a writer with them is not
    /// written by index.
    fn check_no_meta(&self, index: &[u64]) -> Result<()> {
        if self.meta.is_some() {
            return Err(Error::FrameIndex {
                index: index.to_vec(),
                problem: crate::FrameIndexError::Unsupported(
                    "frame metadata (its rows follow the appended frames)",
                ),
            });
        }
        Ok(())
    }

    fn write_frame_with(
        &mut self,
        index: &[u64],
        dtype: crate::DataType,
        frame: Frame<'_>,
        scheduled: Instant,
    ) -> Result<PushOutcome> {
        self.check_no_meta(index)?;
        if !self.admitted()? {
            drop(frame);
            return self.refused_at(index);
        }
        let at = self.grid_index(index)?;
        self.level
            .write_frame_at(&at, dtype, frame, scheduled)
            .map_err(|e| visible_index(e, index))
    }

    /// The writer's grid coordinates of a frame index: a single frame (`y, x`) takes
    /// the empty index, which is its hidden axis' 0.
    fn grid_index(&self, index: &[u64]) -> Result<Vec<u64>> {
        let spec = &self.level.shared.spec;
        if !spec.planar {
            return Ok(index.to_vec());
        }
        if !index.is_empty() {
            return Err(Error::FrameIndex {
                index: index.to_vec(),
                problem: crate::FrameIndexError::Rank {
                    got: index.len(),
                    lead: 0,
                },
            });
        }
        Ok(vec![0])
    }

    /// A frame buffer from the writer's pool, for zero-copy pushes: fill it (e.g. from
    /// the camera driver) and hand it to [`push_buffer`](Self::push_buffer). Waits for a
    /// free buffer under [`Backpressure::Block`]; `None` under `Drop` when none is free.
    pub fn buffer(&mut self) -> Result<Option<PoolBuf>> {
        if !self.admitted()? {
            return Ok(None);
        }
        self.level.buffer()
    }

    /// Pushes a buffer obtained from [`buffer`](Self::buffer) without copying it
    /// (chunks deeper than one frame still copy its rows into staging).
    pub fn push_buffer(&mut self, buf: PoolBuf, scheduled: Instant) -> Result<PushOutcome> {
        if !self.admitted()? {
            drop(buf);
            return self.refused();
        }
        let pushed = self.level.push_buffer(buf, scheduled);
        self.sent(pushed, MetaRows::empty)
    }

    /// Sets the array's attribute `name` (a namespace such as `"acquisition"` or
    /// `"microscope"`) to `value`, replacing an earlier value, at any time during the
    /// recording. `zarr.json` is republished at once, atomically, with the extent and
    /// progress last published (never ahead of the data) and every other attribute kept;
    /// the finisher's later publications keep it too. `"zarrstream"` is the writer's own
    /// and refused ([`Error::Attribute`]).
    ///
    /// ```no_run
    /// # fn run(writer: &zarrstream::Writer) -> zarrstream::Result<()> {
    /// writer.set_attribute("stage", serde_json::json!({"x_um": 1200.5, "y_um": -30.0}))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_attribute(&self, name: &str, value: serde_json::Value) -> Result<()> {
        let s = &self.level.shared;
        s.published
            .set_attribute(&s.dir, &s.spec, name, Some(value))
    }

    /// Removes the array's attribute `name` (see [`set_attribute`](Self::set_attribute)).
    pub fn remove_attribute(&self, name: &str) -> Result<()> {
        let s = &self.level.shared;
        s.published.set_attribute(&s.dir, &s.spec, name, None)
    }

    /// Sets the attribute `name` of the OME-Zarr image group (a writer made by
    /// [`create_ome`](Self::create_ome)), keeping every other key of the group's
    /// `zarr.json`; `"ome"` is the image metadata the writer maintains and is refused.
    /// [`Error::NotAnImage`] for a plain array.
    pub fn set_group_attribute(&self, name: &str, value: serde_json::Value) -> Result<()> {
        let Some(image) = &self.image else {
            return Err(Error::NotAnImage("set_group_attribute"));
        };
        image.set_attribute(name, Some(value))
    }

    /// Removes the attribute `name` of the OME-Zarr image group (see
    /// [`set_group_attribute`](Self::set_group_attribute)).
    pub fn remove_group_attribute(&self, name: &str) -> Result<()> {
        let Some(image) = &self.image else {
            return Err(Error::NotAnImage("remove_group_attribute"));
        };
        image.set_attribute(name, None)
    }

    /// Counts a frame the caller could not push (e.g. no free buffer under `Drop`) as
    /// dropped, keeping its place in the array (it reads as the fill value).
    pub fn skip(&mut self) -> Result<()> {
        let skipped = self.level.skip();
        self.sent(skipped, MetaRows::empty)
    }

    /// Flushes partial chunks and shards, waits for every thread and publishes the final
    /// metadata. Returns the statistics, or the first error any thread met.
    pub fn finish(self) -> Result<Stats> {
        let Writer {
            level,
            meter,
            mirror,
            ..
        } = self;
        let finished = level.finish();
        // Whatever the writer finished goes up, even after its own failure.
        let uploaded = mirror.map(Mirror::finish).transpose();
        let mut stats = finished?;
        uploaded?;
        // Every buffer is freed by now (threads joined, pools dropped): `current` shows
        // what, if anything, outlived the writer.
        stats.memory = meter.usage();
        Ok(stats)
    }

    /// Stops recording at once, for a caller that gives up (a camera fault, a user's
    /// stop): no further frame is accepted, the frames accepted so far are still written
    /// and published (as by [`finish`](Self::finish)), and `zarr.json` records state
    /// `aborted` with `reason`, so readers can tell the run did not end as planned.
    /// Returns the first error the writer met, as `finish` would.
    pub fn abort(self, reason: impl Into<String>) -> Result<()> {
        let aborted = self.level.abort(reason);
        let uploaded = self.mirror.map(Mirror::finish).transpose();
        aborted?;
        uploaded.map(drop)
    }
}

/// An index error names the index as the caller gave it (a single frame's grid index
/// has the hidden axis the caller never sees).
fn visible_index(e: Error, index: &[u64]) -> Error {
    match e {
        Error::FrameIndex { problem, .. } => Error::FrameIndex {
            index: index.to_vec(),
            problem,
        },
        e => e,
    }
}
