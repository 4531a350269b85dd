//! A data mover for the long-run test and bench: deletes every finished shard under
//! `c/` some time after it appeared, and the directories that leaves empty, as a
//! transfer to a file server does during a days-long acquisition.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Moves shards of `store` `after` they were first seen until `done` is set (then takes
/// whatever is left), counting them in `moved`.
pub fn run(store: &Path, after: Duration, done: &AtomicBool, moved: &AtomicU64) {
    let chunks = store.join("c");
    let mut seen: HashMap<PathBuf, Instant> = HashMap::new();
    loop {
        let last = done.load(Ordering::Acquire);
        let now = Instant::now();
        let mut stack = vec![chunks.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                } else {
                    seen.entry(e.path()).or_insert(now);
                }
            }
        }
        seen.retain(|p, t| {
            if !last && now.duration_since(*t) < after {
                return true;
            }
            if std::fs::remove_file(p).is_ok() {
                moved.fetch_add(1, Ordering::Relaxed);
                // Prune what the shard leaves empty, as movers do; the writer makes a
                // directory again when it needs it.
                let mut dir = p.parent();
                while let Some(d) = dir.filter(|d| *d != chunks.as_path()) {
                    if std::fs::remove_dir(d).is_err() {
                        break;
                    }
                    dir = d.parent();
                }
            }
            false
        });
        if last {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
