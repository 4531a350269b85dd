//! [`StoreReader`]: an opened array, its shard files and their indexes.

use crate::platform::FileExt;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::contract::{CHUNK_DIR, METADATA_FILE};
use super::key::{parse_shard_key, shard_key};
use crate::document::ArrayHeader;
use crate::error::IoError;
use crate::read::ReadError;
use crate::read::index::parse_index;
use crate::read::metadata::{StoreMetadata, parse_array_json};
use crate::shard::ShardLayout;
use crate::spec::{ArraySpec, IndexLocation};

/// Why a store could not be opened or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The path does not exist.
    #[error("{0}: no such file or directory")]
    NotFound(PathBuf),
    /// The path exists but holds no Zarr v3 array metadata.
    #[error("{path}: not a Zarr v3 array ({why})")]
    NotAStore {
        /// The store path.
        path: PathBuf,
        /// What is missing or wrong.
        why: String,
    },
    /// `zarr.json` describes an array this library does not read (e.g. an unsupported
    /// codec).
    #[error("{path}: {source}")]
    Metadata {
        /// The `zarr.json` path.
        path: PathBuf,
        /// The parser's reason.
        source: ReadError,
    },
    /// A shard index that does not parse (wrong length, bad crc32c).
    #[error("shard {key}: {source}")]
    Index {
        /// The shard key.
        key: String,
        /// The parser's reason.
        source: ReadError,
    },
    /// A shard key that names no shard file of the store.
    #[error("{store}: no shard {key} (expected a key like c/0/0/0 with one index per axis)")]
    NoSuchShard {
        /// The store path.
        store: PathBuf,
        /// The key asked for.
        key: String,
    },
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// An opened array: what its `zarr.json` says and where each shard keeps its index.
///
/// It reads what the writer (or `recover`) left in place; temporary shards are not
/// its business. Every read is checked: indexes by length and crc32c
/// ([`read_index`](Self::read_index)), entries against the file
/// ([`entry_faults`](Self::entry_faults)), chunks by crc32c or by decoding
/// ([`check_chunk`](Self::check_chunk)).
#[derive(Debug, Clone)]
pub struct StoreReader {
    root: PathBuf,
    meta: StoreMetadata,
    layout: ShardLayout,
    doc: Value,
}

/// One shard file under `c/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The key relative to the store root, e.g. `c/0/1/0`.
    pub key: String,
    /// Shard grid coordinates.
    pub coords: Vec<u64>,
    /// The file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub len: u64,
}

impl Shard {
    /// The shard at `coords` under `root`, of `len` bytes.
    pub fn new(root: &Path, coords: Vec<u64>, len: u64) -> Self {
        let key = shard_key(coords.iter().copied());
        Shard {
            path: root.join(&key),
            key,
            coords,
            len,
        }
    }
}

impl StoreReader {
    /// Opens the array at `root` (the directory holding `zarr.json`).
    pub fn open(root: &Path) -> Result<StoreReader, StoreError> {
        let not_a_store = |why: String| StoreError::NotAStore {
            path: root.to_path_buf(),
            why,
        };
        if !root.exists() {
            return Err(StoreError::NotFound(root.to_path_buf()));
        }
        if !root.is_dir() {
            return Err(not_a_store("not a directory".into()));
        }
        let meta_path = root.join(METADATA_FILE);
        let text = match std::fs::read_to_string(&meta_path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(not_a_store("no zarr.json".into()));
            }
            Err(e) => return Err(IoError::new("read", &meta_path, e).into()),
        };
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| not_a_store(format!("zarr.json is not JSON: {e}")))?;
        if ArrayHeader::deserialize(&doc).is_err() {
            return Err(not_a_store(
                "zarr.json is not a Zarr v3 array (zarr_format 3, node_type array)".into(),
            ));
        }
        Self::from_document(root, doc)
    }

    /// The array at `root` described by `doc`, an already read `zarr.json`. Fails with
    /// [`StoreError::Metadata`] only.
    pub fn from_document(root: &Path, doc: Value) -> Result<StoreReader, StoreError> {
        let path = root.join(METADATA_FILE);
        let meta = parse_array_json(&doc).map_err(|source| StoreError::Metadata {
            path: path.clone(),
            source,
        })?;
        let layout = ShardLayout::new(&meta.spec).map_err(|_| StoreError::Metadata {
            path,
            source: ReadError::Metadata("shard geometry overflows".into()),
        })?;
        Ok(StoreReader {
            root: root.to_path_buf(),
            meta,
            layout,
            doc,
        })
    }

    /// The array directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What `zarr.json` says.
    pub fn metadata(&self) -> &StoreMetadata {
        &self.meta
    }

    /// The array's specification (`shape[0]` as published).
    pub fn spec(&self) -> &ArraySpec {
        &self.meta.spec
    }

    /// `zarr.json` as read (for the codec lists and attributes, shown as they are).
    pub fn document(&self) -> &Value {
        &self.doc
    }

    /// The layout shards are written with.
    pub fn layout(&self) -> &ShardLayout {
        &self.layout
    }

    /// Size of a shard index: 16 bytes per inner chunk, plus 4 for its crc32c.
    pub fn index_size(&self) -> u64 {
        self.layout.index_size
    }

    /// Inner chunks per shard along each axis.
    pub fn chunks_per_shard(&self) -> Vec<u64> {
        let spec = &self.meta.spec;
        spec.shard_shape()
            .iter()
            .zip(spec.chunk_shape())
            .map(|(s, c)| s / c)
            .collect()
    }

    /// Coordinates (within its shard) of inner chunk `i` of a shard index (C order).
    pub fn inner_coords(&self, mut i: u64) -> Vec<u64> {
        let per = self.chunks_per_shard();
        let mut c = vec![0; per.len()];
        for (d, n) in per.iter().enumerate().rev() {
            c[d] = i % n;
            i /= n;
        }
        c
    }

    /// Every shard file under `c/`, sorted by coordinates. Files whose names are not
    /// shard keys of this array's rank are ignored.
    pub fn shards(&self) -> Result<Vec<Shard>, StoreError> {
        let rank = self.meta.spec.rank();
        let mut out = Vec::new();
        let base = self.root.join(CHUNK_DIR);
        if !base.is_dir() {
            return Ok(out);
        }
        let mut stack = vec![(base, Vec::<u64>::new())];
        while let Some((dir, prefix)) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(IoError::with("list", &dir))? {
                let entry = entry.map_err(IoError::with("list", &dir))?;
                let name = entry.file_name();
                let Some(n) = name.to_str().and_then(|s| s.parse::<u64>().ok()) else {
                    continue;
                };
                let mut coords = prefix.clone();
                coords.push(n);
                let path = entry.path();
                let meta = entry.metadata().map_err(IoError::with("stat", &path))?;
                if meta.is_dir() && coords.len() < rank {
                    stack.push((path, coords));
                } else if meta.is_file() && coords.len() == rank {
                    out.push(Shard::new(&self.root, coords, meta.len()));
                }
            }
        }
        out.sort_by(|a, b| a.coords.cmp(&b.coords));
        Ok(out)
    }

    /// The shard file for `key` (`c/0/1/0`, or `0/1/0` without the `c/` prefix).
    pub fn shard(&self, key: &str) -> Result<Shard, StoreError> {
        let missing = || StoreError::NoSuchShard {
            store: self.root.clone(),
            key: key.to_string(),
        };
        let coords = parse_shard_key(key)
            .filter(|c| c.len() == self.meta.spec.rank())
            .ok_or_else(missing)?;
        self.shards()?
            .into_iter()
            .find(|s| s.coords == coords)
            .ok_or_else(missing)
    }

    /// Opens a shard file for reading.
    pub fn open_shard(&self, shard: &Shard) -> Result<File, StoreError> {
        Ok(File::open(&shard.path).map_err(IoError::with("open", &shard.path))?)
    }

    /// The byte range `(offset, size)` of a shard's index: the first or last `16 n + 4`
    /// bytes; `None` if the file is shorter than that.
    pub fn index_range(&self, shard: &Shard) -> Option<(u64, u64)> {
        final_index_range(&self.layout, shard.len)
    }

    /// Reads and checks a shard's index (length and crc32c): `(offset, nbytes)` per inner
    /// chunk in C order, `None` for an absent chunk.
    pub fn read_index(
        &self,
        shard: &Shard,
        file: &File,
    ) -> Result<Vec<Option<(u64, u64)>>, StoreError> {
        let index_err = |source| StoreError::Index {
            key: shard.key.clone(),
            source,
        };
        let (at, size) = self.index_range(shard).ok_or_else(|| {
            index_err(ReadError::IndexLength {
                expected: self.layout.index_size,
                got: shard.len,
            })
        })?;
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, at)
            .map_err(IoError::with("read", &shard.path))?;
        parse_index(&buf, self.layout.n as usize).map_err(index_err)
    }

    /// Offset where chunk data begins in a dense shard: after a start index, else 0.
    pub fn data_start(&self) -> u64 {
        match self.layout.location {
            IndexLocation::Start => self.layout.index_size,
            IndexLocation::End => 0,
        }
    }

    /// The number of shards along each axis that the array's current shape covers.
    pub fn shard_grid(&self) -> Vec<u64> {
        let spec = &self.meta.spec;
        spec.shape()
            .iter()
            .zip(spec.shard_shape())
            .map(|(n, s)| n.div_ceil(*s))
            .collect()
    }

    /// Whether inner chunk `inner` of the shard at `shard` holds any element of the
    /// array's current shape (chunks wholly outside it are always empty).
    pub fn chunk_in_array(&self, shard: &[u64], inner: &[u64]) -> bool {
        let spec = &self.meta.spec;
        shard
            .iter()
            .zip(inner)
            .zip(spec.shard_shape().iter().zip(spec.chunk_shape()))
            .zip(spec.shape())
            .all(|(((s, i), (ss, cs)), n)| s * ss + i * cs < *n)
    }

    /// Bytes of a shard that hold neither a chunk nor the index (holes of a sparse shard
    /// included): `len - index - Σ nbytes`, saturating.
    pub fn gap_bytes(&self, shard: &Shard, entries: &[Option<(u64, u64)>]) -> u64 {
        let used: u64 = entries.iter().flatten().map(|(_, n)| *n).sum();
        shard
            .len
            .saturating_sub(self.layout.index_size)
            .saturating_sub(used)
    }

    #[cfg(test)]
    pub(crate) fn for_tests(root: &Path, spec: ArraySpec) -> StoreReader {
        StoreReader {
            root: root.to_path_buf(),
            // Invariant: the tests give specs `ArraySpec::new` accepted, which have a layout.
            layout: ShardLayout::new(&spec).expect("a valid spec has a shard layout"),
            meta: StoreMetadata {
                spec,
                progress: Default::default(),
            },
            doc: Value::Null,
        }
    }
}

/// Where the final index of a shard file of `len` bytes lies, `(offset, size)`.
pub(crate) fn final_index_range(layout: &ShardLayout, len: u64) -> Option<(u64, u64)> {
    let size = layout.index_size;
    if len < size {
        return None;
    }
    Some(match layout.location {
        IndexLocation::Start => (0, size),
        IndexLocation::End => (len - size, size),
    })
}
