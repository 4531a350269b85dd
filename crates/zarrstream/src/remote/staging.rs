//! The staging gate between the writer and its uploader: bytes of finished shards
//! waiting for upload against the budget, the shards the finisher hands over, and the
//! uploader's failure, which the pushing thread reports.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Error, RemoteError, Result};

/// Shared by the writer's finishers (which add), the uploader (which releases) and the
/// pushing thread (which asks to be admitted).
#[derive(Debug)]
pub(crate) struct Staging {
    budget: u64,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes of finished shards not yet uploaded.
    bytes: u64,
    /// Finished shards (path, length) the uploader has not taken yet.
    finished: Vec<(PathBuf, u64)>,
    /// The uploader gave up; every later push reports this.
    failed: Option<RemoteError>,
}

impl Staging {
    pub(crate) fn new(budget: u64) -> Self {
        Staging {
            budget,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A finisher renamed a shard of `len` bytes into place at `path`.
    pub(crate) fn finished(&self, path: PathBuf, len: u64) {
        let mut s = self.lock();
        s.bytes += len;
        s.finished.push((path, len));
        self.changed.notify_all();
    }

    /// Counts bytes found in staging that no finisher handed over (a leftover of an
    /// earlier run, uploaded first).
    pub(crate) fn found(&self, len: u64) {
        self.lock().bytes += len;
    }

    /// The shards finished since the last call.
    pub(crate) fn take_finished(&self) -> Vec<(PathBuf, u64)> {
        std::mem::take(&mut self.lock().finished)
    }

    /// Waits up to `timeout` for a finished shard.
    pub(crate) fn wait_finished(&self, timeout: Duration) {
        let s = self.lock();
        if s.finished.is_empty() {
            let _ = self.changed.wait_timeout(s, timeout);
        }
    }

    /// The uploader deleted the local copy of `len` uploaded bytes.
    pub(crate) fn released(&self, len: u64) {
        let mut s = self.lock();
        s.bytes = s.bytes.saturating_sub(len);
        self.changed.notify_all();
    }

    /// The uploader gave up: pushes report `e` from now on.
    pub(crate) fn fail(&self, e: RemoteError) {
        let mut s = self.lock();
        if s.failed.is_none() {
            s.failed = Some(e);
        }
        self.changed.notify_all();
    }

    /// The uploader's failure, if it gave up.
    pub(crate) fn failure(&self) -> Option<Error> {
        self.lock()
            .failed
            .as_ref()
            .map(|e| Error::Remote(e.clone()))
    }

    /// Whether the pushing thread may take a frame: `Ok(true)` while the waiting bytes
    /// are within the budget; over it, waits for the uploader when `wait`, else
    /// `Ok(false)` (the frame is dropped and counted). The uploader's failure is an error.
    pub(crate) fn admit(&self, wait: bool) -> Result<bool> {
        let mut s = self.lock();
        loop {
            if let Some(e) = &s.failed {
                return Err(Error::Remote(e.clone()));
            }
            if s.bytes < self.budget {
                return Ok(true);
            }
            if !wait {
                return Ok(false);
            }
            s = self
                .changed
                .wait_timeout(s, Duration::from_millis(100))
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
    }
}

/// The gate as a writer option: compared by identity, so options stay `Eq`.
#[derive(Clone, Default)]
pub(crate) struct StagingLink(pub(crate) Option<Arc<Staging>>);

impl PartialEq for StagingLink {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for StagingLink {}

impl std::fmt::Debug for StagingLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "StagingLink(gate)"
        } else {
            "StagingLink(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_admits_blocks_and_drops() {
        let s = Arc::new(Staging::new(100));
        assert!(s.admit(false).unwrap());
        s.finished("a".into(), 60);
        assert!(s.admit(false).unwrap(), "60 of 100 bytes");
        s.finished("b".into(), 60);
        assert!(!s.admit(false).unwrap(), "120 of 100 bytes: drop");
        let t = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.admit(true))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!t.is_finished(), "blocks over the budget");
        assert_eq!(s.take_finished().len(), 2);
        s.released(60);
        assert!(t.join().unwrap().unwrap(), "admitted once released");
        s.fail(RemoteError::Unreachable {
            url: "s3://b/p".into(),
            message: "gone".into(),
        });
        assert!(matches!(
            s.admit(true),
            Err(Error::Remote(RemoteError::Unreachable { .. }))
        ));
    }
}
