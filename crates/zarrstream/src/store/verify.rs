//! Checking every shard of a store: the index's crc32c, every entry inside the file and
//! clear of the index and of the other chunks, every inner chunk's crc32c (or a full
//! decode); each problem named by shard key and inner-chunk coordinates. The data behind
//! `zarrstream verify`, for the tool and the bindings alike.

use std::path::PathBuf;

use serde::Serialize;

use super::progress::map_shards;
use super::{CheckedBy, Shard, StoreError, StoreReader, read_chunk};

/// One problem found in a shard.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// The shard key, e.g. `c/0/0/0`.
    pub shard: String,
    /// Coordinates of the inner chunk within its shard, or `None` for the whole shard
    /// (index, file).
    pub chunk: Option<Vec<u64>>,
    /// What is wrong.
    pub message: String,
}

/// `c/1/0/0 chunk [1, 0, 1]: crc32c mismatch …`, or `c/0/0/0: …` for the whole shard.
impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.chunk {
            // Debug of a Vec<u64> is the `[a, b, c]` the other reports use.
            Some(c) => write!(f, "{} chunk {c:?}: {}", self.shard, self.message),
            None => write!(f, "{}: {}", self.shard, self.message),
        }
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The store path.
    pub store: PathBuf,
    /// Shard files checked.
    pub shards: u64,
    /// Inner chunks whose bytes were checked.
    pub chunks_checked: u64,
    /// Inner chunks marked empty in readable indexes.
    pub chunks_empty: u64,
    /// How chunks were checked: `crc32c`, `crc32c_and_decode` or `decode`.
    pub checked_by: CheckedBy,
    /// Every problem, in shard order and chunk order within a shard; empty for a sound
    /// store.
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

/// Checks every shard of `store`, shards in parallel: the index (length, crc32c), the
/// entries' placement, then every placed chunk by its crc32c, also decoding it when
/// `decode` is set (always when the array has no crc32c).
///
/// Damage is reported in [`Report::problems`], not as an error: the call fails only when
/// the shards cannot be listed. `progress(done, total)` is called with the number of
/// shards checked so far, once with `done` 0 before the first and once after each (one
/// call at a time, `done` growing, from the thread that checked the shard); pass
/// `|_, _| {}` for none.
///
/// ```no_run
/// use zarrstream::store::{StoreReader, verify};
/// let store = StoreReader::open("run.zarr".as_ref())?;
/// let report = verify(&store, false, |done, total| eprint!("\r{done}/{total} shards"))?;
/// for problem in &report.problems {
///     println!("{problem}");
/// }
/// # Ok::<(), zarrstream::store::StoreError>(())
/// ```
pub fn verify(
    store: &StoreReader,
    decode: bool,
    progress: impl FnMut(u64, u64) + Send,
) -> Result<Report, StoreError> {
    let shards = store.shards()?;
    let results = map_shards(&shards, progress, |s| verify_shard(store, s, decode));
    let checked_by = match (store.spec().crc32c(), decode) {
        (true, false) => CheckedBy::Crc32c,
        (true, true) => CheckedBy::Crc32cAndDecode,
        (false, _) => CheckedBy::Decode,
    };
    Ok(Report {
        store: store.root().to_path_buf(),
        shards: shards.len() as u64,
        chunks_checked: results.iter().map(|r| r.checked).sum(),
        chunks_empty: results.iter().map(|r| r.empty).sum(),
        checked_by,
        problems: results.into_iter().flat_map(|r| r.problems).collect(),
    })
}

/// Checks one shard: its index, the entries' placement, then every placed chunk. Every
/// failure becomes a problem of this shard, so one bad file does not stop the others'
/// checks.
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
        // The parser's reason alone: the problem already names the shard.
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
        // A misplaced entry is already reported; reading it would only add noise.
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
