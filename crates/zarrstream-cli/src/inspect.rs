//! `zarrstream inspect STORE [--shard KEY] [--json]`: what an array is (shape, dtype,
//! chunk and shard shapes, codecs, index location, dimension names, attributes) and how
//! it is stored (shards, stored vs raw bytes, empty inner chunks, unused gap bytes per
//! shard); with `--shard KEY`, one shard's index as a table.
//!
//! Reads only the shard indexes, never chunk data (that is `verify`'s job). A shard
//! whose index does not parse is listed and makes the command exit 1.

use std::path::PathBuf;
use std::process::ExitCode;

use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;

use zarrstream::store::{Shard, StoreError, StoreReader};

use crate::store;

/// Options of `zarrstream inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The array directory (holding zarr.json).
    pub store: PathBuf,
    /// Print this shard's index (offset and nbytes per inner chunk) instead, e.g. c/0/0/0.
    #[arg(long, value_name = "KEY")]
    pub shard: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The array's description, as `zarr.json` gives it.
#[derive(Debug, Serialize)]
pub(crate) struct ArrayInfo {
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

/// One shard's sizes.
#[derive(Debug, Serialize)]
pub(crate) struct ShardInfo {
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

/// The summary of a store.
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
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
    /// Shards with gap bytes (written with sparse packing); `compact` rewrites them.
    pub sparse_shards: u64,
    /// Every shard's sizes.
    pub shard_list: Vec<ShardInfo>,
}

/// One row of a shard's index.
#[derive(Debug, Serialize)]
pub(crate) struct IndexRow {
    /// Inner chunk coordinates within the shard.
    pub chunk: Vec<u64>,
    /// Offset in the file, `None` for an empty chunk.
    pub offset: Option<u64>,
    /// Stored bytes, `None` for an empty chunk.
    pub nbytes: Option<u64>,
}

/// One shard's index.
#[derive(Debug, Serialize)]
pub(crate) struct ShardIndex {
    /// The shard key.
    pub key: String,
    /// File length.
    pub bytes: u64,
    /// Where the index is: `(offset, size)`.
    pub index_offset: u64,
    /// Index size, `16 n + 4`.
    pub index_size: u64,
    /// Bytes holding neither a chunk nor the index.
    pub gap_bytes: u64,
    /// One row per inner chunk in C order.
    pub chunks: Vec<IndexRow>,
}

/// Runs `inspect`.
pub(crate) fn run(args: Args) -> crate::Outcome {
    let store = StoreReader::open(&args.store)?;
    if let Some(key) = &args.shard {
        let index = shard_index(&store, key)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&index)?);
        } else {
            print_index(&index);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let summary = summarise(&store, args.json)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary);
    }
    let damaged: Vec<&ShardInfo> = summary
        .shard_list
        .iter()
        .filter(|s| s.error.is_some())
        .collect();
    match damaged.first() {
        None => Ok(ExitCode::SUCCESS),
        Some(s) => Err(format!(
            "{} shard(s) with an unreadable index; first: {}: {} (run zarrstream verify)",
            damaged.len(),
            s.key,
            s.error.as_deref().unwrap_or_default()
        )
        .into()),
    }
}

/// Reads one shard's index.
pub(crate) fn shard_index(store: &StoreReader, key: &str) -> Result<ShardIndex, StoreError> {
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

/// Describes the array and reads every shard's index (in parallel).
pub(crate) fn summarise(store: &StoreReader, json: bool) -> Result<Summary, StoreError> {
    let shards = store.shards()?;
    let bar = store::progress(shards.len() as u64, "inspect", json);
    let infos: Vec<(ShardInfo, u64)> = shards
        .par_iter()
        .map(|s| {
            let r = shard_info(store, s);
            bar.inc(1);
            r
        })
        .collect::<Result<_, _>>()?;
    bar.finish_and_clear();
    let spec = &store.spec();
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

/// One shard's sizes, and how many of its empty chunks lie inside the array. An
/// unreadable index is recorded in `error`, not returned.
fn shard_info(store: &StoreReader, shard: &Shard) -> Result<(ShardInfo, u64), StoreError> {
    let mut info = ShardInfo {
        key: shard.key.clone(),
        bytes: shard.len,
        allocated_bytes: store::allocated_bytes(&shard.path)?,
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

/// The array's description from the parsed spec and the raw `zarr.json`.
fn array_info(store: &StoreReader) -> ArrayInfo {
    let spec = &store.spec();
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

/// A codec chain as `bytes -> blosc(lz4) -> crc32c`.
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

fn print_summary(s: &Summary) {
    let a = &s.array;
    println!("{}", s.store.display());
    println!("  shape            {:?}", a.shape);
    if let Some(names) = &a.dimension_names {
        println!("  dimension names  {names:?}");
    }
    println!(
        "  dtype            {} (fill value {})",
        a.dtype, a.fill_value
    );
    println!("  chunk shape      {:?}", a.chunk_shape);
    println!(
        "  shard shape      {:?} ({:?} chunks per shard)",
        a.shard_shape, a.chunks_per_shard
    );
    println!("  codecs           {}", chain(&a.codecs));
    println!(
        "  index            {} at the {}",
        chain(&a.index_codecs),
        a.index_location
    );
    if let Some(attrs) = a.attributes.as_object().filter(|o| !o.is_empty()) {
        println!("  attributes");
        for (k, v) in attrs {
            println!("    {k}: {v}");
        }
    }
    println!(
        "  shards           {} files ({} in the grid of the current shape)",
        s.shards, s.shards_in_grid
    );
    println!(
        "  chunks           {} stored, {} empty ({} of them inside the array)",
        s.chunks_stored, s.empty_chunks, s.empty_chunks_in_array
    );
    println!(
        "  bytes            {} stored ({} allocated), {} raw, ratio {:.2}",
        s.stored_bytes, s.allocated_bytes, s.raw_bytes, s.ratio
    );
    println!(
        "  gaps             {} bytes in {} sparse shard(s)",
        s.gap_bytes, s.sparse_shards
    );
    for sh in &s.shard_list {
        match &sh.error {
            Some(e) => println!("    {}: {} bytes, UNREADABLE INDEX: {e}", sh.key, sh.bytes),
            None => println!(
                "    {}: {} bytes, {} chunks, {} empty, {} gap bytes",
                sh.key, sh.bytes, sh.chunks, sh.empty_chunks, sh.gap_bytes
            ),
        }
    }
}

fn print_index(ix: &ShardIndex) {
    println!(
        "{}: {} bytes, index at {} ({} bytes), {} gap bytes",
        ix.key, ix.bytes, ix.index_offset, ix.index_size, ix.gap_bytes
    );
    let width = ix
        .chunks
        .iter()
        .map(|r| store::coords_text(&r.chunk).len())
        .max()
        .unwrap_or(0)
        .max(5);
    println!("  {:<width$}  {:>14}  {:>12}", "chunk", "offset", "nbytes");
    for r in &ix.chunks {
        let coords = store::coords_text(&r.chunk);
        match (r.offset, r.nbytes) {
            (Some(o), Some(n)) => println!("  {coords:<width$}  {o:>14}  {n:>12}"),
            _ => println!("  {coords:<width$}  {:>14}  {:>12}", "empty", "-"),
        }
    }
}
