//! `zarrstream refs`: a kerchunk reference set for the **inner-chunk view** of a sharded
//! array — a Zarr v2 `.zarray` whose chunks are the inner chunks and whose compressor is
//! the inner codec, and one `[url, offset, nbytes]` per present inner chunk, taken from
//! the shard indexes (each index's crc32c is checked). Missing chunks are omitted, so
//! they read as the fill value. Readers: fsspec's `ReferenceFileSystem` with zarr-python
//! 2 or 3, xarray's kerchunk engine.
//!
//! The crc32c that ends every inner chunk by default is either declared as numcodecs'
//! `crc32c` compressor with the inner codec as the filter (`--crc32c verify`, the
//! default: readers check each chunk; needs numcodecs ≥ 0.14) or cut off the referenced
//! ranges (`--crc32c strip`: nbytes − 4, readable by any numcodecs, unchecked).

mod json;
mod parquet;
mod set;
mod zarray;

use std::cell::Cell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use zarrstream::IoError;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use set::{ChunkRef, RefSet, ravel};
use zarray::{Crc32cMode, Crc32cShown};
use zarrstream::store::{METADATA_FILE, Shard, StoreError, StoreReader};

/// Output format of `zarrstream refs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Format {
    /// One kerchunk JSON file (version 1, one URL template for the store root).
    Json,
    /// A directory in fsspec's `LazyReferenceMapper` parquet layout (`.zmetadata`,
    /// `<name>/refs.<n>.parq`): compact and loaded lazily, for long recordings.
    Parquet,
}

/// Options of `zarrstream refs`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The array directory (holding zarr.json).
    pub store: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// The URL (or path) of the store root as readers will see it; chunk URLs are
    /// `URL/c/i/j/k`. Default: the store's absolute path. A relative path is resolved
    /// against the *reader's* working directory, not the reference file. In JSON it is
    /// the template `u` (relocate with fsspec's `template_overrides={"u": ...}`).
    #[arg(long, value_name = "URL")]
    pub url_template: Option<String>,
    /// Where to write: a file (json) or a directory (parquet). Default: beside the store,
    /// `<stem>.refs.json` or `<stem>.refs.parq`.
    #[arg(long, short, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Replace an existing output.
    #[arg(long)]
    pub overwrite: bool,
    /// The array's name inside the reference set (default: the store's name without
    /// `.zarr`, or `data`).
    #[arg(long)]
    pub name: Option<String>,
    /// How readers see each inner chunk's crc32c (arrays written with crc32c).
    #[arg(long, value_enum, default_value = "verify")]
    pub crc32c: Crc32cMode,
    /// Chunks per parquet record file.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub record_size: u64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Why no reference set was written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RefsError {
    /// The store could not be opened or one of its shard indexes not read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An index entry that cannot be a chunk of its shard.
    #[error(
        "shard {key}: chunk {chunk} (offset {offset}, {nbytes} bytes) {why}; the shard is corrupted"
    )]
    BadEntry {
        /// The shard key.
        key: String,
        /// The chunk's position in the index.
        chunk: usize,
        /// Its offset.
        offset: u64,
        /// Its length.
        nbytes: u64,
        /// What is wrong.
        why: &'static str,
    },
    /// The output exists and `--overwrite` was not given, or it is not ours to replace.
    #[error("{0}: {1}")]
    Output(PathBuf, &'static str),
    /// The array uses a data type or codec that Zarr v2 metadata cannot describe.
    #[error("the array's {0} has no Zarr v2 equivalent for references")]
    Unsupported(String),
    /// `--name` is not usable as an array name.
    #[error("--name {0:?}: must be non-empty, without '/', and not start with '.'")]
    BadName(String),
    /// The parquet set could not be written.
    #[error(transparent)]
    Parquet(#[from] parquet::ParquetRefsError),
    /// An I/O error with what was being done to which path.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// What was written (printed as a summary, or as JSON with `--json`).
#[derive(Debug, serde::Serialize)]
pub(crate) struct Summary {
    /// The store read.
    pub store: PathBuf,
    /// The file or directory written.
    pub out: PathBuf,
    /// `json` or `parquet`.
    pub format: Format,
    /// The array's name inside the set.
    pub array: String,
    /// The store root URL the chunk URLs start with.
    pub url: String,
    /// Whether that URL is a relative path (resolved against the reader's directory).
    pub relative_url: bool,
    /// What readers do with the inner crc32c.
    pub crc32c: Crc32cShown,
    /// Shard files read.
    pub shards: usize,
    /// Inner chunks referenced.
    pub chunks_referenced: usize,
    /// Inner chunks of the v2 grid without data (read as the fill value).
    pub chunks_missing: u64,
    /// Parquet record size and files written (parquet only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_size: Option<u64>,
    /// Parquet record files written (parquet only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_files: Option<usize>,
}

/// Runs `zarrstream refs`.
pub(crate) fn run(args: Args) -> crate::Outcome {
    let summary = build(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary);
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads the store, builds the reference set and writes it.
fn build(args: &Args) -> Result<Summary, RefsError> {
    let store = StoreReader::open(&args.store)?;
    let name = array_name(args)?;
    let out = output_path(args);
    check_output(&out, args.overwrite)?;
    let crc = Crc32cShown::new(store.spec().crc32c(), args.crc32c);
    let (fill_value, attributes) = raw_metadata(&store)?;
    let spec = &store.spec();
    let metadata = zarray::metadata_keys(
        &name,
        zarray::zarray(spec, &fill_value, crc)?,
        zarray::zattrs(spec, attributes.as_ref()),
    );
    let shards = store.shards()?;
    let set = collect(&store, &shards, name, metadata, crc)?;
    let url = root_url(args)?;
    let record_files = write_output(args, &set, &url, &out)?;
    Ok(Summary {
        store: args.store.clone(),
        out,
        format: args.format,
        array: set.name.clone(),
        relative_url: is_relative(&url),
        url,
        crc32c: crc,
        shards: shards.len(),
        chunks_referenced: set.refs.len(),
        chunks_missing: set.total_chunks() - set.refs.len() as u64,
        record_size: (args.format == Format::Parquet).then_some(args.record_size),
        record_files,
    })
}

/// `fill_value` and `attributes` exactly as `zarr.json` has them.
fn raw_metadata(store: &StoreReader) -> Result<(Value, Option<Value>), RefsError> {
    let path = store.root().join(METADATA_FILE);
    let text = std::fs::read_to_string(&path).map_err(IoError::with("read", &path))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| {
        IoError::with("parse", &path)(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    })?;
    let fill = doc.get("fill_value").cloned().unwrap_or(Value::from(0));
    Ok((fill, doc.get("attributes").cloned()))
}

/// The array name: `--name`, else the store directory's name without `.zarr`, else `data`.
fn array_name(args: &Args) -> Result<String, RefsError> {
    let ok = |n: &str| !n.is_empty() && !n.contains('/') && !n.starts_with('.');
    if let Some(n) = &args.name {
        return if ok(n) {
            Ok(n.clone())
        } else {
            Err(RefsError::BadName(n.clone()))
        };
    }
    let stem = store_stem(&args.store);
    Ok(if ok(&stem) { stem } else { "data".into() })
}

/// The store directory's name without a `.zarr` extension.
fn store_stem(store: &Path) -> String {
    let name = std::fs::canonicalize(store)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    name.strip_suffix(".zarr").unwrap_or(&name).to_string()
}

/// `--out`, or `<stem>.refs.json` / `<stem>.refs.parq` beside the store.
fn output_path(args: &Args) -> PathBuf {
    if let Some(out) = &args.out {
        return out.clone();
    }
    let ext = match args.format {
        Format::Json => "json",
        Format::Parquet => "parq",
    };
    let store = std::fs::canonicalize(&args.store).unwrap_or_else(|_| args.store.clone());
    let stem = store_stem(&store);
    let stem = if stem.is_empty() {
        "store".into()
    } else {
        stem
    };
    store
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{stem}.refs.{ext}"))
}

/// Refuses an existing output without `--overwrite`.
fn check_output(out: &Path, overwrite: bool) -> Result<(), RefsError> {
    if out.symlink_metadata().is_ok() && !overwrite {
        return Err(RefsError::Output(
            out.to_path_buf(),
            "exists (pass --overwrite to replace it)",
        ));
    }
    Ok(())
}

/// The store root URL: `--url-template` without a trailing `/`, or the absolute path.
fn root_url(args: &Args) -> Result<String, RefsError> {
    match &args.url_template {
        Some(t) => Ok(t.trim_end_matches('/').to_string()),
        None => {
            let abs = std::fs::canonicalize(&args.store)
                .map_err(IoError::with("resolve", &args.store))?;
            Ok(abs.to_string_lossy().into_owned())
        }
    }
}

/// A URL without a scheme that is not an absolute path.
fn is_relative(url: &str) -> bool {
    !url.starts_with('/') && !url.contains("://")
}

/// Reads every shard index and collects the present inner chunks inside the v2 grid.
fn collect(
    store: &StoreReader,
    shards: &[Shard],
    name: String,
    metadata: Vec<(String, Value)>,
    crc: Crc32cShown,
) -> Result<RefSet, RefsError> {
    let spec = &store.spec();
    let grid: Vec<u64> = spec
        .shape()
        .iter()
        .zip(spec.chunk_shape())
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    let mut refs = Vec::new();
    let progress = Progress::new(shards.len() as u64, "reading shard indexes");
    for (k, shard) in shards.iter().enumerate() {
        shard_refs(store, shard, k, &grid, crc, &mut refs)?;
        progress.inc();
    }
    progress.finish();
    refs.sort_unstable_by_key(|r| r.number);
    Ok(RefSet {
        name,
        metadata,
        grid,
        shard_keys: shards.iter().map(|s| s.key.clone()).collect(),
        refs,
    })
}

/// Appends the references of one shard's present chunks.
fn shard_refs(
    store: &StoreReader,
    shard: &Shard,
    k: usize,
    grid: &[u64],
    crc: Crc32cShown,
    out: &mut Vec<ChunkRef>,
) -> Result<(), RefsError> {
    let file = File::open(&shard.path).map_err(IoError::with("open", &shard.path))?;
    let index = store.read_index(shard, &file)?;
    let per = store.chunks_per_shard();
    let min_len = if store.spec().crc32c() { 5 } else { 1 };
    for (i, entry) in index.iter().enumerate() {
        let Some((offset, nbytes)) = *entry else {
            continue;
        };
        let global: Vec<u64> = store
            .inner_coords(i as u64)
            .iter()
            .zip(&shard.coords)
            .zip(&per)
            .map(|((l, s), p)| s * p + l)
            .collect();
        // Slots beyond the published shape (a trailing partial shard) are not in the grid.
        let Some(number) = ravel(&global, grid) else {
            continue;
        };
        let bad = |why| RefsError::BadEntry {
            key: shard.key.clone(),
            chunk: i,
            offset,
            nbytes,
            why,
        };
        if nbytes < min_len {
            return Err(bad("is too short"));
        }
        if offset.checked_add(nbytes).is_none_or(|end| end > shard.len) {
            return Err(bad("lies outside the file"));
        }
        out.push(ChunkRef {
            number,
            shard: k,
            offset,
            nbytes: nbytes - crc.trim(),
        });
    }
    Ok(())
}

/// Writes the set to a temporary sibling of `out`, then renames it into place.
/// Returns the number of parquet record files.
fn write_output(
    args: &Args,
    set: &RefSet,
    url: &str,
    out: &Path,
) -> Result<Option<usize>, RefsError> {
    let file_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "refs".into());
    let tmp = out.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = match args.format {
        Format::Json => write_json(set, url, &tmp).map(|()| None),
        Format::Parquet => write_parquet(set, url, args.record_size, &tmp).map(Some),
    };
    let result = result.and_then(|files| replace(&tmp, out).map(|()| files));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn write_json(set: &RefSet, url: &str, path: &Path) -> Result<(), RefsError> {
    let file = File::create(path).map_err(IoError::with("create", path))?;
    let mut w = BufWriter::new(file);
    json::write(set, url, &mut w)
        .and_then(|()| w.flush())
        .map_err(IoError::with("write", path))?;
    Ok(())
}

fn write_parquet(
    set: &RefSet,
    url: &str,
    record_size: u64,
    dir: &Path,
) -> Result<usize, RefsError> {
    std::fs::create_dir(dir).map_err(IoError::with("create directory", dir))?;
    Ok(parquet::write(set, url, record_size, dir)?)
}

/// Moves `tmp` to `out`, replacing an existing file or reference-set directory.
fn replace(tmp: &Path, out: &Path) -> Result<(), RefsError> {
    if out.is_dir() {
        // Only a previous parquet set (or an empty directory) is ours to remove.
        let empty = std::fs::read_dir(out)
            .map_err(IoError::with("list", out))?
            .next()
            .is_none();
        if !empty && !out.join(".zmetadata").is_file() {
            return Err(RefsError::Output(
                out.to_path_buf(),
                "is a directory but not a parquet reference set; not replacing it",
            ));
        }
        std::fs::remove_dir_all(out).map_err(IoError::with("remove", out))?;
    }
    std::fs::rename(tmp, out).map_err(IoError::with("rename into place", out))?;
    Ok(())
}

fn print_summary(s: &Summary) {
    let what = match s.format {
        Format::Json => "JSON reference file".to_string(),
        Format::Parquet => {
            let files = s.record_files.unwrap_or(0);
            let plural = if files == 1 { "" } else { "s" };
            format!(
                "parquet reference set ({files} record file{plural} of up to {} chunks)",
                s.record_size.unwrap_or(0)
            )
        }
    };
    println!("{}: wrote {what}", s.out.display());
    println!(
        "  array {:?}: {} chunks referenced from {} shards, {} missing (read as fill value)",
        s.array, s.chunks_referenced, s.shards, s.chunks_missing
    );
    println!("  chunk URLs: {}/c/...; {}", s.url, s.crc32c.describe());
    if s.relative_url {
        println!(
            "  note: {:?} is relative: readers resolve it against their working directory",
            s.url
        );
    }
}

/// A progress bar on stderr that appears only once the work has taken a second (and
/// never when stderr is not a terminal).
struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: Cell<bool>,
}

impl Progress {
    fn new(len: u64, what: &'static str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} {eta}") {
            bar.set_style(style);
        }
        bar.set_message(what);
        Progress {
            bar,
            start: Instant::now(),
            shown: Cell::new(false),
        }
    }

    fn inc(&self) {
        self.bar.inc(1);
        if !self.shown.get() && self.start.elapsed() > Duration::from_secs(1) {
            self.shown.set(true);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
