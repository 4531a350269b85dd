//! Start-up of a level's writer: its directories, lock, pools, channels and threads.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::error::{Error, Result};
use crate::metadata::{Progress, State};
use crate::meter::Meter;
use crate::shard::{ShardLayout, SlotOrder};
use crate::sink::SinkKind;
use crate::spec::ArraySpec;
use crate::stats::histogram;
use crate::store::PARTIAL_DIR;
use crate::store::StoreLock;
use crate::writer::api::options::WriterOptions;
use crate::writer::level::{Counters, Intake, Level, Sealer, Threads};
use crate::writer::state::grid::Grid;
use crate::writer::state::job::Link;
use crate::writer::state::pool::Pool;
use crate::writer::state::resume::{self, Start};
use crate::writer::state::shared::{FinisherMsg, Shared};
use crate::writer::threads::engine::{Engine, EngineShape};
use crate::writer::threads::finisher::{self, FinisherReport};
use crate::writer::threads::preparer::{self, PreparedSet};
use crate::writer::threads::priority;

// Write-behind threads per `WriterOptions::threads` with the direct sink: a direct write
// waits for the device, so each thread's worker hands its chunks to these and encodes
// on. Two, as the two extra workers per thread the direct sink had before (three workers
// beat one and four gained little more, BENCHMARKS.md §9), so the same writes are in
// flight, without three encoders taking turns on a core (§20).
const WRITE_BEHIND_PER_THREAD: usize = 2;

// Raw chunk bytes per thread that the write-behind pool holds encoded and not yet
// written. A cache flush stalls this host's disk for 25–155 ms (BENCHMARKS.md §20), and
// while it lasts the workers encode on into the pool: 8 MiB is about 50 ms of `zstd:1`
// per core. One scratch per thread of either kind (3) left the CPUs in iowait 7 % of a
// `zstd:1` recording; 16 per thread (C1's 512 KiB chunks) 3 %, and 6 % more MiB/s. Only
// the encoded bytes of a scratch are touched, so its resident cost is the compressed size.
const WRITE_BEHIND_BYTES_PER_THREAD: usize = 8 << 20;
// The pool's size per thread at most, for tiny chunks.
const WRITE_BEHIND_MAX_PER_THREAD: usize = 64;

/// Encoding threads for the `threads` option (0 = one per core).
pub(in crate::writer) fn thread_count(threads: usize) -> usize {
    if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
}

/// Frame buffers for the `pool_frames` option with `threads` encoding threads: the
/// option, or (0) `2 × threads + 2`, enough for every worker to hold one while the
/// caller fills the next. A recording's budget is this many frames of its largest array.
pub(in crate::writer) fn pool_frames(option: usize, threads: usize) -> usize {
    if option == 0 { 2 * threads + 2 } else { option }
}

/// Where a level's encoding workers come from, and the meter its buffers count in.
#[derive(Clone)]
pub(in crate::writer) enum Workers {
    /// The level starts its own engine, sized by its options (a [`Writer`](crate::writer::Writer)),
    /// whose buffers count in `meter` too.
    Own { meter: Arc<Meter> },
    /// Every level shares `engine` and, for pyramids, the reduction pool `reducers`
    /// (a [`Recording`](crate::writer::Recording)); the engine counts in the recording's meter.
    Shared {
        engine: Arc<Engine>,
        reducers: Option<Arc<rayon::ThreadPool>>,
        meter: Arc<Meter>,
    },
}

impl Workers {
    /// The meter of the level's own buffers.
    pub(in crate::writer) fn meter(&self) -> &Arc<Meter> {
        match self {
            Workers::Own { meter } | Workers::Shared { meter, .. } => meter,
        }
    }
}

/// The engine for `threads` with `sink`, for chunks of at most `chunk_bytes` raw bytes:
/// one encoding worker per thread, and with the direct sink two write-behind threads
/// per thread and a pool of scratches holding about 8 MiB of raw chunks per thread
/// (never fewer than one per thread of either kind, so that every worker can encode
/// while every write-behind thread writes).
pub(in crate::writer) fn engine_shape(
    threads: usize,
    sink: SinkKind,
    chunk_bytes: usize,
) -> EngineShape {
    match sink {
        SinkKind::Direct => {
            let least = 1 + WRITE_BEHIND_PER_THREAD;
            let per_thread = (WRITE_BEHIND_BYTES_PER_THREAD / chunk_bytes.max(1))
                .clamp(least, WRITE_BEHIND_MAX_PER_THREAD);
            EngineShape {
                workers: threads,
                write_behind: WRITE_BEHIND_PER_THREAD * threads,
                scratches: per_thread * threads,
            }
        }
        _ => EngineShape {
            workers: threads,
            write_behind: 0,
            scratches: 0,
        },
    }
}

impl Level {
    /// Creates the array's temporary directory and lock in `dir` (which exists),
    /// publishes its first `zarr.json` and starts its threads. `keep_frames`: a pyramid
    /// thread will read the frames of this level, so they stay in frame buffers.
    pub(in crate::writer) fn start(
        dir: PathBuf,
        spec: ArraySpec,
        options: WriterOptions,
        keep_frames: bool,
        workers: &Workers,
    ) -> Result<Self> {
        let meter = workers.meter();
        let (shared, lock) = open(dir, spec, &options, meter)?;
        let threads = thread_count(options.threads);
        let (frame_pool, group_pool) = pools(&shared, &options, threads, keep_frames, meter)?;
        let own_engine = match workers {
            Workers::Own { .. } => {
                let g = &shared.grid;
                // Jobs never outnumber the chunks of all pooled buffers, so a send never
                // waits longer than the pool already made the caller wait.
                let pooled = group_pool
                    .as_ref()
                    .map_or(0, |p| p.bytes() / g.chunk_bytes.max(1))
                    + frame_pool.bytes() / shared.spec.frame_bytes.max(1) * g.tiles;
                Some(Engine::start(
                    engine_shape(threads, shared.sink, shared.grid.chunk_bytes),
                    options.pin_threads,
                    options.background_nice,
                    Some(pooled.max(1)),
                    meter,
                )?)
            }
            Workers::Shared { .. } => None,
        };
        let jobs = match (workers, &own_engine) {
            (_, Some(e)) | (Workers::Shared { engine: e, .. }, None) => e.sender()?,
            (Workers::Own { .. }, None) => unreachable!("an own engine was started"),
        };
        let (fin_tx, fin_rx) = unbounded::<FinisherMsg>();
        // A rendezvous channel: the preparer holds at most one finished set ahead of need.
        let (prep_tx, prep_rx) = bounded::<Result<PreparedSet>>(0);
        let (preparer, finisher) = spawn(&shared, &options, prep_tx, fin_rx)?;
        let link = Arc::new(Link {
            shared: Arc::clone(&shared),
            finisher: fin_tx,
        });

        let next_frame = shared.start.frame;
        Ok(Level {
            shared,
            threads: Threads {
                jobs: Some(jobs),
                link: Some(link),
                own_engine,
                prepared: Some(prep_rx),
                preparer: Some(preparer),
                finisher: Some(finisher),
            },
            intake: Intake {
                frame_pool,
                group_pool,
                open_groups: HashMap::new(),
                backpressure: options.backpressure,
                placement: None,
            },
            sealer: Sealer {
                open_sets: HashMap::new(),
                row_shards: BTreeMap::new(),
                row_frames: BTreeMap::new(),
            },
            counters: Counters {
                next_frame,
                written: 0,
                dropped: 0,
                push_latency: histogram(),
                started: None,
            },
            lock: Some(lock),
            closed: false,
            pyramid: None,
            level_error: None,
        })
    }
}

/// Creates the temporary directory in `dir`, takes the lock and publishes the array's
/// first `zarr.json` (state `running`, no frames).
fn open(
    dir: PathBuf,
    spec: ArraySpec,
    options: &WriterOptions,
    meter: &Arc<Meter>,
) -> Result<(Arc<Shared>, StoreLock)> {
    let start = if options.resume {
        resume::open(&dir, &spec, options.frame_meta.as_ref())?
    } else {
        (Start::default(), spec.attributes.clone())
    };
    let tmp_dir = dir.join(PARTIAL_DIR);
    std::fs::create_dir(&tmp_dir).map_err(|e| Error::io("create directory", &tmp_dir, e, 0))?;
    let lock = StoreLock::acquire(&tmp_dir)?;
    let grid = Grid::with_order(&spec, options.acquisition_order.as_ref())?;
    preparer::check_open_shards(&grid, options.max_open_shards)?;
    let layout = ShardLayout::new(&spec).map_err(|_| Error::Internal("layout overflow".into()))?;
    let sink = options.sink.resolve(&tmp_dir, &layout, options.chunk_order);
    let order = SlotOrder::new(options.chunk_order, &spec);
    let shared = Arc::new(Shared::new(
        spec,
        grid,
        layout,
        order,
        dir,
        tmp_dir,
        sink,
        options.packing,
        options.durability,
        start,
        Arc::clone(meter),
        options.staging.0.clone(),
    ));
    let s = &shared.start;
    let progress = Progress {
        state: State::Running,
        frames_committed: s.written,
        frames_dropped: s.dropped,
        error: None,
    };
    shared.publish_progress(s.extent0, &progress)?;
    Ok((shared, lock))
}

/// How many buffers of how many bytes a level's pools hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::writer) struct PoolSizes {
    /// Frame buffers and the bytes of one.
    pub frames: (usize, usize),
    /// Staging groups and the bytes of one (chunks deeper than one frame only).
    pub groups: Option<(usize, usize)>,
}

impl PoolSizes {
    /// The pools of a level of `grid` with `frame_bytes` frames, as `options` and
    /// `threads` size them. `keep_frames`: a pyramid thread reads this level's frames.
    pub(in crate::writer) fn new(
        grid: &Grid,
        frame_bytes: usize,
        options: &WriterOptions,
        threads: usize,
        keep_frames: bool,
    ) -> PoolSizes {
        let groups = grid.deep().then(|| {
            let n = grid.open_groups + options.spare_groups.max(1);
            (n, grid.tiles * grid.chunk_bytes)
        });
        // Deep chunks stage rows and keep 2 frame buffers, unless a pyramid thread reads
        // the frames: then they are copied into pooled buffers kept for it, and their
        // rows staged from there.
        let frames = if grid.deep() && !keep_frames {
            2
        } else {
            pool_frames(options.pool_frames, threads)
        };
        PoolSizes {
            frames: (frames, frame_bytes),
            groups,
        }
    }

    /// Frame buffers and staging groups in flight at once.
    pub(in crate::writer) fn in_flight(&self) -> usize {
        self.frames.0 + self.groups.map_or(0, |g| g.0)
    }
}

/// The frame pool and, for chunks deeper than one frame, the staging pool.
fn pools(
    shared: &Shared,
    options: &WriterOptions,
    threads: usize,
    keep_frames: bool,
    meter: &Arc<Meter>,
) -> Result<(Pool, Option<Pool>)> {
    let sizes = PoolSizes::new(
        &shared.grid,
        shared.spec.frame_bytes,
        options,
        threads,
        keep_frames,
    );
    let pool = |(count, len)| {
        Pool::new(count, len, meter).map_err(|e| Error::io("allocate buffers", "", e, 0))
    };
    Ok((pool(sizes.frames)?, sizes.groups.map(pool).transpose()?))
}

/// Starts the shard preparer and the finisher.
fn spawn(
    shared: &Arc<Shared>,
    options: &WriterOptions,
    prep_tx: Sender<Result<PreparedSet>>,
    fin_rx: Receiver<FinisherMsg>,
) -> Result<(JoinHandle<()>, JoinHandle<FinisherReport>)> {
    let spawn = |name: &str| std::thread::Builder::new().name(name.into());
    let nice = options.background_nice;
    let s = Arc::clone(shared);
    let preparer = spawn("zarrstream-preparer")
        .spawn(move || {
            priority::lower_priority(nice);
            preparer::run(s, prep_tx)
        })
        .map_err(|e| Error::io("spawn thread", "", e, 0))?;
    let s = Arc::clone(shared);
    let finisher = spawn("zarrstream-finisher")
        .spawn(move || {
            priority::lower_priority(nice);
            finisher::run(s, fin_rx)
        })
        .map_err(|e| Error::io("spawn thread", "", e, 0))?;
    Ok((preparer, finisher))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_behind_pool_holds_about_8_mib_of_chunks_per_thread() {
        // C1's 512 KiB chunks: 16 per thread, beside one worker and two write-behind
        // threads per thread.
        let c1 = engine_shape(2, SinkKind::Direct, 512 << 10);
        assert_eq!((c1.workers, c1.write_behind, c1.scratches), (2, 4, 32));
        assert_eq!(c1.threads(), 6);
        // Deep chunks: never fewer scratches than threads of either kind.
        let deep = engine_shape(4, SinkKind::Direct, 16 << 20);
        assert_eq!(deep.scratches, 12);
        // Tiny chunks: capped.
        let tiny = engine_shape(1, SinkKind::Direct, 4 << 10);
        assert_eq!(tiny.scratches, WRITE_BEHIND_MAX_PER_THREAD);
        // A sink whose writes return at once: the workers write their own chunks.
        for sink in [SinkKind::Pwrite, SinkKind::Mmap] {
            let own = engine_shape(3, sink, 512 << 10);
            assert_eq!((own.workers, own.write_behind, own.scratches), (3, 0, 0));
        }
    }
}
