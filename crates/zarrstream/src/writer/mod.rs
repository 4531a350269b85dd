//! The writer: accepts frames on the caller's thread and drives the workers, the
//! preparer and the finisher.

mod finisher;
mod grid;
mod pool;
mod preparer;
mod priority;
mod pyramid;
mod shared;
mod worker;
mod writeback;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use hdrhistogram::Histogram;

pub use pool::PoolBuf;

use self::grid::Grid;
use self::pool::Pool;
use self::preparer::PreparedSet;
use self::shared::{Batch, FinisherMsg, Job, OpenShard, Shared};
use crate::dtype::{DataType, Element};
use crate::error::{Error, Result};
use crate::lock::StoreLock;
use crate::metadata::{self, Progress, State};
use crate::ome::Ome;
use crate::shard::{Packing, ShardLayout};
use crate::sink::{SinkChoice, SinkKind};
use crate::spec::ArraySpec;
use crate::stats::{Stats, histogram};

/// What `push` does when every frame buffer is in use (the encoders are behind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backpressure {
    /// Wait for a buffer: nothing is lost, the caller is slowed down.
    #[default]
    Block,
    /// Drop the frame and count it; its place in the array reads as the fill value.
    Drop,
}

/// How far data is flushed before the metadata makes it visible.
///
/// Every mode survives a crash of the process: finished shards are renamed into place
/// from the page cache, and `zarrstream recover` restores the chunks of unfinished ones.
/// They differ in what survives a power loss or kernel crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Each shard is `fdatasync`ed before its rename and its directory synced after, and
    /// `zarr.json` is published after that: after a power loss every frame the metadata
    /// counted is on disk. Costs one flush per shard, on the finisher thread.
    #[default]
    Shard,
    /// Group commit: shards are renamed as they finish, and every `interval` the finisher
    /// flushes all of them and their directories at once, then publishes `zarr.json`. A
    /// power loss loses at most the shards of the last interval, and the metadata never
    /// counts frames that were not flushed. Fewer, larger flushes than `Shard`.
    Periodic {
        /// Time between group commits.
        interval: std::time::Duration,
    },
    /// No flushes of shard data (each `zarr.json` publication is still written with
    /// temp file, fsync and rename): after a power loss, recently finished shards may be
    /// missing or empty although the metadata counts them.
    None,
}

/// Workers per [`WriterOptions::threads`] with the direct sink. With one, `record` (C1
/// `lz4:1`, 2 cores) wrote 1699–1816 MiB/s against 2115–2668 with pwrite; with three,
/// 2955–2973; with four, 3138 (noise: `none` was slower).
const DIRECT_WORKERS_PER_THREAD: usize = 3;

/// Options of a [`Writer`]; `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterOptions {
    /// Encoding threads (0 = one per core). With the [direct](SinkChoice::Direct) sink
    /// each is three worker threads pinned to the same core, since a direct write holds
    /// its worker until the device has the bytes.
    pub threads: usize,
    /// Pin worker `i` to core `i mod cores`.
    pub pin_threads: bool,
    /// Scheduling niceness of the writer's own threads — workers, shard preparer and
    /// finisher — (0..=19; on Linux per thread). Encoding and finishing shards are
    /// throughput work; the thread that pushes frames is latency work. With the writer's
    /// threads a few steps nicer, a push that wakes one of them (handing a shard to the
    /// finisher, say) is not preempted by it, and a push waits for its frame copy, not
    /// behind an encode, when every core is busy. 0 leaves priorities alone.
    pub background_nice: u8,
    /// Which sink writes shard files.
    pub sink: SinkChoice,
    /// Frame buffers in the pool (0 = `2 × threads + 2`, at most 65536); bounds the
    /// memory for frames not yet encoded. Arrays with chunks deeper than one frame stage
    /// rows instead and keep only 2 frame buffers (for [`Writer::buffer`]).
    pub pool_frames: usize,
    /// Extra staging groups beyond those that must be open at once (deep chunks only;
    /// lets the pushing thread run ahead of the encoders).
    pub spare_groups: usize,
    /// Behaviour when the pool is exhausted.
    pub backpressure: Backpressure,
    /// Flushing policy.
    pub durability: Durability,
    /// What happens to unused slot space when a shard is finished.
    pub packing: Packing,
    /// Replace an existing store at the path.
    pub overwrite: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            threads: 0,
            pin_threads: true,
            background_nice: 5,
            sink: SinkChoice::Auto,
            pool_frames: 0,
            spare_groups: 1,
            backpressure: Backpressure::Block,
            durability: Durability::Shard,
            packing: Packing::Compact,
            overwrite: false,
        }
    }
}

impl WriterOptions {
    /// Bounds that keep the derived sizes (pool, queue) far from overflow.
    fn validate(&self) -> Result<()> {
        for (option, value, max) in [
            ("threads", self.threads, 1024),
            ("pool_frames", self.pool_frames, 1 << 16),
            ("spare_groups", self.spare_groups, 1 << 16),
            ("background_nice", usize::from(self.background_nice), 19),
        ] {
            if value > max {
                return Err(Error::InvalidOption { option, value, max });
            }
        }
        Ok(())
    }
}

/// A frame being staged for a deep inner chunk.
struct Group {
    buf: PoolBuf,
    received: Vec<bool>,
    times: Vec<Instant>,
}

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
///     writer.push(&frame)?;
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
    shared: Arc<Shared>,
    jobs: Option<Sender<Job>>,
    finisher_tx: Option<Sender<FinisherMsg>>,
    prepared: Option<Receiver<Result<PreparedSet>>>,
    workers: Vec<JoinHandle<worker::WorkerReport>>,
    preparer: Option<JoinHandle<()>>,
    finisher: Option<JoinHandle<finisher::FinisherReport>>,
    frame_pool: Pool,
    group_pool: Option<Pool>,
    lock: Option<StoreLock>,
    open_sets: HashMap<Vec<u64>, Vec<Arc<OpenShard>>>,
    open_groups: HashMap<Vec<u64>, Group>,
    row_shards: BTreeMap<u64, usize>,
    next_frame: u64,
    written: u64,
    dropped: u64,
    backpressure: Backpressure,
    push_latency: Histogram<u64>,
    started: Option<Instant>,
    closed: bool,
    /// The pyramid thread of an OME image with levels below 0.
    pyramid: Option<pyramid::Pyramid>,
    /// A level below that failed while this writer finished normally.
    level_error: Option<Error>,
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
        Self::start(dir.clone(), spec, options, false).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
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
    ///     writer.push(&frame)?; // channel 0, channel 1, channel 0, ...
    /// }
    /// writer.finish()?;
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn create_ome(
        path: impl AsRef<Path>,
        mut spec: ArraySpec,
        ome: &Ome,
        options: WriterOptions,
    ) -> Result<Self> {
        let root = path.as_ref().to_path_buf();
        options.validate()?;
        let axes = ome.axes(&spec)?;
        if spec.dimension_names.is_none() {
            spec.dimension_names = Some(axes.into_iter().map(|a| a.name).collect());
        }
        let group = crate::ome::group_json(ome.attributes(&spec)?);
        let n_levels = ome.level_count(&spec)?;
        let z = ome.z_axis(&spec)?;
        let mut level_specs = vec![spec.clone()];
        for _ in 1..n_levels {
            let mut next = crate::pyramid::next_level_spec(&level_specs[level_specs.len() - 1], z)?;
            next.lz4_acceleration = Some(ome.level_acceleration());
            level_specs.push(next);
        }
        prepare_dir(&root, options.overwrite)?;
        let level0 = root.join(crate::ome::LEVEL0_PATH);
        let made = std::fs::create_dir(&level0)
            .map_err(|e| Error::io("create directory", &level0, e, 0))
            .and_then(|()| Self::start(level0, spec, options.clone(), n_levels > 1))
            .and_then(|writer| Self::start_levels(writer, &root, &level_specs[1..], ome, &options))
            .and_then(|writer| {
                // After the level's zarr.json, so the group never names a missing array.
                metadata::publish(&root, &group)?;
                Ok(writer)
            });
        made.inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&root);
        })
    }

    /// Starts one internal writer per level below 0 (at `root/1`, `root/2`, …), each
    /// fed by a pyramid thread of the level above: a chain, so that the workers encoding
    /// level `k` also reduce level `k + 1`, from the rows they have just read.
    fn start_levels(
        mut writer: Writer,
        root: &Path,
        specs: &[ArraySpec],
        ome: &Ome,
        options: &WriterOptions,
    ) -> Result<Self> {
        if specs.is_empty() {
            return Ok(writer);
        }
        let threads = if options.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            options.threads
        };
        let nice = options.background_nice;
        let reducers = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("zarrstream-reduce-{i}"))
            .start_handler(move |_| priority::lower_priority(nice))
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the reduction workers: {e}")))?;
        let reducers = Arc::new(reducers);
        let z = ome.z_axis(&writer.shared.spec)?;
        // Pool sizes, top down: frames of level k in flight at once (each message to the
        // pyramid thread below it holds one) and, when level k's workers reduce level
        // k + 1, one level-(k + 1) buffer for each of them on top of that level's own.
        let mut in_flight =
            writer.frame_pool.count() + writer.group_pool.as_ref().map_or(0, Pool::count);
        let mut above = writer.shared.grid.clone();
        let mut opts = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter().enumerate() {
            // Level k holds a 4^k-th of the data: fewer workers, not pinned (level 0's
            // workers are), always waiting (a drop is decided at level 0 only).
            let level_threads = (threads >> (2 * (i + 1))).max(1);
            let own = 2 * level_threads + 2;
            let pool_frames = if pyramid::Reduction::fits(&above, z) {
                in_flight + own
            } else {
                own
            };
            in_flight = pool_frames;
            above = Grid::new(spec);
            opts.push(WriterOptions {
                threads: level_threads,
                pin_threads: false,
                pool_frames,
                backpressure: Backpressure::Block,
                overwrite: false,
                ..options.clone()
            });
        }
        for k in 1..=specs.len() {
            let dir = root.join(k.to_string());
            std::fs::create_dir(&dir).map_err(|e| Error::io("create directory", &dir, e, 0))?;
        }
        // Bottom up: each level starts with the writer of the level below attached.
        let mut below: Option<Writer> = None;
        for (i, (spec, opts)) in specs.iter().zip(opts).enumerate().rev() {
            let dir = root.join((i + 1).to_string());
            let mut level = Self::start(dir, spec.clone(), opts, below.is_some())?;
            if let Some(b) = below.take() {
                level.attach_level(b, ome, z, &reducers, nice)?;
            }
            below = Some(level);
        }
        if let Some(b) = below {
            writer.attach_level(b, ome, z, &reducers, nice)?;
        }
        Ok(writer)
    }

    /// Makes `below` the next pyramid level of this writer (a pyramid thread feeds it).
    fn attach_level(
        &mut self,
        below: Writer,
        ome: &Ome,
        z: Option<usize>,
        reducers: &Arc<rayon::ThreadPool>,
        nice: u8,
    ) -> Result<()> {
        let in_flight = self.frame_pool.count() + self.group_pool.as_ref().map_or(0, Pool::count);
        self.pyramid = Some(pyramid::Pyramid::start(
            below,
            Arc::clone(&self.shared),
            ome.downsample_method(),
            z,
            in_flight,
            Arc::clone(reducers),
            nice,
        )?);
        Ok(())
    }

    fn start(
        dir: std::path::PathBuf,
        spec: ArraySpec,
        options: WriterOptions,
        keep_frames: bool,
    ) -> Result<Self> {
        let tmp_dir = dir.join(PARTIAL_DIR);
        std::fs::create_dir(&tmp_dir).map_err(|e| Error::io("create directory", &tmp_dir, e, 0))?;
        let lock = StoreLock::acquire(&tmp_dir)?;
        let grid = Grid::new(&spec);
        let layout =
            ShardLayout::new(&spec).map_err(|_| Error::Internal("layout overflow".into()))?;
        let sink = options.sink.resolve(&tmp_dir, &layout);
        let threads = if options.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            options.threads
        };
        // A direct write holds its worker until the device has the bytes; the other
        // workers of the thread's core encode meanwhile.
        let workers = match sink {
            SinkKind::Direct => DIRECT_WORKERS_PER_THREAD * threads,
            _ => threads,
        };
        let shared = Arc::new(Shared::new(
            spec,
            grid,
            layout,
            dir,
            tmp_dir,
            sink,
            options.packing,
            options.durability,
        ));
        let progress = Progress {
            state: State::Running,
            frames_committed: 0,
            frames_dropped: 0,
            error: None,
        };
        finisher::publish(&shared, 0, &progress)?;

        let g = &shared.grid;
        let pool =
            |count, len| Pool::new(count, len).map_err(|e| Error::io("allocate buffers", "", e, 0));
        let (frame_pool, group_pool) = if g.deep() && !keep_frames {
            let groups = g.max_open_boxes(&g.chunk_lead) + options.spare_groups.max(1);
            (
                pool(2, shared.spec.frame_bytes)?,
                Some(pool(groups, g.tiles * g.chunk_bytes)?),
            )
        } else {
            let n = if options.pool_frames == 0 {
                2 * threads + 2
            } else {
                options.pool_frames
            };
            // Deep chunks with a pyramid: frames are copied into pooled buffers kept for
            // the pyramid thread, and their rows staged from there.
            let groups = (g.deep()).then(|| {
                let groups = g.max_open_boxes(&g.chunk_lead) + options.spare_groups.max(1);
                pool(groups, g.tiles * g.chunk_bytes)
            });
            (pool(n, shared.spec.frame_bytes)?, groups.transpose()?)
        };
        // Jobs never outnumber the chunks of all pooled buffers, so a send never waits
        // longer than the pool already made the caller wait.
        let pooled = group_pool
            .as_ref()
            .map_or(0, |p| p.bytes() / g.chunk_bytes.max(1))
            + frame_pool.bytes() / shared.spec.frame_bytes.max(1) * g.tiles;
        let (jobs_tx, jobs_rx) = bounded::<Job>(pooled.max(1));
        let (fin_tx, fin_rx) = unbounded::<FinisherMsg>();
        // A rendezvous channel: the preparer holds at most one finished set ahead of need.
        let (prep_tx, prep_rx) = bounded::<Result<PreparedSet>>(0);

        let cores = if options.pin_threads {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let spawn = |name: String| std::thread::Builder::new().name(name);
        let mut worker_handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let (s, rx, ftx) = (Arc::clone(&shared), jobs_rx.clone(), fin_tx.clone());
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let nice = options.background_nice;
            let h = spawn(format!("zarrstream-worker-{i}"))
                .spawn(move || worker::run(s, rx, ftx, core, nice))
                .map_err(|e| Error::io("spawn thread", "", e, 0))?;
            worker_handles.push(h);
        }
        let nice = options.background_nice;
        let s = Arc::clone(&shared);
        let preparer = spawn("zarrstream-preparer".into())
            .spawn(move || {
                priority::lower_priority(nice);
                preparer::run(s, prep_tx)
            })
            .map_err(|e| Error::io("spawn thread", "", e, 0))?;
        let s = Arc::clone(&shared);
        let finisher = spawn("zarrstream-finisher".into())
            .spawn(move || {
                priority::lower_priority(nice);
                finisher::run(s, fin_rx)
            })
            .map_err(|e| Error::io("spawn thread", "", e, 0))?;

        Ok(Writer {
            shared,
            jobs: Some(jobs_tx),
            finisher_tx: Some(fin_tx),
            prepared: Some(prep_rx),
            workers: worker_handles,
            preparer: Some(preparer),
            finisher: Some(finisher),
            frame_pool,
            group_pool,
            lock: Some(lock),
            open_sets: HashMap::new(),
            open_groups: HashMap::new(),
            row_shards: BTreeMap::new(),
            next_frame: 0,
            written: 0,
            dropped: 0,
            backpressure: options.backpressure,
            push_latency: histogram(),
            started: None,
            closed: false,
            pyramid: None,
            level_error: None,
        })
    }

    /// The array specification.
    pub fn spec(&self) -> &ArraySpec {
        &self.shared.spec
    }

    /// The sink in use.
    pub fn sink(&self) -> SinkKind {
        self.shared.sink
    }

    /// Frames whose chunks are all encoded into their shard slots so far. Those survive
    /// a crash of this process (they are in the page cache) and `zarrstream recover`
    /// restores them from the temporary shards.
    pub fn frames_encoded(&self) -> u64 {
        self.shared
            .frames_encoded
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Frames offered so far (written + dropped).
    pub fn frames_pushed(&self) -> u64 {
        self.next_frame
    }

    /// Pushes one frame (one copy into a pooled buffer). Returns `false` if the frame
    /// was dropped by the [`Backpressure::Drop`] policy.
    pub fn push<T: Element>(&mut self, frame: &[T]) -> Result<bool> {
        self.push_at(frame, Instant::now())
    }

    /// Like [`push`](Self::push), with the frame's scheduled camera time, from which
    /// frame latency is measured (open loop: a stall is not hidden).
    pub fn push_at<T: Element>(&mut self, frame: &[T], scheduled: Instant) -> Result<bool> {
        self.check_frame(T::DTYPE, std::mem::size_of_val(frame))?;
        self.accept(Frame::Borrowed(bytemuck::cast_slice(frame)), scheduled)
    }

    /// Pushes one frame of raw little-endian bytes.
    pub fn push_bytes(&mut self, frame: &[u8], scheduled: Instant) -> Result<bool> {
        self.check_frame(self.shared.spec.dtype, frame.len())?;
        self.accept(Frame::Borrowed(frame), scheduled)
    }

    /// A frame buffer from the writer's pool, for zero-copy pushes: fill it (e.g. from
    /// the camera driver) and hand it to [`push_buffer`](Self::push_buffer). Waits for a
    /// free buffer under [`Backpressure::Block`]; `None` under `Drop` when none is free.
    pub fn buffer(&mut self) -> Result<Option<PoolBuf>> {
        self.check_open()?;
        Ok(self
            .frame_pool
            .get(self.backpressure == Backpressure::Block))
    }

    /// Pushes a buffer obtained from [`buffer`](Self::buffer) without copying it
    /// (chunks deeper than one frame still copy its rows into staging).
    pub fn push_buffer(&mut self, buf: PoolBuf, scheduled: Instant) -> Result<bool> {
        self.check_frame(self.shared.spec.dtype, buf.len())?;
        self.accept(Frame::Owned(buf), scheduled)
    }

    /// Counts a frame the caller could not push (e.g. no free buffer under `Drop`) as
    /// dropped, keeping its place in the array (it reads as the fill value).
    pub fn skip(&mut self) -> Result<()> {
        self.check_open()?;
        self.check_capacity()?;
        let t = Instant::now();
        self.accept(Frame::Skipped, t).map(|_| ())
    }

    fn check_open(&mut self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        if self.shared.failed() {
            self.closed = true;
            let e = self.shared.take_error().unwrap_or(Error::Closed);
            self.shutdown(State::Aborted, Some(e.to_string()));
            return Err(e);
        }
        Ok(())
    }

    fn check_frame(&mut self, dtype: DataType, nbytes: usize) -> Result<()> {
        self.check_open()?;
        let spec = &self.shared.spec;
        if dtype != spec.dtype {
            return Err(Error::DataType {
                frame: self.next_frame,
                expected: spec.dtype,
                got: dtype,
            });
        }
        if nbytes != spec.frame_bytes {
            return Err(Error::FrameSize {
                frame: self.next_frame,
                expected: spec.frame_bytes,
                got: nbytes,
            });
        }
        self.check_capacity()
    }

    /// A bounded append axis holds `shape[0] × frames_per_step` frames.
    fn check_capacity(&self) -> Result<()> {
        let spec = &self.shared.spec;
        let cap = spec.shape[0].saturating_mul(spec.frames_per_step());
        if spec.shape[0] != 0 && self.next_frame >= cap {
            return Err(Error::ArrayFull { frames: cap });
        }
        Ok(())
    }

    /// Any failure while accepting a frame closes the writer: finished shards stay
    /// published, the metadata records the abort, and the first error is returned.
    fn accept(&mut self, frame: Frame<'_>, scheduled: Instant) -> Result<bool> {
        // Push latency includes waiting for the next shard set at shard boundaries.
        let t0 = Instant::now();
        self.started.get_or_insert(t0);
        let shared = Arc::clone(&self.shared);
        // A pyramid level that failed (e.g. its disk is full) refuses this frame as a
        // full disk here would: what was accepted before is finished and published.
        if let Some(e) = self
            .pyramid
            .as_ref()
            .and_then(pyramid::Pyramid::take_failure)
        {
            self.closed = true;
            self.shutdown(State::Aborted, Some(e.to_string()));
            return Err(e);
        }
        let c = shared.grid.coords(self.next_frame);
        // Every frame position opens its shard set, dropped or not, so sets are taken
        // from the preparer in exactly the order it makes them. If the next set cannot
        // be made (e.g. the disk is full), this frame is refused, and everything
        // accepted before it, whose space is already reserved, is finished and published.
        if let Err(e) = self.ensure_set(&Grid::box_of(&c, &shared.grid.shard_lead)) {
            // An earlier failure of another thread explains more than this one.
            let e = shared.take_error().unwrap_or(e);
            self.closed = true;
            self.shutdown(State::Aborted, Some(e.to_string()));
            return Err(e);
        }
        match self.accept_frame(frame, scheduled, t0, &c) {
            Ok(accepted) => Ok(accepted),
            Err(e) => {
                self.shared.fail(e);
                self.check_open()?;
                Err(Error::Closed)
            }
        }
    }

    fn accept_frame(
        &mut self,
        frame: Frame<'_>,
        scheduled: Instant,
        t0: Instant,
        c: &[u64],
    ) -> Result<bool> {
        self.next_frame += 1;
        let shared = Arc::clone(&self.shared);
        let g = &shared.grid;
        let wait = self.backpressure == Backpressure::Block;
        let frame = match frame {
            // The pyramid thread needs the frame after staging: keep it in a pool buffer.
            Frame::Borrowed(bytes) if g.deep() && self.pyramid.is_some() => {
                match self.frame_pool.get(wait) {
                    Some(mut b) => {
                        b.copy_from_slice(bytes);
                        Frame::Owned(b)
                    }
                    None => Frame::Skipped,
                }
            }
            f => f,
        };
        let accepted = if g.deep() {
            let staged = self.stage(c, &frame, scheduled, wait)?;
            if let (true, Some(p), Frame::Owned(b)) = (staged, self.pyramid.as_mut(), frame) {
                p.frame(pyramid::Source::Buf(b), scheduled)?;
            }
            staged
        } else {
            let buf = match frame {
                Frame::Owned(b) => Some(b),
                Frame::Borrowed(bytes) => self.frame_pool.get(wait).map(|mut b| {
                    b.copy_from_slice(bytes);
                    b
                }),
                Frame::Skipped => None,
            };
            let next = match (&buf, &self.pyramid) {
                (Some(_), Some(p)) => p.reduction(wait),
                _ => pyramid::NextReduction::Thread,
            };
            let (reduction, done) = match next {
                pyramid::NextReduction::Fused(r, done) => (Some(r), Some(done)),
                pyramid::NextReduction::Thread => (None, None),
                pyramid::NextReduction::Full => return self.account(false, c, t0),
            };
            match buf {
                Some(buf) => {
                    let batch = Arc::new(Batch {
                        buf,
                        staged: false,
                        remaining: AtomicUsize::new(g.tiles),
                        times: vec![scheduled],
                        reduction,
                    });
                    self.dispatch(c, Arc::clone(&batch))?;
                    if let Some(p) = self.pyramid.as_mut() {
                        let src = match done {
                            Some(done) => pyramid::Source::Reduced { batch, done },
                            None => pyramid::Source::Batch(batch),
                        };
                        p.frame(src, scheduled)?;
                    }
                    true
                }
                None => false,
            }
        };
        self.account(accepted, c, t0)
    }

    /// Counts a pushed frame as written or dropped and seals what it completed.
    fn account(&mut self, accepted: bool, c: &[u64], t0: Instant) -> Result<bool> {
        if accepted {
            self.written += 1;
        } else {
            self.dropped += 1;
            if let Some(p) = self.pyramid.as_mut() {
                p.skip();
            }
        }
        self.seal_completed(c)?;
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let _ = self.push_latency.record(ns);
        Ok(accepted)
    }

    /// Copies a frame's rows into the staging buffers of its chunk group.
    fn stage(
        &mut self,
        c: &[u64],
        frame: &Frame<'_>,
        scheduled: Instant,
        wait: bool,
    ) -> Result<bool> {
        let bytes: &[u8] = match frame {
            Frame::Owned(b) => b,
            Frame::Borrowed(b) => b,
            Frame::Skipped => return Ok(false),
        };
        let shared = Arc::clone(&self.shared);
        let g = &shared.grid;
        let gc = Grid::box_of(c, &g.chunk_lead);
        if !self.open_groups.contains_key(&gc) {
            let Some(buf) = self.group_pool.as_ref().and_then(|p| p.get(wait)) else {
                return Ok(false);
            };
            let group = Group {
                buf,
                received: vec![false; g.group_frames],
                times: Vec::new(),
            };
            self.open_groups.insert(gc.clone(), group);
        }
        let Some(group) = self.open_groups.get_mut(&gc) else {
            return Err(Error::Internal("staging group vanished".into()));
        };
        let local = g.local_index(c);
        let plane = g.plane_bytes();
        for t in 0..g.tiles {
            let dst = &mut group.buf[t * g.chunk_bytes + local * plane..][..plane];
            g.tile_source(bytes, t).copy_range(0, plane, dst);
        }
        group.received[local] = true;
        group.times.push(scheduled);
        Ok(true)
    }

    /// Sends one job per tile of `batch`, whose frames sit at chunk-group coordinates
    /// derived from `c` (a frame's leading coordinates, or a group's first frame).
    fn dispatch(&mut self, c: &[u64], batch: Arc<Batch>) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let g = &shared.grid;
        let sc = Grid::box_of(c, &g.shard_lead);
        self.ensure_set(&sc)?;
        let set = self
            .open_sets
            .get(&sc)
            .ok_or_else(|| Error::Internal("shard set vanished".into()))?;
        // Count every job before the first is sent: a worker must never bring a shard
        // to zero while the caller still holds its seal token. Relaxed suffices, as the
        // channel orders each send before the worker's decrement.
        for (shard, &n) in set.iter().zip(&g.tiles_per_shard) {
            shard
                .pending
                .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
        let gc = Grid::box_of(c, &g.chunk_lead);
        let jobs = self.jobs.as_ref().ok_or(Error::Closed)?;
        for tile in 0..g.tiles {
            let shard = Arc::clone(&set[g.shard_of_tile(tile)]);
            let job = Job {
                batch: Arc::clone(&batch),
                tile,
                shard,
                slot: g.slot(&gc, tile),
            };
            jobs.send(job)
                .map_err(|_| Error::Internal("worker threads are gone".into()))?;
        }
        Ok(())
    }

    /// Opens the shard set at shard coordinates `sc`, taking it from the preparer.
    fn ensure_set(&mut self, sc: &[u64]) -> Result<&Vec<Arc<OpenShard>>> {
        if !self.open_sets.contains_key(sc) {
            let rx = self.prepared.as_ref().ok_or(Error::Closed)?;
            let set = rx
                .recv()
                .map_err(|_| Error::Internal("shard preparer stopped".into()))??;
            if set.coords.as_slice() != sc {
                let msg = format!("prepared shard set {:?}, needed {sc:?}", set.coords);
                return Err(Error::Internal(msg));
            }
            *self.row_shards.entry(sc[0]).or_default() += set.shards.len();
            self.open_sets.insert(sc.to_vec(), set.shards);
        }
        self.open_sets
            .get(sc)
            .ok_or_else(|| Error::Internal("shard set vanished".into()))
    }

    /// After frame `c` (accepted or not): dispatch the chunk group it completes, seal
    /// the shard set it completes, and report a completed append-axis row.
    fn seal_completed(&mut self, c: &[u64]) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let g = &shared.grid;
        if g.deep() && g.last_in_box(c, &g.chunk_lead) {
            let gc = Grid::box_of(c, &g.chunk_lead);
            if let Some(group) = self.open_groups.remove(&gc) {
                self.dispatch_group(&gc, group)?;
            }
        }
        if g.last_in_box(c, &g.shard_lead) {
            self.seal_set(&Grid::box_of(c, &g.shard_lead));
        }
        if g.last_in_box(c, &g.row_box) {
            let row = c[0] / g.shard_lead[0];
            self.seal_row(row, c[0] + 1);
        }
        Ok(())
    }

    fn dispatch_group(&mut self, gc: &[u64], mut group: Group) -> Result<()> {
        let g = &self.shared.grid;
        let plane = g.plane_bytes();
        // Frames that never arrived (outside the array, dropped, or after the stream
        // ended) read as the fill value; the pooled buffer may hold older data.
        for (local, _) in group.received.iter().enumerate().filter(|(_, r)| !**r) {
            for t in 0..g.tiles {
                g.fill
                    .fill(&mut group.buf[t * g.chunk_bytes + local * plane..][..plane]);
            }
        }
        let first: Vec<u64> = gc.iter().zip(&g.chunk_lead).map(|(a, b)| a * b).collect();
        let batch = Arc::new(Batch {
            buf: group.buf,
            staged: true,
            remaining: AtomicUsize::new(g.tiles),
            times: group.times,
            reduction: None,
        });
        self.dispatch(&first, batch)
    }

    fn seal_set(&mut self, sc: &[u64]) {
        if let (Some(set), Some(fin)) = (self.open_sets.remove(sc), self.finisher_tx.as_ref()) {
            for shard in set {
                shard.release(fin);
            }
        }
    }

    fn seal_row(&mut self, row: u64, extent0: u64) {
        let shards = self.row_shards.remove(&row).unwrap_or(0);
        if let Some(fin) = &self.finisher_tx {
            let _ = fin.send(FinisherMsg::RowSealed {
                row,
                shards,
                extent0,
            });
        }
    }

    /// Flushes partial chunks and shards, waits for every thread and publishes the final
    /// metadata. Returns the statistics, or the first error any thread met.
    pub fn finish(mut self) -> Result<Stats> {
        self.check_open()?;
        self.closed = true;
        let (report, latency) = self.shutdown(State::Finished, None);
        if let Some(e) = self.shared.take_error().or(self.level_error.take()) {
            return Err(e);
        }
        let seconds = self.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        Ok(Stats {
            frames_pushed: self.next_frame,
            frames_written: self.written,
            frames_dropped: self.dropped,
            bytes_in: self.written * self.shared.spec.frame_bytes as u64,
            bytes_stored: report.bytes_stored,
            shards: report.shards,
            seconds,
            push_latency_ns: crate::stats::LatencySummary::from_histogram(&self.push_latency),
            frame_latency_ns: crate::stats::LatencySummary::from_histogram(&latency),
            sink: self.shared.sink,
            pool_bytes: self.frame_pool.bytes(),
            staging_bytes: self.group_pool.as_ref().map_or(0, Pool::bytes),
        })
    }

    /// Stops recording at once, for a caller that gives up (a camera fault, a user's
    /// stop): no further frame is accepted, the frames accepted so far are still written
    /// and published (as by [`finish`](Self::finish)), and `zarr.json` records state
    /// `aborted` with `reason`, so readers can tell the run did not end as planned.
    /// Returns the first error the writer met, as `finish` would.
    pub fn abort(mut self, reason: impl Into<String>) -> Result<()> {
        self.check_open()?;
        self.closed = true;
        self.shutdown(State::Aborted, Some(reason.into()));
        self.shared.take_error().map_or(Ok(()), Err)
    }

    /// Stops everything in order and writes the final `zarr.json`.
    fn shutdown(
        &mut self,
        state: State,
        error: Option<String>,
    ) -> (finisher::FinisherReport, Histogram<u64>) {
        let failed = self.shared.failed();
        if !failed {
            let mut groups: Vec<_> = self.open_groups.drain().collect();
            groups.sort_by(|a, b| a.0.cmp(&b.0));
            for (gc, group) in groups {
                if let Err(e) = self.dispatch_group(&gc, group) {
                    self.shared.fail(e);
                }
            }
        }
        self.open_groups.clear();
        // The levels below end with this one (aborted with it), before it publishes. A
        // level's error never fails this level: what it accepted is still published.
        // When finishing, `finish` returns the level's error; when aborting, the caller
        // already has the first error.
        if let Some(mut p) = self.pyramid.take() {
            let abort = (self.shared.failed() || state == State::Aborted).then(|| {
                error
                    .clone()
                    .unwrap_or_else(|| "the level above stopped after an error".into())
            });
            if let Err(e) = p.end(abort)
                && state == State::Finished
            {
                self.level_error = Some(e);
            }
        }
        let mut sets: Vec<_> = self.open_sets.keys().cloned().collect();
        sets.sort();
        for sc in sets {
            self.seal_set(&sc);
        }
        // The last, partial row ends at the last frame's append index.
        let extent0 = if self.next_frame == 0 {
            0
        } else {
            self.shared.grid.coords(self.next_frame - 1)[0] + 1
        };
        let rows: Vec<u64> = self.row_shards.keys().copied().collect();
        for row in rows {
            self.seal_row(row, extent0);
        }
        self.jobs = None;
        let mut latency = histogram();
        for h in self.workers.drain(..) {
            match h.join() {
                Ok(r) => {
                    let _ = latency.add(&r.frame_latency_ns);
                }
                Err(p) => self
                    .shared
                    .fail(Error::panicked("a worker thread", p.as_ref())),
            }
        }
        self.prepared = None;
        if let Some(Err(p)) = self.preparer.take().map(JoinHandle::join) {
            self.shared
                .fail(Error::panicked("the shard preparer", p.as_ref()));
        }
        self.finisher_tx = None;
        let report = match self.finisher.take().map(JoinHandle::join) {
            Some(Ok(report)) => report,
            Some(Err(p)) => {
                // Its shards may not be in place: never publish them as finished.
                self.shared
                    .fail(Error::panicked("the finisher thread", p.as_ref()));
                finisher::FinisherReport::default()
            }
            None => finisher::FinisherReport::default(),
        };
        metadata::prune_empty_dirs(&self.shared.dir.join("c"));
        if self.shared.failed() {
            // Publish only what the finisher completed, and why the acquisition stopped.
            let steps = report.visible_extent0;
            let progress = Progress {
                state: State::Aborted,
                frames_committed: (steps * self.shared.spec.frames_per_step()).min(self.written),
                frames_dropped: self.dropped,
                error: Some(format!(
                    "{}; unfinished shards are kept in {PARTIAL_DIR} for `zarrstream recover`",
                    error.as_deref().unwrap_or("a writer thread failed")
                )),
            };
            let _ = finisher::publish(&self.shared, steps, &progress);
            if let Some(lock) = self.lock.take() {
                lock.release();
            }
        } else {
            let progress = Progress {
                state,
                frames_committed: self.written,
                frames_dropped: self.dropped,
                error,
            };
            if let Err(e) = finisher::publish(&self.shared, extent0, &progress) {
                self.shared.fail(e);
            }
            if let Some(lock) = self.lock.take() {
                lock.release();
            }
            let _ = std::fs::remove_dir(&self.shared.tmp_dir);
            if self.shared.durability != Durability::None
                && let Err(e) = metadata::sync_dir(&self.shared.dir)
            {
                self.shared.fail(e);
            }
        }
        (report, latency)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.closed {
            self.closed = true;
            self.shutdown(State::Finished, None);
        }
    }
}

enum Frame<'a> {
    Borrowed(&'a [u8]),
    Owned(PoolBuf),
    Skipped,
}

/// The directory of temporary shards (and the writer's lock), outside the key space.
pub const PARTIAL_DIR: &str = ".zarrstream-partial";

/// Fails with [`Error::Locked`] if a live writer holds the lock of the array at `dir`
/// or of an array directly below it (the level arrays of an OME-Zarr image).
fn refuse_live(dir: &Path) -> Result<()> {
    let children = std::fs::read_dir(dir)
        .map_err(|e| Error::io("read directory", dir, e, 0))?
        .flatten()
        .map(|e| e.path());
    for array in std::iter::once(dir.to_path_buf()).chain(children) {
        let tmp = array.join(PARTIAL_DIR);
        if tmp.is_dir() {
            StoreLock::acquire(&tmp)?.release();
        }
    }
    Ok(())
}

/// Creates the store directory, refusing an existing path unless `overwrite`.
fn prepare_dir(dir: &Path, overwrite: bool) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(_) if !overwrite => {
            return Err(Error::Exists {
                path: dir.to_path_buf(),
            });
        }
        Ok(m) if m.is_dir() => {
            // Never delete a store another live process is still recording into: an
            // array's lock is in the store, an OME image's in its level arrays.
            refuse_live(dir)?;
            std::fs::remove_dir_all(dir).map_err(|e| Error::io("remove", dir, e, 0))?;
        }
        Ok(_) => std::fs::remove_file(dir).map_err(|e| Error::io("remove", dir, e, 0))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("stat", dir, e, 0)),
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e, 0))?;
    Ok(())
}
