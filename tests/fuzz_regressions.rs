//! Runs every saved fuzz input through the same checks as the fuzz targets (the file
//! `fuzz/src/lib.rs` is included here), so CI replays them without nightly or
//! libFuzzer: `tests/fuzz_regressions/<target>/` holds the checked-in seeds (`seed-*`)
//! and the minimized inputs of crashes found by fuzzing (`crash-*`, kept after the fix).

#[allow(dead_code)]
#[path = "../fuzz/src/lib.rs"]
mod checks;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Longest an input may take (the slowest seed takes well under a second).
const TIME_LIMIT: Duration = Duration::from_secs(60);

/// Runs `check` on `data` on its own thread: `Err` with the panic message, or on a
/// timeout (the thread is then left behind).
fn run_one(check: fn(&[u8]), data: Vec<u8>) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(|| check(&data))).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        });
        let _ = tx.send(r);
    });
    match rx.recv_timeout(TIME_LIMIT) {
        Ok(r) => r,
        Err(_) => Err(format!("no result within {} s", TIME_LIMIT.as_secs())),
    }
}

/// Runs every input of `sub` (relative to each target's directory); returns the inputs
/// run and the failures.
fn replay(sub: &str) -> (usize, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut failures = Vec::new();
    let mut count = 0;
    for &(target, check) in checks::TARGETS {
        for path in inputs(&root.join(target).join(sub)) {
            let data = std::fs::read(&path).unwrap();
            count += 1;
            if let Err(msg) = run_one(check, data) {
                failures.push(format!("{target}: {}: {msg}", path.display()));
            }
        }
    }
    (count, failures)
}

#[test]
fn saved_inputs_run_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    for &(target, _) in checks::TARGETS {
        assert!(
            !inputs(&root.join(target)).is_empty(),
            "no saved inputs for fuzz target {target}"
        );
    }
    let (count, failures) = replay("");
    println!("{count} saved fuzz inputs replayed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
