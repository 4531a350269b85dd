//! `zs_recording_*`: several arrays in one group with shared threads and memory,
//! pushed from several threads at once: create, push, frames by index, attributes, finish
//! and abort.

use super::*;

/// Creates a recording of several arrays in one Zarr v3 group at `root` and starts
/// recording into all of them, with one set of encoding threads and one memory budget
/// shared by every array (several cameras, stage positions, ...).
///
/// `config_json` is one JSON object in sections (the JSON Schema
/// `docs/config.schema.json`, its `recording` form); an unknown key, or a key in the
/// wrong place, is ZS_E_INVALID_CONFIG (the message names its place):
/// - `writer`, `remote`: as for `zs_writer_create`, shared by every array; `threads` is
///   the recording's encoder threads, `pool_frames` the **total** frame budget (0 = twice
///   the threads plus 2 frames of the largest array; each array gets max(2, budget x
///   largest frame / sum of frame sizes) frames of its own), `overwrite` replaces the
///   group, `resume` continues every array where it ended, `existing_group` adds the
///   arrays to an existing Zarr group that zarrstream did not create (refused with
///   ZS_E_EXISTS otherwise; its zarr.json is left as it is);
/// - `frame_meta`: the default of every array;
/// - `attributes`: an object set on the root group's attributes;
/// - `arrays` (required, except for a plate): a non-empty list of objects, one per
///   array, in the order of their indexes (0, 1, ...). Each has a `key`, the array's
///   relative "/" path under `root` (plain names; not empty, ".", "..", "c" or starting
///   with "."; unique and never inside another array's key: ZS_E_INVALID_CONFIG), and
///   the array's sections `array`, `ome` (the array becomes an OME-Zarr image group at
///   `root`/key, level 0 at `root`/key/0) and `frame_meta` (replacing the default).
///
/// `root`/zarr.json becomes a group marked as zarrstream's; directories between `root`
/// and an array get a plain group zarr.json if they have none.
///
/// Example: {"writer": {"threads": 2}, "attributes": {"experiment": "E12"}, "arrays": [
/// {"key": "cam0", "array": {"shape": [0, 512, 512], "chunk_shape": [1, 256, 256],
/// "shard_shape": [16, 512, 512]}}, {"key": "cam1", "array": {"shape": [0, 64, 64],
/// "dtype": "uint8", "chunk_shape": [1, 64, 64], "shard_shape": [32, 64, 64],
/// "codec": "zstd:1"}}]}
///
/// Deprecated: the flat form of release 0.1 (writer keys at the top level, array keys in
/// each entry) is still accepted for one release, with a warning on stderr as for
/// `zs_writer_create`.
///
/// An OME-Zarr 0.5 high-content screening plate gives `plate` and `image` instead of
/// `arrays` (every field of view is an OME-Zarr image and one array of the recording):
/// - `plate`: `rows` and `columns` (lists of names, `[A-Za-z0-9]+`, or counts: 2 rows
///   are "A", "B", 3 columns "1", "2", "3"), `wells` (["A/1", "B/3"], in the order
///   visited; default every well, row by row), `fields` (fields of view per well and
///   acquisition, default 1), `name`, `acquisitions` ([{"id": 0, "name": "...",
///   "description": "...", "start_time": s, "end_time": s}], seconds since the epoch).
///   An invalid layout is ZS_E_INVALID_PLATE, naming the problem;
/// - `image`: the sections `array`, `ome` and `frame_meta` of every field image.
///
/// The field images' keys are "ROW/COLUMN/PATH" (PATH = acquisition index x fields +
/// field) and their indexes follow the order a screening microscope visits them:
/// acquisition by acquisition, well by well, each well's fields in turn
/// (`zs_recording_array_index(r, "B/3/1", &i)` finds one). `root`/zarr.json holds
/// `attributes.ome.plate`, each well group `attributes.ome.well`. Example:
/// {"plate": {"rows": 2, "columns": 3, "fields": 2}, "image": {"array": {"shape":
/// [0, 512, 512], "chunk_shape": [1, 512, 512], "shard_shape": [1, 512, 512]},
/// "ome": {}}}
///
/// Threads: unlike a zs_writer, a zs_recording may be used from several threads at once:
/// calls on **different** arrays (push, push_with, skip, set_attribute, frames_pushed,
/// ...) run concurrently, one pushing thread per camera; calls on the same array from
/// different threads are serialised by the recording (a push waiting for a free buffer
/// holds its array). `zs_recording_finish` and `zs_recording_abort` must not race with
/// any other call on the recording: every other thread's calls must have returned, and
/// none may start, before they are called.
///
/// On success returns ZS_OK and stores the new recording in `*out`; on failure stores
/// NULL in `*out` (when `out` is not NULL) and returns ZS_E_INVALID_ARGUMENT (a NULL
/// argument, an empty path), ZS_E_INVALID_CONFIG, ZS_E_INVALID_PLATE, ZS_E_EXISTS,
/// ZS_E_LOCKED, ZS_E_SPEC_MISMATCH, ZS_E_NEEDS_RECOVERY, ZS_E_UNSUPPORTED,
/// ZS_E_DISK_FULL or ZS_E_IO; what the call created is removed then.
///
/// # Safety
/// `root` and `config_json` are NULL or NUL-terminated strings; `out` is NULL or points
/// to writable storage for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_create(
    root: *const c_char,
    config_json: *const c_char,
    out: *mut *mut ZsRecording,
) -> c_int {
    // Before anything that could fail or panic, so a failure never leaves a stale handle.
    if !out.is_null() {
        // SAFETY: `out` is not NULL and points to storage for one pointer (contract).
        unsafe { out.write(ptr::null_mut()) };
    }
    guard("zs_recording_create", || {
        if out.is_null() {
            return Err(CapiError::Null("out"));
        }
        // SAFETY: non-NULL strings are NUL-terminated and outlive this call (contract).
        let (path, config) = unsafe { (c_str(root, "root")?, config_arg(config_json)?) };
        if path.is_empty() {
            return Err(CapiError::Argument("root is empty"));
        }
        let path = crate::path::from_c(path, "root")?;
        let (session, deprecated) = Session::create_recording(&path, config)?;
        warn_deprecated(deprecated.as_deref());
        let handle = Box::into_raw(Box::new(ZsRecording(session)));
        // SAFETY: as above; the caller now owns the handle.
        unsafe { out.write(handle) };
        Ok(ZS_OK)
    })
}

/// Stores in `*index` the index of the array whose key is `key` (its place in the
/// config's `arrays`), for the calls that take an array index.
///
/// Returns ZS_OK; ZS_E_NO_ARRAY if the recording has no such array, or
/// ZS_E_INVALID_ARGUMENT for a NULL argument or a key that is not UTF-8; `*index` is
/// left unchanged then.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted;
/// `key` is NULL or NUL-terminated; `index` is NULL or points to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_array_index(
    r: *const ZsRecording,
    key: *const c_char,
    index: *mut usize,
) -> c_int {
    guard("zs_recording_array_index", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        // SAFETY: `key` is NULL or NUL-terminated and outlives the call (contract).
        let key = unsafe { utf8(key, "key") }?;
        if index.is_null() {
            return Err(CapiError::Null("index"));
        }
        // Through the recording, not the session's key list: refused once poisoned.
        let i = s.with_recording(|rec| Ok::<_, CapiError>(rec.index(key)?))?;
        // SAFETY: not NULL, so it points to a writable size_t (contract).
        unsafe { index.write(i) };
        Ok(ZS_OK)
    })
}

/// Pushes one frame into array `array` (an index, see `zs_recording_array_index`):
/// `nbytes` bytes of little-endian elements of that array's dtype, as for
/// `zs_writer_push`. The bytes are copied before the call returns. May run
/// concurrently with calls on other arrays of the recording.
///
/// Returns ZS_OK, or ZS_DROPPED when back-pressure "drop" dropped the frame. Errors:
/// ZS_E_INVALID_ARGUMENT (NULL `r` or `frame`), ZS_E_NO_ARRAY, ZS_E_FRAME_SIZE
/// (`nbytes` is not the array's frame size; the array stays usable), ZS_E_ARRAY_FULL,
/// and, closing that array only, ZS_E_DISK_FULL, ZS_E_IO, ZS_E_INTERNAL; then
/// ZS_E_CLOSED for it.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted
/// (see the thread rules of `zs_recording_create`); `frame` is NULL or points to
/// `nbytes` readable bytes (read only when `nbytes` is the frame size).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_push(
    r: *mut ZsRecording,
    array: usize,
    frame: *const c_void,
    nbytes: usize,
) -> c_int {
    guard("zs_recording_push", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes, which the
        // recording copies before returning (contract).
        let bytes = unsafe { frame_arg(s, Some(Array::Index(array)), frame, nbytes) }?;
        Ok(ZsCode::from_outcome(s.push(
            Some(Array::Index(array)),
            bytes,
            None,
        )?))
    })
}

/// Like `zs_recording_push`, with the frame's metadata, as `zs_writer_push_with`:
/// `meta_json` is `{"values": {...}, "json": {...}}` (both keys optional) for an array
/// with a "frame_meta" object (its own or the recording's). Metadata that does not fit
/// or does not parse is ZS_E_INVALID_ARGUMENT and the frame is not pushed. Otherwise
/// returns what `zs_recording_push` returns; a dropped frame keeps its metadata.
///
/// # Safety
/// As `zs_recording_push`; `meta_json` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_push_with(
    r: *mut ZsRecording,
    array: usize,
    frame: *const c_void,
    nbytes: usize,
    meta_json: *const c_char,
) -> c_int {
    guard("zs_recording_push_with", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        // SAFETY: `meta_json` is NULL or NUL-terminated and outlives the call (contract).
        let meta = unsafe { meta_arg(meta_json) }?;
        let array = Some(Array::Index(array));
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes, which the
        // recording copies before returning (contract).
        let bytes = unsafe { frame_arg(s, array, frame, nbytes) }?;
        Ok(ZsCode::from_outcome(s.push(array, bytes, Some(&meta))?))
    })
}

/// Writes one frame into array `array` at `index`, as `zs_writer_write_frame` (the
/// recording's "acquisition_order" applies to every array). Returns what
/// `zs_writer_write_frame` returns, or ZS_E_NO_ARRAY.
///
/// # Safety
/// As `zs_recording_push`; `index` is NULL or points to `rank` readable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_write_frame(
    r: *mut ZsRecording,
    array: usize,
    index: *const u64,
    rank: usize,
    frame: *const c_void,
    nbytes: usize,
) -> c_int {
    guard("zs_recording_write_frame", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        let array = Some(Array::Index(array));
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes, which the
        // recording copies before returning (contract).
        let bytes = unsafe { frame_arg(s, array, frame, nbytes) }?;
        Ok(ZsCode::from_outcome(s.push_at(array, index, bytes)?))
    })
}

/// Marks the frame of array `array` at `index` as one that will not come, as
/// `zs_writer_skip_frame`.
///
/// # Safety
/// As `zs_recording_write_frame`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_skip_frame(
    r: *mut ZsRecording,
    array: usize,
    index: *const u64,
    rank: usize,
) -> c_int {
    guard("zs_recording_skip_frame", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        s.skip_frame(Some(Array::Index(array)), index)?;
        Ok(ZS_OK)
    })
}

/// Counts a frame of array `array` the caller could not push (a camera's missed
/// trigger) as dropped: its place reads as the fill value.
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT (NULL `r`), ZS_E_NO_ARRAY, ZS_E_ARRAY_FULL, or
/// the error that closed the array.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted
/// (see the thread rules of `zs_recording_create`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_skip(r: *mut ZsRecording, array: usize) -> c_int {
    guard("zs_recording_skip", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        s.skip(Some(Array::Index(array)), 1)?;
        Ok(ZS_OK)
    })
}

/// Stores in `*frames` how many frames were offered to array `array` so far (written
/// plus dropped, skipped included).
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT (a NULL argument), ZS_E_NO_ARRAY, or ZS_E_CLOSED;
/// `*frames` is left unchanged then.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted
/// (see the thread rules of `zs_recording_create`); `frames` is NULL or points to a
/// writable `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_frames_pushed(
    r: *const ZsRecording,
    array: usize,
    frames: *mut u64,
) -> c_int {
    guard("zs_recording_frames_pushed", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        if frames.is_null() {
            return Err(CapiError::Null("frames"));
        }
        let n = s.frames_pushed(Some(Array::Index(array)))?;
        // SAFETY: not NULL, so it points to a writable uint64_t (contract).
        unsafe { frames.write(n) };
        Ok(ZS_OK)
    })
}

/// Sets the attribute `name` of the recording's root group (`node` NULL or "") or of
/// the array whose key is `node` (level 0 for an OME-Zarr image) to the JSON value
/// `value_json`, replacing an earlier value; NULL `value_json` removes it. The
/// zarr.json is republished at once and atomically with every other attribute kept, as
/// `zs_writer_set_attribute` does. The writer's own namespace ("zarrstream") is
/// refused, and on a plate's root its "ome" (the plate metadata).
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT for a NULL `r` or `name`, text that is not
/// UTF-8, JSON that does not parse, or a refused name; ZS_E_NO_ARRAY for an unknown
/// `node`; ZS_E_IO or ZS_E_DISK_FULL if publishing failed (the previous document stays).
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted
/// (see the thread rules of `zs_recording_create`); `node`, `name` and `value_json` are
/// NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_set_attribute(
    r: *mut ZsRecording,
    node: *const c_char,
    name: *const c_char,
    value_json: *const c_char,
) -> c_int {
    guard("zs_recording_set_attribute", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        // SAFETY: the strings are NULL or NUL-terminated and outlive the call (contract).
        let (node, name, value) = unsafe {
            (
                if node.is_null() {
                    ""
                } else {
                    utf8(node, "node")?
                },
                utf8(name, "name")?,
                json_or_null(value_json)?,
            )
        };
        let target = match node {
            "" => Target::Root,
            key => Target::Array(Some(Array::Key(key))),
        };
        s.set_attribute(target, name, value)?;
        Ok(ZS_OK)
    })
}

/// Sets the attribute `name` of the OME-Zarr image group of array `array` (one with an
/// "ome" object in the config) to the JSON value `value_json`; NULL removes it. As
/// `zs_writer_set_attribute` with `group` = 1: the "ome" namespace is refused.
///
/// Returns ZS_OK; ZS_E_INVALID_ARGUMENT for a NULL `r` or `name`, JSON that does not
/// parse, a refused name, or a plain array; ZS_E_NO_ARRAY; ZS_E_IO or ZS_E_DISK_FULL if
/// publishing failed.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted
/// (see the thread rules of `zs_recording_create`); `name` and `value_json` are NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_set_group_attribute(
    r: *mut ZsRecording,
    array: usize,
    name: *const c_char,
    value_json: *const c_char,
) -> c_int {
    guard("zs_recording_set_group_attribute", || {
        // SAFETY: a non-NULL `r` is a live handle that this call does not outlive.
        let s = unsafe { session(r, "r") }?;
        // SAFETY: the strings are NULL or NUL-terminated and outlive the call (contract).
        let (name, value) = unsafe { (utf8(name, "name")?, json_or_null(value_json)?) };
        s.set_attribute(Target::ImageGroup(Some(Array::Index(array))), name, value)?;
        Ok(ZS_OK)
    })
}

/// Finishes every array of the recording (each even if another fails: every accepted
/// frame written, zarr.json published as finished), stops its threads, frees the
/// recording, and, if `stats_json` is not NULL, stores the statistics in `*stats_json`
/// (free it with `zs_string_free`; NULL on failure):
/// `{"arrays": {"KEY": {...}, ...}, "total": {...}}`, each object with the fields of
/// `zs_writer_finish`'s statistics; in "total" the counters, bytes and pool sizes are
/// summed over the arrays, the latencies are over every array's frames, "seconds" is
/// the longest array's and "sink" the first array's.
///
/// The recording is freed whatever the result: never use `r` again. Returns ZS_OK, or
/// the first error an array met (ZS_E_DISK_FULL, ZS_E_IO, ZS_E_INTERNAL), or
/// ZS_E_CLOSED; ZS_E_INVALID_ARGUMENT for a NULL `r`.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted,
/// with no other call on it running or to come, from any thread; `stats_json` is NULL or
/// points to writable storage for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_finish(
    r: *mut ZsRecording,
    stats_json: *mut *mut c_char,
) -> c_int {
    if !stats_json.is_null() {
        // SAFETY: not NULL, so it points to storage for one pointer (contract).
        unsafe { stats_json.write(ptr::null_mut()) };
    }
    guard("zs_recording_finish", || {
        if r.is_null() {
            return Err(CapiError::Null("r"));
        }
        // SAFETY: `r` came from `zs_recording_create` (Box::into_raw) and is handed
        // back here once, with no other call on it running or to come (contract), so no
        // shared reference to it outlives this point; ownership returns to Rust, which
        // frees it on every path below.
        let handle = unsafe { Box::from_raw(r) };
        let json = handle.0.finish()?;
        if !stats_json.is_null() {
            // SAFETY: not NULL, so it points to storage for one pointer (contract).
            unsafe { hand_over(stats_json, json, "statistics") }?;
        }
        Ok(ZS_OK)
    })
}

/// Stops every array at once and frees the recording: no further frame is accepted,
/// the frames accepted so far are still written and published, and each array's
/// zarr.json records state "aborted" with `reason` (NULL: "aborted by the caller
/// (zs_recording_abort)"; text that is not UTF-8 is shown with replacement characters).
/// It returns nothing: a caller that needs the errors calls `zs_recording_finish`
/// instead. NULL `r` is a no-op.
///
/// # Safety
/// `r` is NULL or a recording from `zs_recording_create` not yet finished or aborted,
/// with no other call on it running or to come, from any thread; `reason` is NULL or
/// NUL-terminated. Never use `r` again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zs_recording_abort(r: *mut ZsRecording, reason: *const c_char) {
    guard("zs_recording_abort", || {
        if r.is_null() {
            return Ok(ZS_OK);
        }
        // SAFETY: as in `zs_recording_finish`: ownership of the handle returns once, with
        // no other call on it running or to come.
        let handle = unsafe { Box::from_raw(r) };
        let reason = if reason.is_null() {
            "aborted by the caller (zs_recording_abort)".to_string()
        } else {
            // SAFETY: not NULL, so NUL-terminated and alive for the call (contract).
            unsafe { CStr::from_ptr(reason) }
                .to_string_lossy()
                .into_owned()
        };
        // Errors are dropped: this function has no way to return them.
        let _ = handle.0.abort(reason);
        Ok(ZS_OK)
    });
}
