//! Opening a store written by zarrstream and walking its shards: what every subcommand
//! that reads a store shares.
#![allow(dead_code)] // TEMPORARY until the issue-6 subcommands use every item; remove then.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use zarrstream::read::ReadError;
use zarrstream::read::index::parse_index;
use zarrstream::read::metadata::{StoreMetadata, parse_array_json};
use zarrstream::{IndexLocation, ShardLayout};

/// Why a store could not be opened or read.
#[derive(Debug, thiserror::Error)]
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
    /// `zarr.json` describes an array this tool does not handle (e.g. an unsupported codec).
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
    /// An I/O error with what was being done to which path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// An opened store: its metadata and the layout of its shards.
#[derive(Debug, Clone)]
pub struct Store {
    /// The array directory.
    pub root: PathBuf,
    /// What `zarr.json` says.
    pub meta: StoreMetadata,
    /// Where the index of each shard is and how large it is.
    pub layout: ShardLayout,
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

impl Store {
    /// Opens the array at `root` (the directory holding `zarr.json`).
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        if !root.exists() {
            return Err(StoreError::NotFound(root.to_path_buf()));
        }
        let meta_path = root.join("zarr.json");
        let text = match std::fs::read_to_string(&meta_path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotAStore {
                    path: root.to_path_buf(),
                    why: "no zarr.json".into(),
                });
            }
            Err(e) => return Err(io("read", &meta_path)(e)),
        };
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| StoreError::NotAStore {
                path: root.to_path_buf(),
                why: format!("zarr.json is not JSON: {e}"),
            })?;
        if doc.get("zarr_format").and_then(serde_json::Value::as_u64) != Some(3)
            || doc.get("node_type").and_then(serde_json::Value::as_str) != Some("array")
        {
            return Err(StoreError::NotAStore {
                path: root.to_path_buf(),
                why: "zarr.json is not a Zarr v3 array (zarr_format 3, node_type array)".into(),
            });
        }
        let meta = parse_array_json(&doc).map_err(|source| StoreError::Metadata {
            path: meta_path.clone(),
            source,
        })?;
        let layout = ShardLayout::new(&meta.spec).map_err(|_| StoreError::Metadata {
            path: meta_path,
            source: ReadError::Metadata("shard geometry overflows".into()),
        })?;
        Ok(Store {
            root: root.to_path_buf(),
            meta,
            layout,
        })
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
        let base = self.root.join("c");
        if !base.is_dir() {
            return Ok(out);
        }
        let mut stack = vec![(base, Vec::<u64>::new())];
        while let Some((dir, prefix)) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(io("list", &dir))? {
                let entry = entry.map_err(io("list", &dir))?;
                let name = entry.file_name();
                let Some(n) = name.to_str().and_then(|s| s.parse::<u64>().ok()) else {
                    continue;
                };
                let mut coords = prefix.clone();
                coords.push(n);
                let path = entry.path();
                let meta = entry.metadata().map_err(io("stat", &path))?;
                if meta.is_dir() && coords.len() < rank {
                    stack.push((path, coords));
                } else if meta.is_file() && coords.len() == rank {
                    let key = std::iter::once("c".to_string())
                        .chain(coords.iter().map(u64::to_string))
                        .collect::<Vec<_>>()
                        .join("/");
                    out.push(Shard {
                        key,
                        coords,
                        path,
                        len: meta.len(),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.coords.cmp(&b.coords));
        Ok(out)
    }

    /// The byte range of a shard's index: the first or last `16 n + 4` bytes.
    pub fn index_range(&self, shard: &Shard) -> Option<(u64, u64)> {
        let size = self.layout.index_size;
        if shard.len < size {
            return None;
        }
        Some(match self.layout.location {
            IndexLocation::Start => (0, size),
            IndexLocation::End => (shard.len - size, size),
        })
    }

    /// Reads and checks a shard's index (length and crc32c): `(offset, nbytes)` per inner
    /// chunk in C order, `None` for an absent chunk.
    pub fn read_index(
        &self,
        shard: &Shard,
        file: &File,
    ) -> Result<Vec<Option<(u64, u64)>>, StoreError> {
        let (at, size) = self.index_range(shard).ok_or_else(|| StoreError::Index {
            key: shard.key.clone(),
            source: ReadError::IndexLength {
                expected: self.layout.index_size,
                got: shard.len,
            },
        })?;
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, at)
            .map_err(io("read", &shard.path))?;
        parse_index(&buf, self.layout.n as usize).map_err(|source| StoreError::Index {
            key: shard.key.clone(),
            source,
        })
    }
}
