//! `zs_writer_*`: one array (or OME-Zarr image) written from one thread: create, push,
//! frames by index, attributes, finish and abort.

use super::*;

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
/// - `dtype`: "int8", "uint8", "int16", "uint16" (default), "int32", "uint32", "int64",
///   "uint64", "float32", "float64" (or i8, u8, i16, u16, i32, u32, i64, u64, f32, f64).
/// - `fill_value`: a number representable in dtype (default 0; int64/uint64 fill values
///   must be exact as a double), or "NaN", "Infinity", "-Infinity" for float32/float64.
/// - `dimension_names`: one distinct string per axis (default none; for an OME image
///   t, c, z, y, x, c and z only when the array has those axes).
/// - `codec`: "none", "zstd", "zstd:LEVEL" (-131072..=22, default level 1), "lz4",
///   "lz4:CLEVEL" (blosc-lz4, 0..=9, default 1), "blosc-zstd", "blosc-zstd:CLEVEL"
///   (blosc with zstd inside, 0..=9, default 1); a blosc codec may end in ":shuffle"
///   (byte shuffle, the default), ":bitshuffle" or ":noshuffle" ("blosc-zstd:3:bitshuffle";
///   ":shuffle" with a 1-byte dtype does nothing and is ZS_E_INVALID_CONFIG); default
///   "lz4:1".
/// - `crc32c`: a crc32c per inner chunk (default true).
/// - `index_location`: "end" (default) or "start".
/// - `attributes`: an object merged into zarr.json's attributes (default {}).
///
/// Writer:
/// - `threads`: encoder threads, 0 = one per core (default 0, at most 1024).
/// - `pin_threads`: pin encoder threads to cores (default true).
/// - `background_nice`: niceness of the writer's threads, 0..=19 (default 5).
/// - `sink`: "auto" (default: direct where the file system takes `O_DIRECT`, else pwrite;
///   mmap with a Morton `chunk_order`), "direct", "mmap" or "pwrite".
/// - `pool_frames`: frame buffers, 0 = 2 x threads + 2 (default 0).
/// - `spare_groups`: extra staging groups for chunks deeper than one frame (default 1).
/// - `backpressure`: "block" (default: push waits, nothing is lost) or "drop" (push
///   returns ZS_DROPPED and counts the frame).
/// - `durability`: "shard" (default: each shard flushed before it is published), "none",
///   or {"periodic": {"interval_ms": N}} (group commit every N ms).
/// - `packing`: "compact" (default) or "sparse".
/// - `chunk_order`: "c" (default) or "morton": the order of the inner chunks' bytes in
///   each shard file (the shard index stays in C order; not recorded in metadata).
///   Morton keeps the chunks of a spatial block together; "auto" then means "mmap",
///   and "direct" is refused (ZS_E_INVALID_CONFIG).
/// - `overwrite`: replace an existing store (default false; never a store that a live
///   writer holds).
/// - `resume`: continue the array zarrstream finished (or `zarrstream recover`
///   repaired) at `store_path` instead of creating one (default false): the first frame
///   pushed follows the last one on disk. The array keys must describe the array on
///   disk (ZS_E_SPEC_MISMATCH names the first field that differs); a store a writer
///   left unfinished is ZS_E_NEEDS_RECOVERY; not with `overwrite`.
/// - `frame_meta`: {"fields": {"NAME": "float64" | "int64", ...}, "json": BOOL}: per-frame
///   metadata stored beside the array, pushed with `zs_writer_push_with` (default none).
///
/// OME-Zarr 0.5 image (`ome` present, even as {}): `store_path` becomes an image group
/// and the array its level 0 at `store_path`/0. Keys of `ome`, all optional: `name`
/// (default "image"), `pixel_size` [Y, X], `z_step`, `frame_interval_ms`, `space_unit`
/// ("micrometer" default, "nanometer"), `time_unit` ("millisecond" default, "second"),
/// `channels` [names, one per entry of the channel axis], `omero` ("auto": each
/// channel's display window from the frames recorded, the 0.1 % to 99.9 % quantiles of
/// sampled pixels, republished while recording; {"window": {"min", "max", "start",
/// "end"}} for every channel; or {"channels": [{"label", "color" ("RRGGBB"), "window"
/// (optional: without it, from the data), "active"}]}), and the pyramid: `levels` (a count, 1 = level 0 only (default), at most
/// 16, or "auto": until a level's frame fits one inner chunk; level k at
/// `store_path`/k), `downsample` ("mean" default, "decimate", "min", "max"),
/// `downsample_z` (halve z too, default false), `level_lz4_acceleration` (LZ4
/// acceleration of the lz4 chunks of levels 1 and up).
///
/// Object store: a `store_path` of the form `s3://bucket/prefix` (or `gs://`, `az://`,
/// `file:///shared/path`) records into a local staging directory and uploads each shard,
/// and each zarr.json after the shards it covers. Credentials, region and endpoint come
/// from the environment (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, ...) and `store_options`. Keys (ignored for a local path):
/// - `staging_dir`: the local directory (default `$ZARRSTREAM_STAGING`, else the
///   temporary directory, under zarrstream-staging/SCHEME/BUCKET/PREFIX).
/// - `staging_budget`: bytes of finished shards that may wait for upload (default 2 GiB);
///   beyond it push waits (or drops under "drop" back-pressure).
/// - `part_size`: bytes per part of a multipart upload (default 8 MiB, at least 5 MiB).
/// - `uploads_in_flight`: objects uploaded at once (default 4, 1..=256).
/// - `upload_timeout`: seconds uploads may keep failing before ZS_E_REMOTE_UPLOAD
///   (default 60; a fraction is allowed).
/// - `part`: this process records part K (index on axis 1, chunk and shard extent 1) of
///   an array recorded by several processes (default none).
/// - `coordinate`: with `part`, this process also publishes the shared zarr.json
///   (default false).
/// - `store_options`: {"aws_endpoint": "http://10.0.0.5:3900", "aws_region": "garage",
///   "aws_access_key_id": "...", "aws_secret_access_key": "...", ...}: object_store
///   configuration keys, over the environment (default {}).
///
/// Example: {"shape": [0, 2048, 2048], "chunk_shape": [1, 512, 512],
/// "shard_shape": [32, 2048, 2048], "codec": "zstd:1", "threads": 4}
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
        let (path, config) = unsafe {
            (
                c_str(store_path, "store_path")?,
                c_str(config_json, "config_json")?,
            )
        };
        if path.is_empty() {
            return Err(CapiError::Argument("store_path is empty"));
        }
        let path = crate::path::from_c(path, "store_path")?;
        let config = config.to_str().map_err(ConfigError::from)?;
        let writer = Config::parse(config)?.into_parsed()?.create(&path)?;
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
        // SAFETY: a non-NULL `w` is a live handle that only this call uses (contract).
        let handle = unsafe { w.as_mut() }.ok_or(CapiError::Null("w"))?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        handle.call(|writer| {
            if frame.is_null() {
                return Err(CapiError::Null("frame"));
            }
            ZsWriter::check_size(writer, nbytes)?;
            // SAFETY: `frame` is not NULL and points to `nbytes` readable bytes, which
            // the writer copies before returning (contract).
            let bytes = unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), nbytes) };
            let outcome = writer.write_frame_bytes(index, bytes, std::time::Instant::now())?;
            Ok(ZsCode::from_outcome(outcome))
        })
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
        // SAFETY: a non-NULL `w` is a live handle that only this call uses (contract).
        let handle = unsafe { w.as_mut() }.ok_or(CapiError::Null("w"))?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        handle.call(|writer| {
            writer.skip_frame(index)?;
            Ok(ZS_OK)
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
        let meta = zarrstream::FrameMeta::from_value(doc)?;
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
        let name = unsafe { utf8(name, "name") }?;
        // SAFETY: `value_json` is NULL or NUL-terminated and outlives the call (contract).
        let value = unsafe { json_or_null(value_json) }?;
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
        let json = handle.finish()?;
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
            unsafe { Box::from_raw(w) }.abort();
        }
        Ok(ZS_OK)
    });
}
