//! Runs every saved fuzz input through the same checks as the fuzz targets (the file
//! `fuzz/src/lib.rs` is included here), so CI replays them without nightly or
//! libFuzzer: `tests/fuzz_regressions/<target>/` holds the checked-in seeds (`seed-*`)
//! and the minimized inputs of crashes found by fuzzing (`crash-*`, kept after the fix).

// The fuzz crate's public checks are private here.
#[allow(dead_code, unreachable_pub)]
#[path = "../../../../fuzz/src/lib.rs"]
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

/// A short fuzzing smoke run on stable, for CI: every saved input of every target is
/// mutated (byte flips, truncation, insertions, splices with another input) by a seeded
/// generator and run through the same checks, within a time budget per target. Long runs
/// use `cargo fuzz` (see `fuzz/README.md`); this catches a regression in minutes of CI
/// time rather than hours.
#[test]
fn mutation_smoke_run() {
    const BUDGET: Duration = Duration::from_secs(4);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut failures = Vec::new();
    let mut total = 0usize;
    for &(target, check) in checks::TARGETS {
        let seeds: Vec<Vec<u8>> = inputs(&root.join(target))
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        let start = std::time::Instant::now();
        let mut runs = 0usize;
        while start.elapsed() < BUDGET && runs < 20_000 {
            let mut data = seeds[next() as usize % seeds.len()].clone();
            for _ in 0..=(next() % 4) {
                let at = if data.is_empty() {
                    0
                } else {
                    next() as usize % data.len()
                };
                match next() % 4 {
                    0 if !data.is_empty() => data[at] ^= 1 << (next() % 8),
                    1 => data.truncate(at),
                    2 => data.insert(at, next() as u8),
                    _ => {
                        let other = &seeds[next() as usize % seeds.len()];
                        let from = if other.is_empty() {
                            0
                        } else {
                            next() as usize % other.len()
                        };
                        data.splice(at..at, other[from..].iter().take(64).copied());
                    }
                }
            }
            runs += 1;
            if let Err(msg) = run_one(check, data.clone()) {
                failures.push(format!("{target}: mutated input {data:02x?}: {msg}"));
                break;
            }
        }
        println!(
            "{target}: {runs} mutated inputs in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        total += runs;
    }
    println!("{total} mutated inputs in all");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
