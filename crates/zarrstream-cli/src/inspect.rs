//! `zarrstream inspect STORE [--shard KEY] [--json]`: what an array is (shape, dtype,
//! chunk and shard shapes, codecs, index location, dimension names, attributes) and how
//! it is stored (shards, stored vs raw bytes, empty inner chunks, unused gap bytes per
//! shard); with `--shard KEY`, one shard's index as a table.
//!
//! Reads only the shard indexes, never chunk data (that is `verify`'s job). A shard
//! whose index does not parse is listed and makes the command exit 1.

use std::path::PathBuf;
use std::process::ExitCode;

use zarrstream::store::{ShardIndex, ShardInfo, StoreReader, Summary, shard_index, summarise};

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
    let bar = store::progress(0, "inspect", args.json);
    let summary = summarise(&store, store::advance(&bar))?;
    bar.finish_and_clear();
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
    println!("  codecs           {}", a.codecs_text());
    println!(
        "  index            {} at the {}",
        a.index_codecs_text(),
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
