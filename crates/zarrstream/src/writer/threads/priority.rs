//! Scheduling of the writer's own threads: they do throughput work and must not delay
//! the caller's thread, which pushes frames and is latency work.

/// Makes the calling thread background work (see [`WriterOptions::background_nice`]):
/// on Linux the `SCHED_BATCH` policy, so that waking it (a job for a worker, a shard for
/// the finisher) never preempts the thread that pushes frames, and `nice` steps nicer; on
/// Windows a priority below normal. Best effort: neither needs privileges, and a failure
/// only costs latency.
pub(crate) fn lower_priority(nice: u8) {
    if nice == 0 {
        return;
    }
    crate::platform::lower_thread_priority(nice);
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// `(policy, nice)` of the calling thread from `/proc/thread-self/stat`.
    fn sched() -> (u32, i32) {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // Fields after the parenthesised command name; nice is field 19, policy 41.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        (f[41 - 3].parse().unwrap(), f[19 - 3].parse().unwrap())
    }

    #[test]
    fn background_threads_are_batch_and_nicer() {
        const SCHED_BATCH: u32 = 3;
        let (policy, nice) = std::thread::spawn(|| {
            lower_priority(5);
            sched()
        })
        .join()
        .unwrap();
        assert_eq!(policy, SCHED_BATCH);
        assert_eq!(nice, 5);
        // The calling thread is untouched.
        assert_ne!(sched().0, SCHED_BATCH);
    }

    #[test]
    fn zero_leaves_the_thread_alone() {
        let before = std::thread::spawn(sched).join().unwrap();
        let after = std::thread::spawn(|| {
            lower_priority(0);
            sched()
        })
        .join()
        .unwrap();
        assert_eq!(before, after);
    }
}
