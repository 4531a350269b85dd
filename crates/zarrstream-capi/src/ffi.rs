//! The exported functions. All of the crate's `unsafe` is here and only here: reading the
//! caller's C strings and frame bytes through raw pointers, writing through its out
//! pointers, and turning the `zs_writer` handle into a `Box` and back. Every body runs
//! inside [`guard`], so no panic crosses into C.

use std::ffi::{CStr, CString, OsStr, c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use crate::error::{CapiError, ZsCode::ZS_OK, guard, last_error};
use crate::handle::ZsWriter;
use zarrstream::config::{Config, ConfigError};

/// Creates the store at `store_path` and starts recording into it.
///
/// `config_json` is one JSON object. Its keys are the names of the Rust API's
/// `ArraySpec` builder methods, `WriterOptions` fields and `Ome` options, with the same
/// defaults; only `shape`, `chunk_shape` and `shard_shape` are required, and an unknown
/// key is an error. Durations are in milliseconds (keys ending in `_ms`).
///
/// Array:
/// - `shape` [D0, ..., Y, X]: rank 3 to 31; D0 = 0 is an unbounded append axis.
/// - `chunk_shape`, `shard_shape`: inner chunk and shard shape, same rank; the inner
///   chunk divides the shard on every axis.
/// - `dtype`: "uint8", "uint16" (default), "int16", "uint32", "float32" (or u8, u16,
///   i16, u32, f32).
/// - `fill_value`: a number representable in dtype (default 0), or "NaN", "Infinity",
///   "-Infinity" for float32.
/// - `dimension_names`: one distinct string per axis (default none; t, [c], [z], y, x
///   for an OME image).
/// - `codec`: "none", "zstd", "zstd:LEVEL" (-131072..=22, default level 1), "lz4",
///   "lz4:CLEVEL" (blosc-lz4 with byte shuffle, 0..=9, default 1); default "lz4:1".
/// - `crc32c`: a crc32c per inner chunk (default true).
/// - `index_location`: "end" (default) or "start".
/// - `attributes`: an object merged into zarr.json's attributes (default {}).
///
/// Writer:
/// - `threads`: encoder threads, 0 = one per core (default 0, at most 1024).
/// - `pin_threads`: pin encoder threads to cores (default true).
/// - `background_nice`: niceness of the writer's threads, 0..=19 (default 5).
/// - `sink`: "auto" (default, = pwrite), "mmap" or "pwrite".
/// - `pool_frames`: frame buffers, 0 = 2 x threads + 2 (default 0).
/// - `spare_groups`: extra staging groups for chunks deeper than one frame (default 1).
/// - `backpressure`: "block" (default: push waits, nothing is lost) or "drop" (push
///   returns ZS_DROPPED and counts the frame).
/// - `durability`: "shard" (default: each shard flushed before it is published), "none",
///   or {"periodic": {"interval_ms": N}} (group commit every N ms).
/// - `packing`: "compact" (default) or "sparse".
/// - `overwrite`: replace an existing store (default false; never a store that a live
///   writer holds).
///
/// OME-Zarr 0.5 image (`ome` present, even as {}): `store_path` becomes an image group
/// and the array its level 0 at `store_path`/0. Keys of `ome`, all optional: `name`
/// (default "image"), `pixel_size` [Y, X], `z_step`, `frame_interval_ms`, `space_unit`
/// ("micrometer" default, "nanometer"), `time_unit` ("millisecond" default, "second"),
/// `channels` [names, one per entry of the channel axis], `omero` ("auto" or
/// {"channels": [{"label", "color" ("RRGGBB"), "window" {"min", "max", "start", "end"},
/// "active"}]}), and the pyramid: `levels` (a count, 1 = level 0 only (default), at most
/// 16, or "auto": until a level's frame fits one inner chunk; level k at
/// `store_path`/k), `downsample` ("mean" default, "decimate", "min", "max"),
/// `downsample_z` (halve z too, default false), `level_lz4_acceleration` (LZ4
/// acceleration of the lz4 chunks of levels 1 and up).
///
/// Example: {"shape": [0, 2048, 2048], "chunk_shape": [1, 512, 512],
/// "shard_shape": [32, 2048, 2048], "codec": "zstd:1", "threads": 4}
///
/// On success returns ZS_OK and stores the new writer in `*out`; on failure stores NULL
/// in `*out` (when `out` is not NULL) and returns ZS_E_INVALID_ARGUMENT (a NULL
/// argument, an empty path), ZS_E_INVALID_CONFIG, ZS_E_EXISTS, ZS_E_LOCKED,
/// ZS_E_DISK_FULL or ZS_E_IO; nothing new is left on disk then.
///
/// # Safety
/// `store_path` and `config_json` are NULL or NUL-terminated strings; `out` is NULL or
/// points to writable storage for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_create(
    store_path: *const c_char,
    config_json: *const c_char,
    out: *mut *mut ZsWriter,
) -> c_int {
    // Before anything that could fail or panic, so a failure never leaves a stale handle.
    if !out.is_null() {
        // SAFETY: `out` is not NULL and points to storage for one pointer (contract).
        unsafe { out.write(ptr::null_mut()) };
    }
    guard("zs_writer_create", || {
        if out.is_null() {
            return Err(CapiError::Null("out"));
        }
        // SAFETY: non-NULL strings are NUL-terminated and outlive this call (contract).
        let (path, config) = unsafe {
            (
                c_str(store_path, "store_path")?,
                c_str(config_json, "config_json")?,
            )
        };
        if path.is_empty() {
            return Err(CapiError::Argument("store_path is empty"));
        }
        let path = Path::new(OsStr::from_bytes(path.to_bytes()));
        let config = config.to_str().map_err(ConfigError::from)?;
        let writer = Config::parse(config)?.into_parsed()?.create(path)?;
        let handle = Box::into_raw(Box::new(ZsWriter::new(writer)));
        // SAFETY: as above; the caller now owns the handle.
        unsafe { out.write(handle) };
        Ok(ZS_OK)
    })
}

/// Pushes one frame: `nbytes` bytes of little-endian elements of the array's dtype, one
/// y-x plane in C order. Frames fill the leading axes in C order. The bytes are copied
/// before the call returns (under back-pressure "block" it waits for a free buffer).
///
/// Returns ZS_OK, or ZS_DROPPED when back-pressure "drop" dropped the frame. Errors:
/// ZS_E_INVALID_ARGUMENT (NULL `w` or `frame`), ZS_E_FRAME_SIZE (`nbytes` is not the
/// frame size; the message names both; the writer stays usable), ZS_E_ARRAY_FULL, and,
/// closing the writer, ZS_E_DISK_FULL, ZS_E_IO, ZS_E_INTERNAL; then ZS_E_CLOSED.
///
/// # Safety
/// `w` is NULL or a writer from `zs_writer_create` not yet finished or aborted, used by
/// no other thread during the call; `frame` is NULL or points to `nbytes` readable bytes
/// (read only when `nbytes` is the frame size).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_push(
    w: *mut ZsWriter,
    frame: *const c_void,
    nbytes: usize,
) -> c_int {
    guard("zs_writer_push", || {
        // SAFETY: a non-NULL `w` is a live handle that only this call uses (contract).
        let handle = unsafe { w.as_mut() }.ok_or(CapiError::Null("w"))?;
        handle.call(|writer| {
            if frame.is_null() {
                return Err(CapiError::Null("frame"));
            }
            ZsWriter::check_size(writer, nbytes)?;
            // SAFETY: `frame` is not NULL and points to `nbytes` readable bytes, which
            // the writer copies before returning (contract).
            let bytes = unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), nbytes) };
            ZsWriter::push(writer, bytes)
        })
    })
}

/// Like `zs_writer_push`, with the frame's metadata: `meta_json` is a JSON object
/// `{"values": {"timestamp": 0.02, "counter": 7}, "json": {...}}` (both keys optional) for
/// a writer whose config_json has a "frame_meta" object. The metadata is checked before
/// the frame is pushed: an unknown field, an integer field given a fraction, JSON for a
/// writer that stores none, or a `meta_json` that does not parse is
/// ZS_E_INVALID_ARGUMENT and the frame is not pushed. Otherwise returns what
/// `zs_writer_push` returns; a dropped frame keeps its metadata.
///
/// # Safety
/// As `zs_writer_push`; `meta_json` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_push_with(
    w: *mut ZsWriter,
    frame: *const c_void,
    nbytes: usize,
    meta_json: *const c_char,
) -> c_int {
    guard("zs_writer_push_with", || {
        // SAFETY: a non-NULL `w` is a live handle that only this call uses (contract).
        let handle = unsafe { w.as_mut() }.ok_or(CapiError::Null("w"))?;
        // SAFETY: `meta_json` is NULL or NUL-terminated and outlives the call (contract).
        let text = unsafe { c_str(meta_json, "meta_json") }?;
        let doc = serde_json::from_slice::<serde_json::Value>(text.to_bytes())
            .map_err(|_| CapiError::Argument("meta_json is not JSON"))?;
        let meta = zarrstream::FrameMeta::from_json(&doc)?;
        handle.call(|writer| {
            if frame.is_null() {
                return Err(CapiError::Null("frame"));
            }
            ZsWriter::check_size(writer, nbytes)?;
            // SAFETY: `frame` is not NULL and points to `nbytes` readable bytes, which
            // the writer copies before returning (contract).
            let bytes = unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), nbytes) };
            ZsWriter::push_with(writer, bytes, &meta)
        })
    })
}

/// Sets the attribute `name` of the array (`group` = 0) or of the OME-Zarr image group
/// (`group` = 1, for a writer created with an "ome" object) to the JSON value
/// `value_json`, replacing an earlier value, at any time during the recording; NULL
/// `value_json` removes it. zarr.json is republished at once and atomically, with every
/// other attribute kept and the array's extent as last published (never ahead of the
/// data). The writer's own namespaces ("zarrstream" on the array, "ome" on the image
/// group) are refused.
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT for a NULL `w` or `name`, JSON that does not
/// parse, a refused name, or `group` = 1 on a plain array; ZS_E_IO or ZS_E_DISK_FULL if
/// publishing failed (the previous document stays).
///
/// # Safety
/// `w` is NULL or a writer from `zs_writer_create` not yet finished or aborted, used by
/// no other thread during the call; `name` and `value_json` are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_set_attribute(
    w: *mut ZsWriter,
    group: c_int,
    name: *const c_char,
    value_json: *const c_char,
) -> c_int {
    guard("zs_writer_set_attribute", || {
        // SAFETY: a non-NULL `w` is a live handle that only this call uses (contract).
        let handle = unsafe { w.as_mut() }.ok_or(CapiError::Null("w"))?;
        // SAFETY: `name` is NULL or NUL-terminated and outlives the call (contract).
        let name = unsafe { c_str(name, "name") }?
            .to_str()
            .map_err(|_| CapiError::Argument("name is not UTF-8"))?;
        let value = if value_json.is_null() {
            None
        } else {
            // SAFETY: not NULL, so NUL-terminated and alive for the call (contract).
            let text = unsafe { CStr::from_ptr(value_json) };
            Some(
                serde_json::from_slice::<serde_json::Value>(text.to_bytes())
                    .map_err(|_| CapiError::Argument("value_json is not JSON"))?,
            )
        };
        handle.call(|writer| {
            match (group, value) {
                (0, Some(v)) => writer.set_attribute(name, v)?,
                (0, None) => writer.remove_attribute(name)?,
                (1, Some(v)) => writer.set_group_attribute(name, v)?,
                (1, None) => writer.remove_group_attribute(name)?,
                _ => return Err(CapiError::Argument("group is neither 0 nor 1")),
            }
            Ok(ZS_OK)
        })
    })
}

/// Finishes the recording (every accepted frame written, zarr.json published as
/// finished), frees the writer, and, if `stats_json` is not NULL, stores the statistics
/// in `*stats_json` as a JSON object (free it with `zs_string_free`; NULL on failure):
/// frames_pushed, frames_written, frames_dropped, bytes_in, bytes_stored, shards,
/// seconds, push_latency_ns and frame_latency_ns ({count, min, mean, max, p50, p90, p99, p999}),
/// sink, pool_bytes, staging_bytes.
///
/// The writer is freed whatever the result: never use `w` again. Returns ZS_OK, or the
/// first error the writer met (ZS_E_DISK_FULL, ZS_E_IO, ZS_E_INTERNAL), or ZS_E_CLOSED
/// if a push already reported it; ZS_E_INVALID_ARGUMENT for a NULL `w`.
///
/// # Safety
/// `w` is NULL or a writer from `zs_writer_create` not yet finished or aborted, used by
/// no other thread; `stats_json` is NULL or points to writable storage for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_finish(w: *mut ZsWriter, stats_json: *mut *mut c_char) -> c_int {
    if !stats_json.is_null() {
        // SAFETY: not NULL, so it points to storage for one pointer (contract).
        unsafe { stats_json.write(ptr::null_mut()) };
    }
    guard("zs_writer_finish", || {
        if w.is_null() {
            return Err(CapiError::Null("w"));
        }
        // SAFETY: `w` came from `zs_writer_create` (Box::into_raw) and is handed back
        // here once; ownership returns to Rust, which frees it on every path below.
        let handle = unsafe { Box::from_raw(w) };
        let json = handle.finish()?;
        if !stats_json.is_null() {
            let json = CString::new(json)
                .map_err(|e| zarrstream::Error::Internal(format!("statistics: {e}")))?;
            // SAFETY: as above; the caller frees the string with `zs_string_free`.
            unsafe { stats_json.write(json.into_raw()) };
        }
        Ok(ZS_OK)
    })
}

/// Stops recording at once and frees the writer: no further frame is accepted, the
/// frames accepted so far are still written and published, and zarr.json records state
/// "aborted" with the reason "aborted by the caller (zs_writer_abort)". It returns
/// nothing: a caller that needs the writer's errors calls `zs_writer_finish` instead.
/// NULL is a no-op.
///
/// # Safety
/// `w` is NULL or a writer from `zs_writer_create` not yet finished or aborted, used by
/// no other thread. Never use `w` again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_abort(w: *mut ZsWriter) {
    guard("zs_writer_abort", || {
        if !w.is_null() {
            // SAFETY: as in `zs_writer_finish`: ownership of the handle returns once.
            unsafe { Box::from_raw(w) }.abort();
        }
        Ok(ZS_OK)
    });
}

/// The message of the last failed call on the calling thread, or "" if no call on this
/// thread has failed. Calls that succeed leave it unchanged (test the return code
/// first). The string belongs to the library and stays valid until the next failing
/// call on the same thread; do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn zs_last_error() -> *const c_char {
    std::panic::catch_unwind(last_error).unwrap_or(c"".as_ptr())
}

/// Frees a string returned by `zs_writer_finish`. NULL is a no-op.
///
/// # Safety
/// `s` is NULL or a string from `zs_writer_finish` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_string_free(s: *mut c_char) {
    guard("zs_string_free", || {
        if !s.is_null() {
            // SAFETY: `s` came from `CString::into_raw` in `zs_writer_finish` and is
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
