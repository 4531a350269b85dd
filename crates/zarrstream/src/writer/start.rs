//! Start-up of a level's writer: its directories, lock, pools, channels and threads.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use super::engine::{Engine, Link};
use super::finisher::{self, FinisherReport};
use super::grid::Grid;
use super::level::Level;
use super::options::WriterOptions;
use super::pool::Pool;
use super::preparer::{self, PreparedSet};
use super::priority;
use super::resume::{self, Start};
use super::shared::{FinisherMsg, Shared};
use crate::error::{Error, Result};
use crate::metadata::{Progress, State};
use crate::shard::{ShardLayout, SlotOrder};
use crate::sink::SinkKind;
use crate::spec::ArraySpec;
use crate::stats::histogram;
use crate::store::PARTIAL_DIR;
use crate::store::StoreLock;

// Workers per `WriterOptions::threads` with the direct sink: a direct write holds its
// worker until the device has the bytes, so the others on that core encode meanwhile.
// One per thread left the device idle and lost to pwrite; three beat it, four gained
// little more (BENCHMARKS.md §9).
const DIRECT_WORKERS_PER_THREAD: usize = 3;

/// Encoding threads for the `threads` option (0 = one per core).
pub(super) fn thread_count(threads: usize) -> usize {
    if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
}

/// Frame buffers for the `pool_frames` option with `threads` encoding threads: the
/// option, or (0) `2 × threads + 2`, enough for every worker to hold one while the
/// caller fills the next. A recording's budget is this many frames of its largest array.
pub(super) fn pool_frames(option: usize, threads: usize) -> usize {
    if option == 0 { 2 * threads + 2 } else { option }
}

/// Where a level's encoding workers come from.
#[derive(Clone)]
pub(super) enum Workers {
    /// The level starts its own engine, sized by its options (a [`Writer`](super::Writer)).
    Own,
    /// Every level shares `engine` and, for pyramids, the reduction pool `reducers`
    /// (a [`Recording`](super::Recording)).
    Shared {
        engine: Arc<Engine>,
        reducers: Option<Arc<rayon::ThreadPool>>,
    },
}

/// Encoding workers for `threads` with `sink`: three per thread with the direct sink.
pub(super) fn worker_count(threads: usize, sink: SinkKind) -> usize {
    // A direct write holds its worker until the device has the bytes; the other
    // workers of the thread's core encode meanwhile.
    match sink {
        SinkKind::Direct => DIRECT_WORKERS_PER_THREAD * threads,
        _ => threads,
    }
}

impl Level {
    /// Creates the array's temporary directory and lock in `dir` (which exists),
    /// publishes its first `zarr.json` and starts its threads. `keep_frames`: a pyramid
    /// thread will read the frames of this level, so they stay in frame buffers.
    pub(super) fn start(
        dir: PathBuf,
        spec: ArraySpec,
        options: WriterOptions,
        keep_frames: bool,
        workers: &Workers,
    ) -> Result<Self> {
        let (shared, lock) = open(dir, spec, &options)?;
        let threads = thread_count(options.threads);
        let (frame_pool, group_pool) = pools(&shared, &options, threads, keep_frames)?;
        let own_engine = match workers {
            Workers::Own => {
                let g = &shared.grid;
                // Jobs never outnumber the chunks of all pooled buffers, so a send never
                // waits longer than the pool already made the caller wait.
                let pooled = group_pool
                    .as_ref()
                    .map_or(0, |p| p.bytes() / g.chunk_bytes.max(1))
                    + frame_pool.bytes() / shared.spec.frame_bytes.max(1) * g.tiles;
                Some(Engine::start(
                    worker_count(threads, shared.sink),
                    options.pin_threads,
                    options.background_nice,
                    Some(pooled.max(1)),
                )?)
            }
            Workers::Shared { .. } => None,
        };
        let jobs = match (workers, &own_engine) {
            (_, Some(e)) | (Workers::Shared { engine: e, .. }, None) => e.sender()?,
            (Workers::Own, None) => unreachable!("an own engine was started"),
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
            jobs: Some(jobs),
            link: Some(link),
            own_engine,
            prepared: Some(prep_rx),
            preparer: Some(preparer),
            finisher: Some(finisher),
            frame_pool,
            group_pool,
            lock: Some(lock),
            open_sets: HashMap::new(),
            open_groups: HashMap::new(),
            row_shards: BTreeMap::new(),
            next_frame,
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
}

/// Creates the temporary directory in `dir`, takes the lock and publishes the array's
/// first `zarr.json` (state `running`, no frames).
fn open(
    dir: PathBuf,
    spec: ArraySpec,
    options: &WriterOptions,
) -> Result<(Arc<Shared>, StoreLock)> {
    let start = if options.resume {
        resume::open(&dir, &spec, options.frame_meta.as_ref())?
    } else {
        (Start::default(), spec.attributes.clone())
    };
    let tmp_dir = dir.join(PARTIAL_DIR);
    std::fs::create_dir(&tmp_dir).map_err(|e| Error::io("create directory", &tmp_dir, e, 0))?;
    let lock = StoreLock::acquire(&tmp_dir)?;
    let grid = Grid::new(&spec);
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
    ));
    let s = &shared.start;
    let progress = Progress {
        state: State::Running,
        frames_committed: s.written,
        frames_dropped: s.dropped,
        error: None,
    };
    finisher::publish(&shared, s.extent0, &progress)?;
    Ok((shared, lock))
}

/// The frame pool and, for chunks deeper than one frame, the staging pool.
fn pools(
    shared: &Shared,
    options: &WriterOptions,
    threads: usize,
    keep_frames: bool,
) -> Result<(Pool, Option<Pool>)> {
    let g = &shared.grid;
    let pool =
        |count, len| Pool::new(count, len).map_err(|e| Error::io("allocate buffers", "", e, 0));
    if g.deep() && !keep_frames {
        let groups = g.max_open_boxes(&g.chunk_lead) + options.spare_groups.max(1);
        return Ok((
            pool(2, shared.spec.frame_bytes)?,
            Some(pool(groups, g.tiles * g.chunk_bytes)?),
        ));
    }
    let n = pool_frames(options.pool_frames, threads);
    // Deep chunks with a pyramid: frames are copied into pooled buffers kept for
    // the pyramid thread, and their rows staged from there.
    let groups = (g.deep()).then(|| {
        let groups = g.max_open_boxes(&g.chunk_lead) + options.spare_groups.max(1);
        pool(groups, g.tiles * g.chunk_bytes)
    });
    Ok((pool(n, shared.spec.frame_bytes)?, groups.transpose()?))
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
