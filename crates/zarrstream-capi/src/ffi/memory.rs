//! Memory: the estimate before a writer or recording exists, and what one holds now.

use super::*;
use zarrstream::config::{Config, RecordingConfig};
use zarrstream_bind::json;

/// Stores in `*estimate_json` (a JSON object the caller frees with `zs_string_free`)
/// the most memory, in bytes, that the writer `zs_writer_create` would make from
/// `config_json` will use, by part: {"frame_pool", "staging", "encoders",
/// "mapped_shards", "pyramid", "bookkeeping", "page_cache", "resident", "total"}.
/// "resident" (every part but "page_cache") bounds what the writer adds to the
/// process's resident memory; "total" adds the file pages it lets the page cache hold.
/// The book's "Memory" chapter says what each part covers. Nothing is created.
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT for a NULL argument; for a configuration that
/// `zs_writer_create` would refuse before touching the disk, the code and message it
/// would return (ZS_E_INVALID_CONFIG, ZS_E_INVALID_ARGUMENT); `*estimate_json` is NULL
/// then.
///
/// # Safety
/// `config_json` is NULL or NUL-terminated; `estimate_json` is NULL or points to
/// writable storage for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_estimate_memory(
    config_json: *const c_char,
    estimate_json: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract is this function's.
    unsafe {
        estimate("zs_estimate_memory", config_json, estimate_json, |c| {
            let parsed = Config::parse(c)?.into_parsed()?;
            warn_deprecated(parsed.deprecated.as_deref());
            Ok(json::estimate(&parsed.estimate_memory()?)?)
        })
    }
}

/// As `zs_estimate_memory`, for the recording `zs_recording_create` would make from
/// `config_json`: every array's parts summed, the shared encoding workers counted once.
///
/// # Safety
/// As `zs_estimate_memory`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_estimate_memory(
    config_json: *const c_char,
    estimate_json: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract is this function's.
    unsafe {
        estimate(
            "zs_recording_estimate_memory",
            config_json,
            estimate_json,
            |c| {
                let config = RecordingConfig::parse(c)?;
                warn_deprecated(config.deprecated.as_deref());
                Ok(json::estimate(&config.estimate_memory()?)?)
            },
        )
    }
}

/// The body of the two estimate functions.
///
/// # Safety
/// As `zs_estimate_memory`.
unsafe fn estimate(
    name: &'static str,
    config_json: *const c_char,
    out: *mut *mut c_char,
    f: impl FnOnce(&str) -> Result<String, CapiError>,
) -> c_int {
    if !out.is_null() {
        // SAFETY: not NULL, so it points to storage for one pointer (contract).
        unsafe { out.write(ptr::null_mut()) };
    }
    guard(name, || {
        if out.is_null() {
            return Err(CapiError::Null("estimate_json"));
        }
        // SAFETY: a non-NULL string is NUL-terminated and outlives this call (contract).
        let estimate = f(unsafe { config_arg(config_json) }?)?;
        // SAFETY: `out` is not NULL (checked above), so it points to storage for one
        // pointer (contract).
        unsafe { hand_over(out, estimate, "estimate") }?;
        Ok(ZS_OK)
    })
}

/// Stores in `*current` and `*peak` the bytes the writer's own buffers hold now and
/// at most so far (frame pool, staging, the encoding workers' scratch and encoders,
/// mapped shard pages, and those of every pyramid level), as the writer counts them
/// where it allocates and frees them. Either pointer may be NULL.
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT for a NULL `w`; ZS_E_CLOSED after a panic
/// poisoned the writer.
///
/// # Safety
/// `w` is NULL or a writer from `zs_writer_create` not yet finished or aborted, used by
/// no other thread during the call; `current` and `peak` are NULL or point to a
/// writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_memory_in_use(
    w: *mut ZsWriter,
    current: *mut u64,
    peak: *mut u64,
) -> c_int {
    guard("zs_writer_memory_in_use", || {
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let m = unsafe { session(w, "w") }?.memory_in_use()?;
        // SAFETY: each is NULL or points to a writable uint64_t (contract).
        unsafe { write_usage(m, current, peak) };
        Ok(ZS_OK)
    })
}

/// As `zs_writer_memory_in_use`, for the whole recording: every array's buffers and the
/// shared encoding workers'. Any thread may call it while others push.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted;
/// `current` and `peak` are NULL or point to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_memory_in_use(
    r: *const ZsRecording,
    current: *mut u64,
    peak: *mut u64,
) -> c_int {
    guard("zs_recording_memory_in_use", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let m = unsafe { session(r, "r") }?.memory_in_use()?;
        // SAFETY: each is NULL or points to a writable uint64_t (contract).
        unsafe { write_usage(m, current, peak) };
        Ok(ZS_OK)
    })
}

/// Writes `m` through the non-NULL ones of `current` and `peak`.
///
/// # Safety
/// Each pointer is NULL or points to a writable `uint64_t`.
unsafe fn write_usage(m: zarrstream::MemoryUsage, current: *mut u64, peak: *mut u64) {
    if !current.is_null() {
        // SAFETY: not NULL, so writable (this function's contract).
        unsafe { current.write(m.current) };
    }
    if !peak.is_null() {
        // SAFETY: not NULL, so writable (this function's contract).
        unsafe { peak.write(m.peak) };
    }
}
