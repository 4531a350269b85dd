//! The writer of one array (level 0, or a pyramid level below it): its threads,
//! channels, pools and the bookkeeping of the shards and staging groups it has open.
//!
//! Its behaviour is spread over files named for each job: start-up (`start`), intake and
//! staging (`intake`), dispatch and sealing (`dispatch`), shutdown and publishing
//! (`shutdown`); the level chain (`chain`) links one per level.

pub(in crate::writer) mod dispatch;
pub(in crate::writer) mod intake;
pub(in crate::writer) mod placement;
pub(in crate::writer) mod shutdown;
pub(in crate::writer) mod start;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use hdrhistogram::Histogram;

use crate::error::{Error, Result};
use crate::metadata::State;
use crate::store::StoreLock;
use crate::writer::api::options::Backpressure;
use crate::writer::level::placement::Placement;
use crate::writer::pyramid::feed::Feed;
use crate::writer::state::job::Job;
use crate::writer::state::job::Link;
use crate::writer::state::pool::{Pool, PoolBuf};
use crate::writer::state::shared::{FrameCount, OpenShard, Shared};
use crate::writer::threads::engine::Engine;
use crate::writer::threads::finisher::FinisherReport;
use crate::writer::threads::preparer::PreparedSet;

/// The internal writer of one array. [`Writer`](crate::writer::Writer) wraps the one of level 0;
/// the pyramid thread of each level owns the one of the level below. Its state is held
/// by the stage that uses it: the threads and their channels, the intake (pools and
/// staging), the sealer (open shard sets and rows) and the counters.
pub(in crate::writer) struct Level {
    pub(in crate::writer) shared: Arc<Shared>,
    pub(in crate::writer) threads: Threads,
    pub(in crate::writer) intake: Intake,
    pub(in crate::writer) sealer: Sealer,
    pub(in crate::writer) counters: Counters,
    pub(in crate::writer) lock: Option<StoreLock>,
    pub(in crate::writer) closed: bool,
    /// The pyramid thread of an OME image with levels below this one.
    pub(in crate::writer) pyramid: Option<Feed>,
    /// A level below that failed while this writer finished normally.
    pub(in crate::writer) level_error: Option<Error>,
}

/// The level's threads and the channels to them (`start` makes them, `shutdown` joins).
pub(in crate::writer) struct Threads {
    pub(in crate::writer) jobs: Option<Sender<Job>>,
    /// What each job carries for its worker; also the level's finisher sender.
    pub(in crate::writer) link: Option<Arc<Link>>,
    /// The engine this level started and joins (`None`: a shared one, joined by its owner).
    pub(in crate::writer) own_engine: Option<Arc<Engine>>,
    pub(in crate::writer) prepared: Option<Receiver<Result<PreparedSet>>>,
    pub(in crate::writer) preparer: Option<JoinHandle<()>>,
    pub(in crate::writer) finisher: Option<JoinHandle<FinisherReport>>,
}

/// What the caller's thread takes frames into (`intake`, `placement`).
pub(in crate::writer) struct Intake {
    pub(in crate::writer) frame_pool: Pool,
    pub(in crate::writer) group_pool: Option<Pool>,
    pub(in crate::writer) open_groups: HashMap<Vec<u64>, Group>,
    pub(in crate::writer) backpressure: Backpressure,
    /// Frames written by index: `Some` from the first one on.
    pub(in crate::writer) placement: Option<Placement>,
}

/// The shard sets and append-axis rows open until their frames are all taken
/// (`dispatch`).
pub(in crate::writer) struct Sealer {
    pub(in crate::writer) open_sets: HashMap<Vec<u64>, Vec<Arc<OpenShard>>>,
    pub(in crate::writer) row_shards: BTreeMap<u64, usize>,
    /// Frames written and dropped in each append-axis row not yet sealed.
    pub(in crate::writer) row_frames: BTreeMap<u64, FrameCount>,
}

/// The level's frame counts and push latency.
pub(in crate::writer) struct Counters {
    pub(in crate::writer) next_frame: u64,
    pub(in crate::writer) written: u64,
    pub(in crate::writer) dropped: u64,
    pub(in crate::writer) push_latency: Histogram<u64>,
    pub(in crate::writer) started: Option<Instant>,
}

/// A frame being staged for a deep inner chunk.
pub(in crate::writer) struct Group {
    pub(in crate::writer) buf: PoolBuf,
    pub(in crate::writer) received: Vec<bool>,
    pub(in crate::writer) times: Vec<Instant>,
}

impl Level {
    /// Frame buffers and staging groups that can be in flight at once: each message to
    /// the pyramid thread below holds one.
    pub(in crate::writer) fn in_flight(&self) -> usize {
        self.intake.frame_pool.count() + self.intake.group_pool.as_ref().map_or(0, Pool::count)
    }

    /// Fails once the writer is closed; after another thread's failure, closes it
    /// (publishing what it finished) and returns that failure.
    pub(in crate::writer) fn check_open(&mut self) -> Result<()> {
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
}

impl Drop for Level {
    fn drop(&mut self) {
        if !self.closed {
            self.closed = true;
            self.shutdown(State::Finished, None);
        }
    }
}
