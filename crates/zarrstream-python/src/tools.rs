//! The command-line tool's store functions, for Python: `recover`, `inspect`, `verify`.
//! Each returns the tool's `--json` report as a string, which the Python side parses:
//! one serialisation (serde's) for the CLI and Python alike.

use std::path::PathBuf;

use pyo3::prelude::*;
use serde::Serialize;
use zarrstream::store::{self, StoreReader};

use crate::errors::{Failure, Kind, guarded};

/// `report` as JSON text, for the Python side to parse.
pub(crate) fn json(report: &impl Serialize) -> Result<String, Failure> {
    serde_json::to_string(report).map_err(|e| Failure::new(Kind::Internal, e.to_string()))
}

/// Recovers the store at `path` after its writer died (`zarrstream recover --json`).
#[pyfunction]
pub(crate) fn recover(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        guarded("recover", || {
            json(&zarrstream::recover::recover_store(&path)?)
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

/// What the store at `path` holds (`zarrstream inspect --json`).
#[pyfunction]
pub(crate) fn inspect(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        guarded("inspect", || {
            let reader = StoreReader::open(&path)?;
            json(&store::summarise(&reader, |_, _| {})?)
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

/// Checks every chunk of the store at `path` by its crc32c (and by decoding it with
/// `decode`) (`zarrstream verify --json`).
#[pyfunction]
#[pyo3(signature = (path, decode = false))]
pub(crate) fn verify(py: Python<'_>, path: PathBuf, decode: bool) -> PyResult<String> {
    py.detach(|| {
        guarded("verify", || {
            let reader = StoreReader::open(&path)?;
            json(&store::verify(&reader, decode, |_, _| {})?)
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

/// The memory estimate of the writer `config` describes (the `zarrstream::config`
/// JSON), as JSON: its parts, `resident` and `total`, in bytes.
#[pyfunction]
pub(crate) fn estimate_memory(py: Python<'_>, config: &str) -> PyResult<String> {
    py.detach(|| {
        guarded("estimating memory", || {
            let parsed = zarrstream::config::Config::parse(config)?.into_parsed()?;
            estimate_json(&parsed.estimate_memory()?)
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

/// The memory estimate of the recording `config` describes (the
/// `zarrstream::config::RecordingConfig` JSON), as [`estimate_memory`] gives it.
#[pyfunction]
pub(crate) fn estimate_recording_memory(py: Python<'_>, config: &str) -> PyResult<String> {
    py.detach(|| {
        guarded("estimating memory", || {
            let parsed = zarrstream::config::RecordingConfig::parse(config)?;
            estimate_json(&parsed.estimate_memory()?)
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

fn estimate_json(e: &zarrstream::MemoryEstimate) -> Result<String, Failure> {
    let mut v = serde_json::to_value(e).map_err(|e| Failure::new(Kind::Internal, e.to_string()))?;
    if let Some(o) = v.as_object_mut() {
        o.insert("resident".into(), e.resident().into());
        o.insert("total".into(), e.total().into());
    }
    json(&v)
}
