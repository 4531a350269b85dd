//! `NativeRecording`: one [`zarrstream::Recording`] (several arrays, one set of encoding
//! workers), for the Python `Recording`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrstream::config::RecordingConfig;
use zarrstream::{Error, Recording};

use crate::errors::{Failure, guarded};
use crate::frames::{Frames, RecordingArray};
use crate::indexed;
use zarrstream::ErrorKind;

/// What a push checks a buffer against, per array (known at creation, so checking a
/// buffer takes no lock).
struct Geometry {
    frame_bytes: usize,
    frame_shape: [usize; 2],
    item_size: usize,
}

/// The recording; `None` once finished or aborted. Pushes share the `RwLock` for
/// reading (the recording has a lock per array inside, so pushes into different arrays
/// run at once); finishing and aborting take it for writing. Every lock is taken with
/// the interpreter lock released, because a push waiting on back-pressure holds both
/// this lock (shared) and its array's lock while other Python threads run.
#[pyclass(module = "zarrstream._native", frozen)]
pub(crate) struct NativeRecording {
    recording: RwLock<Option<Recording>>,
    /// Set once the recording is taken: read without any lock.
    closed: AtomicBool,
    keys: Vec<String>,
    arrays: Vec<Geometry>,
}

fn closed() -> Failure {
    Failure::new(ErrorKind::Closed, "the recording is closed")
}

impl NativeRecording {
    /// The index of array `key`, or `UnknownArray`.
    fn index(&self, key: &str) -> Result<usize, Failure> {
        self.keys.iter().position(|k| k == key).ok_or_else(|| {
            Failure::from(Error::UnknownArray {
                key: key.to_string(),
            })
        })
    }

    /// The live recording (shared), or `Closed`.
    fn live(&self) -> Result<RwLockReadGuard<'_, Option<Recording>>, Failure> {
        // A panic while pushing is caught and reported, so a poisoned lock only means
        // that push failed; the recording inside is still the one to finish.
        let guard = self.recording.read().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            return Err(closed());
        }
        Ok(guard)
    }

    /// Runs `f` on the live recording with the interpreter lock released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        context: &str,
        f: impl FnOnce(&Recording) -> Result<T, Failure> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            guarded(context, || {
                let guard = self.live()?;
                f(guard.as_ref().ok_or_else(closed)?)
            })
        })
        .map_err(|f| f.into_pyerr(py))
    }

    fn take(&self) -> Result<Recording, Failure> {
        let rec = self
            .recording
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(closed)?;
        self.closed.store(true, Ordering::Release);
        Ok(rec)
    }

    /// The buffer `frames` checked against array `i`.
    fn frames(&self, py: Python<'_>, i: usize, frames: &Bound<'_, PyAny>) -> PyResult<Frames> {
        let g = &self.arrays[i];
        let buf = PyUntypedBuffer::get(frames)?;
        Frames::new(buf, g.frame_bytes, g.frame_shape, g.item_size).map_err(|f| f.into_pyerr(py))
    }

    fn target<'a>(&self, recording: &'a Recording, index: usize) -> RecordingArray<'a> {
        RecordingArray {
            recording,
            index,
            frame_bytes: self.arrays[index].frame_bytes,
            scratch: Vec::new(),
        }
    }
}

#[pymethods]
impl NativeRecording {
    /// Creates the recording at `path` from `config`, the JSON object of
    /// `zarrstream::config::RecordingConfig` with, beside its keys, `acquisition_order`
    /// (axis numbers, or dimension names resolved in every array) and
    /// `max_open_shards`.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, config: &str) -> PyResult<Self> {
        let config = config.to_owned();
        let (recording, keys, arrays) = py
            .detach(move || {
                guarded("creating the recording", || {
                    let (config, keys) = indexed::split(&config)?;
                    let mut parsed = RecordingConfig::parse(&config)?;
                    keys.apply_recording(&mut parsed)?;
                    let rec = parsed.create(&path)?;
                    let keys: Vec<String> = rec.keys().map(str::to_owned).collect();
                    let mut arrays = Vec::with_capacity(keys.len());
                    for i in 0..keys.len() {
                        let spec = rec.spec(i)?;
                        let shape = spec.shape();
                        let rank = shape.len();
                        arrays.push(Geometry {
                            frame_bytes: spec.frame_bytes(),
                            frame_shape: [shape[rank - 2], shape[rank - 1]].map(|v| v as usize),
                            item_size: spec.dtype().size(),
                        });
                    }
                    Ok((rec, keys, arrays))
                })
            })
            .map_err(|f| f.into_pyerr(py))?;
        Ok(NativeRecording {
            recording: RwLock::new(Some(recording)),
            closed: AtomicBool::new(false),
            keys,
            arrays,
        })
    }

    /// The arrays' keys, in the order given.
    #[getter]
    fn keys(&self) -> Vec<String> {
        self.keys.clone()
    }

    /// Pushes every frame of `frames` (any object with the buffer protocol holding whole
    /// frames of array `key`); returns `(accepted, dropped)`.
    fn push(&self, py: Python<'_>, key: &str, frames: &Bound<'_, PyAny>) -> PyResult<(u64, u64)> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        let frames = self.frames(py, i, frames)?;
        let pushed = self.with(py, "push", |rec| frames.push(&mut self.target(rec, i)))?;
        Ok((pushed.accepted, pushed.dropped))
    }

    /// Pushes one frame of array `key` with its metadata, the JSON object of
    /// `zarrstream::FrameMeta::from_json`; returns `(accepted, dropped)`.
    fn push_with(
        &self,
        py: Python<'_>,
        key: &str,
        frame: &Bound<'_, PyAny>,
        meta_json: &str,
    ) -> PyResult<(u64, u64)> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        let doc: serde_json::Value = serde_json::from_str(meta_json)
            .map_err(|e| Failure::new(ErrorKind::InvalidArgument, format!("frame metadata: {e}")))
            .map_err(|f| f.into_pyerr(py))?;
        let meta =
            zarrstream::FrameMeta::from_value(doc).map_err(|e| Failure::from(e).into_pyerr(py))?;
        let frames = self.frames(py, i, frame)?;
        let pushed = self.with(py, "push_with", |rec| {
            frames.push_with(&mut self.target(rec, i), &meta)
        })?;
        Ok((pushed.accepted, pushed.dropped))
    }

    /// Writes one frame of array `key` (a buffer of exactly one frame) at `index`, its
    /// coordinates on the leading axes; returns whether it was accepted (not dropped).
    fn write_frame(
        &self,
        py: Python<'_>,
        key: &str,
        index: Vec<u64>,
        frame: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        let frames = self.frames(py, i, frame)?;
        let outcome = self.with(py, "write_frame", |rec| {
            frames.write_at(&mut self.target(rec, i), &index)
        })?;
        Ok(outcome.is_accepted())
    }

    /// Marks the frame of array `key` at `index` as one that will not come: it reads
    /// as the fill value and counts as dropped.
    fn skip_frame(&self, py: Python<'_>, key: &str, index: Vec<u64>) -> PyResult<()> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        self.with(py, "skip_frame", |rec| Ok(rec.skip_frame(i, &index)?))
    }

    /// Counts `n` frames of array `key` the caller could not deliver as dropped,
    /// keeping their places.
    fn skip(&self, py: Python<'_>, key: &str, n: u64) -> PyResult<()> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        self.with(py, "skip", |rec| {
            for _ in 0..n {
                rec.skip(i)?;
            }
            Ok(())
        })
    }

    /// Finishes every array and returns the statistics as JSON (the library's
    /// serialisation of `RecordingStats`: `arrays` as `[key, stats]` pairs, `total`).
    fn finish(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| guarded("finish", || crate::tools::json(&self.take()?.finish()?)))
            .map_err(|f| f.into_pyerr(py))
    }

    /// Stops every array, keeping every frame accepted so far; each array's `zarr.json`
    /// records the state `aborted` and `reason`.
    fn abort(&self, py: Python<'_>, reason: String) -> PyResult<()> {
        py.detach(|| guarded("abort", || Ok(self.take()?.abort(reason)?)))
            .map_err(|f| f.into_pyerr(py))
    }

    /// Sets (`value_json` given) or removes the attribute `name` of the root group
    /// (`array` None), of array `array`, or of its OME image group with `group`.
    #[pyo3(signature = (name, value_json, array = None, group = false))]
    fn set_attribute(
        &self,
        py: Python<'_>,
        name: &str,
        value_json: Option<&str>,
        array: Option<&str>,
        group: bool,
    ) -> PyResult<()> {
        let value = value_json
            .map(serde_json::from_str::<serde_json::Value>)
            .transpose()
            .map_err(|e| {
                Failure::new(
                    ErrorKind::InvalidArgument,
                    format!("attribute {name:?}: {e}"),
                )
            })
            .map_err(|f| f.into_pyerr(py))?;
        let index = array
            .map(|k| self.index(k))
            .transpose()
            .map_err(|f| f.into_pyerr(py))?;
        self.with(py, "set_attribute", |rec| {
            match (index, group, value) {
                (None, _, Some(v)) => rec.set_root_attribute(name, v)?,
                (None, _, None) => rec.remove_root_attribute(name)?,
                (Some(i), false, Some(v)) => rec.set_attribute(i, name, v)?,
                (Some(i), false, None) => rec.remove_attribute(i, name)?,
                (Some(i), true, Some(v)) => rec.set_group_attribute(i, name, v)?,
                (Some(i), true, None) => rec.remove_group_attribute(i, name)?,
            }
            Ok(())
        })
    }

    /// Whether the recording was finished or aborted.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// `(current, peak)` bytes held by the recording's own buffers (every array's and
    /// the shared workers'), as it counts them.
    fn memory_in_use(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        self.with(py, "memory_in_use", |rec| {
            let m = rec.memory_in_use();
            Ok((m.current, m.peak))
        })
    }

    /// Frames offered to array `key` so far (accepted and dropped).
    fn frames_pushed(&self, py: Python<'_>, key: &str) -> PyResult<u64> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        self.with(py, "frames_pushed", |rec| Ok(rec.frames_pushed(i)?))
    }

    /// Frames of array `key` whose chunks are all encoded so far.
    fn frames_encoded(&self, py: Python<'_>, key: &str) -> PyResult<u64> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        self.with(py, "frames_encoded", |rec| Ok(rec.frames_encoded(i)?))
    }

    /// Array `key` as the library built it: shape, chunk and shard shapes, dtype, codec,
    /// fill value and dimension names.
    fn spec<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyDict>> {
        let i = self.index(key).map_err(|f| f.into_pyerr(py))?;
        let s = self.with(py, "spec", |rec| Ok(rec.spec(i)?))?;
        let d = PyDict::new(py);
        d.set_item("shape", s.shape().to_vec())?;
        d.set_item("chunk_shape", s.chunk_shape().to_vec())?;
        d.set_item("shard_shape", s.shard_shape().to_vec())?;
        d.set_item("dtype", s.dtype().zarr_name())?;
        d.set_item("codec", s.codec().to_string())?;
        d.set_item("fill_value", s.fill_value())?;
        d.set_item(
            "dimension_names",
            s.dimension_names().map(<[String]>::to_vec),
        )?;
        Ok(d)
    }
}
