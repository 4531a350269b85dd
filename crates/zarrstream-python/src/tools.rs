//! The command-line tool's store functions, for Python: `recover`, `inspect`, `verify`,
//! `upload_staged`, `publish_parts`. Each returns the tool's `--json` report as a
//! string, which the Python side parses: one serialisation (serde's) for the CLI and
//! Python alike.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::prelude::*;
use serde::Serialize;
use serde_json::json;
use zarrstream::remote::RemoteOptions;
use zarrstream::store::{self, StoreReader};

use zarrstream::ErrorKind;

use crate::errors::{Failure, guarded};

/// The keys of the configuration's `array`, `writer` and `remote` sections, as the
/// library's types read them: the keyword arguments `Writer` and `Recording` take (an
/// unknown one is a `TypeError`), from the types instead of a list kept in Python.
#[pyfunction]
pub(crate) fn config_keys() -> std::collections::BTreeMap<&'static str, Vec<&'static str>> {
    zarrstream::config::section_keys()
        .into_iter()
        .map(|(section, keys)| (section, keys.to_vec()))
        .collect()
}

/// `report` as JSON text, for the Python side to parse.
pub(crate) fn json(report: &impl Serialize) -> Result<String, Failure> {
    serde_json::to_string(report).map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))
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
            Ok(zarrstream_bind::json::estimate_writer(config)?)
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
            let (config, keys) = crate::indexed::split(config)?;
            let mut parsed = zarrstream::config::RecordingConfig::parse(&config)?;
            keys.apply_recording(&mut parsed)?;
            Ok(zarrstream_bind::json::estimate(&parsed.estimate_memory()?)?)
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

/// The object-store options of `upload_staged` and `publish_parts`: `store_options`
/// over the environment, and how long uploads may keep failing.
fn remote_options(
    store_options: Vec<(String, String)>,
    upload_timeout: f64,
) -> Result<RemoteOptions, Failure> {
    let timeout = Duration::try_from_secs_f64(upload_timeout).map_err(|_| {
        Failure::new(
            ErrorKind::InvalidArgument,
            format!("upload_timeout {upload_timeout} is not a number of seconds ≥ 0"),
        )
    })?;
    let mut options = RemoteOptions::default().upload_timeout(timeout);
    options.store_options = store_options;
    Ok(options)
}

/// Uploads what a recording left in the staging directory `staging` and republishes
/// its metadata (`zarrstream upload --json`): `{url, shards, bytes, documents}`.
#[pyfunction]
pub(crate) fn upload_staged(
    py: Python<'_>,
    staging: PathBuf,
    store_options: Vec<(String, String)>,
    upload_timeout: f64,
) -> PyResult<String> {
    py.detach(|| {
        guarded("upload_staged", || {
            let options = remote_options(store_options, upload_timeout)?;
            let r = zarrstream::remote::upload_staged(&staging, &options)?;
            json(&json!({"url": r.url, "shards": r.shards, "bytes": r.bytes,
                         "documents": r.documents}))
        })
    })
    .map_err(|f| f.into_pyerr(py))
}

/// Publishes the shared `zarr.json` of the array recorded in parts at `url` from the
/// parts' progress (`zarrstream publish --json`): `{url, parts, parts_found, extent0,
/// state, published}`.
#[pyfunction]
pub(crate) fn publish_parts(
    py: Python<'_>,
    url: String,
    store_options: Vec<(String, String)>,
) -> PyResult<String> {
    py.detach(|| {
        guarded("publish_parts", || {
            let mut options = RemoteOptions::default();
            options.store_options = store_options;
            let r = zarrstream::remote::publish_parts(&url, &options)?;
            json(
                &json!({"url": url, "parts": r.parts, "parts_found": r.parts_found,
                         "extent0": r.extent0, "state": r.state, "published": r.published}),
            )
        })
    })
    .map_err(|f| f.into_pyerr(py))
}
