//! `NativeWriter`: one [`zarrstream::Writer`] behind a lock, for the Python `Writer`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zarrstream::Writer;
use zarrstream::config::Config;

use crate::errors::{Failure, guarded};
use crate::frames::Frames;
use zarrstream::ErrorKind;

/// The writer; `None` once finished or aborted. A `Mutex`, not the interpreter lock,
/// guards it, because pushes run with the interpreter lock released.
#[pyclass(module = "zarrstream._native", frozen)]
pub(crate) struct NativeWriter {
    writer: Mutex<Option<Writer>>,
    /// Set once the writer is taken: read without the `Mutex`, which a push waiting on
    /// back-pressure holds while other Python threads run.
    closed: AtomicBool,
    frame_bytes: usize,
    frame_shape: [usize; 2],
    item_size: usize,
}

impl NativeWriter {
    /// The live writer, or `Closed`.
    fn live(&self) -> Result<MutexGuard<'_, Option<Writer>>, Failure> {
        // A panic while pushing is caught and reported, so a poisoned lock only means
        // that push failed; the writer inside is still the one to finish.
        let guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            return Err(Failure::new(ErrorKind::Closed, "the writer is closed"));
        }
        Ok(guard)
    }

    fn take(&self) -> Result<Writer, Failure> {
        let writer = self
            .live()?
            .take()
            .ok_or_else(|| Failure::new(ErrorKind::Closed, "the writer is closed"))?;
        self.closed.store(true, Ordering::Release);
        Ok(writer)
    }

    /// Runs `f` on the writer's `Mutex` with the interpreter lock released, so a thread
    /// waiting here never stops the others.
    fn locked<T: Send>(&self, py: Python<'_>, f: impl FnOnce(Option<&Writer>) -> T + Send) -> T {
        py.detach(|| {
            f(self
                .writer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref())
        })
    }
}

#[pymethods]
impl NativeWriter {
    /// Creates the store at `path` from `config`, the JSON object of
    /// `zarrstream::config` (the C API's `config_json`).
    #[new]
    fn new(py: Python<'_>, path: PathBuf, config: &str) -> PyResult<Self> {
        let config = config.to_owned();
        let writer = py
            .detach(move || {
                guarded("creating the writer", || {
                    let parsed = Config::parse(&config)?.into_parsed()?;
                    Ok(parsed.create(&path)?)
                })
            })
            .map_err(|f| f.into_pyerr(py))?;
        let spec = writer.spec();
        let rank = spec.rank();
        let frame_shape = [spec.shape()[rank - 2], spec.shape()[rank - 1]].map(|v| v as usize);
        Ok(NativeWriter {
            frame_bytes: spec.frame_bytes(),
            frame_shape,
            item_size: spec.dtype().size(),
            writer: Mutex::new(Some(writer)),
            closed: AtomicBool::new(false),
        })
    }

    /// Pushes every frame of `frames` (any object with the buffer protocol holding whole
    /// frames); returns `(accepted, dropped)`.
    fn push(&self, py: Python<'_>, frames: &Bound<'_, PyAny>) -> PyResult<(u64, u64)> {
        let buf = PyUntypedBuffer::get(frames)?;
        let frames = Frames::new(buf, self.frame_bytes, self.frame_shape, self.item_size)
            .map_err(|f| f.into_pyerr(py))?;
        let pushed = py
            .detach(|| {
                guarded("push", || {
                    let mut guard = self.live()?;
                    match guard.as_mut() {
                        Some(writer) => frames.push(writer),
                        None => Err(Failure::new(ErrorKind::Closed, "the writer is closed")),
                    }
                })
            })
            .map_err(|f| f.into_pyerr(py))?;
        Ok((pushed.accepted, pushed.dropped))
    }

    /// Pushes one frame (a buffer of exactly one frame) with its metadata, the JSON
    /// object of `zarrstream::FrameMeta::from_json`; returns `(accepted, dropped)`.
    fn push_with(
        &self,
        py: Python<'_>,
        frame: &Bound<'_, PyAny>,
        meta_json: &str,
    ) -> PyResult<(u64, u64)> {
        let doc: serde_json::Value = serde_json::from_str(meta_json)
            .map_err(|e| Failure::new(ErrorKind::InvalidArgument, format!("frame metadata: {e}")))
            .map_err(|f| f.into_pyerr(py))?;
        let meta =
            zarrstream::FrameMeta::from_value(doc).map_err(|e| Failure::from(e).into_pyerr(py))?;
        let buf = PyUntypedBuffer::get(frame)?;
        let frames = Frames::new(buf, self.frame_bytes, self.frame_shape, self.item_size)
            .map_err(|f| f.into_pyerr(py))?;
        py.detach(|| {
            guarded("push_with", || {
                let mut guard = self.live()?;
                match guard.as_mut() {
                    Some(writer) => frames.push_with(writer, &meta),
                    None => Err(Failure::new(ErrorKind::Closed, "the writer is closed")),
                }
            })
        })
        .map(|p| (p.accepted, p.dropped))
        .map_err(|f| f.into_pyerr(py))
    }

    /// Writes one frame (a buffer of exactly one frame) at `index`, its coordinates on
    /// the leading axes; returns whether it was accepted (not dropped).
    fn write_frame(
        &self,
        py: Python<'_>,
        index: Vec<u64>,
        frame: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let buf = PyUntypedBuffer::get(frame)?;
        let frames = Frames::new(buf, self.frame_bytes, self.frame_shape, self.item_size)
            .map_err(|f| f.into_pyerr(py))?;
        py.detach(|| {
            guarded("write_frame", || {
                let mut guard = self.live()?;
                match guard.as_mut() {
                    Some(writer) => frames.write_at(writer, &index),
                    None => Err(Failure::new(ErrorKind::Closed, "the writer is closed")),
                }
            })
        })
        .map(|outcome| outcome.is_accepted())
        .map_err(|f| f.into_pyerr(py))
    }

    /// Marks the frame at `index` as one that will not come: it reads as the fill
    /// value and counts as dropped.
    fn skip_frame(&self, py: Python<'_>, index: Vec<u64>) -> PyResult<()> {
        py.detach(|| {
            guarded("skip_frame", || {
                let mut guard = self.live()?;
                match guard.as_mut() {
                    Some(writer) => Ok(writer.skip_frame(&index)?),
                    None => Err(Failure::new(ErrorKind::Closed, "the writer is closed")),
                }
            })
        })
        .map_err(|f| f.into_pyerr(py))
    }

    /// Counts `n` frames the caller could not deliver as dropped, keeping their places.
    fn skip(&self, py: Python<'_>, n: u64) -> PyResult<()> {
        py.detach(|| {
            guarded("skip", || {
                let mut guard = self.live()?;
                if let Some(writer) = guard.as_mut() {
                    for _ in 0..n {
                        writer.skip()?;
                    }
                }
                Ok(())
            })
        })
        .map_err(|f| f.into_pyerr(py))
    }

    /// Finishes the recording and returns its statistics as JSON (the library's
    /// serialisation of `Stats`, which the C API hands out too).
    fn finish(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| guarded("finish", || crate::tools::json(&self.take()?.finish()?)))
            .map_err(|f| f.into_pyerr(py))
    }

    /// Stops the recording, keeping every frame accepted so far; `zarr.json` records the
    /// state `aborted` and `reason`.
    fn abort(&self, py: Python<'_>, reason: String) -> PyResult<()> {
        py.detach(|| guarded("abort", || Ok(self.take()?.abort(reason)?)))
            .map_err(|f| f.into_pyerr(py))
    }

    /// Sets (`value_json` given) or removes the attribute `name` of the array, or of the
    /// OME image group with `group`; `zarr.json` is republished at once.
    #[pyo3(signature = (name, value_json, group = false))]
    fn set_attribute(
        &self,
        py: Python<'_>,
        name: &str,
        value_json: Option<&str>,
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
        py.detach(|| {
            guarded("set_attribute", || {
                let guard = self.live()?;
                let Some(w) = guard.as_ref() else {
                    return Err(Failure::new(ErrorKind::Closed, "the writer is closed"));
                };
                match (group, value) {
                    (false, Some(v)) => w.set_attribute(name, v)?,
                    (false, None) => w.remove_attribute(name)?,
                    (true, Some(v)) => w.set_group_attribute(name, v)?,
                    (true, None) => w.remove_group_attribute(name)?,
                }
                Ok(())
            })
        })
        .map_err(|f| f.into_pyerr(py))
    }

    /// Whether the writer was finished or aborted.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Frames offered so far (accepted and dropped); 0 after closing.
    #[getter]
    fn frames_pushed(&self, py: Python<'_>) -> u64 {
        self.locked(py, |w| w.map_or(0, Writer::frames_pushed))
    }

    /// Frames whose chunks are all encoded so far; 0 after closing.
    #[getter]
    fn frames_encoded(&self, py: Python<'_>) -> u64 {
        self.locked(py, |w| w.map_or(0, Writer::frames_encoded))
    }

    /// `(current, peak)` bytes held by the writer's own buffers, as it counts them.
    fn memory_in_use(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        let m = self.locked(py, |w| w.map(Writer::memory_in_use));
        let m = m
            .ok_or_else(|| Failure::new(ErrorKind::Closed, "the writer is closed"))
            .map_err(|f| f.into_pyerr(py))?;
        Ok((m.current, m.peak))
    }

    /// The array as the library built it: shape, chunk and shard shapes, dtype, codec,
    /// fill value, dimension names and the sink in use.
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let spec = self.locked(py, |w| w.map(|w| (w.spec().clone(), w.sink())));
        let d = PyDict::new(py);
        if let Some((s, sink)) = spec {
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
            d.set_item("sink", sink.as_str())?;
        }
        Ok(d)
    }
}
