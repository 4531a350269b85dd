//! Paths from C strings, the one place where the C API differs between platforms: on
//! Linux a path is bytes, passed on as they are (any file name the system allows); on
//! Windows file names are UTF-16, and the C API takes them as UTF-8 (what C callers,
//! LabVIEW's string conversion and Python's ctypes hand over most easily).

use std::ffi::CStr;
use std::path::PathBuf;

use crate::error::CapiError;

/// The path that the C string `s` (the argument named `what`) names.
#[cfg(unix)]
pub(crate) fn from_c(s: &CStr, _what: &'static str) -> Result<PathBuf, CapiError> {
    use std::os::unix::ffi::OsStrExt;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(s.to_bytes())))
}

/// The path that the C string `s` (the argument named `what`) names; not UTF-8 is
/// [`CapiError::NotUtf8`].
#[cfg(windows)]
pub(crate) fn from_c(s: &CStr, what: &'static str) -> Result<PathBuf, CapiError> {
    s.to_str()
        .map(PathBuf::from)
        .map_err(|_| CapiError::NotUtf8(what))
}
