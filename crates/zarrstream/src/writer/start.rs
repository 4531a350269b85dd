//! Start-up of a level's writer: its directories, lock, pools, channels and threads.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use super::finisher::{self, FinisherReport};
use super::grid::Grid;
use super::job::Job;
use super::level::Level;
use super::options::WriterOptions;
use super::pool::Pool;
use super::preparer::{self, PreparedSet};
use super::priority;
use super::shared::{FinisherMsg, Shared};
use super::worker::{self, WorkerReport};
use crate::error::{Error, Result};
use crate::metadata::{Progress, State};
use crate::shard::ShardLayout;
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

/// The threads of a level, once started.
struct Threads {
    workers: Vec<JoinHandle<WorkerReport>>,
    preparer: JoinHandle<()>,
    finisher: JoinHandle<FinisherReport>,
}

/// The receiving ends the threads take.
struct Inbound {
    jobs: Receiver<Job>,
    finisher: Receiver<FinisherMsg>,
    finisher_tx: Sender<FinisherMsg>,
    prepared: Sender<Result<PreparedSet>>,
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
    ) -> Result<Self> {
        let (shared, lock) = open(dir, spec, &options)?;
        let threads = thread_count(options.threads);
        // A direct write holds its worker until the device has the bytes; the other
        // workers of the thread's core encode meanwhile.
        let workers = match shared.sink {
            SinkKind::Direct => DIRECT_WORKERS_PER_THREAD * threads,
            _ => threads,
        };
        let (frame_pool, group_pool) = pools(&shared, &options, threads, keep_frames)?;
        let g = &shared.grid;
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
        let inbound = Inbound {
            jobs: jobs_rx,
            finisher: fin_rx,
            finisher_tx: fin_tx.clone(),
            prepared: prep_tx,
        };
        let threads = spawn(&shared, &options, workers, inbound)?;

        Ok(Level {
            shared,
            jobs: Some(jobs_tx),
            finisher_tx: Some(fin_tx),
            prepared: Some(prep_rx),
            workers: threads.workers,
            preparer: Some(threads.preparer),
            finisher: Some(threads.finisher),
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
}

/// Creates the temporary directory in `dir`, takes the lock and publishes the array's
/// first `zarr.json` (state `running`, no frames).
fn open(
    dir: PathBuf,
    spec: ArraySpec,
    options: &WriterOptions,
) -> Result<(Arc<Shared>, StoreLock)> {
    let tmp_dir = dir.join(PARTIAL_DIR);
    std::fs::create_dir(&tmp_dir).map_err(|e| Error::io("create directory", &tmp_dir, e, 0))?;
    let lock = StoreLock::acquire(&tmp_dir)?;
    let grid = Grid::new(&spec);
    let layout = ShardLayout::new(&spec).map_err(|_| Error::Internal("layout overflow".into()))?;
    let sink = options.sink.resolve(&tmp_dir, &layout);
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
    Ok((pool(n, shared.spec.frame_bytes)?, groups.transpose()?))
}

/// Starts `workers` encoding workers, the shard preparer and the finisher.
fn spawn(
    shared: &Arc<Shared>,
    options: &WriterOptions,
    workers: usize,
    inbound: Inbound,
) -> Result<Threads> {
    let cores = if options.pin_threads {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    let spawn = |name: String| std::thread::Builder::new().name(name);
    let nice = options.background_nice;
    let mut worker_handles = Vec::with_capacity(workers);
    for i in 0..workers {
        let (s, rx, ftx) = (
            Arc::clone(shared),
            inbound.jobs.clone(),
            inbound.finisher_tx.clone(),
        );
        let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
        let h = spawn(format!("zarrstream-worker-{i}"))
            .spawn(move || worker::run(s, rx, ftx, core, nice))
            .map_err(|e| Error::io("spawn thread", "", e, 0))?;
        worker_handles.push(h);
    }
    let (s, prep_tx) = (Arc::clone(shared), inbound.prepared);
    let preparer = spawn("zarrstream-preparer".into())
        .spawn(move || {
            priority::lower_priority(nice);
            preparer::run(s, prep_tx)
        })
        .map_err(|e| Error::io("spawn thread", "", e, 0))?;
    let (s, fin_rx) = (Arc::clone(shared), inbound.finisher);
    let finisher = spawn("zarrstream-finisher".into())
        .spawn(move || {
            priority::lower_priority(nice);
            finisher::run(s, fin_rx)
        })
        .map_err(|e| Error::io("spawn thread", "", e, 0))?;
    Ok(Threads {
        workers: worker_handles,
        preparer,
        finisher,
    })
}
