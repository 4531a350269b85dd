//! The encoding engine: a set of worker threads taking chunk jobs from one channel.
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

/// Encoding workers and the sending end of their jobs channel.
pub(crate) struct Engine {
    jobs: Mutex<Option<Sender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Starts `workers` threads `zarrstream-worker-i`, worker `i` pinned to core
    /// `i mod cores` when `pin`, at niceness `nice`. `bound`: the jobs channel's
    /// capacity (`None`: unbounded). The workers' scratch and encoders count in `meter`.
    pub(crate) fn start(
        workers: usize,
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
            workers: Mutex::new(Vec::with_capacity(workers)),
        });
        for i in 0..workers {
            let rx = rx.clone();
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let meter = Arc::clone(meter);
            let spawned = std::thread::Builder::new()
                .name(format!("zarrstream-worker-{i}"))
                .spawn(move || worker::run(rx, core, nice, &meter));
            match spawned {
                Ok(h) => lock(&engine.workers).push(h),
                Err(e) => {
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

    /// Drops the engine's sender and joins the workers once every other sender is gone;
    /// a worker that panicked outside a job is reported.
    pub(crate) fn join(&self) -> Result<()> {
        lock(&self.jobs).take();
        let handles: Vec<_> = lock(&self.workers).drain(..).collect();
        let mut first = Ok(());
        for h in handles {
            if let Err(p) = h.join()
                && first.is_ok()
            {
                first = Err(Error::panicked("a worker thread", p.as_ref()));
            }
        }
        first
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
