//! Writes a reference set in the parquet layout of fsspec's `LazyReferenceMapper`:
//!
//! ```text
//! OUT/.zmetadata                 {"metadata": {".zgroup": {...}, ...}, "record_size": N}
//! OUT/<name>/refs.<n>.parq       rows n*N .. of the C-order chunk numbering
//! ```
//!
//! Columns `path` (utf8, nullable), `offset` (int64), `size` (int64), `raw` (binary,
//! nullable, always null here). A missing chunk is a row with null `path` and null `raw`;
//! a record file whose chunks are all missing is not written (fsspec then reports every
//! key in it missing). Every file but the last has exactly `record_size` rows, the last
//! one rows up to the last chunk of the grid, because fsspec indexes rows positionally.
//! zstd-compressed like fsspec's own writer; statistics only for `offset` and `size`
//! (their null count keeps fastparquet from reading them as float64).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use zarrstream::IoError;

use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::Type;
use serde_json::{Map, Value, json};

use super::set::{ChunkRef, RefSet};

const SCHEMA: &str = "message schema {
    OPTIONAL BYTE_ARRAY path (UTF8);
    REQUIRED INT64 offset;
    REQUIRED INT64 size;
    OPTIONAL BYTE_ARRAY raw;
}";

/// Why the parquet set could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParquetRefsError {
    /// The parquet encoder failed.
    #[error("writing {path}: {source}")]
    Parquet {
        /// The record file.
        path: String,
        /// The encoder's reason.
        source: ParquetError,
    },
    /// An I/O error with what was being done to which path.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// The rows of one record file.
struct Record<'a> {
    /// First chunk number of the record.
    first: u64,
    /// Rows in the file.
    rows: usize,
    /// Present chunks in it, sorted.
    refs: &'a [ChunkRef],
}

/// Writes `set` into the (empty, existing) directory `dir`; chunk paths are
/// `root_url/<shard key>`. Returns the number of record files written.
pub(super) fn write(
    set: &RefSet,
    root_url: &str,
    record_size: u64,
    dir: &Path,
) -> Result<usize, ParquetRefsError> {
    write_zmetadata(set, record_size, dir)?;
    let field = dir.join(&set.name);
    std::fs::create_dir_all(&field).map_err(IoError::with("create directory", &field))?;
    let urls: Vec<String> = set
        .shard_keys
        .iter()
        .map(|k| format!("{root_url}/{k}"))
        .collect();
    let schema =
        Arc::new(
            parse_message_type(SCHEMA).map_err(|source| ParquetRefsError::Parquet {
                path: "schema".into(),
                source,
            })?,
        );
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_statistics_enabled(EnabledStatistics::None)
            // fastparquet turns an int64 column into float64 unless its statistics say
            // it has no nulls, and fsspec needs integer offsets.
            .set_column_statistics_enabled("offset".into(), EnabledStatistics::Chunk)
            .set_column_statistics_enabled("size".into(), EnabledStatistics::Chunk)
            .build(),
    );
    let records = records(set, record_size);
    for (n, record) in &records {
        let path = field.join(format!("refs.{n}.parq"));
        write_record(record, &urls, &path, &schema, &props)?;
    }
    Ok(records.len())
}

/// `.zmetadata`: the metadata documents as JSON objects and the record size.
fn write_zmetadata(set: &RefSet, record_size: u64, dir: &Path) -> Result<(), ParquetRefsError> {
    let metadata: Map<String, Value> = set.metadata.iter().cloned().collect();
    let doc = json!({"metadata": metadata, "record_size": record_size});
    let path = dir.join(".zmetadata");
    Ok(std::fs::write(&path, doc.to_string()).map_err(IoError::with("write", &path))?)
}

/// The record files that hold at least one present chunk, by record number.
fn records(set: &RefSet, record_size: u64) -> Vec<(u64, Record<'_>)> {
    let total = set.total_chunks();
    let mut out = Vec::new();
    let mut rest = set.refs.as_slice();
    while let Some(head) = rest.first() {
        let n = head.number / record_size;
        let first = n * record_size;
        let end = (first + record_size).min(total);
        let len = rest.partition_point(|r| r.number < end);
        let (refs, tail) = rest.split_at(len);
        out.push((
            n,
            Record {
                first,
                rows: (end - first) as usize,
                refs,
            },
        ));
        rest = tail;
    }
    out
}

/// Writes one record file: one row group of four columns.
fn write_record(
    record: &Record<'_>,
    urls: &[String],
    path: &Path,
    schema: &Arc<Type>,
    props: &Arc<WriterProperties>,
) -> Result<(), ParquetRefsError> {
    let shown = path.display().to_string();
    let perr = |source| ParquetRefsError::Parquet {
        path: shown.clone(),
        source,
    };
    let file = File::create(path).map_err(IoError::with("create", path))?;
    let mut writer =
        SerializedFileWriter::new(file, schema.clone(), props.clone()).map_err(perr)?;
    let cols = Columns::new(record, urls);
    let mut group = writer.next_row_group().map_err(perr)?;
    let mut index = 0;
    while let Some(mut col) = group.next_column().map_err(perr)? {
        match index {
            0 => col
                .typed::<ByteArrayType>()
                .write_batch(&cols.paths, Some(&cols.path_defs), None),
            1 => col
                .typed::<Int64Type>()
                .write_batch(&cols.offsets, None, None),
            2 => col
                .typed::<Int64Type>()
                .write_batch(&cols.sizes, None, None),
            _ => col
                .typed::<ByteArrayType>()
                .write_batch(&[], Some(&cols.raw_defs), None),
        }
        .map_err(perr)?;
        col.close().map_err(perr)?;
        index += 1;
    }
    group.close().map_err(perr)?;
    writer.close().map_err(perr)?;
    Ok(())
}

/// Column values of one record file.
struct Columns {
    paths: Vec<ByteArray>,
    path_defs: Vec<i16>,
    offsets: Vec<i64>,
    sizes: Vec<i64>,
    raw_defs: Vec<i16>,
}

impl Columns {
    fn new(record: &Record<'_>, urls: &[String]) -> Self {
        let mut c = Columns {
            paths: Vec::with_capacity(record.refs.len()),
            path_defs: vec![0; record.rows],
            offsets: vec![0; record.rows],
            sizes: vec![0; record.rows],
            raw_defs: vec![0; record.rows],
        };
        for r in record.refs {
            let row = (r.number - record.first) as usize;
            c.paths.push(ByteArray::from(urls[r.shard].as_str()));
            c.path_defs[row] = 1;
            // Offsets and sizes come from a shard file's length, far below 2^63.
            c.offsets[row] = i64::try_from(r.offset).unwrap_or(i64::MAX);
            c.sizes[row] = i64::try_from(r.nbytes).unwrap_or(i64::MAX);
        }
        c
    }
}
