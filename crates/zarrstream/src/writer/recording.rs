//! A recording of several arrays in one group: one engine of encoding workers and one
//! memory budget shared by all of them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::chain;
use super::engine::Engine;
use super::intake::Frame;
use super::level::Level;
use super::options::WriterOptions;
use super::outcome::PushOutcome;
use super::start::{Workers, thread_count, worker_count};
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::ome::Ome;
use crate::sink::{SinkChoice, SinkKind};
use crate::spec::ArraySpec;
use crate::stats::Stats;
use crate::store::{self, prepare_dir};

/// One array of a [`Recording`]: where it goes in the group, its specification and,
/// for an OME-Zarr image (a group with its levels at `<key>/0`, `<key>/1`, …), its
/// OME settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ArrayConfig {
    /// Relative `/` path of the array (or image group) under the recording's root.
    pub key: String,
    /// The array's specification (of level 0 for an image).
    pub spec: ArraySpec,
    /// OME-Zarr image settings; `None` writes a plain array.
    pub ome: Option<Ome>,
}

impl ArrayConfig {
    /// A plain array at `key`.
    pub fn new(key: impl Into<String>, spec: ArraySpec) -> Self {
        ArrayConfig {
            key: key.into(),
            spec,
            ome: None,
        }
    }

    /// Makes the array an OME-Zarr image with `ome`'s settings.
    #[must_use]
    pub fn ome(mut self, ome: Ome) -> Self {
        self.ome = Some(ome);
        self
    }
}

/// Names an array of a [`Recording`]: by key (`&str`, `String`) or by index (`usize`,
/// the order given to [`Recording::create`]).
pub trait ArrayId {
    /// The array's index among `keys`, or [`Error::UnknownArray`].
    fn index_in(&self, keys: &[String]) -> Result<usize>;
}

impl ArrayId for usize {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        (*self < keys.len())
            .then_some(*self)
            .ok_or_else(|| Error::UnknownArray {
                key: self.to_string(),
            })
    }
}

impl ArrayId for &str {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        keys.iter()
            .position(|k| k == self)
            .ok_or_else(|| Error::UnknownArray {
                key: (*self).to_string(),
            })
    }
}

impl ArrayId for &String {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        self.as_str().index_in(keys)
    }
}

impl ArrayId for String {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        self.as_str().index_in(keys)
    }
}

/// Statistics of a finished [`Recording`]: per array (in the order given) and in total.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordingStats {
    /// Each array's key and statistics.
    pub arrays: Vec<(String, Stats)>,
    /// Counters, bytes and pool sizes summed over the arrays; `seconds` is the longest
    /// array's, the latency summaries and `sink` are the first array's.
    pub total: Stats,
}

/// Records frames into several arrays of one Zarr v3 group at once (several cameras,
/// stage positions, …), with **one** set of encoding workers (`options.threads`, 0 = one
/// per core; three per thread with [`SinkChoice::Direct`]) and one memory budget shared
/// by all arrays.
///
/// - `root/zarr.json` is a group; each array (or OME-Zarr image group) is at
///   `root/<key>`, and the groups between them get a group `zarr.json`.
/// - `options.pool_frames` (0 = `2 × threads + 2` frames of the largest array) is the
///   **total** frame budget: each array gets `max(2, budget / Σ frame bytes)` frames of
///   its own, so back-pressure and drop counts stay exact per array.
/// - Each array has its own shard preparer and finisher thread (and pyramid threads for
///   images); pyramid levels use the shared workers and one shared reduction pool.
/// - Pushes take `&self`: one thread per camera may push, each into its array (a
///   per-array lock, uncontended when each array has one pushing thread).
/// - An array that fails does not stop the others: its error comes back from its next
///   push and from [`finish`](Self::finish).
///
/// ```no_run
/// use zarrstream::{ArrayConfig, ArraySpec, DataType, Recording, WriterOptions};
/// let spec = |h, w| {
///     ArraySpec::builder()
///         .shape([0, h, w])
///         .chunk_shape([1, h, w])
///         .shard_shape([16, h, w])
///         .dtype(DataType::UInt16)
///         .build()
/// };
/// let arrays = vec![
///     ArrayConfig::new("camera0", spec(512, 512)?),
///     ArrayConfig::new("camera1", spec(256, 256)?),
/// ];
/// let rec = Recording::create("run.zarr", arrays, WriterOptions::default().threads(2))?;
/// for _ in 0..100 {
///     rec.push("camera0", &vec![0u16; 512 * 512])?;
///     rec.push(1, &vec![0u16; 256 * 256])?;
/// }
/// let stats = rec.finish()?;
/// assert_eq!(stats.total.frames_written, 200);
/// # Ok::<(), zarrstream::Error>(())
/// ```
///
/// Dropping a recording without [`finish`](Self::finish) finishes it and ignores
/// errors.
pub struct Recording {
    root: PathBuf,
    keys: Vec<String>,
    arrays: Vec<Mutex<Option<Level>>>,
    engine: Option<Arc<Engine>>,
}

/// Checks every key: a relative path of plain names, given once, never inside another.
fn check_keys(arrays: &[ArrayConfig]) -> Result<()> {
    let bad = |key: &str, reason| Error::ArrayKey {
        key: key.to_string(),
        reason,
    };
    if arrays.is_empty() {
        return Err(bad("", "a recording needs at least one array"));
    }
    for (i, a) in arrays.iter().enumerate() {
        let key = a.key.as_str();
        if key.is_empty() || key.starts_with('/') || key.ends_with('/') {
            return Err(bad(key, "not a relative path"));
        }
        for part in key.split('/') {
            if part.is_empty() || part == "." || part == ".." {
                return Err(bad(key, "empty, `.` or `..` path component"));
            }
            if part == store::CHUNK_DIR || part.starts_with('.') {
                return Err(bad(key, "component `c` or starting with `.` is reserved"));
            }
        }
        for b in &arrays[..i] {
            if b.key == a.key {
                return Err(bad(key, "given twice"));
            }
            let (short, long) = if b.key.len() < key.len() {
                (b.key.as_str(), key)
            } else {
                (key, b.key.as_str())
            };
            if long.starts_with(short) && long.as_bytes()[short.len()] == b'/' {
                return Err(bad(key, "one array's key is inside another's"));
            }
        }
    }
    Ok(())
}

/// A minimal Zarr v3 group document.
const GROUP_JSON: &[u8] = br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#;

fn publish_group(dir: &Path) -> Result<()> {
    store::publish_bytes(dir, "zarr.json", GROUP_JSON).map_err(Error::from)
}

fn lock(m: &Mutex<Option<Level>>) -> MutexGuard<'_, Option<Level>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Recording {
    /// Creates the group at `root` (replaced with `options.overwrite`), every array in
    /// it, and starts the shared workers. Keys are checked before anything is written
    /// ([`Error::ArrayKey`]). A recording that could not be set up completely is removed.
    pub fn create(
        root: impl AsRef<Path>,
        arrays: Vec<ArrayConfig>,
        options: WriterOptions,
    ) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        options.validate()?;
        check_keys(&arrays)?;
        if options.frame_meta.is_some() {
            // Not silently dropped: a recording's arrays do not carry it yet.
            return Err(Error::FrameMeta {
                field: "(options)".into(),
                reason: "per-frame metadata is not available in a Recording yet; use one \
                         Writer per array"
                    .into(),
            });
        }
        prepare_dir(&root, options.overwrite)?;
        Self::start(&root, arrays, options).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&root);
        })
    }

    fn start(root: &Path, arrays: Vec<ArrayConfig>, options: WriterOptions) -> Result<Self> {
        publish_group(root)?;
        let threads = thread_count(options.threads);
        // Sized like a `Writer`'s: `Auto` resolves per array, to `Direct` on most local
        // file systems, whose writes hold their worker, so it counts as `Direct` here
        // (on a file system where it resolves to pwrite the extra workers only wait).
        let kind = match options.sink {
            SinkChoice::Direct | SinkChoice::Auto => SinkKind::Direct,
            _ => SinkKind::Pwrite,
        };
        let engine = Engine::start(
            worker_count(threads, kind),
            options.pin_threads,
            options.background_nice,
            None,
        )?;
        let reducers = if arrays.iter().any(|a| a.ome.is_some()) {
            Some(chain::reduction_pool(threads, options.background_nice)?)
        } else {
            None
        };
        let workers = Workers::Shared {
            engine: Arc::clone(&engine),
            reducers,
        };
        // The frame budget, in bytes, split so that every array has the same number of
        // frames: budget / Σ frame bytes (at least 2).
        let largest = arrays.iter().map(|a| a.spec.frame_bytes).max().unwrap_or(0);
        let total_frames = if options.pool_frames == 0 {
            2 * threads + 2
        } else {
            options.pool_frames
        };
        let sum: usize = arrays.iter().map(|a| a.spec.frame_bytes).sum();
        let per_array = (total_frames * largest)
            .checked_div(sum)
            .unwrap_or(0)
            .max(2);
        let mut rec = Recording {
            root: root.to_path_buf(),
            keys: Vec::with_capacity(arrays.len()),
            arrays: Vec::with_capacity(arrays.len()),
            engine: Some(engine),
        };
        for a in arrays {
            let dir = root.join(&a.key);
            // Groups between the root and the array.
            let mut parent = root.to_path_buf();
            let parts: Vec<&str> = a.key.split('/').collect();
            for part in &parts[..parts.len() - 1] {
                parent.push(part);
                if !parent.join("zarr.json").exists() {
                    std::fs::create_dir_all(&parent)
                        .map_err(|e| Error::io("create directory", &parent, e, 0))?;
                    publish_group(&parent)?;
                }
            }
            std::fs::create_dir(&dir).map_err(|e| Error::io("create directory", &dir, e, 0))?;
            let opts = WriterOptions {
                pool_frames: per_array,
                overwrite: false,
                ..options.clone()
            };
            let level = match &a.ome {
                Some(ome) => chain::create_image(&dir, a.spec, ome, opts, &workers, true)?,
                None => Level::start(dir, a.spec, opts, false, &workers)?,
            };
            rec.keys.push(a.key);
            rec.arrays.push(Mutex::new(Some(level)));
        }
        Ok(rec)
    }

    /// The root of the recording's group.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The arrays' keys, in the order given to [`create`](Self::create).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(String::as_str)
    }

    /// Runs `f` on the array's level (or [`Error::Closed`] once finished).
    fn with<R>(&self, a: impl ArrayId, f: impl FnOnce(&mut Level) -> Result<R>) -> Result<R> {
        let i = a.index_in(&self.keys)?;
        let mut level = lock(&self.arrays[i]);
        f(level.as_mut().ok_or(Error::Closed)?)
    }

    /// Pushes one frame into array `a` (one copy into its pool). Returns
    /// [`PushOutcome::Dropped`] if the array's pool was empty under
    /// [`Backpressure::Drop`](crate::Backpressure::Drop).
    pub fn push<T: Element>(&self, a: impl ArrayId, frame: &[T]) -> Result<PushOutcome> {
        let bytes = bytemuck::cast_slice(frame);
        self.with(a, |l| {
            l.push_frame(T::DTYPE, Frame::Borrowed(bytes), Instant::now())
        })
    }

    /// Pushes one frame of raw little-endian bytes into array `a`, with its scheduled
    /// camera time (from which frame latency is measured).
    pub fn push_bytes(
        &self,
        a: impl ArrayId,
        frame: &[u8],
        scheduled: Instant,
    ) -> Result<PushOutcome> {
        self.with(a, |l| {
            let dtype = l.shared.spec.dtype;
            l.push_frame(dtype, Frame::Borrowed(frame), scheduled)
        })
    }

    /// Counts a frame of array `a` the caller could not push as dropped (its place
    /// reads as the fill value).
    pub fn skip(&self, a: impl ArrayId) -> Result<()> {
        self.with(a, Level::skip)
    }

    /// Frames offered to array `a` so far (written + dropped).
    pub fn frames_pushed(&self, a: impl ArrayId) -> Result<u64> {
        self.with(a, |l| Ok(l.next_frame))
    }

    /// The specification of array `a` (of level 0 for an image).
    pub fn spec(&self, a: impl ArrayId) -> Result<ArraySpec> {
        self.with(a, |l| Ok(l.shared.spec.clone()))
    }

    /// Finishes every array (each even if another fails), then stops the workers.
    /// Returns the statistics, or the first error.
    pub fn finish(mut self) -> Result<RecordingStats> {
        let mut first = None;
        let mut arrays = Vec::with_capacity(self.keys.len());
        for (key, slot) in self.keys.iter().zip(&self.arrays) {
            let Some(level) = lock(slot).take() else {
                continue;
            };
            match level.finish() {
                Ok(s) => arrays.push((key.clone(), s)),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        if let Err(e) = self.join() {
            first.get_or_insert(e);
        }
        if let Some(e) = first {
            return Err(e);
        }
        let total = total(&arrays).ok_or(Error::Closed)?;
        Ok(RecordingStats { arrays, total })
    }

    /// Stops every array at once (as [`Writer::abort`](crate::Writer::abort)), then the
    /// workers. Returns the first error met.
    pub fn abort(mut self, reason: impl Into<String>) -> Result<()> {
        let reason = reason.into();
        let mut first = None;
        for slot in &self.arrays {
            if let Some(level) = lock(slot).take()
                && let Err(e) = level.abort(reason.clone())
            {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = self.join() {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    fn join(&mut self) -> Result<()> {
        self.engine.take().map_or(Ok(()), |e| e.join())
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        for slot in &self.arrays {
            // Dropping a level finishes it.
            drop(lock(slot).take());
        }
        let _ = self.join();
    }
}

/// The arrays' statistics summed.
fn total(arrays: &[(String, Stats)]) -> Option<Stats> {
    let mut it = arrays.iter().map(|(_, s)| s);
    let mut t = it.next()?.clone();
    for s in it {
        t.frames_pushed += s.frames_pushed;
        t.frames_written += s.frames_written;
        t.frames_dropped += s.frames_dropped;
        t.bytes_in += s.bytes_in;
        t.bytes_stored += s.bytes_stored;
        t.shards += s.shards;
        t.seconds = t.seconds.max(s.seconds);
        t.pool_bytes += s.pool_bytes;
        t.staging_bytes += s.staging_bytes;
    }
    Some(t)
}
