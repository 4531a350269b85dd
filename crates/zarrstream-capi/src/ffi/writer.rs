//! `zs_writer_*`: one array (or OME-Zarr image) written from one thread: create, push,
//! frames by index, attributes, finish and abort.

use super::*;

/// Creates the store at `store_path` and starts recording into it.
///
/// `config_json` is one JSON object in sections, each read by the Rust type it configures
/// with that type's defaults; an unknown key, or a key in the wrong section, is
/// ZS_E_INVALID_CONFIG and the message names its place (`writer.sink: ...`):
/// - `array` (required): the array, `shape`, `chunk_shape`, `shard_shape` (required),
///   `dtype`, `fill_value`, `dimension_names`, `codec`, `crc32c`, `index_location`,
///   `attributes`;
/// - `writer`: threads, sink, buffers, back-pressure, durability, packing, chunk order,
///   acquisition order, `overwrite`, `resume`;
/// - `remote`: staging and upload when `store_path` is an object store URL
///   (`s3://bucket/prefix`, `gs://`, `az://`, `file:///shared/path`; credentials, region
///   and endpoint come from the environment and `store_options`);
/// - `ome` (present, even as {}: `store_path` becomes an OME-Zarr 0.5 image group, the
///   array its level 0 at `store_path`/0, and levels 1 and up the pyramid);
/// - `frame_meta`: per-frame metadata pushed with `zs_writer_push_with`.
///
/// Every duration is a number of milliseconds, in a key ending in `_ms`. The keys, their
/// types, defaults and meanings are in the JSON Schema `docs/config.schema.json` (the
/// `writer` form) and the book's configuration reference. Example:
/// {"array": {"shape": [0, 2048, 2048], "chunk_shape": [1, 512, 512],
/// "shard_shape": [32, 2048, 2048], "codec": "zstd:1"}, "writer": {"threads": 4}}
///
/// Deprecated: the flat form of release 0.1 (every key at the top level, `upload_timeout`
/// in seconds) is still accepted for one release; the first call that uses it writes a
/// deprecation warning to stderr.
///
/// On success returns ZS_OK and stores the new writer in `*out`; on failure stores NULL
/// in `*out` (when `out` is not NULL) and returns ZS_E_INVALID_ARGUMENT (a NULL
/// argument, an empty path), ZS_E_INVALID_CONFIG (also a URL or store option that
/// cannot be used), ZS_E_EXISTS, ZS_E_LOCKED, ZS_E_SPEC_MISMATCH, ZS_E_NEEDS_RECOVERY,
/// ZS_E_UNSUPPORTED (resume only), ZS_E_DISK_FULL or ZS_E_IO; for an object store also
/// ZS_E_REMOTE_CREDENTIALS, ZS_E_REMOTE_NO_BUCKET, ZS_E_REMOTE_UNREACHABLE or
/// ZS_E_REMOTE (a staging directory in the way); nothing new is left on disk (or in the
/// bucket) then.
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
        let (path, config) =
            unsafe { (c_str(store_path, "store_path")?, config_arg(config_json)?) };
        if path.is_empty() {
            return Err(CapiError::Argument("store_path is empty"));
        }
        let path = crate::path::from_c(path, "store_path")?;
        let (session, deprecated) = Session::create_writer(&path, config)?;
        warn_deprecated(deprecated.as_deref());
        let handle = Box::into_raw(Box::new(ZsWriter(session)));
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
/// closing the writer, ZS_E_DISK_FULL, ZS_E_IO, ZS_E_INTERNAL, ZS_E_REMOTE_UPLOAD (an
/// object store that went away; the message names the staging directory keeping the
/// data); then ZS_E_CLOSED.
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
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let s = unsafe { session(w, "w") }?;
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes, which the writer
        // copies before returning (contract).
        let bytes = unsafe { frame_arg(s, None, frame, nbytes) }?;
        Ok(ZsCode::from_outcome(s.push(None, bytes, None)?))
    })
}

/// Writes one frame of `nbytes` bytes at `index`: its `rank` coordinates on the leading
/// axes (every axis but y and x, in storage order; `rank` 0 and `index` NULL for a
/// single-frame array of shape [y, x]), in any order. A chunk is encoded as soon as all
/// its frames are in, a shard finished as soon as all its chunks are; `zs_writer_finish`
/// finishes the rest, frames never written reading as the fill value. Declare an order
/// other than storage order in config_json ("acquisition_order": ["c", "t", "z"] or axis
/// numbers, outermost loop first) so that shards are prepared in that order and the
/// shards it keeps open are budgeted ("max_open_shards"). A writer takes either
/// `zs_writer_push` or `zs_writer_write_frame`, not both.
///
/// Returns ZS_OK, ZS_DROPPED, or: ZS_E_INDEX (a wrong `rank`, a coordinate past its axis,
/// or outside the window of two shard rows of an unbounded axis 0), ZS_E_DUPLICATE_FRAME
/// (written before), ZS_E_WORKING_SET (an undeclared order too far from storage order),
/// ZS_E_INVALID_ARGUMENT (NULL arguments, or a writer appended to), ZS_E_UNSUPPORTED (a
/// pyramid image or frame metadata), ZS_E_FRAME_SIZE. None of these touches what was
/// written; the writer goes on.
///
/// # Safety
/// As `zs_writer_push`; `index` is NULL or points to `rank` readable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_write_frame(
    w: *mut ZsWriter,
    index: *const u64,
    rank: usize,
    frame: *const c_void,
    nbytes: usize,
) -> c_int {
    guard("zs_writer_write_frame", || {
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let s = unsafe { session(w, "w") }?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes, which the writer
        // copies before returning (contract).
        let bytes = unsafe { frame_arg(s, None, frame, nbytes) }?;
        Ok(ZsCode::from_outcome(s.push_at(None, index, bytes)?))
    })
}

/// Marks the frame at `index` (as `zs_writer_write_frame` takes it) as one that will
/// not come: it reads as the fill value, counts as dropped, and the chunks and shards
/// waiting for it are finished now. Returns ZS_OK or the errors of
/// `zs_writer_write_frame`.
///
/// # Safety
/// As `zs_writer_write_frame`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_skip_frame(
    w: *mut ZsWriter,
    index: *const u64,
    rank: usize,
) -> c_int {
    guard("zs_writer_skip_frame", || {
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let s = unsafe { session(w, "w") }?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        s.skip_frame(None, index)?;
        Ok(ZS_OK)
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
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let s = unsafe { session(w, "w") }?;
        // SAFETY: `meta_json` is NULL or NUL-terminated and outlives the call (contract).
        let meta = unsafe { meta_arg(meta_json) }?;
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes, which the writer
        // copies before returning (contract).
        let bytes = unsafe { frame_arg(s, None, frame, nbytes) }?;
        Ok(ZsCode::from_outcome(s.push(None, bytes, Some(&meta))?))
    })
}

/// Counts a frame the caller could not push (a camera's missed trigger) as dropped: its
/// place reads as the fill value, as `zs_recording_skip` does for a recording's array.
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT (NULL `w`), ZS_E_ARRAY_FULL, or the error that
/// closed the writer.
///
/// # Safety
/// `w` is NULL or a writer from `zs_writer_create` not yet finished or aborted, used by
/// no other thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_skip(w: *mut ZsWriter) -> c_int {
    guard("zs_writer_skip", || {
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let s = unsafe { session(w, "w") }?;
        s.skip(None, 1)?;
        Ok(ZS_OK)
    })
}

/// Stores in `*frames` how many frames were offered to the writer so far (written plus
/// dropped, skipped included), as `zs_recording_frames_pushed` does for a recording's
/// array.
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT (a NULL argument) or ZS_E_CLOSED; `*frames` is
/// left unchanged then.
///
/// # Safety
/// `w` is NULL or a writer from `zs_writer_create` not yet finished or aborted, used by
/// no other thread during the call; `frames` is NULL or points to a writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_writer_frames_pushed(w: *const ZsWriter, frames: *mut u64) -> c_int {
    guard("zs_writer_frames_pushed", || {
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let s = unsafe { session(w, "w") }?;
        if frames.is_null() {
            return Err(CapiError::Null("frames"));
        }
        let n = s.frames_pushed(None)?;
        // SAFETY: not NULL, so it points to a writable uint64_t (contract).
        unsafe { frames.write(n) };
        Ok(ZS_OK)
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
        // SAFETY: a non-NULL `w` is a live handle that this call does not outlive.
        let s = unsafe { session(w, "w") }?;
        // SAFETY: `name` is NULL or NUL-terminated and outlives the call (contract).
        let name = unsafe { utf8(name, "name") }?;
        // SAFETY: `value_json` is NULL or NUL-terminated and outlives the call (contract).
        let value = unsafe { json_or_null(value_json) }?;
        let target = match group {
            0 => Target::Array(None),
            1 => Target::ImageGroup(None),
            _ => return Err(CapiError::Argument("group is neither 0 nor 1")),
        };
        s.set_attribute(target, name, value)?;
        Ok(ZS_OK)
    })
}

/// Finishes the recording (every accepted frame written, zarr.json published as
/// finished), frees the writer, and, if `stats_json` is not NULL, stores the statistics
/// in `*stats_json` as a JSON object (free it with `zs_string_free`; NULL on failure):
/// frames_pushed, frames_written, frames_dropped, bytes_in, bytes_stored, shards,
/// seconds, push_latency_ns and frame_latency_ns ({count, min, mean, max, p50, p90, p99, p999}),
/// sink, pool_bytes, staging_bytes, memory ({current, peak}: the bytes the writer's
/// buffers held at the end, 0 once freed, and at most, as `zs_writer_memory_in_use`).
///
/// The writer is freed whatever the result: never use `w` again. Returns ZS_OK, or the
/// first error the writer met (ZS_E_DISK_FULL, ZS_E_IO, ZS_E_INTERNAL,
/// ZS_E_REMOTE_UPLOAD), or ZS_E_CLOSED if a push already reported it;
/// ZS_E_INVALID_ARGUMENT for a NULL `w`. For an object store it returns once every
/// shard and zarr.json is in the store.
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
        let json = handle.0.finish()?;
        if !stats_json.is_null() {
            // SAFETY: not NULL, so it points to storage for one pointer (contract).
            unsafe { hand_over(stats_json, json, "statistics") }?;
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
            let handle = unsafe { Box::from_raw(w) };
            // Errors are dropped: this function has no way to return them.
            let _ = handle
                .0
                .abort("aborted by the caller (zs_writer_abort)".into());
        }
        Ok(ZS_OK)
    });
}
