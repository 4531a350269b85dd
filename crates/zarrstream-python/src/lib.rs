//! The native module `zarrstream._native`: the Rust writer behind the Python package.
//!
//! Python users import `zarrstream`, a pure-Python package over this module that takes
//! keyword arguments, checks frames with numpy and raises the package's exceptions; this
//! module only moves bytes and maps errors. The writer is described to it as the same
//! JSON object the C API takes ([`zarrstream::config`]), so every default is the Rust
//! library's and the two bindings cannot drift apart.
//!
//! All `unsafe` code is in [`frames`], which reads the memory of a Python buffer while
//! the interpreter lock is released. What this module shares with the C API (the
//! session handle, its poison policy, the statistics and estimate JSON) is the binding
//! core, `zarrstream-bind`.

#![deny(unsafe_code)]

mod errors;
#[allow(unsafe_code)]
mod frames;
mod indexed;
mod plate;
mod session;
mod tools;

use pyo3::prelude::*;

/// The native half of the `zarrstream` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<session::NativeSession>()?;
    m.add_function(wrap_pyfunction!(tools::config_keys, m)?)?;
    m.add_function(wrap_pyfunction!(tools::recover, m)?)?;
    m.add_function(wrap_pyfunction!(tools::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(tools::verify, m)?)?;
    m.add_function(wrap_pyfunction!(tools::estimate_memory, m)?)?;
    m.add_function(wrap_pyfunction!(tools::estimate_recording_memory, m)?)?;
    m.add_function(wrap_pyfunction!(tools::upload_staged, m)?)?;
    m.add_function(wrap_pyfunction!(tools::publish_parts, m)?)?;
    m.add_function(wrap_pyfunction!(plate::plate_images, m)?)?;
    m.add_function(wrap_pyfunction!(plate::plate_image_key, m)?)?;
    m.add_function(wrap_pyfunction!(errors::error_kinds, m)?)?;
    Ok(())
}
