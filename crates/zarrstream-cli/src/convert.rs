//! `zarrstream convert LEGACY OUT`: pre-standard sharded arrays → standard Zarr v3
//! `sharding_indexed`, without decoding or recompressing a single chunk.
//!
//! The legacy layouts (see [`legacy`]) share today's binary shard index minus its
//! crc32c, so each shard is copied to its new key (`<array>/c/i/j/k`) with the crc32c
//! of its index appended; the metadata is rewritten (`zarr.json` with the shard shape
//! as chunk grid, `bytes` + the mapped compressor as inner codecs, `bytes` + `crc32c`
//! as index codecs, index at the end, a valid fill value). The output is built under a
//! temporary name beside OUT and renamed into place at the end.

mod error;
mod legacy;
mod mapping;
mod shard;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zarrstream::IoError;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use serde_json::{Map, Value, json};

use error::ConvertError;
use legacy::{Layout, LegacyArray, LegacyStore};
use shard::convert_shard;
use zarrstream::IndexLocation;
use zarrstream::document::{
    ArrayDocument, ArrayNode, Endian, Named, ShardingConfiguration, ZarrFormat,
};
use zarrstream::store::{METADATA_FILE, shard_key, sync_dir};

/// Options of `zarrstream convert`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The legacy store: a Zarr v2 array directory with `.zarray` "shards" (PR 876), or
    /// a v3-draft store root (the directory holding zarr.json, meta/ and data/).
    pub legacy: PathBuf,
    /// Where to write the standard Zarr v3 array or hierarchy (must not exist).
    pub out: PathBuf,
    /// Replace OUT if it exists (only once the new one is complete).
    #[arg(long)]
    pub overwrite: bool,
    /// Print the result as JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// What was converted, as printed with `--json`.
#[derive(Debug, Serialize)]
pub(crate) struct ConvertReport {
    /// The legacy store.
    pub legacy: PathBuf,
    /// The new store.
    pub out: PathBuf,
    /// One entry per converted array.
    pub arrays: Vec<ArrayReport>,
    /// Groups written (paths inside OUT, `""` = OUT).
    pub groups: Vec<String>,
    /// Things the user should know (e.g. a replaced `fill_value: null`).
    pub warnings: Vec<String>,
}

/// One converted array.
#[derive(Debug, Serialize)]
pub(crate) struct ArrayReport {
    /// Path inside OUT (`""`: OUT is the array).
    pub path: String,
    /// The legacy layout it was written in.
    pub layout: Layout,
    /// Array shape.
    pub shape: Vec<u64>,
    /// v3 data type.
    pub data_type: String,
    /// Inner chunk shape.
    pub chunk_shape: Vec<u64>,
    /// Shard shape.
    pub shard_shape: Vec<u64>,
    /// Inner compressor (`zstd:3`, `blosc/lz4:5`, `gzip:5`, `none`).
    pub compressor: String,
    /// v3 fill value written.
    pub fill_value: Value,
    /// Shard files converted.
    pub shards: u64,
    /// Shards of the grid without a legacy file (they read as the fill value).
    pub shards_missing: u64,
    /// Inner chunks present in the converted shards.
    pub chunks: u64,
    /// Bytes written (shard files).
    pub bytes: u64,
}

/// Runs `zarrstream convert`.
pub(crate) fn run(args: Args) -> crate::Outcome {
    let report = convert(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Converts `args.legacy` into `args.out`.
pub(crate) fn convert(args: &Args) -> Result<ConvertReport, ConvertError> {
    let store = legacy::open(&args.legacy)?;
    check_out(args)?;
    let tmp = sibling(&args.out, "convert")?;
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(IoError::with("remove stale", &tmp))?;
    }
    let result = build(&store, &tmp, args);
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    publish(&tmp, &args.out)?;
    Ok(ConvertReport {
        legacy: args.legacy.clone(),
        out: args.out.clone(),
        ..report
    })
}

/// Refuses an existing OUT without `--overwrite`, and OUT = LEGACY always.
fn check_out(args: &Args) -> Result<(), ConvertError> {
    if !args.out.exists() {
        return Ok(());
    }
    let same = match (fs::canonicalize(&args.out), fs::canonicalize(&args.legacy)) {
        (Ok(a), Ok(b)) => a == b || b.starts_with(&a),
        _ => false,
    };
    if same {
        return Err(ConvertError::OutIsInput(args.out.clone()));
    }
    if !args.overwrite {
        return Err(ConvertError::OutExists(args.out.clone()));
    }
    Ok(())
}

/// A hidden sibling of `out` for building or setting aside: `.<name>.zarrstream-<what>-<pid>`.
fn sibling(out: &Path, what: &str) -> Result<PathBuf, ConvertError> {
    let name = out.file_name().ok_or_else(|| {
        ConvertError::Io(IoError::new(
            "use as output",
            out,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
        ))
    })?;
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(parent.join(format!(
        ".{}.zarrstream-{what}-{}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Writes the whole converted store under `tmp`.
fn build(store: &LegacyStore, tmp: &Path, args: &Args) -> Result<ConvertReport, ConvertError> {
    create_dir(tmp)?;
    let mut groups = Vec::new();
    for (path, attrs) in &store.groups {
        let dir = tmp.join(path);
        create_dir(&dir)?;
        let doc = json!({"zarr_format": 3, "node_type": "group", "attributes": attrs});
        write_json(&dir.join(METADATA_FILE), &doc)?;
        groups.push(path.clone());
    }
    let total: u64 = store
        .arrays
        .iter()
        .map(|a| a.shard_grid().iter().product::<u64>())
        .sum();
    let bar = progress(total, args.json);
    let mut arrays = Vec::new();
    let mut warnings = Vec::new();
    for a in &store.arrays {
        if a.fill.replaced {
            warnings.push(format!(
                "{}: fill_value null replaced by {} (Zarr v3 requires a value)",
                a.meta_path.display(),
                a.fill.value
            ));
        }
        arrays.push(convert_array(a, &tmp.join(&a.out_path), &bar)?);
    }
    bar.finish_and_clear();
    sync_dir(tmp)?;
    Ok(ConvertReport {
        legacy: PathBuf::new(),
        out: PathBuf::new(),
        arrays,
        groups,
        warnings,
    })
}

/// A progress bar over all shards, drawn on stderr (not with `--json`, not when
/// stderr is not a terminal: indicatif hides it then).
fn progress(total: u64, json: bool) -> ProgressBar {
    if json {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("converting {msg} {bar:40} {pos}/{len} shards, eta {eta}")
    {
        bar.set_style(style);
    }
    bar
}

/// Converts one array into `dir`: its shards, then its `zarr.json` (written last).
fn convert_array(
    a: &LegacyArray,
    dir: &Path,
    bar: &ProgressBar,
) -> Result<ArrayReport, ConvertError> {
    create_dir(dir)?;
    bar.set_message(if a.out_path.is_empty() {
        ".".to_string()
    } else {
        a.out_path.clone()
    });
    let grid = a.shard_grid();
    let n = a.chunks_per_shard();
    let mut report = ArrayReport {
        path: a.out_path.clone(),
        layout: a.layout,
        shape: a.shape.clone(),
        data_type: a.dtype.name.to_string(),
        chunk_shape: a.inner.clone(),
        shard_shape: a.shard_shape(),
        compressor: a.compressor.describe(),
        fill_value: a.fill.value.clone(),
        shards: 0,
        shards_missing: 0,
        chunks: 0,
        bytes: 0,
    };
    let mut made = std::collections::HashSet::new();
    for coords in GridIter::new(&grid) {
        let dst = dir.join(shard_key(coords.iter().copied()));
        if let Some(parent) = dst.parent()
            && made.insert(parent.to_path_buf())
        {
            fs::create_dir_all(parent).map_err(IoError::with("create", parent))?;
        }
        match convert_shard(&a.shard_path(&coords), &dst, n)? {
            Some(s) => {
                report.shards += 1;
                report.chunks += s.chunks;
                report.bytes += s.bytes;
            }
            None => report.shards_missing += 1,
        }
        bar.inc(1);
    }
    for d in &made {
        sync_dir(d)?;
    }
    write_json(&dir.join(METADATA_FILE), &array_json(a))?;
    sync_dir(dir)?;
    Ok(report)
}

/// The standard v3 `zarr.json` of a converted array: `sharding_indexed` with the legacy
/// inner codecs and a crc32c-checked index.
fn array_json(a: &LegacyArray) -> ArrayDocument {
    let endian = if a.dtype.big_endian {
        Endian::Big
    } else {
        Endian::Little
    };
    let mut inner = Vec::new();
    if a.fortran {
        let order: Vec<usize> = (0..a.shape.len()).rev().collect();
        inner.push(Named::with("transpose", &json!({"order": order})));
    }
    inner.push(Named::bytes(endian));
    inner.extend(a.compressor.codec(&a.dtype));
    let sharding = ShardingConfiguration {
        chunk_shape: a.inner.clone(),
        codecs: inner,
        index_codecs: vec![Named::bytes(Endian::Little), Named::new("crc32c")],
        index_location: IndexLocation::End,
    };
    ArrayDocument {
        zarr_format: ZarrFormat,
        node_type: ArrayNode,
        shape: a.shape.clone(),
        data_type: a.dtype.name.into(),
        chunk_grid: Named::regular_grid(a.shard_shape()),
        chunk_key_encoding: Named::default_keys(),
        fill_value: a.fill.value.clone(),
        codecs: vec![Named::with("sharding_indexed", &sharding)],
        attributes: a.attributes.clone(),
        storage_transformers: None,
        dimension_names: dimension_names(&a.attributes, a.shape.len()),
        extra: Map::new(),
    }
}

/// xarray's `_ARRAY_DIMENSIONS` attribute as v3 `dimension_names`, when it is a list
/// of strings of the right length.
fn dimension_names(attrs: &Map<String, Value>, rank: usize) -> Option<Vec<Option<String>>> {
    let list = attrs.get("_ARRAY_DIMENSIONS")?.as_array()?;
    let names: Vec<Option<String>> = list
        .iter()
        .map(|v| v.as_str().map(|s| Some(s.to_string())))
        .collect::<Option<_>>()?;
    (names.len() == rank).then_some(names)
}

/// C-order iteration over every coordinate of a grid.
struct GridIter {
    grid: Vec<u64>,
    next: Option<Vec<u64>>,
}

impl GridIter {
    fn new(grid: &[u64]) -> Self {
        let empty = grid.contains(&0);
        GridIter {
            grid: grid.to_vec(),
            next: (!empty).then(|| vec![0; grid.len()]),
        }
    }
}

impl Iterator for GridIter {
    type Item = Vec<u64>;
    fn next(&mut self) -> Option<Vec<u64>> {
        let current = self.next.take()?;
        let mut n = current.clone();
        for d in (0..n.len()).rev() {
            n[d] += 1;
            if n[d] < self.grid[d] {
                self.next = Some(n);
                return Some(current);
            }
            n[d] = 0;
        }
        Some(current)
    }
}

fn create_dir(dir: &Path) -> Result<(), ConvertError> {
    Ok(fs::create_dir_all(dir).map_err(IoError::with("create", dir))?)
}

/// Writes a JSON document and flushes it to disk.
fn write_json(path: &Path, doc: &impl Serialize) -> Result<(), ConvertError> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| {
        IoError::new(
            "serialize",
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    fs::write(path, text).map_err(IoError::with("write", path))?;
    fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(IoError::with("fsync", path))?;
    Ok(())
}

/// Moves the finished `tmp` to `out`, setting an existing `out` aside first and
/// removing it only once the new one is in place.
fn publish(tmp: &Path, out: &Path) -> Result<(), ConvertError> {
    let old = if out.exists() {
        let old = sibling(out, "old")?;
        fs::rename(out, &old).map_err(IoError::with("set aside", out))?;
        Some(old)
    } else {
        None
    };
    fs::rename(tmp, out).map_err(IoError::with("rename into place", out))?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    if let Some(old) = old {
        let remove = if old.is_dir() {
            fs::remove_dir_all(&old)
        } else {
            fs::remove_file(&old)
        };
        remove.map_err(IoError::with("remove the replaced", &old))?;
    }
    Ok(())
}

fn print_summary(r: &ConvertReport) {
    println!("{} -> {}", r.legacy.display(), r.out.display());
    for a in &r.arrays {
        let name = if a.path.is_empty() { "." } else { &a.path };
        println!(
            "  {name}: {} {} {:?}, chunks {:?} in shards {:?}, {}: {} shards ({} missing), {} chunks, {} bytes",
            a.layout.describe(),
            a.data_type,
            a.shape,
            a.chunk_shape,
            a.shard_shape,
            a.compressor,
            a.shards,
            a.shards_missing,
            a.chunks,
            a.bytes
        );
    }
    if r.groups.len() > 1 || r.groups.first().is_some_and(|g| !g.is_empty()) {
        println!(
            "  groups: {}",
            r.groups
                .iter()
                .map(|g| if g.is_empty() { "/" } else { g })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for w in &r.warnings {
        println!("  warning: {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_iterates_in_c_order() {
        let all: Vec<_> = GridIter::new(&[2, 3]).collect();
        assert_eq!(all.len(), 6);
        assert_eq!(all[1], vec![0, 1]);
        assert_eq!(all[5], vec![1, 2]);
        assert_eq!(GridIter::new(&[0, 3]).count(), 0);
    }
}
