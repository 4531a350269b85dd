//! The encoding engine: a set of worker threads taking chunk jobs from one channel.
//!
//! With a sink whose writes wait for the device (direct), the engine also starts
//! write-behind threads and a pool of scratches ([`write_behind`](super::write_behind)):
//! workers encode, those threads write.
//!
//! A level owns one ([`Writer`](crate::writer::Writer): each level starts its own, as many
//! workers as its options ask), or shares one with every level of every array of a
//! [`Recording`](crate::writer::Recording). A job carries what its worker needs for its array
//! (the array's [`Shared`](crate::writer::state::shared::Shared) and its finisher's sender, in a [`Link`](crate::writer::state::job::Link)), so any worker can
//! encode any array's chunks.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{Sender, bounded, unbounded};

use crate::error::{Error, Result};
use crate::meter::Meter;
use crate::writer::state::job::Job;
use crate::writer::threads::worker;
use crate::writer::threads::write_behind::{self, WriteBehind};

/// Encoding workers and the sending end of their jobs channel.
pub(crate) struct Engine {
    jobs: Mutex<Option<Sender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// Joined after the workers: they end once every worker (each holding a sender of
    /// staged chunks) has.
    write_behind: Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Starts `shape.workers` threads `zarrstream-worker-i`, worker `i` pinned to core
    /// `i mod cores` when `pin`, and `shape.write_behind` threads
    /// `zarrstream-behind-i` (not pinned: they mostly wait for the device) with a pool
    /// of `shape.scratches` scratches; all at niceness `nice`. `bound`: the jobs
    /// channel's capacity (`None`: unbounded). The workers' scratch and encoders count
    /// in `meter`.
    pub(crate) fn start(
        shape: EngineShape,
        pin: bool,
        nice: u8,
        bound: Option<usize>,
        meter: &Arc<Meter>,
    ) -> Result<Arc<Engine>> {
        let (tx, rx) = match bound {
            Some(n) => bounded::<Job>(n),
            None => unbounded::<Job>(),
        };
        let cores = if pin { pin_cores() } else { Vec::new() };
        let engine = Arc::new(Engine {
            jobs: Mutex::new(Some(tx)),
            workers: Mutex::new(Vec::with_capacity(shape.workers)),
            write_behind: Mutex::new(Vec::with_capacity(shape.write_behind)),
        });
        let behind = (shape.write_behind > 0).then(|| WriteBehind::new(shape.scratches, meter));
        if let Some((_, ends)) = &behind {
            for i in 0..shape.write_behind {
                let ends = ends.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("zarrstream-behind-{i}"))
                    .spawn(move || write_behind::run(ends, nice));
                match spawned {
                    Ok(h) => lock(&engine.write_behind).push(h),
                    Err(e) => {
                        drop(behind);
                        let _ = engine.join();
                        return Err(Error::io("spawn thread", "", e, 0));
                    }
                }
            }
        }
        let workers_end = behind.map(|(w, _)| w);
        for i in 0..shape.workers {
            let rx = rx.clone();
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let meter = Arc::clone(meter);
            let ends = workers_end.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("zarrstream-worker-{i}"))
                .spawn(move || worker::run(rx, ends, core, nice, &meter));
            match spawned {
                Ok(h) => lock(&engine.workers).push(h),
                Err(e) => {
                    drop(workers_end);
                    let _ = engine.join();
                    return Err(Error::io("spawn thread", "", e, 0));
                }
            }
        }
        Ok(engine)
    }

    /// A sender of jobs (fails once the engine is joined).
    pub(crate) fn sender(&self) -> Result<Sender<Job>> {
        lock(&self.jobs)
            .clone()
            .ok_or_else(|| Error::Internal("the encoding workers are gone".into()))
    }

    /// Drops the engine's sender and joins the workers once every other sender is gone,
    /// then the write-behind threads (which end with the last worker); a thread that
    /// panicked outside a job is reported.
    pub(crate) fn join(&self) -> Result<()> {
        lock(&self.jobs).take();
        let workers: Vec<_> = lock(&self.workers).drain(..).collect();
        let behind: Vec<_> = lock(&self.write_behind).drain(..).collect();
        let mut first = Ok(());
        for (h, what) in workers
            .into_iter()
            .map(|h| (h, "a worker thread"))
            .chain(behind.into_iter().map(|h| (h, "a write-behind thread")))
        {
            if let Err(p) = h.join()
                && first.is_ok()
            {
                first = Err(Error::panicked(what, p.as_ref()));
            }
        }
        first
    }
}

/// How many threads of each kind an engine starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EngineShape {
    /// Encoding workers.
    pub(crate) workers: usize,
    /// Write-behind threads (0: the workers write their chunks themselves).
    pub(crate) write_behind: usize,
    /// Scratches in the write-behind pool (0 without write-behind threads): the chunks
    /// encoded and not yet written, at most.
    pub(crate) scratches: usize,
}

impl EngineShape {
    /// Threads in all.
    pub(crate) fn threads(&self) -> usize {
        self.workers + self.write_behind
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// The cores workers are pinned to, in order: those the calling thread may run on. On
/// Linux that is its affinity mask (`sched_getaffinity`), so a process started under
/// `taskset -c LIST` (or a cgroup's cpuset) pins its workers inside LIST and never onto
/// a CPU it was kept off. Empty when the mask cannot be read: the workers then float.
fn pin_cores() -> Vec<core_affinity::CoreId> {
    core_affinity::get_core_ids().unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::pin_cores;

    /// A thread kept to one CPU (as `taskset -c` keeps `record`) gets workers pinned to that
    /// CPU alone, not to every CPU of the machine.
    #[test]
    fn workers_are_pinned_within_the_calling_threads_cpus() {
        let all = core_affinity::get_core_ids().expect("the test thread's CPUs can be read");
        let last = *all.last().expect("a thread may run on at least one CPU");
        let chosen = std::thread::spawn(move || {
            assert!(
                core_affinity::set_for_current(last),
                "a thread may be moved onto CPU {} it may run on",
                last.id
            );
            pin_cores()
        })
        .join()
        .expect("the pinned thread returns");
        assert_eq!(
            chosen,
            vec![last],
            "workers' cores within the caller's mask"
        );
        // The test's own thread, not moved, still sees every CPU it was given.
        assert_eq!(pin_cores(), all);
    }
}
