//! The exported functions. All of the crate's `unsafe` is here and only here: reading the
//! caller's C strings and frame bytes through raw pointers, writing through its out
//! pointers, and turning the `zs_writer` and `zs_recording` handles into a `Box` and back
//! (and a `zs_recording` into shared references, which several threads may hold at once).
//! Every body runs inside `guard`, so no panic crosses into C.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr;

use crate::error::ZsCode;
use crate::error::{CapiError, ZsCode::ZS_OK, guard, last_error};
use crate::handle::{ZsRecording, ZsWriter};
use zarrstream::config::{Config, ConfigError, RecordingConfig};

// In this order, which is the header's (cbindgen keeps the order of the source).
mod writer;
pub use writer::*;

mod recording;
pub use recording::*;

mod memory;
pub use memory::*;

mod strings;
pub use strings::*;

/// Writes a deprecated configuration's notice to stderr, once per process: a C program
/// has no other channel for a warning that is not an error, and once is enough to be
/// seen without flooding a long acquisition's log.
fn warn_deprecated(note: Option<&str>) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if let Some(note) = note {
        ONCE.call_once(|| eprintln!("zarrstream: warning: {note}"));
    }
}

/// The `rank` coordinates at `index` (NULL allowed when `rank` is 0).
///
/// # Safety
/// `index` is NULL or points to `rank` readable `uint64_t`.
unsafe fn index_arg<'a>(index: *const u64, rank: usize) -> Result<&'a [u64], CapiError> {
    if rank == 0 {
        return Ok(&[]);
    }
    if index.is_null() {
        return Err(CapiError::Null("index"));
    }
    // SAFETY: `index` is not NULL and points to `rank` readable values (contract).
    Ok(unsafe { std::slice::from_raw_parts(index, rank) })
}

/// A C string argument, or the error naming it if it is NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives `'a`.
unsafe fn c_str<'a>(p: *const c_char, name: &'static str) -> Result<&'a CStr, CapiError> {
    if p.is_null() {
        return Err(CapiError::Null(name));
    }
    // SAFETY: not NULL, so NUL-terminated and alive for 'a (this function's contract).
    Ok(unsafe { CStr::from_ptr(p) })
}

/// A UTF-8 C string argument, or the error naming it if it is NULL or not UTF-8.
///
/// # Safety
/// As [`c_str`].
unsafe fn utf8<'a>(p: *const c_char, name: &'static str) -> Result<&'a str, CapiError> {
    // SAFETY: this function's contract is `c_str`'s.
    unsafe { c_str(p, name) }?
        .to_str()
        .map_err(|_| CapiError::NotUtf8(name))
}

/// The `value_json` argument: `None` for NULL, an error if it does not parse.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string alive for the call.
unsafe fn json_or_null(p: *const c_char) -> Result<Option<serde_json::Value>, CapiError> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: not NULL, so NUL-terminated and alive for the call (contract).
    let text = unsafe { CStr::from_ptr(p) };
    serde_json::from_slice(text.to_bytes())
        .map(Some)
        .map_err(|_| CapiError::Argument("value_json is not JSON"))
}

/// Gives `json` to the caller through `out` as a NUL-terminated string that the caller
/// frees with `zs_string_free`; `what` names it in the error for an interior NUL.
///
/// # Safety
/// `out` is not NULL and points to writable storage for one pointer.
unsafe fn hand_over(out: *mut *mut c_char, json: String, what: &str) -> Result<(), CapiError> {
    let json =
        CString::new(json).map_err(|e| zarrstream::Error::Internal(format!("{what}: {e}")))?;
    // SAFETY: `out` is writable (this function's contract).
    unsafe { out.write(json.into_raw()) };
    Ok(())
}
