//! What an array is and how it is stored, from `zarr.json` and the shard indexes only
//! (never chunk data; checking chunks is [`verify`](super::verify)'s job): the data
//! behind `zarrstream inspect`, for the tool and the bindings alike.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::progress::map_shards;
use super::{Shard, StoreError, StoreReader};
use crate::error::IoError;

/// The array's description, as `zarr.json` gives it.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ArrayInfo {
    /// Current shape (axis 0 is the append axis).
    pub shape: Vec<u64>,
    /// Zarr data type name.
    pub dtype: String,
    /// Inner chunk shape.
    pub chunk_shape: Vec<u64>,
    /// Shard shape (the chunk grid).
    pub shard_shape: Vec<u64>,
    /// Inner chunks per shard along each axis.
    pub chunks_per_shard: Vec<u64>,
    /// Short codec label (`none`, `zstd:1`, `lz4:1`).
    pub codec: String,
    /// Whether inner chunks carry a crc32c.
    pub crc32c: bool,
    /// The inner codec chain as in `zarr.json`.
    pub codecs: Value,
    /// The index codec chain as in `zarr.json`.
    pub index_codecs: Value,
    /// `start` or `end`.
    pub index_location: String,
    /// Names of the axes, if given.
    pub dimension_names: Option<Vec<String>>,
    /// The fill value as in `zarr.json`.
    pub fill_value: Value,
    /// The array's attributes (acquisition metadata and the writer's progress).
    pub attributes: Value,
}

impl ArrayInfo {
    /// The inner codec chain as one line, e.g. `bytes{"endian":"little"} -> zstd{…} ->
    /// crc32c`.
    pub fn codecs_text(&self) -> String {
        chain(&self.codecs)
    }

    /// The index codec chain as one line, e.g. `bytes{"endian":"little"} -> crc32c`.
    pub fn index_codecs_text(&self) -> String {
        chain(&self.index_codecs)
    }
}

/// One shard's sizes.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ShardInfo {
    /// The key, e.g. `c/0/0/0`.
    pub key: String,
    /// File length in bytes.
    pub bytes: u64,
    /// Bytes the filesystem allocated (smaller than `bytes` for a sparse file).
    pub allocated_bytes: u64,
    /// Inner chunks with data.
    pub chunks: u64,
    /// Inner chunks marked empty.
    pub empty_chunks: u64,
    /// Bytes holding neither a chunk nor the index.
    pub gap_bytes: u64,
    /// Why the index could not be read, if it could not.
    pub error: Option<String>,
}

/// The summary of a store: what [`summarise`] returns.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Summary {
    /// The store path.
    pub store: PathBuf,
    /// What the array is.
    pub array: ArrayInfo,
    /// Shard files present.
    pub shards: u64,
    /// Shards the current shape covers (files absent for the rest read as fill value).
    pub shards_in_grid: u64,
    /// Inner chunks with data.
    pub chunks_stored: u64,
    /// Inner chunks marked empty in readable shards (those outside the array included).
    pub empty_chunks: u64,
    /// Of `empty_chunks`, those holding part of the array (dropped or skipped frames,
    /// a stream stopped mid-chunk).
    pub empty_chunks_in_array: u64,
    /// Sum of the shard files' lengths.
    pub stored_bytes: u64,
    /// Sum of the bytes allocated for them.
    pub allocated_bytes: u64,
    /// Bytes of the array's current shape, uncompressed.
    pub raw_bytes: u64,
    /// `raw_bytes / stored_bytes` (0 when nothing is stored).
    pub ratio: f64,
    /// Sum of the shards' gap bytes.
    pub gap_bytes: u64,
    /// Shards with gap bytes (written with sparse packing); `zarrstream compact`
    /// rewrites them.
    pub sparse_shards: u64,
    /// Every shard's sizes, in shard order. A shard whose index does not parse is
    /// listed with its [`error`](ShardInfo::error) set.
    pub shard_list: Vec<ShardInfo>,
}

/// One row of a shard's index.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct IndexRow {
    /// Inner chunk coordinates within the shard.
    pub chunk: Vec<u64>,
    /// Offset in the file, `None` for an empty chunk.
    pub offset: Option<u64>,
    /// Stored bytes, `None` for an empty chunk.
    pub nbytes: Option<u64>,
}

/// One shard's index: what [`shard_index`] returns.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ShardIndex {
    /// The shard key.
    pub key: String,
    /// File length.
    pub bytes: u64,
    /// Where the index starts in the file.
    pub index_offset: u64,
    /// Index size, `16 n + 4`.
    pub index_size: u64,
    /// Bytes holding neither a chunk nor the index.
    pub gap_bytes: u64,
    /// One row per inner chunk in C order.
    pub chunks: Vec<IndexRow>,
}

/// Reads the index of the shard `key` (e.g. `c/0/0/0`).
///
/// Fails with [`StoreError::NoSuchShard`] for a key naming no shard file and with
/// [`StoreError::Index`] for an index that does not parse.
///
/// ```no_run
/// use zarrstream::store::{StoreReader, shard_index};
/// let store = StoreReader::open("run.zarr".as_ref())?;
/// let index = shard_index(&store, "c/0/0/0")?;
/// let empty = index.chunks.iter().filter(|r| r.offset.is_none()).count();
/// println!("{}: {} chunks, {empty} empty", index.key, index.chunks.len());
/// # Ok::<(), zarrstream::store::StoreError>(())
/// ```
pub fn shard_index(store: &StoreReader, key: &str) -> Result<ShardIndex, StoreError> {
    let shard = store.shard(key)?;
    let file = store.open_shard(&shard)?;
    let entries = store.read_index(&shard, &file)?;
    let (index_offset, index_size) = store.index_range(&shard).unwrap_or_default();
    let chunks = entries
        .iter()
        .enumerate()
        .map(|(i, e)| IndexRow {
            chunk: store.inner_coords(i as u64),
            offset: e.map(|(o, _)| o),
            nbytes: e.map(|(_, n)| n),
        })
        .collect();
    Ok(ShardIndex {
        gap_bytes: store.gap_bytes(&shard, &entries),
        key: shard.key,
        bytes: shard.len,
        index_offset,
        index_size,
        chunks,
    })
}

/// Describes the array and reads every shard's index, shards in parallel.
///
/// `progress(done, total)` is called with the number of shards read so far, once with
/// `done` 0 before the first and once after each (one call at a time, `done` growing,
/// from the thread that read the shard); pass `|_, _| {}` for none.
///
/// A shard whose index does not parse does not fail the call: it is listed with its
/// [`ShardInfo::error`]. Listing the shards or reading a file does.
///
/// ```no_run
/// use zarrstream::store::{StoreReader, summarise};
/// let store = StoreReader::open("run.zarr".as_ref())?;
/// let summary = summarise(&store, |_, _| {})?;
/// println!("{:?}: {} shards, ratio {:.2}", summary.array.shape, summary.shards, summary.ratio);
/// # Ok::<(), zarrstream::store::StoreError>(())
/// ```
pub fn summarise(
    store: &StoreReader,
    progress: impl FnMut(u64, u64) + Send,
) -> Result<Summary, StoreError> {
    let shards = store.shards()?;
    let infos = map_shards(&shards, progress, |s| shard_info(store, s))
        .into_iter()
        .collect::<Result<Vec<(ShardInfo, u64)>, StoreError>>()?;
    let spec = store.spec();
    let raw_bytes = spec
        .shape()
        .iter()
        .product::<u64>()
        .saturating_mul(spec.dtype().size() as u64);
    let (shard_list, in_array): (Vec<ShardInfo>, Vec<u64>) = infos.into_iter().unzip();
    let stored_bytes = shard_list.iter().map(|s| s.bytes).sum();
    Ok(Summary {
        store: store.root().to_path_buf(),
        array: array_info(store),
        shards: shard_list.len() as u64,
        shards_in_grid: store.shard_grid().iter().product(),
        chunks_stored: shard_list.iter().map(|s| s.chunks).sum(),
        empty_chunks: shard_list.iter().map(|s| s.empty_chunks).sum(),
        empty_chunks_in_array: in_array.iter().sum(),
        stored_bytes,
        allocated_bytes: shard_list.iter().map(|s| s.allocated_bytes).sum(),
        raw_bytes,
        ratio: if stored_bytes == 0 {
            0.0
        } else {
            raw_bytes as f64 / stored_bytes as f64
        },
        gap_bytes: shard_list.iter().map(|s| s.gap_bytes).sum(),
        sparse_shards: shard_list.iter().filter(|s| s.gap_bytes > 0).count() as u64,
        shard_list,
    })
}

/// Bytes the filesystem has allocated for the file at `path` (less than its length when
/// it is sparse, e.g. a shard written with sparse packing on Linux).
pub fn allocated_bytes(path: &Path) -> Result<u64, IoError> {
    let file = std::fs::File::open(path).map_err(IoError::with("open", path))?;
    crate::platform::allocated_bytes(&file).map_err(IoError::with("stat", path))
}

/// One shard's sizes, and how many of its empty chunks lie inside the array. An
/// unreadable index is recorded in `error`, not returned, so one damaged shard does not
/// hide the others.
fn shard_info(store: &StoreReader, shard: &Shard) -> Result<(ShardInfo, u64), StoreError> {
    let mut info = ShardInfo {
        key: shard.key.clone(),
        bytes: shard.len,
        allocated_bytes: allocated_bytes(&shard.path)?,
        chunks: 0,
        empty_chunks: 0,
        gap_bytes: 0,
        error: None,
    };
    let file = store.open_shard(shard)?;
    let entries = match store.read_index(shard, &file) {
        Ok(e) => e,
        Err(StoreError::Index { source, .. }) => {
            info.error = Some(source.to_string());
            return Ok((info, 0));
        }
        Err(e) => return Err(e),
    };
    let mut empty_in_array = 0;
    for (i, e) in entries.iter().enumerate() {
        if e.is_some() {
            info.chunks += 1;
        } else {
            info.empty_chunks += 1;
            if store.chunk_in_array(&shard.coords, &store.inner_coords(i as u64)) {
                empty_in_array += 1;
            }
        }
    }
    info.gap_bytes = store.gap_bytes(shard, &entries);
    Ok((info, empty_in_array))
}

/// The array's description from the parsed spec and the raw `zarr.json` (the codec
/// chains, fill value and attributes as written, which the spec does not keep).
fn array_info(store: &StoreReader) -> ArrayInfo {
    let spec = store.spec();
    let sharding = store
        .document()
        .get("codecs")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("configuration"));
    let pick = |k: &str| {
        sharding
            .and_then(|s| s.get(k))
            .cloned()
            .unwrap_or(Value::Null)
    };
    ArrayInfo {
        shape: spec.shape().to_vec(),
        dtype: spec.dtype().to_string(),
        chunk_shape: spec.chunk_shape().to_vec(),
        shard_shape: spec.shard_shape().to_vec(),
        chunks_per_shard: store.chunks_per_shard(),
        codec: spec.codec().label(),
        crc32c: spec.crc32c(),
        codecs: pick("codecs"),
        index_codecs: pick("index_codecs"),
        index_location: spec.index_location().as_str().to_string(),
        dimension_names: spec.dimension_names().map(<[String]>::to_vec),
        fill_value: store
            .document()
            .get("fill_value")
            .cloned()
            .unwrap_or(Value::Null),
        attributes: store
            .document()
            .get("attributes")
            .cloned()
            .unwrap_or(Value::Null),
    }
}

/// A codec chain as `bytes -> blosc{…} -> crc32c`: each codec's name, followed by its
/// configuration when it has one.
fn chain(codecs: &Value) -> String {
    let names: Vec<String> = codecs
        .as_array()
        .map(|l| {
            l.iter()
                .map(|c| {
                    let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
                    match c.get("configuration") {
                        Some(conf) if conf.as_object().is_some_and(|o| !o.is_empty()) => {
                            format!("{name}{conf}")
                        }
                        _ => name.to_string(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    names.join(" -> ")
}
