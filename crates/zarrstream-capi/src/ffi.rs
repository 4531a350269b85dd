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

/// Creates a recording of several arrays in one Zarr v3 group at `root` and starts
/// recording into all of them, with one set of encoding threads and one memory budget
/// shared by every array (several cameras, stage positions, ...).
///
/// `config_json` is one JSON object with three kinds of keys; an unknown key, or a key
/// in the wrong place, is ZS_E_INVALID_CONFIG (the message says where it goes).
///
/// Top level: the writer keys of `zs_writer_create`, shared by every array:
/// `threads` (the recording's encoder threads, 0 = one per core), `pin_threads`,
/// `background_nice`, `sink`, `pool_frames` (the **total** frame budget, 0 = twice the
/// threads plus 2 frames of the largest array; each array gets max(2, budget x largest
/// frame / sum of frame sizes) frames of its own), `spare_groups`, `backpressure`,
/// `durability`, `packing`, `chunk_order`, `overwrite` (replace the group), `frame_meta` (the default
/// of every array), and
/// - `resume`: continue every array where it ended (as for `zs_writer_create`; a
///   different specification is ZS_E_SPEC_MISMATCH, an unfinished store
///   ZS_E_NEEDS_RECOVERY, an OME image with a pyramid ZS_E_UNSUPPORTED);
/// - `existing_group`: add the arrays to an existing Zarr group that zarrstream did not
///   create (refused with ZS_E_EXISTS otherwise); its zarr.json is left as it is;
/// - `attributes`: an object set on the root group's attributes;
/// - `arrays` (required, except for a plate): a non-empty list of objects, one per
///   array, in the order of their indexes (0, 1, ...). Each has a `key`, the array's
///   relative "/" path under `root` (plain names; not empty, ".", "..", "c" or starting
///   with "."; unique and
///   never inside another array's key: ZS_E_INVALID_CONFIG), and the array keys of
///   `zs_writer_create`: `shape`, `chunk_shape`, `shard_shape` (required), `dtype`,
///   `fill_value`, `dimension_names`, `codec`, `crc32c`, `index_location`, `attributes`
///   (of the array), `ome` (the array becomes an OME-Zarr image group at `root`/key,
///   level 0 at `root`/key/0) and `frame_meta` (this array's, replacing the top level's).
///
/// `root`/zarr.json becomes a group marked as zarrstream's; directories between `root`
/// and an array get a plain group zarr.json if they have none.
///
/// Example: {"threads": 2, "attributes": {"experiment": "E12"}, "arrays": [
/// {"key": "cam0", "shape": [0, 512, 512], "chunk_shape": [1, 256, 256],
/// "shard_shape": [16, 512, 512]}, {"key": "cam1", "shape": [0, 64, 64], "dtype": "uint8",
/// "chunk_shape": [1, 64, 64], "shard_shape": [32, 64, 64], "codec": "zstd:1"}]}
///
/// An OME-Zarr 0.5 high-content screening plate gives `plate` and `image` instead of
/// `arrays` (every field of view is an OME-Zarr image and one array of the recording):
/// - `plate`: `rows` and `columns` (lists of names, `[A-Za-z0-9]+`, or counts: 2 rows
///   are "A", "B", 3 columns "1", "2", "3"), `wells` (["A/1", "B/3"], in the order
///   visited; default every well, row by row), `fields` (fields of view per well and
///   acquisition, default 1), `name`, `acquisitions` ([{"id": 0, "name": "...",
///   "description": "...", "start_time": s, "end_time": s}], seconds since the epoch).
///   An invalid layout is ZS_E_INVALID_PLATE, naming the problem;
/// - `image`: the array keys above (`shape`, ..., `ome`, `frame_meta`) for every field
///   image.
///
/// The field images' keys are "ROW/COLUMN/PATH" (PATH = acquisition index x fields +
/// field) and their indexes follow the order a screening microscope visits them:
/// acquisition by acquisition, well by well, each well's fields in turn
/// (`zs_recording_array_index(r, "B/3/1", &i)` finds one). `root`/zarr.json holds
/// `attributes.ome.plate`, each well group `attributes.ome.well`. Example:
/// {"plate": {"rows": 2, "columns": 3, "fields": 2}, "image": {"shape": [0, 512, 512],
/// "chunk_shape": [1, 512, 512], "shard_shape": [1, 512, 512], "ome": {}}}
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
        let (path, config) = unsafe { (c_str(root, "root")?, c_str(config_json, "config_json")?) };
        if path.is_empty() {
            return Err(CapiError::Argument("root is empty"));
        }
        let path = crate::path::from_c(path, "root")?;
        let config = config.to_str().map_err(ConfigError::from)?;
        let recording = RecordingConfig::parse(config)?.create(&path)?;
        let handle = Box::into_raw(Box::new(ZsRecording::new(recording)?));
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        // SAFETY: `key` is NULL or NUL-terminated and outlives the call (contract).
        let key = unsafe { utf8(key, "key") }?;
        if index.is_null() {
            return Err(CapiError::Null("index"));
        }
        let i = handle.call(|rec| Ok(rec.index(key)?))?;
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes (contract).
        unsafe { push(handle, array, frame, nbytes, None) }
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        // SAFETY: `meta_json` is NULL or NUL-terminated and outlives the call (contract).
        let text = unsafe { c_str(meta_json, "meta_json") }?;
        let doc = serde_json::from_slice::<serde_json::Value>(text.to_bytes())
            .map_err(|_| CapiError::Argument("meta_json is not JSON"))?;
        let meta = zarrstream::FrameMeta::from_value(doc)?;
        // SAFETY: `frame` is NULL or points to `nbytes` readable bytes (contract).
        unsafe { push(handle, array, frame, nbytes, Some(&meta)) }
    })
}

/// The body of the two pushes.
///
/// # Safety
/// `frame` is NULL or points to `nbytes` readable bytes for the duration of the call.
unsafe fn push(
    handle: &ZsRecording,
    array: usize,
    frame: *const c_void,
    nbytes: usize,
    meta: Option<&zarrstream::FrameMeta>,
) -> Result<ZsCode, CapiError> {
    let sizes = handle.frame_bytes();
    handle.call(|rec| {
        if frame.is_null() {
            return Err(CapiError::Null("frame"));
        }
        ZsRecording::check_size(rec, sizes, array, nbytes)?;
        // SAFETY: `frame` is not NULL and points to `nbytes` readable bytes, which the
        // recording copies before returning (this function's contract).
        let bytes = unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), nbytes) };
        ZsRecording::push(rec, array, bytes, meta)
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        let sizes = handle.frame_bytes();
        handle.call(|rec| {
            if frame.is_null() {
                return Err(CapiError::Null("frame"));
            }
            ZsRecording::check_size(rec, sizes, array, nbytes)?;
            // SAFETY: `frame` is not NULL and points to `nbytes` readable bytes, which
            // the recording copies before returning (contract).
            let bytes = unsafe { std::slice::from_raw_parts(frame.cast::<u8>(), nbytes) };
            let outcome = rec.write_frame_bytes(array, index, bytes, std::time::Instant::now())?;
            Ok(ZsCode::from_outcome(outcome))
        })
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        // SAFETY: `index` is NULL or points to `rank` values (contract).
        let index = unsafe { index_arg(index, rank) }?;
        handle.call(|rec| {
            rec.skip_frame(array, index)?;
            Ok(ZS_OK)
        })
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        handle.call(|rec| {
            rec.skip(array)?;
            Ok(ZS_OK)
        })
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        if frames.is_null() {
            return Err(CapiError::Null("frames"));
        }
        let n = handle.call(|rec| Ok(rec.frames_pushed(array)?))?;
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
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
        handle.call(|rec| {
            match (node, value) {
                ("", Some(v)) => rec.set_root_attribute(name, v)?,
                ("", None) => rec.remove_root_attribute(name)?,
                (key, Some(v)) => rec.set_attribute(key, name, v)?,
                (key, None) => rec.remove_attribute(key, name)?,
            }
            Ok(ZS_OK)
        })
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        // SAFETY: the strings are NULL or NUL-terminated and outlive the call (contract).
        let (name, value) = unsafe { (utf8(name, "name")?, json_or_null(value_json)?) };
        handle.call(|rec| {
            match value {
                Some(v) => rec.set_group_attribute(array, name, v)?,
                None => rec.remove_group_attribute(array, name)?,
            }
            Ok(ZS_OK)
        })
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
        let json = handle.finish()?;
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
        handle.abort(reason);
        Ok(ZS_OK)
    });
}

/// Stores in `*estimate_json` (a JSON object the caller frees with `zs_string_free`)
/// the most memory, in bytes, that the writer `zs_writer_create` would make from
/// `config_json` will use, by part: {"frame_pool", "staging", "encoders",
/// "mapped_shards", "pyramid", "bookkeeping", "page_cache", "resident", "total"}.
/// "resident" (every part but "page_cache") bounds what the writer adds to the
/// process's resident memory; "total" adds the file pages it lets the page cache hold.
/// README's "Memory" section says what each part covers. Nothing is created.
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
            Ok(Config::parse(c)?.into_parsed()?.estimate_memory()?)
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
            |c| Ok(RecordingConfig::parse(c)?.estimate_memory()?),
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
    f: impl FnOnce(&str) -> Result<zarrstream::MemoryEstimate, CapiError>,
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
        let config = unsafe { c_str(config_json, "config_json") }?;
        let config = config.to_str().map_err(ConfigError::from)?;
        let json = crate::stats::estimate_to_json(&f(config)?)
            .map_err(|e| zarrstream::Error::Internal(format!("estimate: {e}")))?;
        // SAFETY: `out` is not NULL (checked above), so it points to storage for one
        // pointer (contract).
        unsafe { hand_over(out, json, "estimate") }?;
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
        // SAFETY: a non-NULL `w` is a live writer used by no other thread (contract).
        let handle = unsafe { w.as_mut() }.ok_or(CapiError::Null("w"))?;
        let m = handle.call(|w| Ok(w.memory_in_use()))?;
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
        // SAFETY: a non-NULL `r` is a live handle; only shared access is made, which the
        // handle allows from several threads at once (`ZsRecording` is Sync).
        let handle = unsafe { r.as_ref() }.ok_or(CapiError::Null("r"))?;
        let m = handle.call(|rec| Ok(rec.memory_in_use()))?;
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
