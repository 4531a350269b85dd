//! `NativeSession`: the binding core's [`Session`] (a writer or a recording) for the
//! Python `Writer` and `Recording`. This module keeps only what is Python's: buffers
//! ([`Frames`]), the interpreter lock (released around every call that may wait) and the
//! class glue. The session holds the lock discipline, the poison policy (a panic in a
//! call leaves the object refusing every later call with `ClosedError`, as the C API
//! does) and the statistics JSON.

use std::path::PathBuf;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrstream::ErrorKind;
use zarrstream::config::RecordingConfig;
use zarrstream_bind::{Array, Session, Target};

use crate::errors::{Failure, guarded};
use crate::frames::{Frames, Pushed};
use crate::indexed;

/// A writer (`key` None in every call) or a recording (`key` names its array).
#[pyclass(module = "zarrstream._native", frozen)]
pub(crate) struct NativeSession {
    session: Session,
}

impl NativeSession {
    /// Runs `f` with the interpreter lock released, a panic caught as an internal error.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        context: &str,
        f: impl FnOnce(&Session) -> Result<T, Failure> + Send,
    ) -> PyResult<T> {
        py.detach(|| guarded(context, || f(&self.session)))
            .map_err(|f| f.into_pyerr(py))
    }

    /// The buffer `frames` checked against the frame geometry of array `key`, while the
    /// interpreter lock is held (the checks only read the buffer's header).
    fn frames(
        &self,
        py: Python<'_>,
        key: Option<&str>,
        frames: &Bound<'_, PyAny>,
    ) -> PyResult<Frames> {
        let i = self
            .session
            .index(key.map(Array::Key))
            .map_err(|e| Failure::from(e).into_pyerr(py))?;
        let a = &self.session.arrays()[i];
        let buf = PyUntypedBuffer::get(frames)?;
        Frames::new(buf, a.frame_bytes, a.frame_shape, a.item_size).map_err(|f| f.into_pyerr(py))
    }
}

/// `text` as JSON, or an `InvalidArgument` naming `what`.
fn parse_json(what: &str, text: &str) -> Result<serde_json::Value, Failure> {
    serde_json::from_str(text)
        .map_err(|e| Failure::new(ErrorKind::InvalidArgument, format!("{what}: {e}")))
}

#[pymethods]
impl NativeSession {
    /// Creates the store at `path` from `config`: with `recording`, the JSON object of
    /// `zarrstream::config::RecordingConfig` with, beside its keys, `acquisition_order`
    /// (axis numbers, or dimension names resolved in every array) and
    /// `max_open_shards`; otherwise the writer's JSON of `zarrstream::config` (the C
    /// API's `config_json`).
    #[new]
    #[pyo3(signature = (path, config, recording = false))]
    fn new(py: Python<'_>, path: PathBuf, config: &str, recording: bool) -> PyResult<Self> {
        let config = config.to_owned();
        let session = py
            .detach(move || {
                guarded("creating the session", || {
                    if !recording {
                        return Ok(Session::create_writer(&path, &config)?.0);
                    }
                    let (config, keys) = indexed::split(&config)?;
                    let mut parsed = RecordingConfig::parse(&config)?;
                    keys.apply_recording(&mut parsed)?;
                    Ok(Session::from_recording(parsed.create(&path)?)?)
                })
            })
            .map_err(|f| f.into_pyerr(py))?;
        Ok(NativeSession { session })
    }

    /// The arrays' keys, in the order given (a writer's one key is "").
    #[getter]
    fn keys(&self) -> Vec<String> {
        self.session
            .arrays()
            .iter()
            .map(|a| a.key.clone())
            .collect()
    }

    /// Pushes every frame of `frames` (any object with the buffer protocol holding whole
    /// frames of array `key`); returns `(accepted, dropped)`.
    #[pyo3(signature = (key, frames))]
    fn push(
        &self,
        py: Python<'_>,
        key: Option<&str>,
        frames: &Bound<'_, PyAny>,
    ) -> PyResult<(u64, u64)> {
        let frames = self.frames(py, key, frames)?;
        // One frame per call into the session, as the C API pushes: a stack does not
        // hold its array for its whole length. Stops at the first error, the frames
        // pushed before it counted in the array.
        let pushed = self.run(py, "push", |s| {
            let mut pushed = Pushed::default();
            for f in 0..frames.len() {
                pushed.count(s.with_array(key.map(Array::Key), |w| frames.push_one(w, f))?);
            }
            Ok(pushed)
        })?;
        Ok((pushed.accepted, pushed.dropped))
    }

    /// Pushes one frame of array `key` with its metadata, the JSON object of
    /// `zarrstream::FrameMeta::from_json`; returns `(accepted, dropped)`.
    #[pyo3(signature = (key, frame, meta_json))]
    fn push_with(
        &self,
        py: Python<'_>,
        key: Option<&str>,
        frame: &Bound<'_, PyAny>,
        meta_json: &str,
    ) -> PyResult<(u64, u64)> {
        let meta = parse_json("frame metadata", meta_json)
            .and_then(|doc| Ok(zarrstream::FrameMeta::from_value(doc)?))
            .map_err(|f| f.into_pyerr(py))?;
        let frames = self.frames(py, key, frame)?;
        let pushed = self.run(py, "push_with", |s| {
            s.with_array(key.map(Array::Key), |w| frames.push_with(w, &meta))
        })?;
        Ok((pushed.accepted, pushed.dropped))
    }

    /// Writes one frame of array `key` (a buffer of exactly one frame) at `index`, its
    /// coordinates on the leading axes; returns whether it was accepted (not dropped).
    #[pyo3(signature = (key, index, frame))]
    fn write_frame(
        &self,
        py: Python<'_>,
        key: Option<&str>,
        index: Vec<u64>,
        frame: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let frames = self.frames(py, key, frame)?;
        let outcome = self.run(py, "write_frame", |s| {
            s.with_array(key.map(Array::Key), |w| frames.write_at(w, &index))
        })?;
        Ok(outcome.is_accepted())
    }

    /// Marks the frame of array `key` at `index` as one that will not come: it reads
    /// as the fill value and counts as dropped.
    #[pyo3(signature = (key, index))]
    fn skip_frame(&self, py: Python<'_>, key: Option<&str>, index: Vec<u64>) -> PyResult<()> {
        self.run(py, "skip_frame", |s| {
            Ok(s.skip_frame(key.map(Array::Key), &index)?)
        })
    }

    /// Counts `n` frames of array `key` the caller could not deliver as dropped,
    /// keeping their places.
    #[pyo3(signature = (key, n))]
    fn skip(&self, py: Python<'_>, key: Option<&str>, n: u64) -> PyResult<()> {
        self.run(py, "skip", |s| Ok(s.skip(key.map(Array::Key), n)?))
    }

    /// Finishes the writer or every array and returns the statistics as JSON (the
    /// binding core's serialisation, which the C API hands out too).
    fn finish(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "finish", |s| Ok(s.finish()?))
    }

    /// Stops at once, keeping every frame accepted so far; each `zarr.json` records the
    /// state `aborted` and `reason`. Also frees a session a panic poisoned.
    fn abort(&self, py: Python<'_>, reason: String) -> PyResult<()> {
        self.run(py, "abort", |s| Ok(s.abort(reason)?))
    }

    /// Sets (`value_json` given) or removes the attribute `name` of the writer's array
    /// or of a recording's array `array`, with `group` of its OME image group; of a
    /// recording's root group when `array` is None.
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
            .map(|text| parse_json(&format!("attribute {name:?}"), text))
            .transpose()
            .map_err(|f| f.into_pyerr(py))?;
        let array = array.map(Array::Key);
        let target = match (array, group) {
            (None, _) if self.session.is_recording() => Target::Root,
            (array, false) => Target::Array(array),
            (array, true) => Target::ImageGroup(array),
        };
        self.run(py, "set_attribute", |s| {
            Ok(s.set_attribute(target, name, value)?)
        })
    }

    /// Whether the session was finished or aborted.
    #[getter]
    fn closed(&self) -> bool {
        self.session.is_closed()
    }

    /// `(current, peak)` bytes held by the session's own buffers (a recording's: every
    /// array's and the shared workers'), as it counts them.
    fn memory_in_use(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        let m = self.run(py, "memory_in_use", |s| Ok(s.memory_in_use()?))?;
        Ok((m.current, m.peak))
    }

    /// Frames offered to array `key` so far (accepted and dropped).
    #[pyo3(signature = (key = None))]
    fn frames_pushed(&self, py: Python<'_>, key: Option<&str>) -> PyResult<u64> {
        self.run(py, "frames_pushed", |s| {
            Ok(s.frames_pushed(key.map(Array::Key))?)
        })
    }

    /// Frames of array `key` whose chunks are all encoded so far.
    #[pyo3(signature = (key = None))]
    fn frames_encoded(&self, py: Python<'_>, key: Option<&str>) -> PyResult<u64> {
        self.run(py, "frames_encoded", |s| {
            Ok(s.frames_encoded(key.map(Array::Key))?)
        })
    }

    /// Array `key` as the library built it: shape, chunk and shard shapes, dtype, codec,
    /// fill value, dimension names, and for a writer the sink in use.
    #[pyo3(signature = (key = None))]
    fn spec<'py>(&self, py: Python<'py>, key: Option<&str>) -> PyResult<Bound<'py, PyDict>> {
        let recording = self.session.is_recording();
        let (s, sink) = self
            .session
            .spec(key.map(Array::Key))
            .map_err(|e| Failure::from(e).into_pyerr(py))?;
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
        // A recording's spec has had no sink (its arrays share the writer options).
        if !recording {
            d.set_item("sink", sink.as_str())?;
        }
        Ok(d)
    }
}
