//! The writer of one array (level 0, or a pyramid level below it): its threads,
//! channels, pools and the bookkeeping of the shards and staging groups it has open.
//!
//! Its behaviour is spread over files named for each job: start-up (`start`), intake and
//! staging (`intake`), dispatch and sealing (`dispatch`), shutdown and publishing
//! (`shutdown`); the level chain (`chain`) links one per level.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use hdrhistogram::Histogram;

use super::engine::{Engine, Link};
use super::feed::Feed;
use super::finisher::FinisherReport;
use super::job::Job;
use super::options::Backpressure;
use super::placement::Placement;
use super::pool::{Pool, PoolBuf};
use super::preparer::PreparedSet;
use super::shared::{FrameCount, OpenShard, Shared};
use crate::error::{Error, Result};
use crate::metadata::State;
use crate::store::StoreLock;

/// The internal writer of one array. [`Writer`](super::Writer) wraps the one of level 0;
/// the pyramid thread of each level owns the one of the level below.
pub(super) struct Level {
    pub(super) shared: Arc<Shared>,
    pub(super) jobs: Option<Sender<Job>>,
    /// What each job carries for its worker; also the level's finisher sender.
    pub(super) link: Option<Arc<Link>>,
    /// The engine this level started and joins (`None`: a shared one, joined by its owner).
    pub(super) own_engine: Option<Arc<Engine>>,
    pub(super) prepared: Option<Receiver<Result<PreparedSet>>>,
    pub(super) preparer: Option<JoinHandle<()>>,
    pub(super) finisher: Option<JoinHandle<FinisherReport>>,
    pub(super) frame_pool: Pool,
    pub(super) group_pool: Option<Pool>,
    pub(super) lock: Option<StoreLock>,
    pub(super) open_sets: HashMap<Vec<u64>, Vec<Arc<OpenShard>>>,
    pub(super) open_groups: HashMap<Vec<u64>, Group>,
    pub(super) row_shards: BTreeMap<u64, usize>,
    /// Frames written and dropped in each append-axis row not yet sealed.
    pub(super) row_frames: BTreeMap<u64, FrameCount>,
    pub(super) next_frame: u64,
    pub(super) written: u64,
    pub(super) dropped: u64,
    pub(super) backpressure: Backpressure,
    pub(super) push_latency: Histogram<u64>,
    pub(super) started: Option<Instant>,
    pub(super) closed: bool,
    /// The pyramid thread of an OME image with levels below this one.
    pub(super) pyramid: Option<Feed>,
    /// A level below that failed while this writer finished normally.
    pub(super) level_error: Option<Error>,
    /// Frames written by index: `Some` from the first one on.
    pub(super) placement: Option<Placement>,
}

/// A frame being staged for a deep inner chunk.
pub(super) struct Group {
    pub(super) buf: PoolBuf,
    pub(super) received: Vec<bool>,
    pub(super) times: Vec<Instant>,
}

impl Level {
    /// Frame buffers and staging groups that can be in flight at once: each message to
    /// the pyramid thread below holds one.
    pub(super) fn in_flight(&self) -> usize {
        self.frame_pool.count() + self.group_pool.as_ref().map_or(0, Pool::count)
    }

    /// Fails once the writer is closed; after another thread's failure, closes it
    /// (publishing what it finished) and returns that failure.
    pub(super) fn check_open(&mut self) -> Result<()> {
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
