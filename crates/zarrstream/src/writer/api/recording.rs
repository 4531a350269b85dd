//! A recording of several arrays in one group: one engine of encoding workers and one
//! memory budget shared by all of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::metadata;
use crate::meter::{MemoryUsage, Meter};
use crate::ome::{Ome, Plate};
use crate::remote::Mirror;
use crate::shard::ChunkOrder;
use crate::sink::{SinkChoice, SinkKind};
use crate::spec::ArraySpec;
use crate::stats::Stats;
use crate::store::{self, GroupState, group_state, prepare_dir};
use crate::writer::Writer;
use crate::writer::api::array::{ArrayConfig, ArrayId, check_arrays};
use crate::writer::api::memory::MemoryEstimate;
use crate::writer::api::options::WriterOptions;
use crate::writer::level::Level;
use crate::writer::level::start::{Workers, engine_shape, pool_frames, thread_count};
use crate::writer::pyramid::chain;
use crate::writer::state::destination::Destination;
use crate::writer::state::published::{self, OURS};
use crate::writer::threads::engine::Engine;

/// Statistics of a finished [`Recording`]: per array (in the order given) and in total.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct RecordingStats {
    /// Each array's key and statistics (serialised as an object from key to
    /// statistics, in this order).
    #[serde(serialize_with = "arrays_as_map")]
    pub arrays: Vec<(String, Stats)>,
    /// Counters, bytes and pool sizes summed over the arrays, latencies over every
    /// array's frames; `seconds` is the longest array's and `sink` the first array's.
    pub total: Stats,
}

/// `{"<key>": <stats>, …}` in the arrays' order, whatever map type serde_json builds.
fn arrays_as_map<S: serde::Serializer>(
    arrays: &[(String, Stats)],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(arrays.len()))?;
    for (key, stats) in arrays {
        map.serialize_entry(key, stats)?;
    }
    map.end()
}

/// Records frames into several arrays of one Zarr v3 group at once (several cameras,
/// stage positions, …), with **one** set of encoding workers (`options.threads`, 0 = one
/// per core; with the direct sink two write-behind threads per thread besides) and one
/// memory budget shared by
/// all arrays.
///
/// - `root/zarr.json` is a group marked as zarrstream's
///   (`attributes.zarrstream.recording`); each array (or OME-Zarr image group) is at
///   `root/<key>`, and the groups between them get a group `zarr.json` if they have
///   none. An existing group zarrstream did not make is refused ([`Error::NotOwned`])
///   unless [`existing_group`](WriterOptions::existing_group) is set; its `zarr.json`
///   is then left as it is.
/// - `options.pool_frames` (0 = `2 × threads + 2` frames of the largest array) is the
///   **total** frame budget: each array gets `max(2, budget / Σ frame bytes)` frames of
///   its own, so back-pressure and drop counts stay exact per array.
/// - Each array has its own shard preparer and finisher thread (and pyramid threads for
///   images); pyramid levels use the shared workers and one shared reduction pool.
/// - Pushes take `&self`: one thread per camera may push, each into its array (a
///   per-array lock, uncontended when each array has one pushing thread).
/// - An array that fails does not stop the others: its error comes back from its next
///   push and from [`finish`](Self::finish).
/// - With [`resume`](WriterOptions::resume), every array is continued where it ended
///   (see [`Writer`]'s resume).
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
///     // Each array is a `Writer` while its guard lives: push, push_at, buffers, ….
///     rec.array("camera0")?.push(&vec![0u16; 512 * 512])?;
///     rec.array(1)?.push(&vec![0u16; 256 * 256])?;
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
    arrays: Vec<Mutex<Writer>>,
    engine: Option<Arc<Engine>>,
    /// Held while the root group's document is rewritten.
    root_doc: Mutex<()>,
    /// The shared workers' buffers count here, and every array's (each in its own
    /// meter, a child of this one).
    meter: Arc<Meter>,
    /// A root attribute the recording writes itself besides `zarrstream` (a plate's
    /// `ome`), refused by `set_root_attribute`.
    root_reserved: Option<&'static str>,
    /// With an object-store destination, the uploader of the staging directory.
    mirror: Option<Mirror>,
}

/// A plate's field images: one OME image array of `spec` per field, in visiting order.
fn plate_arrays(plate: &Plate, spec: &ArraySpec, ome: &Ome) -> Result<Vec<ArrayConfig>> {
    Ok(plate
        .images()?
        .into_iter()
        .map(|i| ArrayConfig::new(i.key, spec.clone()).ome(ome.clone()))
        .collect())
}

/// The attributes of the groups a recording lays out around its arrays (a plate's);
/// empty for a plain recording.
#[derive(Debug, Default)]
struct Layout {
    /// Added beside the recording's mark in the root group's attributes.
    root: Map<String, Value>,
    /// The attributes of groups between the root and the arrays, by key.
    groups: HashMap<String, Value>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn into_inner<T>(m: Mutex<T>) -> T {
    m.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// One array of a [`Recording`], borrowed from it by [`Recording::array`]: derefs to
/// the array's [`Writer`], whose lock it holds while it lives.
pub struct ArrayWriter<'a> {
    writer: MutexGuard<'a, Writer>,
}

impl std::ops::Deref for ArrayWriter<'_> {
    type Target = Writer;
    fn deref(&self) -> &Writer {
        &self.writer
    }
}

impl std::ops::DerefMut for ArrayWriter<'_> {
    fn deref_mut(&mut self) -> &mut Writer {
        &mut self.writer
    }
}

/// Makes (or, as the options allow, takes) the recording's root group. Returns whether
/// this call created it (and so may remove it on failure).
fn claim_root(
    root: &Path,
    keys: &[String],
    options: &WriterOptions,
    layout: &Layout,
) -> Result<bool> {
    let not_owned = |reason| Error::NotOwned {
        path: root.to_path_buf(),
        reason,
    };
    let create = |overwrite| -> Result<bool> {
        prepare_dir(root, overwrite)?;
        metadata::publish(root, &store::recording_group(keys, &layout.root))?;
        Ok(true)
    };
    match group_state(root) {
        GroupState::Absent if options.resume => Err(Error::io(
            "resume",
            root,
            std::io::Error::from(std::io::ErrorKind::NotFound),
            0,
        )),
        GroupState::Absent => create(false),
        GroupState::NotAGroup if options.resume || options.existing_group => {
            Err(not_owned("not a Zarr v3 group"))
        }
        _ if options.overwrite && !options.existing_group => create(true),
        GroupState::Ours if options.resume || options.existing_group => Ok(false),
        GroupState::Foreign if options.resume || options.existing_group => Ok(false),
        GroupState::Foreign => Err(not_owned(
            "a Zarr group zarrstream did not create (set existing_group to add arrays to it)",
        )),
        GroupState::Ours | GroupState::NotAGroup => Err(Error::Exists {
            path: root.to_path_buf(),
        }),
    }
}

/// Gives every directory between `root` and `dir` a group document if it has none
/// (with the layout's attributes for that group, if it names it).
fn groups_between(root: &Path, key: &str, layout: &Layout) -> Result<()> {
    let mut parent = root.to_path_buf();
    let parts: Vec<&str> = key.split('/').collect();
    for (i, part) in parts[..parts.len() - 1].iter().enumerate() {
        parent.push(part);
        match group_state(&parent) {
            GroupState::Absent => {
                // Durably: publishing the group's document below syncs the group's own
                // directory, not its name in the one above, and a power cut even after
                // `finish` lost the group with the arrays in it (found by
                // `tests/writer/power_loss.rs`).
                store::create_dirs_durably(&parent)?;
                let doc = match layout.groups.get(&parts[..=i].join("/")) {
                    Some(attributes) => store::group_document(attributes.clone()),
                    None => store::plain_group(),
                };
                metadata::publish(&parent, &doc)?;
            }
            GroupState::Ours | GroupState::Foreign => {}
            GroupState::NotAGroup => {
                return Err(Error::NotOwned {
                    path: parent,
                    reason: "not a Zarr v3 group, so an array key cannot pass through it",
                });
            }
        }
    }
    Ok(())
}

/// With resume: the root attributes the layout writes (a plate's `ome`) must be those on
/// disk, or the arrays would be continued under a different plate.
fn same_root_attributes(root: &Path, layout: &Layout) -> Result<()> {
    if layout.root.is_empty() {
        return Ok(());
    }
    let path = root.join(store::METADATA_FILE);
    let text = std::fs::read(&path).map_err(|e| Error::io("read", &path, e, 0))?;
    let doc: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
    for (name, want) in &layout.root {
        let got = doc.pointer(&format!("/attributes/{name}"));
        if got != Some(want) {
            return Err(Error::ResumeMismatch {
                path: root.to_path_buf(),
                field: "plate",
                on_disk: got.map_or_else(|| "none".into(), Value::to_string),
                requested: want.to_string(),
            });
        }
    }
    Ok(())
}

impl Recording {
    /// Creates the group at `root` (replaced with `options.overwrite`), every array in
    /// it, and starts the shared workers. Keys and options are checked before anything
    /// is written ([`Error::ArrayKey`]). On failure, what this call created is removed.
    pub fn create(
        root: impl AsRef<Path>,
        arrays: Vec<ArrayConfig>,
        options: WriterOptions,
    ) -> Result<Self> {
        Self::create_in(root.as_ref(), arrays, options, Layout::default(), None)
    }

    /// Creates an OME-Zarr 0.5 high-content screening plate at `root`: every field of
    /// view of `plate` is an OME-Zarr image (`ome`'s settings, level 0 stored as `spec`)
    /// at its [`PlateImage::key`](crate::PlateImage::key) `ROW/COLUMN/PATH`, and one
    /// array of this recording, in the order of [`Plate::images`] (acquisition by
    /// acquisition, well by well, each well's fields in turn). All of them share the
    /// recording's workers and memory budget, as any recording's arrays do.
    ///
    /// `root/zarr.json` holds `attributes.ome.plate` beside the recording's mark
    /// (`attributes.zarrstream`); each well `ROW/COLUMN` holds `attributes.ome.well`
    /// listing its images; row groups `ROW` are plain groups. The plate's layout is
    /// checked before anything is written ([`Error::Plate`]). With
    /// [`resume`](WriterOptions::resume), the plate on disk must be the same
    /// ([`Error::ResumeMismatch`] naming `plate`); `existing_group` is refused (the
    /// root group is the plate's and must carry its metadata).
    ///
    /// ```no_run
    /// use zarrstream::{ArraySpec, Ome, Plate, Recording, WriterOptions};
    /// let plate = Plate::grid(8, 12).name("screen 7").fields(4);
    /// let spec = ArraySpec::builder()
    ///     .shape([0, 1024, 1024])
    ///     .chunk_shape([1, 512, 512])
    ///     .shard_shape([1, 1024, 1024])
    ///     .build()?;
    /// let ome = Ome::new().pixel_size(0.65, 0.65);
    /// let rec = Recording::create_plate("screen.ome.zarr", &plate, spec, &ome,
    ///                                   WriterOptions::default())?;
    /// let frame = vec![0u16; 1024 * 1024];
    /// for image in plate.images()? {
    ///     // The stage is over this field of view: one frame of it.
    ///     let _ = rec.array(&image.key)?.push(&frame)?;
    /// }
    /// rec.finish()?;
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn create_plate(
        root: impl AsRef<Path>,
        plate: &Plate,
        spec: ArraySpec,
        ome: &Ome,
        options: WriterOptions,
    ) -> Result<Self> {
        let root = root.as_ref();
        if options.existing_group {
            return Err(Error::ConflictingOptions("plate", "existing_group"));
        }
        let arrays = plate_arrays(plate, &spec, ome)?;
        let mut layout = Layout::default();
        layout.root.insert("ome".into(), plate.attributes()?);
        layout.groups = (plate.well_attributes()?.into_iter())
            .map(|(well, ome)| (well, serde_json::json!({ "ome": ome })))
            .collect();
        Self::create_in(root, arrays, options, layout, Some("ome"))
    }

    /// The most memory the recording [`create_plate`](Self::create_plate) would make
    /// will use: [`estimate_memory`](Self::estimate_memory) over its field images.
    pub fn estimate_plate_memory(
        plate: &Plate,
        spec: &ArraySpec,
        ome: &Ome,
        options: &WriterOptions,
    ) -> Result<crate::MemoryEstimate> {
        Self::estimate_memory(&plate_arrays(plate, spec, ome)?, options)
    }

    fn create_in(
        root: &Path,
        arrays: Vec<ArrayConfig>,
        mut options: WriterOptions,
        layout: Layout,
        root_reserved: Option<&'static str>,
    ) -> Result<Self> {
        options.validate()?;
        let destination = Destination::open(root, &mut options, None)?;
        let root = destination.dir.clone();
        check_arrays(&arrays)?;
        let keys: Vec<String> = arrays.iter().map(|a| a.key.clone()).collect();
        let made_root = claim_root(&root, &keys, &options, &layout)?;
        if options.resume {
            same_root_attributes(&root, &layout)?;
        }
        let mut made = Vec::new();
        Self::start(&root, arrays, options, &layout, &mut made)
            .map(|mut rec| {
                rec.root_reserved = root_reserved;
                rec
            })
            .and_then(|mut rec| {
                destination.started()?;
                rec.mirror = destination.mirror;
                Ok(rec)
            })
            .inspect_err(|_| {
                if made_root {
                    let _ = std::fs::remove_dir_all(&root);
                } else {
                    for dir in &made {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                }
            })
    }

    fn start(
        root: &Path,
        arrays: Vec<ArrayConfig>,
        options: WriterOptions,
        layout: &Layout,
        made: &mut Vec<PathBuf>,
    ) -> Result<Self> {
        let threads = thread_count(options.threads);
        // Sized like a `Writer`'s: `Auto` resolves per array, to `Direct` on most local
        // file systems, whose writes hold their worker, so it counts as `Direct` here
        // (on a file system where it resolves to pwrite the extra workers only wait).
        // A chunk order other than C resolves `Auto` to a slot sink.
        let kind = match options.sink {
            SinkChoice::Direct | SinkChoice::Auto if options.chunk_order == ChunkOrder::C => {
                SinkKind::Direct
            }
            _ => SinkKind::Pwrite,
        };
        let meter = Meter::new();
        // Every level of an image has its level 0's chunk shape.
        let chunk_bytes = arrays.iter().map(|a| a.spec.chunk_bytes()).max();
        let engine = Engine::start(
            engine_shape(threads, kind, chunk_bytes.unwrap_or(0)),
            options.pin_threads,
            options.background_nice,
            None,
            &meter,
        )?;
        let reducers = if arrays.iter().any(|a| a.ome.is_some()) {
            Some(chain::reduction_pool(threads, options.background_nice)?)
        } else {
            None
        };
        let workers = |meter| Workers::Shared {
            engine: Arc::clone(&engine),
            reducers: reducers.clone(),
            meter,
        };
        // The frame budget, in bytes, split so that every array has the same number of
        // frames: budget / Σ frame bytes (at least 2).
        let largest = arrays.iter().map(|a| a.spec.frame_bytes).max().unwrap_or(0);
        let total_frames = pool_frames(options.pool_frames, threads);
        let sum: usize = arrays.iter().map(|a| a.spec.frame_bytes).sum();
        let per_array = (total_frames * largest)
            .checked_div(sum)
            .unwrap_or(0)
            .max(2);
        let mut rec = Recording {
            root: root.to_path_buf(),
            keys: Vec::with_capacity(arrays.len()),
            arrays: Vec::with_capacity(arrays.len()),
            engine: Some(Arc::clone(&engine)),
            root_doc: Mutex::new(()),
            meter: Arc::clone(&meter),
            root_reserved: None,
            mirror: None,
        };
        for a in arrays {
            let dir = root.join(&a.key);
            groups_between(root, &a.key, layout)?;
            if !options.resume {
                // Replaced with `overwrite`, unless a live writer holds an array in it.
                prepare_dir(&dir, options.overwrite)?;
                made.push(dir.clone());
            }
            // The array's own metadata spec, or the recording's default.
            let opts = WriterOptions {
                pool_frames: per_array,
                overwrite: false,
                frame_meta: a.frame_meta.or(options.frame_meta.clone()),
                ..options.clone()
            };
            let meta = opts.frame_meta.clone();
            let meta = meta.as_ref();
            let workers = workers(Meter::child(&meter));
            let writer = match &a.ome {
                Some(ome) => {
                    let (level, image) =
                        chain::create_image(&dir, a.spec, ome, opts, &workers, true)?;
                    Writer::from_level(level, Some(image), meta)?
                }
                None => Writer::from_level(
                    Level::start(dir, a.spec, opts, false, &workers)?,
                    None,
                    meta,
                )?,
            };
            rec.keys.push(a.key);
            rec.arrays.push(Mutex::new(writer));
        }
        Ok(rec)
    }

    /// The most memory a [`create`](Self::create) of `arrays` with `options` will use:
    /// every array's pools, staging, mapped shards and pyramid levels, the shared
    /// encoding workers once (see [`MemoryEstimate`]). Invalid keys, options or
    /// metadata fail with the error `create` would return.
    pub fn estimate_memory(
        arrays: &[ArrayConfig],
        options: &WriterOptions,
    ) -> Result<MemoryEstimate> {
        crate::writer::api::memory::estimate_recording(arrays, options)
    }

    /// The bytes the recording's own buffers hold now, and at most so far: every
    /// array's (as [`Writer::memory_in_use`]) and the shared encoding workers'.
    /// [`Recording::estimate_memory`] bounds it before the recording exists.
    pub fn memory_in_use(&self) -> MemoryUsage {
        self.meter.usage()
    }

    /// The root of the recording's group.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The arrays' keys, in the order given to [`create`](Self::create).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(String::as_str)
    }

    /// The index of the array with key `key` (its place in [`keys`](Self::keys)).
    pub fn index(&self, key: &str) -> Result<usize> {
        key.index_in(&self.keys)
    }

    /// Array `a`'s writer, for as long as the returned guard lives: every [`Writer`]
    /// method works on it (`push_at`, the zero-copy [`buffer`](Writer::buffer) and
    /// [`push_buffer`](Writer::push_buffer), [`push_with`](Writer::push_with), …).
    /// Calls on different arrays from different threads proceed in parallel; the guard
    /// holds the array's lock, so a push waiting for a free buffer holds it too.
    ///
    /// ```
    /// use std::time::Instant;
    /// use zarrstream::{ArrayConfig, ArraySpec, Recording, WriterOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let run = dir.path().join("run.zarr");
    /// let spec = ArraySpec::builder()
    ///     .shape([0, 64, 64])
    ///     .chunk_shape([1, 64, 64])
    ///     .shard_shape([8, 64, 64])
    ///     .build()?;
    /// let rec = Recording::create(
    ///     &run,
    ///     vec![ArrayConfig::new("cam0", spec)],
    ///     WriterOptions::default(),
    /// )?;
    /// let mut cam0 = rec.array("cam0")?;
    /// // A pooled buffer the camera fills in place: no copy on push.
    /// if let Some(mut buf) = cam0.buffer()? {
    ///     buf.fill(7);
    ///     assert!(cam0.push_buffer(buf, Instant::now())?.is_accepted());
    /// }
    /// drop(cam0);
    /// assert_eq!(rec.finish()?.total.frames_written, 1);
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn array(&self, a: impl ArrayId) -> Result<ArrayWriter<'_>> {
        let i = a.index_in(&self.keys)?;
        Ok(ArrayWriter {
            writer: lock(&self.arrays[i]),
        })
    }

    /// Sets the attribute `name` of the image group of array `a`, as
    /// [`Writer::set_group_attribute`] ([`Error::NotAnImage`] for a plain array).
    pub fn set_group_attribute(&self, a: impl ArrayId, name: &str, value: Value) -> Result<()> {
        self.array(a)?.set_group_attribute(name, value)
    }

    /// Removes the attribute `name` of the image group of array `a`.
    pub fn remove_group_attribute(&self, a: impl ArrayId, name: &str) -> Result<()> {
        self.array(a)?.remove_group_attribute(name)
    }

    /// Sets the attribute `name` of the recording's root group, keeping every other key
    /// of its `zarr.json` (also of a group someone else made, joined with
    /// [`existing_group`](WriterOptions::existing_group)), published atomically.
    /// `"zarrstream"` is the recording's own and refused ([`Error::Attribute`]).
    ///
    /// ```no_run
    /// # fn run(rec: &zarrstream::Recording) -> zarrstream::Result<()> {
    /// rec.set_root_attribute("acquisition", serde_json::json!({"operator": "ada"}))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_root_attribute(&self, name: &str, value: Value) -> Result<()> {
        self.check_root_name(name)?;
        let _doc = lock(&self.root_doc);
        published::set_group_attribute(&self.root, name, Some(value), OURS)
    }

    /// Removes the attribute `name` of the recording's root group.
    pub fn remove_root_attribute(&self, name: &str) -> Result<()> {
        self.check_root_name(name)?;
        let _doc = lock(&self.root_doc);
        published::set_group_attribute(&self.root, name, None, OURS)
    }

    /// Refuses the root attribute a plate keeps for its own metadata (`ome`).
    fn check_root_name(&self, name: &str) -> Result<()> {
        match self.root_reserved {
            Some(reserved) if name == reserved => Err(Error::Attribute {
                name: name.to_string(),
                reason: "the plate's own metadata, written by the recording",
            }),
            _ => Ok(()),
        }
    }

    /// Finishes every array (each even if another fails), then stops the workers.
    /// Returns the statistics, or the first error.
    pub fn finish(mut self) -> Result<RecordingStats> {
        let mut first = None;
        let mut arrays = Vec::with_capacity(self.keys.len());
        let writers = std::mem::take(&mut self.arrays);
        for (key, slot) in self.keys.iter().zip(writers) {
            match into_inner(slot).finish() {
                Ok(s) => arrays.push((key.clone(), s)),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        if let Err(e) = self.join() {
            first.get_or_insert(e);
        }
        // Whatever the arrays finished goes up, even after a failure of one of them.
        if let Some(Err(e)) = self.mirror.take().map(Mirror::finish) {
            first.get_or_insert(e);
        }
        if let Some(e) = first {
            return Err(e);
        }
        let mut total = total(&arrays).ok_or(Error::Closed)?;
        // After the workers are joined: their buffers are freed too.
        total.memory = self.meter.usage();
        Ok(RecordingStats { arrays, total })
    }

    /// Stops every array at once (as [`Writer::abort`]), then the workers. Returns the
    /// first error met.
    pub fn abort(mut self, reason: impl Into<String>) -> Result<()> {
        let reason = reason.into();
        let mut first = None;
        for slot in std::mem::take(&mut self.arrays) {
            if let Err(e) = into_inner(slot).abort(reason.clone()) {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = self.join() {
            first.get_or_insert(e);
        }
        if let Some(Err(e)) = self.mirror.take().map(Mirror::finish) {
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
        // Dropping a writer finishes it.
        self.arrays.clear();
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
        t.push_latency_ns = t.push_latency_ns.merged(&s.push_latency_ns);
        t.frame_latency_ns = t.frame_latency_ns.merged(&s.frame_latency_ns);
    }
    Some(t)
}
