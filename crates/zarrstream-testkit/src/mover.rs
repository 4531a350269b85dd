//! A data mover for the long-run test and bench: deletes every finished shard under
//! `c/` some time after it appeared, and the directories that leaves empty, as a
//! transfer to a file server does during a days-long acquisition.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Moves shards of `store` `after` they were first seen until `done` is set (then takes
/// whatever is left), counting each shard once in `moved`.
///
/// On Windows a file deleted while the writer still has it open (between the rename and
/// the finisher's close) stays listed, delete-pending, until that handle closes; the
/// next scan sees it again and a second delete succeeds under Wine. Shard keys of an
/// appended array are never reused, so a path once moved is not counted again.
pub fn run(store: &Path, after: Duration, done: &AtomicBool, moved: &AtomicU64) {
    let chunks = store.join("c");
    let mut seen: HashMap<PathBuf, Instant> = HashMap::new();
    let mut gone: HashSet<PathBuf> = HashSet::new();
    loop {
        let last = done.load(Ordering::Acquire);
        let now = Instant::now();
        let mut stack = vec![chunks.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                } else if !gone.contains(&e.path()) {
                    seen.entry(e.path()).or_insert(now);
                }
            }
        }
        seen.retain(|p, t| {
            if !last && now.duration_since(*t) < after {
                return true;
            }
            if std::fs::remove_file(p).is_ok() && gone.insert(p.clone()) {
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
