//! `zarrstream verify STORE [--decode] [--json]`: checks every shard of a store — the
//! index's crc32c, every entry inside the file and clear of the index and of the other
//! chunks, every inner chunk's crc32c (or a full decode when the array has none, or with
//! `--decode`) — and reports each problem with its shard key and inner-chunk
//! coordinates. Shards are checked in parallel. Exit status 1 on any problem.

use std::path::PathBuf;
use std::process::ExitCode;

use rayon::prelude::*;
use serde::Serialize;

use zarrstream::store::{CheckedBy, Shard, StoreError, StoreReader, read_chunk};

use crate::store;

/// Options of `zarrstream verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The array directory (holding zarr.json).
    pub store: PathBuf,
    /// Decode every chunk completely, also where its crc32c already verified it.
    #[arg(long)]
    pub decode: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One problem found in a shard.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct Problem {
    /// The shard key, e.g. `c/0/0/0`.
    pub shard: String,
    /// Coordinates of the inner chunk within its shard, or `None` for the whole shard
    /// (index, file).
    pub chunk: Option<Vec<u64>>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.chunk {
            Some(c) => write!(
                f,
                "{} chunk {}: {}",
                self.shard,
                store::coords_text(c),
                self.message
            ),
            None => write!(f, "{}: {}", self.shard, self.message),
        }
    }
}

/// What `verify` found.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    /// The store path.
    pub store: PathBuf,
    /// Shard files checked.
    pub shards: usize,
    /// Inner chunks whose bytes were checked.
    pub chunks_checked: u64,
    /// Inner chunks marked empty in readable indexes.
    pub chunks_empty: u64,
    /// How chunks were checked: `crc32c`, `crc32c_and_decode` or `decode`.
    pub checked_by: CheckedBy,
    /// Every problem, in shard order and chunk order within a shard.
    pub problems: Vec<Problem>,
}

/// What one shard's check found.
#[derive(Debug, Default)]
struct ShardResult {
    checked: u64,
    empty: u64,
    problems: Vec<Problem>,
}

impl ShardResult {
    fn problem(&mut self, shard: &Shard, chunk: Option<Vec<u64>>, message: String) {
        self.problems.push(Problem {
            shard: shard.key.clone(),
            chunk,
            message,
        });
    }
}

/// Runs `verify`.
pub(crate) fn run(args: Args) -> crate::Outcome {
    let report = verify_store(&args.store, args.decode, args.json)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    match report.problems.first() {
        None => Ok(ExitCode::SUCCESS),
        Some(first) => Err(format!(
            "{} problem(s) in {}; first: {first}",
            report.problems.len(),
            report.store.display()
        )
        .into()),
    }
}

/// Checks every shard of the store at `root` in parallel.
pub(crate) fn verify_store(
    root: &std::path::Path,
    decode: bool,
    json: bool,
) -> Result<Report, StoreError> {
    let store = StoreReader::open(root)?;
    let shards = store.shards()?;
    let bar = store::progress(shards.len() as u64, "verify", json);
    let results: Vec<ShardResult> = shards
        .par_iter()
        .map(|s| {
            let r = verify_shard(&store, s, decode);
            bar.inc(1);
            r
        })
        .collect();
    bar.finish_and_clear();
    let checked_by = match (store.spec().crc32c(), decode) {
        (true, false) => CheckedBy::Crc32c,
        (true, true) => CheckedBy::Crc32cAndDecode,
        (false, _) => CheckedBy::Decode,
    };
    Ok(Report {
        store: root.to_path_buf(),
        shards: shards.len(),
        chunks_checked: results.iter().map(|r| r.checked).sum(),
        chunks_empty: results.iter().map(|r| r.empty).sum(),
        checked_by,
        problems: results.into_iter().flat_map(|r| r.problems).collect(),
    })
}

/// Checks one shard: its index, the entries' placement, then every placed chunk.
fn verify_shard(store: &StoreReader, shard: &Shard, decode: bool) -> ShardResult {
    let mut r = ShardResult::default();
    let file = match store.open_shard(shard) {
        Ok(f) => f,
        Err(e) => {
            r.problem(shard, None, e.to_string());
            return r;
        }
    };
    let entries = match store.read_index(shard, &file) {
        Ok(e) => e,
        Err(StoreError::Index { source, .. }) => {
            r.problem(shard, None, source.to_string());
            return r;
        }
        Err(e) => {
            r.problem(shard, None, e.to_string());
            return r;
        }
    };
    let faults = store.entry_faults(shard, &entries);
    for (i, f) in &faults {
        r.problem(shard, Some(store.inner_coords(*i as u64)), f.to_string());
    }
    for (i, entry) in entries.iter().enumerate() {
        let Some((offset, nbytes)) = *entry else {
            r.empty += 1;
            continue;
        };
        if faults.iter().any(|(j, _)| *j == i) {
            continue;
        }
        r.checked += 1;
        let outcome = read_chunk(&file, offset, nbytes).and_then(|b| store.check_chunk(&b, decode));
        if let Err(f) = outcome {
            r.problem(shard, Some(store.inner_coords(i as u64)), f.to_string());
        }
    }
    r
}

fn print_text(r: &Report) {
    let how = match r.checked_by {
        CheckedBy::Crc32c => "crc32c",
        CheckedBy::Crc32cAndDecode => "crc32c and full decode",
        CheckedBy::Decode => "full decode (no crc32c)",
    };
    println!(
        "{}: {} shards, {} chunks checked by {how}, {} empty",
        r.store.display(),
        r.shards,
        r.chunks_checked,
        r.chunks_empty
    );
    for p in &r.problems {
        println!("  {p}");
    }
    if r.problems.is_empty() {
        println!("  OK: no problems");
    }
}
