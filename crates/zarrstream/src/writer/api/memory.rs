//! The memory estimate: an upper bound, before a writer exists, of what it will hold,
//! derived from the same sizing rules the writer's start-up uses (pools, staging, the
//! preparer's bound on open shards, worker counts, the finisher's writeback window).

use std::fmt;

use crate::codec::{self, BloscCompressor, BloscShuffle, Checksum, Codec};
use crate::error::{Error, Result};
use crate::meter::page_span;
use crate::ome::Ome;
use crate::shard::ShardLayout;
use crate::sink::{self, SinkChoice, SinkKind};
use crate::spec::ArraySpec;
use crate::writer::api::array::{ArrayConfig, check_arrays};
use crate::writer::api::options::{Durability, WriterOptions};
use crate::writer::level::start::{PoolSizes, engine_shape, pool_frames, thread_count};
use crate::writer::pyramid::chain;
use crate::writer::state::grid::Grid;
use crate::writer::threads::finisher::WRITEBACK_WINDOW;
use crate::writer::threads::preparer::max_unfinished;

/// The most memory a writer (or a [`Recording`](crate::writer::Recording)) will use, by part, in
/// bytes: an upper bound derived from how the writer sizes and frees its buffers, not a
/// measurement. Made by [`estimate_memory`], [`estimate_memory_ome`] and
/// [`Recording::estimate_memory`](crate::writer::Recording::estimate_memory).
///
/// [`resident`](Self::resident) is what counts in the process's resident set (RSS):
/// every part but `page_cache`. [`total`](Self::total) adds the file pages the writer
/// lets the kernel cache. Where the options leave the sink to the file system
/// ([`SinkChoice::Auto`], or a sink that may fall back to `pwrite`), each part is the
/// largest of the sinks the writer may end up with.
///
/// ```
/// use zarrstream::{ArraySpec, Codec, SinkChoice, WriterOptions, estimate_memory};
/// let spec = ArraySpec::builder()
///     .shape([0, 2048, 2048])
///     .chunk_shape([1, 512, 512])
///     .shard_shape([32, 2048, 2048])
///     .codec(Codec::blosc_lz4(1))
///     .build()?;
/// let options = WriterOptions::default().threads(2).sink(SinkChoice::Pwrite);
/// let m = estimate_memory(&spec, &options)?;
/// // 2 × 2 + 2 pooled frames of 8 MiB.
/// assert_eq!(m.frame_pool, 6 * 8 << 20);
/// assert!(m.resident() > m.frame_pool && m.total() > m.resident());
/// println!("{m}");
/// # Ok::<(), zarrstream::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct MemoryEstimate {
    /// Level 0's frame pool: `pool_frames` buffers of one frame (2 when chunks deeper
    /// than one frame are staged instead, unless a pyramid reads the frames).
    pub frame_pool: u64,
    /// Level 0's staging groups for chunks deeper than one frame: (groups that can be
    /// open at once + `spare_groups`) × the frame's tiles × one chunk.
    pub staging: u64,
    /// The encoding workers (level 0's, or a recording's shared ones): per worker, an
    /// encode scratch of one slot (pwrite and direct sinks; the mmap sink encodes into
    /// the mapping) and, per kind of array it encodes, the codec's context and scratch
    /// (zstd's context as zstd itself sizes it for the chunk size, a Blosc block, a
    /// gathered chunk for zstd).
    pub encoders: u64,
    /// Level 0's shard pages mapped by the sink, for every shard that may be reserved
    /// and unfinished at once (the preparer's bound): the whole file with the mmap sink
    /// (prefaulted), the working index's pages with the direct sink, none with pwrite.
    pub mapped_shards: u64,
    /// Every pyramid level below level 0: its pools (including the buffers level 0's
    /// workers reduce into), its own encoding workers (a writer's) and mapped shards.
    pub pyramid: u64,
    /// What the writer holds besides its buffers: each thread's stack and malloc arena
    /// (an allowance of 256 KiB per thread), two latency histograms per level and one
    /// per encoding worker (sized for latencies up to an hour), and per-frame metadata columns awaiting publication.
    pub bookkeeping: u64,
    /// File pages the writer lets accumulate in the page cache, not mapped (so not in
    /// RSS): with pwrite, every unfinished shard's file (written chunks and index); with
    /// [`Durability::None`] (and [`Durability::Periodic`]) also the last
    /// `4` finished shards whose writeback was started and whose pages are dropped
    /// later. With `Periodic`, the shards finished within one interval stay dirty until
    /// the interval's flush; the writer does not bound those (the kernel's dirty-page
    /// limits do), and the estimate assumes they are within that window.
    pub page_cache: u64,
}

impl MemoryEstimate {
    /// Bytes that count in the process's resident set: every part but `page_cache`.
    pub fn resident(&self) -> u64 {
        self.frame_pool
            + self.staging
            + self.encoders
            + self.mapped_shards
            + self.pyramid
            + self.bookkeeping
    }

    /// [`resident`](Self::resident) plus the page cache the writer lets accumulate.
    pub fn total(&self) -> u64 {
        self.resident() + self.page_cache
    }

    /// The part-wise largest of two estimates (an estimate that holds for either).
    fn max(self, o: MemoryEstimate) -> MemoryEstimate {
        MemoryEstimate {
            frame_pool: self.frame_pool.max(o.frame_pool),
            staging: self.staging.max(o.staging),
            encoders: self.encoders.max(o.encoders),
            mapped_shards: self.mapped_shards.max(o.mapped_shards),
            pyramid: self.pyramid.max(o.pyramid),
            bookkeeping: self.bookkeeping.max(o.bookkeeping),
            page_cache: self.page_cache.max(o.page_cache),
        }
    }

    fn plus(self, o: MemoryEstimate) -> MemoryEstimate {
        MemoryEstimate {
            frame_pool: self.frame_pool + o.frame_pool,
            staging: self.staging + o.staging,
            encoders: self.encoders + o.encoders,
            mapped_shards: self.mapped_shards + o.mapped_shards,
            pyramid: self.pyramid + o.pyramid,
            bookkeeping: self.bookkeeping + o.bookkeeping,
            page_cache: self.page_cache + o.page_cache,
        }
    }
}

impl fmt::Display for MemoryEstimate {
    /// One line in MiB: the resident total, its parts, then the page cache.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        write!(
            f,
            "{:.1} MiB resident (frame pool {:.1}, staging {:.1}, encoders {:.1}, mapped shards {:.1}, \
             pyramid {:.1}, bookkeeping {:.1}) + {:.1} MiB page cache",
            mib(self.resident()),
            mib(self.frame_pool),
            mib(self.staging),
            mib(self.encoders),
            mib(self.mapped_shards),
            mib(self.pyramid),
            mib(self.bookkeeping),
            mib(self.page_cache),
        )
    }
}

/// The most memory a [`Writer::create`](crate::writer::Writer::create) of `spec` with `options`
/// will use; see [`MemoryEstimate`] for what each part covers. Invalid options fail
/// with the error creating the writer would return.
///
/// ```
/// use zarrstream::{ArraySpec, WriterOptions, estimate_memory};
/// let spec = ArraySpec::builder()
///     .shape([0, 512, 512])
///     .chunk_shape([1, 256, 256])
///     .shard_shape([8, 512, 512])
///     .build()?;
/// let m = estimate_memory(&spec, &WriterOptions::default().threads(1))?;
/// assert_eq!(m.pyramid, 0);
/// assert!(m.resident() >= m.frame_pool + m.encoders);
/// # Ok::<(), zarrstream::Error>(())
/// ```
pub fn estimate_memory(spec: &ArraySpec, options: &WriterOptions) -> Result<MemoryEstimate> {
    options.validate()?;
    let engine = OwnEngines;
    let level = LevelPlan::new(spec, options, false)?;
    let mut est = level.estimate(&engine)?;
    est.bookkeeping += frame_meta_bytes(options, &level);
    Ok(est)
}

/// The most memory a [`Writer::create_ome`](crate::writer::Writer::create_ome) of `spec` as the
/// image `ome` describes will use (its pyramid levels in
/// [`pyramid`](MemoryEstimate::pyramid)). Invalid options or OME metadata fail with the
/// error creating the image would return.
pub fn estimate_memory_ome(
    spec: &ArraySpec,
    ome: &Ome,
    options: &WriterOptions,
) -> Result<MemoryEstimate> {
    let plans = image_plans(spec, ome, options)?;
    let engine = OwnEngines;
    let mut est = image_estimate(&plans, &engine)?;
    est.bookkeeping += frame_meta_bytes(options, &plans[0]);
    // One pool of reduction threads per image with a pyramid.
    if plans.len() > 1 {
        est.bookkeeping += thread_count(options.threads) as u64 * THREAD_BYTES;
    }
    Ok(est)
}

/// The estimate of [`Recording::estimate_memory`](crate::writer::Recording::estimate_memory):
/// every array's parts summed, the shared workers counted once (each holds one scratch
/// of the largest slot and one encoder per kind of array).
pub(in crate::writer) fn estimate_recording(
    arrays: &[ArrayConfig],
    options: &WriterOptions,
) -> Result<MemoryEstimate> {
    options.validate()?;
    check_arrays(arrays)?;
    let threads = thread_count(options.threads);
    // Sized as `Recording::start` sizes them.
    let largest = arrays.iter().map(|a| a.spec.frame_bytes).max().unwrap_or(0);
    let sum: usize = arrays.iter().map(|a| a.spec.frame_bytes).sum();
    let per_array = (pool_frames(options.pool_frames, threads) * largest)
        .checked_div(sum)
        .unwrap_or(0)
        .max(2);
    let mut images = Vec::with_capacity(arrays.len());
    for a in arrays {
        let opts = WriterOptions {
            pool_frames: per_array,
            frame_meta: a.frame_meta.clone().or(options.frame_meta.clone()),
            ..options.clone()
        };
        let plans = match &a.ome {
            Some(ome) => image_plans(&a.spec, ome, &opts)?,
            None => vec![LevelPlan::new(&a.spec, &opts, false)?],
        };
        images.push((plans, opts));
    }
    let engine = SharedEngine::new(options, &images)?;
    let mut est = MemoryEstimate::default();
    for (plans, opts) in &images {
        est = est.plus(image_estimate(plans, &engine)?);
        est.bookkeeping += frame_meta_bytes(opts, &plans[0]);
    }
    est.encoders = engine.bytes;
    // Each worker also holds its own latency histogram.
    est.bookkeeping += engine.workers as u64 * (THREAD_BYTES + histogram_bytes());
    if images.iter().any(|(p, _)| p.len() > 1) {
        est.bookkeeping += threads as u64 * THREAD_BYTES;
    }
    Ok(est)
}

/// An allowance per thread the writer starts, for what it touches of its stack and of
/// its malloc arena (glibc gives each thread that allocates an arena whose first heap
/// grows as it is used). The threads allocate only small objects outside the counted
/// buffers (channels' blocks, index entries, shard keys).
const THREAD_BYTES: u64 = 256 << 10;

/// The largest latency the histograms are sized for: an hour, in nanoseconds.
const HISTOGRAM_MAX_NS: u64 = 3_600_000_000_000;

/// Bytes of one latency histogram grown to [`HISTOGRAM_MAX_NS`] (hdrhistogram's counts
/// are `u64`).
fn histogram_bytes() -> u64 {
    hdrhistogram::Histogram::<u64>::new_with_max(HISTOGRAM_MAX_NS, 3)
        .map_or(0, |h| h.distinct_values() as u64 * 8)
}

/// One level of an array or image, with the options its writer starts with.
struct LevelPlan {
    spec: ArraySpec,
    options: WriterOptions,
    grid: Grid,
    layout: ShardLayout,
    pools: PoolSizes,
    /// Level 0 of its image or array.
    top: bool,
}

impl LevelPlan {
    fn new(spec: &ArraySpec, options: &WriterOptions, keep_frames: bool) -> Result<LevelPlan> {
        let grid = Grid::with_order(spec, options.acquisition_order.as_ref())?;
        let layout =
            ShardLayout::new(spec).map_err(|_| Error::Internal("layout overflow".into()))?;
        let pools = PoolSizes::new(
            &grid,
            spec.frame_bytes,
            options,
            thread_count(options.threads),
            keep_frames,
        );
        Ok(LevelPlan {
            spec: spec.clone(),
            options: options.clone(),
            grid,
            layout,
            pools,
            top: true,
        })
    }

    /// The sinks this level may end up with (see `SinkChoice::resolve`).
    fn kinds(&self) -> Vec<SinkKind> {
        let aligned = sink::direct_layout_ok(&self.layout);
        match self.options.sink {
            SinkChoice::Mmap => vec![SinkKind::Mmap, SinkKind::Pwrite],
            SinkChoice::Auto | SinkChoice::Direct if aligned => {
                vec![SinkKind::Direct, SinkKind::Pwrite]
            }
            _ => vec![SinkKind::Pwrite],
        }
    }

    /// The level's own share (pools, mapped shards, page cache, its threads but the
    /// engine's) plus its engine's, as `engine` counts it; the part-wise largest over
    /// the sinks it may get.
    fn estimate(&self, engine: &dyn Engines) -> Result<MemoryEstimate> {
        let mut best = MemoryEstimate::default();
        for kind in self.kinds() {
            best = best.max(self.estimate_with(kind, engine)?);
        }
        Ok(best)
    }

    fn estimate_with(&self, kind: SinkKind, engine: &dyn Engines) -> Result<MemoryEstimate> {
        let pool = |(count, len): (usize, usize)| count as u64 * page_span(0, len as u64);
        let open = max_unfinished(&self.grid) as u64;
        let file = page_span(0, self.layout.file_size);
        let finished = match self.options.durability {
            Durability::Shard => 0,
            Durability::Periodic { .. } | Durability::None => WRITEBACK_WINDOW as u64,
        };
        let index = page_span(self.layout.index_offset, self.layout.index_size);
        let page_cache = match kind {
            SinkKind::Pwrite => (open + finished) * file,
            SinkKind::Mmap => finished * file,
            SinkKind::Direct => finished * index,
        };
        // Preparer and finisher; below level 0, the pyramid thread that feeds it.
        let threads = 2 + u64::from(!self.top);
        let (encoders, workers) = engine.level(self, kind)?;
        // A resumed array's preparer copies the finished chunks of the last row through
        // a scratch of one slot.
        let resume = if self.options.resume {
            page_span(0, self.layout.slot_size)
        } else {
            0
        };
        Ok(MemoryEstimate {
            frame_pool: pool(self.pools.frames),
            staging: self.pools.groups.map_or(0, pool),
            encoders,
            mapped_shards: open * sink::mapped_bytes(kind, &self.layout) + resume,
            pyramid: 0,
            bookkeeping: (threads + workers as u64) * THREAD_BYTES
                + (2 + workers as u64) * histogram_bytes(),
            page_cache,
        })
    }

    /// What one worker holds to encode this level's chunks with `kind`: its sink
    /// scratch (one slot) and the encoder's own bytes.
    fn worker_bytes(&self, kind: SinkKind) -> Result<(u64, Encoder)> {
        let scratch = match kind {
            SinkKind::Mmap => 0,
            SinkKind::Pwrite | SinkKind::Direct => page_span(0, self.layout.slot_size),
        };
        let (g, spec) = (&self.grid, &self.spec);
        let chunk = g.chunk_bytes;
        // A chunk is gathered for zstd unless it lies contiguous in memory: staged, or
        // whole rows of a frame with no padding.
        let contiguous = g.deep() || (g.cx == g.x && g.y.is_multiple_of(g.cy));
        let bytes = match spec.codec {
            Codec::None => 0,
            Codec::Blosc {
                compressor,
                clevel,
                shuffle,
            } => {
                // One block shuffled; a bit shuffle also keeps the block's byte planes.
                let block = codec::blosc::blocksize(compressor, clevel, g.es, chunk);
                let bits = shuffle.unwrap_or(BloscShuffle::default_for_size(g.es))
                    == BloscShuffle::BitShuffle;
                let planes = if bits { block } else { 0 };
                // zstd's context is sized by its level and the block it compresses.
                let context = match compressor {
                    BloscCompressor::Zstd => {
                        let level = codec::blosc::zstd_level(clevel);
                        codec::zstd_context_bytes(level, block)?
                    }
                    _ => 0,
                };
                (block + planes + context) as u64
            }
            Codec::Zstd { level, .. } => {
                let gather = if contiguous { 0 } else { chunk as u64 };
                gather + codec::zstd_context_bytes(level, chunk)? as u64
            }
        };
        let key = (
            spec.codec,
            g.es,
            spec.checksum(),
            spec.lz4_acceleration
                .filter(|_| matches!(spec.codec, Codec::Blosc { .. })),
        );
        Ok((scratch, Encoder { key, bytes }))
    }
}

/// What makes two arrays' encoders one (as the workers cache them).
type EncoderKey = (Codec, usize, Checksum, Option<i32>);

/// An encoder a worker keeps, and the bytes it holds at most.
#[derive(Clone, Copy)]
struct Encoder {
    key: EncoderKey,
    bytes: u64,
}

/// How a level's encoding workers are counted.
trait Engines {
    /// The bytes of the workers this level adds, and how many threads they are.
    fn level(&self, level: &LevelPlan, kind: SinkKind) -> Result<(u64, usize)>;
}

/// A writer's levels each start their own workers.
struct OwnEngines;

impl Engines for OwnEngines {
    /// Each worker's encoder, and each worker's scratch or, with write-behind threads,
    /// the pool's scratches.
    fn level(&self, level: &LevelPlan, kind: SinkKind) -> Result<(u64, usize)> {
        let threads = thread_count(level.options.threads);
        let shape = engine_shape(threads, kind, level.grid.chunk_bytes);
        let (scratch, enc) = level.worker_bytes(kind)?;
        let scratches = shape.scratches.max(shape.workers);
        Ok((
            shape.workers as u64 * enc.bytes + scratches as u64 * scratch,
            shape.threads(),
        ))
    }
}

/// A recording's one set of workers: every worker may meet every array, so each holds
/// the largest scratch and one encoder per kind of array (the largest of that kind).
struct SharedEngine {
    workers: usize,
    bytes: u64,
}

impl SharedEngine {
    fn new(options: &WriterOptions, images: &[(Vec<LevelPlan>, WriterOptions)]) -> Result<Self> {
        // As `Recording::start` counts them.
        let kind = match options.sink {
            SinkChoice::Direct | SinkChoice::Auto => SinkKind::Direct,
            _ => SinkKind::Pwrite,
        };
        let chunk_bytes = images
            .iter()
            .flat_map(|(plans, _)| plans)
            .map(|level| level.grid.chunk_bytes)
            .max();
        let shape = engine_shape(
            thread_count(options.threads),
            kind,
            chunk_bytes.unwrap_or(0),
        );
        let mut scratch = 0;
        let mut encoders: Vec<Encoder> = Vec::new();
        for level in images.iter().flat_map(|(plans, _)| plans) {
            for k in level.kinds() {
                let (s, e) = level.worker_bytes(k)?;
                scratch = scratch.max(s);
                match encoders.iter_mut().find(|x| x.key == e.key) {
                    Some(x) => x.bytes = x.bytes.max(e.bytes),
                    None => encoders.push(e),
                }
            }
        }
        // Every worker holds an encoder of each kind; the scratches are the workers' own
        // or, with write-behind threads, the pool's.
        let encoders = encoders.iter().map(|e| e.bytes).sum::<u64>();
        let scratches = shape.scratches.max(shape.workers);
        Ok(SharedEngine {
            workers: shape.threads(),
            bytes: shape.workers as u64 * encoders + scratches as u64 * scratch,
        })
    }
}

impl Engines for SharedEngine {
    /// Counted once for the recording, not per level.
    fn level(&self, _level: &LevelPlan, _kind: SinkKind) -> Result<(u64, usize)> {
        Ok((0, 0))
    }
}

/// The levels of an image as `chain::create_image` starts them.
fn image_plans(spec: &ArraySpec, ome: &Ome, options: &WriterOptions) -> Result<Vec<LevelPlan>> {
    let (specs, _) = chain::image_levels(spec.clone(), ome, options)?;
    let keep = specs.len() > 1;
    let top = LevelPlan::new(&specs[0], options, keep)?;
    let z = ome.z_axis(&specs[0])?;
    let threads = thread_count(options.threads);
    let opts = chain::level_options(
        top.pools.in_flight(),
        &top.grid,
        &specs[1..],
        z,
        threads,
        options,
    );
    let mut plans = vec![top];
    for (i, (spec, opts)) in specs[1..].iter().zip(opts).enumerate() {
        // Every level but the last has a level below reading its frames.
        let keep = i + 2 < specs.len();
        let mut plan = LevelPlan::new(spec, &opts, keep)?;
        plan.top = false;
        plans.push(plan);
    }
    Ok(plans)
}

/// Level 0's parts, plus every level below it folded into `pyramid` (their page cache
/// and bookkeeping stay in those parts).
fn image_estimate(plans: &[LevelPlan], engine: &dyn Engines) -> Result<MemoryEstimate> {
    let mut est = MemoryEstimate::default();
    for (i, plan) in plans.iter().enumerate() {
        let e = plan.estimate(engine)?;
        if i == 0 {
            est = e;
        } else {
            est.pyramid += e.frame_pool + e.staging + e.encoders + e.mapped_shards;
            est.bookkeeping += e.bookkeeping;
            est.page_cache += e.page_cache;
        }
    }
    Ok(est)
}

/// Per-frame metadata held until published: each numeric column (the fields, the JSON
/// offsets and lengths) buffers the values of the frames in unfinished shards plus a
/// chunk of 4096, in a vector that may have doubled. The JSON text itself is as large as
/// the caller makes it and is not included.
fn frame_meta_bytes(options: &WriterOptions, level: &LevelPlan) -> u64 {
    let Some(meta) = &options.frame_meta else {
        return 0;
    };
    let g = &level.grid;
    let sets = (max_unfinished(g) / g.shard_tiles.max(1)) as u64;
    let frames = 4096 + sets * g.shard_lead.iter().product::<u64>();
    (meta.fields().len() as u64 + 2) * 8 * frames * 2
}
