//! The library's strings: the last error of the calling thread, strings handed to the
//! caller, and the version.

use super::*;

/// The message of the last failed call on the calling thread, or "" if no call on this
/// thread has failed. Calls that succeed leave it unchanged (test the return code
/// first). The string belongs to the library and stays valid until the next failing
/// call on the same thread; do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn zs_last_error() -> *const c_char {
    std::panic::catch_unwind(last_error).unwrap_or(c"".as_ptr())
}

/// Frees a string returned by `zs_writer_finish`, `zs_recording_finish` or an estimate
/// function. NULL is a no-op.
///
/// # Safety
/// `s` is NULL or a string from one of those functions not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_string_free(s: *mut c_char) {
    guard("zs_string_free", || {
        if !s.is_null() {
            // SAFETY: `s` came from `CString::into_raw` in one of those functions and is
            // freed once (contract).
            drop(unsafe { CString::from_raw(s) });
        }
        Ok(ZS_OK)
    });
}

/// The library's version, e.g. "0.1.0" (a static string; do not free it).
#[unsafe(no_mangle)]
pub extern "C" fn zs_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => panic!("the package version has no NUL"),
        };
    VERSION.as_ptr()
}
