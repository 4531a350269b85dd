//! The command-line tool's store functions, for Python: `recover`.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors::guarded;

/// Recovers the store at `path` after its writer died; returns the report as a JSON
/// string (the CLI's `recover --json`), which the Python side parses.
#[pyfunction]
pub(crate) fn recover(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        guarded("recover", || {
            let report = zarrstream::recover::recover_store(&path)?;
            serde_json::to_string(&report).map_err(|e| {
                crate::errors::Failure::new(crate::errors::Kind::Internal, e.to_string())
            })
        })
    })
    .map_err(|f| f.into_pyerr(py))
}
