//! Continuing an array that zarrstream finished (or `recover` repaired): what is on
//! disk, whether the request matches it, where the next frame goes, and the chunks of
//! the last, partly filled shards that the new shards keep.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::frame_meta::{FrameMetaSpec, check_resumable};
use crate::shard::IndexEntries;
use crate::sink::{Scratch, SlotSink};
use crate::spec::ArraySpec;
use crate::store::{LOCK_FILE, PARTIAL_DIR, StoreError, StoreLock, StoreReader};
use crate::writer::state::grid::Grid;
use crate::writer::state::published::OURS;

/// Where a level starts: at frame 0 of a new array, or after the frames of the array it
/// resumes.
#[derive(Debug, Default)]
pub(crate) struct Start {
    /// The first frame this writer pushes.
    pub frame: u64,
    /// Steps of axis 0 already published (those before [`frame`](Self::frame)'s).
    pub extent0: u64,
    /// Frames earlier sessions wrote and dropped (added to the published counts).
    pub written: u64,
    pub dropped: u64,
    /// The array as found, for the chunks of its last shards (`None`: a new array).
    pub store: Option<StoreReader>,
}

impl Start {
    /// The shard row (along axis 0) holding [`frame`](Self::frame): the new shards
    /// begin there, the rows before it are complete on disk.
    pub(crate) fn first_row(&self, grid: &Grid) -> u64 {
        grid.coords(self.frame)[0] / grid.shard_lead[0]
    }

    /// Copies the chunks of the finished shard `key` (if there is one) that hold frames
    /// before [`frame`](Self::frame) into `sink`, as they are (they already end in their
    /// checksum: nothing is decoded or re-encoded), and records them in `entries`.
    pub(crate) fn carry_over(
        &self,
        grid: &Grid,
        key: &str,
        sink: &dyn SlotSink,
        entries: &IndexEntries,
    ) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let shard = match store.shard(key) {
            Ok(s) => s,
            // Every chunk of it was dropped: nothing to keep.
            Err(StoreError::NoSuchShard { .. }) => return Ok(()),
            Err(e) => return Err(store_error(store.root(), e)),
        };
        let file = store
            .open_shard(&shard)
            .map_err(|e| store_error(store.root(), e))?;
        let index = store
            .read_index(&shard, &file)
            .map_err(|e| store_error(store.root(), e))?;
        let next_t = grid.coords(self.frame)[0];
        let per = store.chunks_per_shard();
        let chunk0 = store.spec().chunk_shape()[0];
        let mut scratch = Scratch::default();
        for (i, entry) in index.iter().enumerate() {
            let Some((offset, nbytes)) = *entry else {
                continue;
            };
            // Chunks at or after the first new frame are not counted as written (the
            // metadata said fewer frames): the new frames take their place.
            let t0 = (shard.coords[0] * per[0] + store.inner_coords(i as u64)[0]) * chunk0;
            if t0 >= next_t {
                continue;
            }
            let bytes = crate::store::read_chunk(&file, offset, nbytes).map_err(|e| {
                Error::NeedsRecovery {
                    path: shard.path.clone(),
                    reason: format!("chunk {i} of the last shard cannot be read: {e}"),
                }
            })?;
            let (at, n) = sink.write_chunk(i, &mut scratch, &mut |out| {
                let dst = out.get_mut(..bytes.len()).ok_or_else(|| {
                    Error::Internal(format!("chunk {i} of {key} is larger than its slot"))
                })?;
                dst.copy_from_slice(&bytes);
                Ok(bytes.len())
            })?;
            entries.set(i, at, n);
        }
        Ok(())
    }
}

fn store_error(path: &Path, e: StoreError) -> Error {
    match e {
        StoreError::NotFound(p) => Error::io(
            "resume",
            &p,
            std::io::Error::from(std::io::ErrorKind::NotFound),
            0,
        ),
        StoreError::Io(io) => Error::io(io.op, &io.path, io.source, 0),
        StoreError::NotAStore { path, .. } => Error::NotOwned {
            path,
            reason: "not a Zarr v3 array, so there is nothing to resume (a recording's group \
                     is resumed as a Recording)",
        },
        other => Error::NeedsRecovery {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

/// Opens the array at `dir` for resuming with `spec`: refuses a store a live writer
/// holds ([`Error::Locked`]), one a crashed writer left ([`Error::NeedsRecovery`]) and
/// a specification that differs ([`Error::ResumeMismatch`]). Returns where to start and
/// the user attributes on disk (under those of `spec`).
pub(crate) fn open(
    dir: &Path,
    spec: &ArraySpec,
    frame_meta: Option<&FrameMetaSpec>,
) -> Result<(Start, Map<String, Value>)> {
    let tmp = dir.join(PARTIAL_DIR);
    if tmp.is_dir() {
        let lock = StoreLock::acquire(&tmp)?;
        // Anything but the lock (temporary shards, what `recover` set aside) is for
        // `recover` or a person to look at, never to be removed here.
        let leftover = std::fs::read_dir(&tmp)
            .map_err(|e| Error::io("read directory", &tmp, e, 0))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|name| name != LOCK_FILE);
        if let Some(name) = leftover {
            return Err(Error::NeedsRecovery {
                path: dir.to_path_buf(),
                reason: format!("a writer that stopped left {PARTIAL_DIR}/{name}"),
            });
        }
        lock.release();
        std::fs::remove_dir(&tmp).map_err(|e| Error::io("remove", &tmp, e, 0))?;
    }
    let store = StoreReader::open(dir).map_err(|e| store_error(dir, e))?;
    let progress = &store.metadata().progress;
    if progress.state.as_deref() == Some("running") {
        return Err(Error::NeedsRecovery {
            path: dir.to_path_buf(),
            reason: "its state is `running`: the writer did not finish".into(),
        });
    }
    let on_disk = store.spec();
    if spec.rank() == 2 {
        return Err(Error::ResumeUnsupported(
            "a single frame (y, x): there is nothing to go on with",
        ));
    }
    compare(dir, on_disk, spec)?;
    check_resumable(dir, frame_meta)?;
    if spec.shape()[0] != 0 && progress.state.as_deref() == Some("recovered") {
        // `recover` counts the frames whose chunks are all present, not where the last
        // one was: on a bounded axis there is no extent to say where to go on.
        return Err(Error::ResumeUnsupported(
            "a bounded array that `recover` repaired (where its last frame was is not recorded)",
        ));
    }
    let grid = Grid::new(spec);
    let fps = spec.frames_per_step();
    let written = progress.frames_committed.unwrap_or(0);
    let dropped = progress.frames_dropped.unwrap_or(0);
    let frame = if spec.shape()[0] == 0 {
        // The published extent: the frames of a last, partial step read as fill.
        on_disk.shape()[0] * fps
    } else {
        (written + dropped).div_ceil(fps.max(1)) * fps
    };
    let t = grid.coords(frame)[0];
    if grid.chunk_lead[0] > 1 && !t.is_multiple_of(grid.chunk_lead[0]) {
        return Err(Error::ResumeUnsupported(
            "an inner chunk deeper than one step of axis 0 that is partly written",
        ));
    }
    let mut attributes = store
        .document()
        .get("attributes")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    attributes.remove(OURS);
    attributes.extend(spec.attributes.clone());
    Ok((
        Start {
            frame,
            extent0: t,
            written,
            dropped,
            store: Some(store),
        },
        attributes,
    ))
}

/// The first field (in a fixed order) where the request differs from the array on
/// disk, as [`Error::ResumeMismatch`].
fn compare(dir: &Path, disk: &ArraySpec, want: &ArraySpec) -> Result<()> {
    let shape = |s: &ArraySpec, all: bool| {
        let v: Vec<String> = s.shape()[usize::from(!all)..]
            .iter()
            .map(u64::to_string)
            .collect();
        format!("[{}]", v.join(", "))
    };
    let diff: [(&'static str, String, String); 10] = [
        ("rank", disk.rank().to_string(), want.rank().to_string()),
        ("shape after axis 0", shape(disk, false), shape(want, false)),
        (
            "chunk_shape",
            format!("{:?}", disk.chunk_shape()),
            format!("{:?}", want.chunk_shape()),
        ),
        (
            "shard_shape",
            format!("{:?}", disk.shard_shape()),
            format!("{:?}", want.shard_shape()),
        ),
        ("dtype", disk.dtype().to_string(), want.dtype().to_string()),
        (
            "fill_value",
            format!("{:?}", disk.fill_value().to_bits()),
            format!("{:?}", want.fill_value().to_bits()),
        ),
        // Compared as written: an explicit byte shuffle is the default's `zarr.json`.
        (
            "codec",
            disk.codec().canonical(disk.dtype()).to_string(),
            want.codec().canonical(want.dtype()).to_string(),
        ),
        (
            "crc32c",
            disk.crc32c().to_string(),
            want.crc32c().to_string(),
        ),
        (
            "index_location",
            disk.index_location().to_string(),
            want.index_location().to_string(),
        ),
        (
            "dimension_names",
            format!("{:?}", disk.dimension_names()),
            format!("{:?}", want.dimension_names()),
        ),
    ];
    for (field, on_disk, requested) in diff {
        if on_disk != requested {
            return Err(Error::ResumeMismatch {
                path: dir.to_path_buf(),
                field,
                on_disk,
                requested,
            });
        }
    }
    // A bounded request must name the bound on disk; an unbounded one continues
    // whatever extent was published.
    if want.shape()[0] != 0 && want.shape()[0] != disk.shape()[0] {
        return Err(Error::ResumeMismatch {
            path: dir.to_path_buf(),
            field: "shape[0]",
            on_disk: disk.shape()[0].to_string(),
            requested: want.shape()[0].to_string(),
        });
    }
    Ok(())
}
