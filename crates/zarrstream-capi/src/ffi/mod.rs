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
use zarrstream::config::ConfigError;
use zarrstream_bind::{Array, Session, Target};

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

/// The session behind a `zs_writer` or `zs_recording` pointer, or the error naming the
/// argument if it is NULL.
///
/// # Safety
/// `p` is NULL or a live handle that outlives `'a`, not being freed meanwhile.
unsafe fn session<'a, H: Handle + 'a>(
    p: *const H,
    name: &'static str,
) -> Result<&'a Session, CapiError> {
    // SAFETY: a non-NULL `p` is a live handle (contract); only shared access is made,
    // which a session allows from several threads at once (it is Sync).
    unsafe { p.as_ref() }
        .map(Handle::session)
        .ok_or(CapiError::Null(name))
}

/// A handle type: a session under a C name.
trait Handle {
    fn session(&self) -> &Session;
}

impl Handle for ZsWriter {
    fn session(&self) -> &Session {
        &self.0
    }
}

impl Handle for ZsRecording {
    fn session(&self) -> &Session {
        &self.0
    }
}

/// The `nbytes` bytes at `frame` as a slice, once the session has checked that
/// `nbytes` is the frame size of `array`: never a slice of a length the caller may not
/// own. The one place where the C API turns a frame pointer into a slice.
///
/// # Safety
/// `frame` is NULL or points to `nbytes` readable bytes (when `nbytes` is the frame size)
/// that stay alive and unchanged for `'a`.
unsafe fn frame_arg<'a>(
    s: &Session,
    array: Option<Array<'_>>,
    frame: *const c_void,
    nbytes: usize,
) -> Result<&'a [u8], CapiError> {
    if frame.is_null() {
        return Err(CapiError::Null("frame"));
    }
    s.check_len(array, nbytes)?;
    // SAFETY: `frame` is not NULL and, `nbytes` being the frame size, points to
    // `nbytes` readable bytes alive for 'a (this function's contract).
    Ok(unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), nbytes) })
}

/// The `meta_json` argument as frame metadata.
///
/// # Safety
/// `meta_json` is NULL or NUL-terminated and alive for the call.
unsafe fn meta_arg(meta_json: *const c_char) -> Result<zarrstream::FrameMeta, CapiError> {
    // SAFETY: this function's contract is `c_str`'s.
    let text = unsafe { c_str(meta_json, "meta_json") }?;
    let doc = serde_json::from_slice::<serde_json::Value>(text.to_bytes())
        .map_err(|_| CapiError::Argument("meta_json is not JSON"))?;
    Ok(zarrstream::FrameMeta::from_value(doc)?)
}

/// The `config_json` argument as UTF-8.
///
/// # Safety
/// As [`c_str`].
unsafe fn config_arg<'a>(config_json: *const c_char) -> Result<&'a str, CapiError> {
    // SAFETY: this function's contract is `c_str`'s.
    let config = unsafe { c_str(config_json, "config_json") }?;
    Ok(config.to_str().map_err(ConfigError::from)?)
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
